"""Ordered words and the counts the exact cuts search with (cuts.py).

A key's ordered word is the unsigned word whose order is the requested
order (kernels/include/keys.cuh's csk_encode, the order every cudasortkit
kernel compares in): unsigned keys as they are, signed keys with the sign bit
flipped, floats by their IEEE bits with negatives inverted, -0.0 as +0.0 and
every NaN as all ones (last); descending inverts every word but NaN's.
`encode` computes them on the host (NumPy); on a GPU the kernel encodes the
keys as it reads them, so no array of words is ever made there.

count_words(a, words, lo, hi, ...) counts, for every row t of query words
and every query in it, the elements of a[lo[t]:hi[t]] (sorted in the
requested order) whose word is below the query (side 0) or not above it
(side 1): one launch of kernels/dask_counts.cu per call on CuPy arrays,
np.searchsorted on NumPy ones.
"""
from __future__ import annotations

import numpy as np

from ..build.template import KernelTemplate

DASK_COUNTS = KernelTemplate("dask_counts.cu")
COUNT_BLOCK = 256
COUNT_CONFIG = {"block_size": COUNT_BLOCK}


def key_bits(dtype) -> int:
    """Bits of the ordered words of `dtype`'s keys (bool: 8, as the kernels read it)."""
    return 8 * np.dtype(dtype).itemsize


def top(dtype) -> int:
    """The largest ordered word of `dtype`."""
    return (1 << key_bits(dtype)) - 1


def encode(keys: np.ndarray, descending: bool) -> np.ndarray:
    """Host keys' ordered words (csk_encode), as uint64."""
    keys = np.asarray(keys)
    size = keys.dtype.itemsize
    uint = np.dtype(f"u{size}")
    x = keys.astype(np.uint8) if keys.dtype.kind == "b" else keys.view(uint)
    bits = 8 * size
    sign = uint.type(1 << (bits - 1))
    ones = uint.type((1 << bits) - 1)
    kind = keys.dtype.kind
    if kind == "i":
        u = x ^ sign
    elif kind == "f":
        inf = {2: 0x7C00, 4: 0x7F800000, 8: 0x7FF0000000000000}[size]
        magnitude = x & ~sign
        y = np.where(magnitude == 0, uint.type(0), x)
        u = np.where((y & sign) != 0, ~y, y | sign).astype(uint)
        u = np.where(magnitude > uint.type(inf), ones, u).astype(uint)
    else:
        u = x
    if descending:
        flipped = (u ^ ones).astype(uint)
        u = np.where(u == ones, u, flipped) if kind == "f" else flipped
    return u.astype(np.uint64)


def count_words(a, words, lo, hi, descending: bool, side: int, out=None):
    """int64 counts, words' shape (rows, per_row): for row t, the elements of
    a[lo[t]:hi[t]] whose ordered word is below (side 0) or at most (side 1)
    each query; added into `out` when given (and returned). a, words (uint64),
    lo, hi (int64) and out are arrays of one library: NumPy or CuPy."""
    if type(a).__module__.split(".")[0] == "cupy":
        return _count_device(a, words, lo, hi, descending, side, out)
    words = np.asarray(words, np.uint64)
    counts = np.zeros(words.shape, np.int64)
    if len(a):
        for t in range(words.shape[0]):
            window = encode(a[int(lo[t]):int(hi[t])], descending)
            counts[t] = np.searchsorted(window, words[t], side="right" if side else "left")
    if out is None:
        return counts
    out += counts
    return out


def _count_device(a, words, lo, hi, descending: bool, side: int, out):
    import cupy

    from ..dispatch.request import caller_ordering
    from ..gpu.arrays import Operand

    rows, per_row = words.shape
    accumulate = out is not None
    if out is None:
        out = cupy.zeros(words.shape, np.int64)
    if not len(a) or not out.size:
        return out
    if not out.flags.c_contiguous:
        raise ValueError("cudasortkit.dask: count_words adds into a C-contiguous `out` only")
    # The kernel reads rows x per_row words and writes as many counts: both
    # go to it as flat (1-D) operands of the same memory.
    words = cupy.ascontiguousarray(words, np.uint64).reshape(-1)
    lo = cupy.ascontiguousarray(lo, np.int64)
    hi = cupy.ascontiguousarray(hi, np.int64)
    dtype = "uint8" if a.dtype.kind == "b" else a.dtype.name
    operands = [Operand(x, what) for x, what in ((a, "keys"), (words, "words"), (lo, "lo"), (hi, "hi"))]
    state, ordering = caller_ordering(None, operands + [Operand(out.reshape(-1), "counts", "out")])
    ordering.begin()
    try:
        kernel = DASK_COUNTS.kernel(state, dtype, 0, COUNT_CONFIG, "csk_dask_count", owner="dask")
        mask = (1 << key_bits(a.dtype)) - 1 if descending else 0
        grid = -(-rows * per_row // COUNT_BLOCK)
        kernel.launch(state, state.stream, (grid, 1), (COUNT_BLOCK, 1, 1),
                      (int(a.data.ptr), int(lo.data.ptr), int(hi.data.ptr), int(words.data.ptr), int(rows),
                       int(per_row), int(mask), int(side), int(accumulate), int(out.data.ptr)),
                      owner="dask", dtype=dtype, config=COUNT_CONFIG)
    finally:
        ordering.end()
    return out


def bucket_ids(keys, splitters, descending: bool):
    """uint8 bucket of every key: how many of the splitter words (uint64,
    ascending, at most 255) are at or below the key's ordered word. CuPy
    keys: one launch of kernels/dask_counts.cu's csk_dask_buckets."""
    if type(keys).__module__.split(".")[0] != "cupy":
        return np.searchsorted(np.asarray(splitters, np.uint64), encode(keys, descending),
                               side="right").astype(np.uint8)
    import cupy

    from ..dispatch.request import caller_ordering
    from ..gpu.arrays import Operand

    if len(splitters) > 255:
        raise ValueError(f"cudasortkit.dask: {len(splitters)} splitters; at most 255 fit a byte's buckets")
    out = cupy.empty(len(keys), np.uint8)
    if not len(keys):
        return out
    words = cupy.ascontiguousarray(splitters, np.uint64)
    dtype = "uint8" if keys.dtype.kind == "b" else keys.dtype.name
    state, ordering = caller_ordering(None, [Operand(keys, "keys"), Operand(words, "splitters"),
                                             Operand(out, "buckets", "out")])
    ordering.begin()
    try:
        kernel = DASK_COUNTS.kernel(state, dtype, 0, COUNT_CONFIG, "csk_dask_buckets", owner="dask")
        mask = (1 << key_bits(keys.dtype)) - 1 if descending else 0
        grid = max(1, min(-(-len(keys) // COUNT_BLOCK), state.limits.sm_count * 16))
        kernel.launch(state, state.stream, (grid, 1), (COUNT_BLOCK, 1, 1),
                      (int(keys.data.ptr), int(len(keys)), int(words.data.ptr), int(len(splitters)), int(mask),
                       int(out.data.ptr)), owner="dask", dtype=dtype, config=COUNT_CONFIG)
    finally:
        ordering.end()
    return out
