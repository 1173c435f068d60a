"""Kernel source rendering: a .cu template plus a small prelude of macros.

Rendering is kept apart from compiling so the very same text can be compiled
by pycuda's SourceModule at run time and by plain nvcc in CI (no GPU there).
The prelude only defines macros; templates are ordinary .cu files.
"""
from __future__ import annotations

import functools
import importlib
import os
from typing import Any, Mapping

import numpy as np

from ..dtypes import is_bfloat16, itemsize, key_kind

#: Package of cudasortkit's own kernels (util.cu, scan.cu, radix.cu, ...).
CORE_PACKAGE = "cudasortkit.kernels"
def package_dir(package: str) -> str:
    """The directory of an importable package. A package imported as a
    namespace (no __init__.py: e.g. a folder cudasortkit/kernels/ or
    cudasortkit/plugins/ of __pycache__ left by an older checkout, where
    they now sit at the repository's top level) shadows the installed one:
    that is said, with what to delete."""
    module = importlib.import_module(package)
    if getattr(module, "__file__", None) is None:
        raise ImportError(f"{package} was imported as a namespace package from {list(module.__path__)}: "
                          "a folder left over from an older checkout shadows the installed package; "
                          "delete that folder")
    return os.path.dirname(module.__file__)


#: Directory of cudasortkit's own kernels: the *.cu entry points.
KERNEL_DIR = package_dir(CORE_PACKAGE)
#: Shared device code (keys.cuh, scan.cuh, ...): on every template's include
#: path, so `#include "keys.cuh"` works in cudasortkit's and plugins' kernels.
KERNEL_INCLUDE_DIR = os.path.join(KERNEL_DIR, "include")


@functools.lru_cache(maxsize=None)
def template_dir(package: str) -> str:
    """Directory of an importable package that holds kernel templates."""
    return package_dir(package)


def template_path(package: str, template: str) -> str:
    path = os.path.join(template_dir(package), template)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"kernel template {template!r} not found in package "
                                f"{package!r} ({path})")
    return path


def include_dirs(package: str) -> list:
    """The package's directory, then cudasortkit's shared headers (kernels/include/)."""
    return [template_dir(package), KERNEL_INCLUDE_DIR]


#: The value modes of the segmented kernels (their `mode` argument; the SDK
#: names them cudasortkit.sdk.segmented.MODE_*): keys only; argsort, int64
#: index in the segment (rows); argsort, int64 position in the whole array
#: (ragged); pairs, the caller's values. Every prelude defines them, so
#: kernels (include/segments.cuh) use the names, never the numbers.
VALUE_MODES = {"CSK_MODE_KEYS": 0, "CSK_MODE_LOCAL": 1, "CSK_MODE_GLOBAL": 2, "CSK_MODE_PAIRS": 3}
_MODE_LINES = [f"#define {name} {value}" for name, value in VALUE_MODES.items()]


def _macro_value(value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    raise TypeError(f"tunable values must be int or bool to become macros, got {value!r}")


def prelude(dtype, value_bytes: int, config: Mapping[str, Any], defines: Mapping[str, Any] = None) -> str:
    """The macro block that turns a template into one concrete kernel."""
    name = dtype if isinstance(dtype, str) else np.dtype(dtype).name
    if name == "bool":
        name = "uint8"
    lines = [
        f"// cudasortkit prelude: keys {name}, values {value_bytes or 'none'}",
        f"#define CSK_KEY_BYTES {itemsize(name)}",
        f"#define CSK_KEY_KIND {key_kind(name)}",
        f"#define CSK_KEY_BFLOAT {int(is_bfloat16(name))}",
        f"#define CSK_VALUE_BYTES {int(value_bytes)}",
        *_MODE_LINES,
    ]
    for name, value in sorted({**config, **(defines or {})}.items()):
        lines.append(f"#define {name.upper()} {_macro_value(value)}")
    return "\n".join(lines) + "\n"


def render(package: str, template: str, dtype, value_bytes: int = 0,
           config: Mapping[str, Any] = None, defines: Mapping[str, Any] = None) -> str:
    """Full source of one kernel module: prelude, then the text of `template`
    in `package`. `config` holds the tunables, `defines` macros that are not
    tunables (e.g. a kernel variant); both become upper-cased macros.
    """
    path = template_path(package, template)
    with open(path, encoding="utf-8") as f:
        body = f.read()
    return prelude(dtype, value_bytes, config or {}, defines) + f'#line 1 "{template}"\n' + body
