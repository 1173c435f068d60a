"""Kernels the core launches itself (argsort's index payload, the key range
of integer keys), from its own KernelTemplate of kernels/util.cu. Errors name
`owner`: "core", or the plugin that asked (counting sort measures its range)."""
from __future__ import annotations

import numpy as np

from .dtypes import key_dtype
from .errors import KernelError, describe
from .template import SYNC_EVERY_LAUNCH, KernelTemplate

UTIL = KernelTemplate("util.cu")
IOTA_BLOCK = 256
MINMAX_BLOCK = 256
#: The macros util.cu is rendered with (its kernels read their block size
#: from blockDim, so one build serves both launches).
UTIL_CONFIG = {"block_size": 256}


def launch(state, kernel, grid: int, block: int, args, where: str) -> None:
    """Launch on the device's stream; CUDA errors become KernelError naming `where`."""
    if len(args) != len(kernel.signature):
        raise KernelError(f"{where}: launched with {len(args)} arguments, but the kernel takes "
                          f"{len(kernel.signature)} ({kernel.signature!r})")
    try:
        kernel.issue(state, state.stream, (grid, 1), (block, 1, 1), args, 0)
        if SYNC_EVERY_LAUNCH:
            state.stream.synchronize()
    except state.cuda.Error as exc:
        raise KernelError(f"{where}: launch grid=({grid}, 1) block=({block}, 1, 1) "
                          f"failed: {exc}") from exc


def iota64(state, ptr: int, n: int, owner: str = "core", index_bytes: int = 8) -> None:
    """Fill n int64 (index_bytes 4: int32) at ptr with 0..n-1 on the device's stream."""
    if n <= 0:
        return
    name = "csk_iota64" if index_bytes == 8 else "csk_iota32"
    kernel = UTIL.kernel(state, "uint32", 0, UTIL_CONFIG, name, owner=owner)
    grid = min(-(-int(n) // IOTA_BLOCK), 65535)
    launch(state, kernel, grid, IOTA_BLOCK, (int(ptr), int(n)),
            describe(owner, kernel.name, None, None))


def key_minmax(state, ptr: int, n: int, dtype, owner: str = "core") -> tuple | None:
    """(min, max) of n integer keys of `dtype` at device address ptr, as Python
    ints, from one reduction pass on the device's stream (waits for it).

    None when n == 0. Range-limited algorithms (counting sort) use it to learn
    how many bins a request needs.
    """
    dt = key_dtype(dtype)
    if dt.kind not in "iu":
        raise TypeError(f"key_minmax measures integer keys, not {dt}")
    if n <= 0:
        return None
    where = describe(owner, "csk_minmax_ordered", dt.name, None)
    kernel = UTIL.kernel(state, dt.name, 0, UTIL_CONFIG, "csk_minmax_ordered", owner=owner)
    out = state.allocate(16, f"{where}, key range")
    try:
        state.cuda.memset_d32_async(int(out), 0xFFFFFFFF, 2, state.stream)
        state.cuda.memset_d32_async(int(out) + 8, 0, 2, state.stream)
        grid = max(1, min(-(-int(n) // (MINMAX_BLOCK * 4)), state.limits.sm_count * 8))
        launch(state, kernel, grid, MINMAX_BLOCK, (int(ptr), int(n), int(out)), where)
        host = np.empty(2, np.uint64)
        state.stream.synchronize()
        state.cuda.memcpy_dtoh(host, int(out))
    except state.cuda.Error as exc:
        raise KernelError(f"{where}: key range reduction failed: {exc}") from exc
    finally:
        out.free()
    lo, hi = int(host[0]), int(host[1])
    if dt.kind == "i":  # ordered word = key with the sign bit flipped
        offset = 1 << (8 * dt.itemsize - 1)
        lo, hi = lo - offset, hi - offset
    return lo, hi
