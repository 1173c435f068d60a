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
from ..dtypes import key_name
from ..gpu.streams import cupy_stream

DASK_COUNTS = KernelTemplate("dask_counts.cu")
COUNT_BLOCK = 256
COUNT_CONFIG = {"block_size": COUNT_BLOCK}
DASK_PARTITION = KernelTemplate("dask_partition.cu")
PARTITION_BLOCK = 256
#: Blocks an SM of the partition kernels' grid (one wave: each block walks a
#: contiguous range, so the scan's counts stay small).
PARTITION_BLOCKS_PER_SM = 3


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
    dtype = key_name(a.dtype)
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


def bucket_ids(keys, splitters, descending: bool) -> np.ndarray:
    """Host keys' buckets (uint8): how many of the splitter words (uint64,
    ascending, at most 255) are at or below each key's ordered word."""
    return np.searchsorted(np.asarray(splitters, np.uint64), encode(keys, descending),
                           side="right").astype(np.uint8)


def partition_items(key_bytes: int, value_bytes: int) -> int:
    """Keys a thread of kernels/dask_partition.cu holds per round: few enough
    that three blocks fit an SM (registers: the round's keys, the next
    round's, their buckets and ranks) and the round's stage fits 48 KiB."""
    return 8 if key_bytes <= 4 and value_bytes <= 4 else 6


def partition_config(key_bytes: int, value_bytes: int, splitters: int) -> dict:
    """kernels/dask_partition.cu's configuration: block size, keys per thread
    and round (partition_items), bits of the largest bucket number."""
    return {"block_size": PARTITION_BLOCK, "items_per_thread": partition_items(key_bytes, value_bytes),
            "bucket_bits": max(1, int(splitters).bit_length())}


def partition(keys, splitters, descending: bool, keys_out, values=None, values_out=None):
    """Lay `keys` out in `keys_out` bucket after bucket (bucket_ids' buckets,
    len(splitters) + 1 of them), each bucket's keys in index order (stable),
    and beside them in `values_out` the keys' `values` or, with values
    "positions", their indices in `keys`. Returns the int64 size of every
    bucket, an array of keys' library. NumPy: a stable argsort of the bucket
    ids; CuPy: kernels/dask_partition.cu (two launches and a scan)."""
    if len(splitters) > 255:
        raise ValueError(f"cudasortkit.dask: {len(splitters)} splitters; at most 255 fit a byte's buckets")
    buckets = len(splitters) + 1
    if type(keys).__module__.split(".")[0] != "cupy":
        ids = bucket_ids(keys, splitters, descending)
        order = np.argsort(ids, kind="stable")
        keys_out[...] = keys[order]
        if values is not None:
            values_out[...] = order if isinstance(values, str) else values[order]
        return np.bincount(ids, minlength=buckets).astype(np.int64)
    return _partition_device(keys, splitters, descending, keys_out, values, values_out, buckets)


def _partition_device(keys, splitters, descending, keys_out, values, values_out, buckets: int):
    import cupy

    from ..dispatch.request import caller_ordering
    from ..gpu.arrays import Operand

    n = len(keys)
    if not n:
        return cupy.zeros(buckets, np.int64)
    positions = isinstance(values, str)
    value_bytes = 0 if values is None else values_out.dtype.itemsize
    if value_bytes not in (0, 4, 8):   # the kernel moves 4- and 8-byte values: others by their positions
        order = cupy.empty(n, np.int64)
        sizes = _partition_device(keys, splitters, descending, keys_out, "positions", order, buckets)
        cupy.take(values, order, out=values_out)
        return sizes
    dtype = key_name(keys.dtype)
    config = partition_config(keys.dtype.itemsize, value_bytes, len(splitters))
    words = cupy.ascontiguousarray(splitters, np.uint64)
    operands = [Operand(keys, "keys"), Operand(keys_out, "keys_out", "out")]
    if values is not None:
        operands.append(Operand(values_out, "values_out", "out"))
        if not positions:
            operands.append(Operand(values, "values", "values"))
    state, ordering = caller_ordering(None, operands)
    ordering.begin()
    try:
        count_kernel = DASK_PARTITION.kernel(state, dtype, value_bytes, config, "csk_dask_partition_counts",
                                             owner="dask")
        scatter = DASK_PARTITION.kernel(state, dtype, value_bytes, config, "csk_dask_partition_scatter",
                                        owner="dask")
        round_keys = PARTITION_BLOCK * config["items_per_thread"]
        grid = max(1, min(-(-n // round_keys), state.limits.sm_count * PARTITION_BLOCKS_PER_SM))
        per = -(-n // grid)
        grid = -(-n // per)
        mask = (1 << key_bits(keys.dtype)) - 1 if descending else 0
        counts = cupy.empty(buckets * grid, np.int64)
        block = (PARTITION_BLOCK, 1, 1)
        count_kernel.launch(state, state.stream, (grid, 1), block,
                            (int(keys.data.ptr), n, per, int(words.data.ptr), len(splitters), mask,
                             int(counts.data.ptr)), owner="dask", dtype=dtype, config=config)
        with cupy_stream(state.stream.handle):
            starts = cupy.cumsum(counts) - counts       # bucket-major: blocks in index order within a bucket
            sizes = counts.reshape(buckets, grid).sum(axis=1)
        mode = 0 if values is None else 1 if positions else 2
        scatter.launch(state, state.stream, (grid, 1), block,
                       (int(keys.data.ptr), int(values.data.ptr) if mode == 2 else 0, n, per, int(words.data.ptr),
                        len(splitters), mask, int(starts.data.ptr), mode, int(keys_out.data.ptr),
                        int(values_out.data.ptr) if mode else 0), owner="dask", dtype=dtype, config=config)
    finally:
        ordering.end()
    return sizes
