"""Kernel source rendering: a plugin's .cu template plus a small prelude.

Rendering is kept apart from compiling so the very same text can be compiled
by pycuda's SourceModule at run time and by plain nvcc in CI (no GPU there).
The prelude only defines macros; templates are ordinary .cu files.
"""
from __future__ import annotations

import importlib
import os
from typing import Any, Mapping

import numpy as np

from .dtypes import is_bfloat16, itemsize, key_kind

#: Directory of cudasortkit's own kernels (keys.cuh, scan.cuh, ...).
KERNEL_DIR = os.path.dirname(importlib.import_module("cudasortkit.kernels").__file__)


def template_dir(plugin_cls) -> str:
    package = importlib.import_module(plugin_cls.template_package)
    return os.path.dirname(package.__file__)


def template_path(plugin_cls, template: str) -> str:
    path = os.path.join(template_dir(plugin_cls), template)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{plugin_cls.name}: kernel template {template!r} not found at {path}")
    return path


def include_dirs(plugin_cls) -> list:
    dirs = [template_dir(plugin_cls)]
    if KERNEL_DIR not in dirs:
        dirs.append(KERNEL_DIR)
    return dirs


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
    ]
    for name, value in sorted({**config, **(defines or {})}.items()):
        lines.append(f"#define {name.upper()} {_macro_value(value)}")
    return "\n".join(lines) + "\n"


def render(plugin_cls, template: str, dtype, value_bytes: int = 0,
           config: Mapping[str, Any] = None, defines: Mapping[str, Any] = None) -> str:
    """Full source of one kernel module: prelude, then the template text.

    `defines` adds macros that are not tunables (e.g. a kernel variant).
    """
    if config is None:
        config = {name: t.default for name, t in plugin_cls.tunables.items()}
    path = template_path(plugin_cls, template)
    with open(path, encoding="utf-8") as f:
        body = f.read()
    return prelude(dtype, value_bytes, config, defines) + f'#line 1 "{template}"\n' + body
