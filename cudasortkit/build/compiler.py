"""Runtime compilation of rendered sources, cached per context and source.

A source compiles to one cubin (build/cubins.py: nvcc, and the cubins kept
on disk across processes, found without running the compiler); this module
loads it once per (context, source, options) as a pycuda module and keeps
prepared functions, so a sort never compiles or prepares twice in one
process. Kernels launched in ways pycuda cannot (overlapped launches) are
loaded through the driver from the same cubin bytes (driver_function), once
per context and source. It compiles text: rendering a template is
build/render.py's job, choosing what to render (and the one kernel cache)
build/template.py's.
"""
from __future__ import annotations

import threading

from ..gpu import caches, libcuda
from . import cubins

_lock = threading.Lock()
_modules: dict = {}
_functions: dict = {}
#: (ordinal, source, options) -> (CUmodule, {name: CUfunction}) loaded through
#: the driver (driver_function).
_driver_modules: dict = {}
_driver_lock = threading.Lock()  # held while a module loads: one load per source

NVCC_OPTIONS = ("-O3", "-std=c++17")


def compile_module(state, source: str, include_dirs, where: str):
    """The pycuda module of `source` on the device's context; nvcc's errors
    become KernelCompileError starting with `where` (who compiled what)."""
    key = (state.ordinal, source, NVCC_OPTIONS)
    with _lock:
        module = _modules.get(key)
    if module is not None:
        return module
    from pycuda.driver import module_from_buffer

    args = (source, include_dirs, NVCC_OPTIONS, state.arch, where)
    try:
        module = module_from_buffer(cubins.image(*args))
    except state.cuda.Error:  # a cubin the driver refuses (a damaged file): compiled again
        module = module_from_buffer(cubins.recompile(*args))
    with _lock:
        module = _modules.setdefault(key, module)
    return module


def compile_only(state, source: str, include_dirs, where: str) -> None:
    """The cubin of `source` for the state's arch made (or found) and kept
    on disk, nothing loaded: a state without a device (tuning/prebuild.py)."""
    cubins.image(source, include_dirs, NVCC_OPTIONS, state.arch, where)


def driver_function(state, source: str, include_dirs, name: str) -> int:
    """Kernel `name` of `source` as a CUfunction handle, for launches pycuda
    cannot make (gpu/libcuda.launch_overlapped): the cubin compile_module
    loaded (cubins.image: this process's copy), loaded once more through
    the driver, once per context and source."""
    key = (state.ordinal, source, NVCC_OPTIONS)
    with _driver_lock:
        loaded = _driver_modules.get(key)
        if loaded is None:
            image = cubins.image(source, include_dirs, NVCC_OPTIONS, state.arch, name)
            loaded = _driver_modules[key] = (libcuda.load_module(image), {})
        module, functions = loaded
        if name not in functions:
            functions[name] = libcuda.module_function(module, name)
        return functions[name]


def forget_modules() -> None:
    """Drop every cached module and function (before the context goes away)."""
    with _lock:
        _functions.clear()
        _modules.clear()
    with _driver_lock:
        loaded = list(_driver_modules.values())
        _driver_modules.clear()
    for module, _ in loaded:
        libcuda.driver().cuModuleUnload(module)


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
