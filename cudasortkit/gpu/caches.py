"""Caches of things made on a CUDA context (compiled modules, prepared
functions, kernels, launch plans) and their one clear, as pycuda's
context_dependent_memoize and clear_context_caches: each layer that keeps
such a cache registers its clear() here, and all are cleared before a
context goes away, so nothing below calls up to clear what sits above.

Device memory a layer keeps for reuse (prepared calls' temporaries) is
registered apart, with a release() that gives it back to the pool: running
out of memory calls release_kept() before it fails (gpu/device.py), so
memory kept for speed never costs a caller an allocation; clear_all()
releases it too."""
from __future__ import annotations

_clears: list = []


def register(clear) -> None:
    """Have clear_all() call `clear` (once per registration)."""
    _clears.append(clear)


def clear_all() -> None:
    """Drop everything the registered caches hold, and the memory kept for
    reuse (release_kept)."""
    for clear in list(_clears):
        clear()
    release_kept()


_releases: list = []


def register_kept(release) -> None:
    """Have release_kept() call `release`, which gives device memory kept for
    reuse back to the pool (the keeper takes it anew when next needed)."""
    _releases.append(release)


def release_kept() -> None:
    """Give back all device memory the registered keepers hold for reuse."""
    for release in list(_releases):
        release()
