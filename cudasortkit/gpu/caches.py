"""Caches of things made on a CUDA context (compiled modules, prepared
functions, kernels, launch plans) and their one clear, as pycuda's
context_dependent_memoize and clear_context_caches: each layer that keeps
such a cache registers its clear() here, and all are cleared before a
context goes away, so nothing below calls up to clear what sits above."""
from __future__ import annotations

_clears: list = []


def register(clear) -> None:
    """Have clear_all() call `clear` (once per registration)."""
    _clears.append(clear)


def clear_all() -> None:
    """Drop everything the registered caches hold."""
    for clear in list(_clears):
        clear()
