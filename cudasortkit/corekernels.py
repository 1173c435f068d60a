"""Kernels the core launches itself (argsort's index payload), compiled and
launched through the same Job machinery as plugins so errors read the same."""
from __future__ import annotations

from .errors import KernelError
from .job import Job
from .plugin import SortPlugin, Tunable

IOTA_BLOCK = 256


class CoreKernels(SortPlugin):
    """Not an algorithm and not registered: a home for kernels/util.cu."""

    name = "core"
    dtypes = ("uint32",)
    tunables = {"block_size": Tunable(IOTA_BLOCK)}
    templates = ("util.cu",)

    def run(self, job):  # pragma: no cover - never sorts
        raise NotImplementedError


_CORE = CoreKernels()


def iota64(state, ptr: int, n: int) -> None:
    """Fill n int64 at ptr with 0..n-1 on the device's stream."""
    job = Job(_CORE, state, dtype="uint32", n=n, keys_in=0, keys_out=0)
    kernel = job.kernel("util.cu", "csk_iota64")
    grid = min(job.blocks(n, IOTA_BLOCK), 65535)
    job.launch(kernel, grid, IOTA_BLOCK, ptr, n)


MINMAX_BLOCK = 256


def key_minmax(state, ptr: int, n: int, dtype) -> tuple | None:
    """(min, max) of n integer keys of `dtype` at device address ptr, as Python
    ints, from one reduction pass on the device's stream (waits for it).

    None when n == 0. Range-limited algorithms (counting sort) use it to learn
    how many bins a request needs.
    """
    import numpy as np

    from .dtypes import key_dtype

    dt = key_dtype(dtype)
    if dt.kind not in "iu":
        raise TypeError(f"key_minmax measures integer keys, not {dt}")
    if n <= 0:
        return None
    job = Job(_CORE, state, dtype=dt.name, n=n, keys_in=ptr, keys_out=0)
    try:
        kernel = job.kernel("util.cu", "csk_minmax_ordered")
        out = job.alloc(16)
        job.memset32(int(out), 0xFFFFFFFF, 2)
        job.memset32(int(out) + 8, 0, 2)
        grid = max(1, min(job.blocks(n, MINMAX_BLOCK * 4), state.sm_count * 8))
        job.launch(kernel, grid, MINMAX_BLOCK, int(ptr), int(n), int(out))
        host = np.empty(2, np.uint64)
        state.stream.synchronize()
        state.cuda.memcpy_dtoh(host, int(out))
    except state.cuda.Error as exc:
        raise KernelError(f"{job.where}: key range reduction failed: {exc}") from exc
    finally:
        job.release()
    lo, hi = int(host[0]), int(host[1])
    if dt.kind == "i":  # ordered word = key with the sign bit flipped
        offset = 1 << (8 * dt.itemsize - 1)
        lo, hi = lo - offset, hi - offset
    return lo, hi
