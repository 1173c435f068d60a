"""Runtime compilation of rendered sources, cached per context and source.

pycuda's SourceModule compiles with nvcc and keeps cubins in its disk cache
across processes; this module adds the in-memory cache (one module per
(context, source, options)) and prepared functions, so a sort never compiles
or prepares twice in one process. It compiles text: rendering a template is
build/render.py's job, choosing what to render (and the one kernel cache)
build/template.py's.
"""
from __future__ import annotations

import threading

from ..gpu import caches
from ..errors import KernelCompileError

_lock = threading.Lock()
_modules: dict = {}
_functions: dict = {}

NVCC_OPTIONS = ("-O3", "-std=c++17")


def compile_module(state, source: str, include_dirs, where: str):
    """The pycuda module of `source` on the device's context; nvcc's errors
    become KernelCompileError starting with `where` (who compiled what)."""
    key = (state.ordinal, source, NVCC_OPTIONS)
    with _lock:
        module = _modules.get(key)
    if module is not None:
        return module
    from pycuda.compiler import SourceModule
    from pycuda.driver import CompileError

    try:
        module = SourceModule(source, options=list(NVCC_OPTIONS), no_extern_c=True,
                              include_dirs=list(include_dirs), arch=state.arch)
    except CompileError as exc:
        detail = (getattr(exc, "stderr", None) or str(exc))
        if isinstance(detail, bytes):
            detail = detail.decode("utf-8", "replace")
        raise KernelCompileError(f"{where}: nvcc failed:\n{detail}") from exc
    with _lock:
        _modules[key] = module
    return module


def forget_modules() -> None:
    """Drop every cached module and function (before the context goes away)."""
    with _lock:
        _functions.clear()
        _modules.clear()


caches.register(forget_modules)


def prepared_function(module, name: str, signature: str):
    """module.get_function(name), prepare()d once with `signature`."""
    key = (id(module), name, signature)
    with _lock:
        func = _functions.get(key)
    if func is None:
        func = module.get_function(name)
        func.prepare(signature)
        with _lock:
            _functions[key] = func
    return func
