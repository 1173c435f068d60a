"""References for topk and partition, independent of the plugins: the
selection order of docs/select.md spelled out per key in Python."""
from __future__ import annotations

import math

import numpy as np

from helpers import comparable, dense_rank, to_numpy


def _selection_key(x, i, largest):
    nan = isinstance(x, float) and math.isnan(x)
    if largest:
        return (0, 0, i) if nan else (1, -x, i)
    return (1, 0, i) if nan else (0, x, i)


def reference_topk(a: np.ndarray, k: int, axis: int = -1, largest: bool = True):
    """(values, int64 indices) along `axis`: NaN largest, -0.0 == +0.0,
    equal keys lower index first; values are the input's own bits."""
    moved = np.moveaxis(a, axis, -1)
    rows = moved.reshape(-1, moved.shape[-1]) if moved.size or moved.shape[-1] else \
        moved.reshape(-1, 0)
    c = comparable(rows)
    idx = np.empty((rows.shape[0], k), np.int64)
    for r in range(rows.shape[0]):
        row = c[r].tolist()
        order = sorted(range(len(row)), key=lambda i: _selection_key(row[i], i, largest))
        idx[r] = order[:k]
    values = np.take_along_axis(rows, idx, axis=-1)
    shape = moved.shape[:-1] + (k,)
    return (np.moveaxis(values.reshape(shape), -1, axis),
            np.moveaxis(idx.reshape(shape), -1, axis))


def assert_same_bits(got, expected, what="values"):
    got, expected = to_numpy(got), np.asarray(expected)
    assert got.dtype == expected.dtype, f"{what}: dtype {got.dtype} != {expected.dtype}"
    assert got.shape == expected.shape, f"{what}: shape {got.shape} != {expected.shape}"
    gb = np.ascontiguousarray(got).view(f"u{got.dtype.itemsize}") if got.dtype != np.bool_ else got
    eb = np.ascontiguousarray(expected).view(gb.dtype) if got.dtype != np.bool_ else expected
    if not np.array_equal(gb, eb):
        bad = np.argwhere(gb != eb)[:5]
        raise AssertionError(f"{what} differ at {bad.tolist()}: got {got[tuple(bad.T)]}, "
                             f"expected {expected[tuple(bad.T)]}")


def assert_topk(result, a, k, axis=-1, largest=True):
    values, indices = result
    ev, ei = reference_topk(a, k, axis, largest)
    indices = to_numpy(indices)
    assert indices.dtype == np.int64, indices.dtype
    assert np.array_equal(indices, ei), f"indices: got {indices}, expected {ei}"
    assert_same_bits(values, ev)


def assert_partitioned(indices, a: np.ndarray, kth, axis=-1):
    """`indices` (argpartition's) permute every row along `axis`, and put
    at each kth the key a sort would, smaller-or-equal before, greater-or-
    equal after (NaNs largest)."""
    indices = to_numpy(indices)
    assert indices.dtype == np.int64 and indices.shape == a.shape
    moved = np.moveaxis(a, axis, -1).reshape(-1, a.shape[axis])
    idx = np.moveaxis(indices, axis, -1).reshape(moved.shape)
    kths = [kth] if np.ndim(kth) == 0 else list(kth)
    n = moved.shape[1]
    for r in range(moved.shape[0]):
        assert np.array_equal(np.sort(idx[r]), np.arange(n)), f"row {r} is no permutation"
        rank = dense_rank(moved[r])[idx[r]]
        want = np.sort(dense_rank(moved[r]))
        for kt in kths:
            kt %= n
            assert rank[kt] == want[kt], f"row {r}: wrong key at kth={kt}"
            assert (rank[:kt] <= rank[kt]).all() and (rank[kt + 1:] >= rank[kt]).all(), \
                f"row {r}: not partitioned at kth={kt}"


def assert_partition_values(values, a: np.ndarray, kth, axis=-1):
    """partition's `values`: every row along `axis` holds the row's keys
    (as values: NaN == NaN), the sorted key at each kth, smaller-or-equal
    before it and greater-or-equal after."""
    values = to_numpy(values)
    assert values.dtype == a.dtype and values.shape == a.shape
    moved = np.moveaxis(a, axis, -1).reshape(-1, a.shape[axis])
    got = np.moveaxis(values, axis, -1).reshape(moved.shape)
    kths = [kth] if np.ndim(kth) == 0 else list(kth)
    n = moved.shape[1]
    for r in range(moved.shape[0]):
        both = np.concatenate([moved[r], got[r]])
        rank = dense_rank(both)
        mine, theirs = rank[n:], np.sort(rank[:n])
        assert np.array_equal(np.sort(mine), theirs), f"row {r}: not the row's keys"
        for kt in kths:
            kt %= n
            assert mine[kt] == theirs[kt], f"row {r}: wrong key at kth={kt}"
            assert (mine[:kt] <= mine[kt]).all() and (mine[kt + 1:] >= mine[kt]).all(), \
                f"row {r}: not partitioned at kth={kt}"
