"""Kernels the core launches itself (argsort's index payload, the key range
of integer keys), from its own KernelTemplate of kernels/util.cu. Errors name
`owner`: "core", or the plugin that asked (counting sort measures its range)."""
from __future__ import annotations

import numpy as np

from ..dtypes import key_dtype
from ..errors import KernelError, describe
from .template import KernelTemplate

UTIL = KernelTemplate("util.cu")
IOTA_BLOCK = 256
MINMAX_BLOCK = 256
#: The macros util.cu is rendered with (its kernels read their block size
#: from blockDim, so one build serves both launches).
UTIL_CONFIG = {"block_size": 256}


def iota64(state, ptr: int, n: int, owner: str = "core", index_bytes: int = 8, *,
           start: int = 0, max_grid: int = 65535) -> None:
    """Fill n int64 (index_bytes 4: int32) at ptr with start, start + 1, ...
    on the device's stream, with at most `max_grid` blocks (util.cu's csk_iota)."""
    if n <= 0:
        return
    kernel = UTIL.kernel(state, "uint32", 0, UTIL_CONFIG, "csk_iota", owner=owner)
    grid = min(-(-int(n) // IOTA_BLOCK), max_grid)
    kernel.launch(state, state.stream, (grid, 1), (IOTA_BLOCK, 1, 1),
                  (int(ptr), int(n), int(start), int(index_bytes)), owner=owner)


def _reduce(state, kernel, grid: int, args, words: int, ones: int, owner: str, dtype,
            what: str) -> np.ndarray:
    """Launch a reduction kernel on the device's stream with args + (out,),
    out being `words` 64-bit words set to all ones (the first `ones`) and
    zero (the rest), wait for it and return out as NumPy uint64. Errors
    name owner, kernel and dtype."""
    out = state.allocate(words * 8, f"{describe(owner, kernel.name, dtype, None)}, {what}")
    host = np.empty(words, np.uint64)
    try:
        state.cuda.memset_d32_async(int(out), 0xFFFFFFFF, 2 * ones, state.stream)
        state.cuda.memset_d32_async(int(out) + 8 * ones, 0, 2 * (words - ones), state.stream)
        kernel.launch(state, state.stream, (grid, 1), (MINMAX_BLOCK, 1, 1), (*args, int(out)),
                      owner=owner, dtype=dtype)
        state.stream.synchronize()
        state.cuda.memcpy_dtoh(host, int(out))
    except state.cuda.Error as exc:
        raise KernelError.failed(owner, kernel.name, dtype, None, what, exc) from exc
    finally:
        out.free()
    return host


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
    kernel = UTIL.kernel(state, dt.name, 0, UTIL_CONFIG, "csk_minmax_ordered", owner=owner)
    grid = max(1, min(-(-int(n) // (MINMAX_BLOCK * 4)), state.limits.sm_count * 8))
    host = _reduce(state, kernel, grid, (int(ptr), int(n)), 2, 1, owner, dt.name,
                   "key range reduction")
    lo, hi = int(host[0]), int(host[1])
    if dt.kind == "i":  # ordered word = key with the sign bit flipped
        offset = 1 << (8 * dt.itemsize - 1)
        lo, hi = lo - offset, hi - offset
    return lo, hi


#: Length buckets of offsets_check: bucket b holds lengths with bit length
#: of (length - 1) == b (lengths 0 and 1 in bucket 0), b in 0..64.
OFFSET_BUCKETS = 65
#: The stats words of csk_offsets_check (kernels/util.cu).
_STATS_WORDS = 4 + 2 * OFFSET_BUCKETS


def offsets_check(state, ptr: int, count: int, wide: bool, widened: int = 0,
                  owner: str = "core") -> dict:
    """CUB-style offsets (count + 1 int64 values if `wide`, else int32, at
    device address ptr) checked and measured by one pass on the device's
    stream, which this waits for. Returns {"bad": first s with offsets[s + 1]
    < offsets[s] or None, "longest": the longest segment, "first": offsets[0],
    "last": offsets[count], "segments"/"keys": NumPy int64 per length bucket
    (OFFSET_BUCKETS)}. `widened` (a device address or 0) gets the offsets as int64."""
    kernel = UTIL.kernel(state, "uint32", 0, UTIL_CONFIG, "csk_offsets_check", owner=owner)
    grid = max(1, min(-(-int(count) // MINMAX_BLOCK), state.limits.sm_count * 4))
    host = _reduce(state, kernel, grid, (int(ptr), int(bool(wide)), int(count), int(widened)),
                   _STATS_WORDS, 1, owner, None, "offsets check")
    signed = host.view(np.int64)
    return {"bad": None if host[0] == np.uint64(0xFFFFFFFFFFFFFFFF) else int(host[0]),
            "longest": int(host[1]), "first": int(signed[2]), "last": int(signed[3]),
            "segments": signed[4:4 + OFFSET_BUCKETS].copy(),
            "keys": signed[4 + OFFSET_BUCKETS:].copy()}
