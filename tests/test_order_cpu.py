"""NumPy 2.5's order on the CPU path: NaNs last in both directions, and a
stable descending sort keeps equal keys (-0.0/+0.0, NaNs) in input order.
sort, argsort, sort_by_key, merge and merge_by_key, through the numpy plugin."""
import numpy as np
import pytest

import cudasortkit as csk
from helpers import (NUMPY_DESCENDING, as_dtype, assert_keys_equal, lexsort_descending,
                     make_keys, reference_argsort)

FLOATS = ["float16", "float32", "float64", "bfloat16"]


def test_issue_example_argsort_descending_stable():
    a = np.array([1., np.nan, 2., 2., -np.nan, 1., -0., 0.])
    got = csk.argsort(a, descending=True, stable=True, algorithm="numpy")
    assert got.tolist() == [2, 3, 0, 5, 6, 7, 1, 4]


def test_stable_descending_keeps_signed_zeros_in_input_order():
    a = np.array([-0., 0., 1.])
    got = csk.sort(a, descending=True, stable=True, algorithm="numpy")
    assert np.signbit(got).tolist() == [False, True, False]  # 1., -0., 0.
    b = np.array([0., -0., 1.])
    got = csk.sort(b, descending=True, stable=True, algorithm="numpy")
    assert np.signbit(got).tolist() == [False, False, True]  # 1., 0., -0.


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("stable", [False, True])
def test_nans_last_in_both_orders(dtype, stable):
    dt = as_dtype(dtype)
    a = np.array([np.nan, 3, -1, np.nan, 0, 7], np.float64).astype(dt)
    for descending in (False, True):
        got = np.asarray(csk.sort(a, descending=descending, stable=stable, algorithm="numpy"),
                         np.float64)
        assert np.isnan(got[-2:]).all() and not np.isnan(got[:-2]).any(), got
        expect = [-1, 0, 3, 7] if not descending else [7, 3, 0, -1]
        assert got[:-2].tolist() == expect


def test_reference_matches_numpy_where_numpy_has_descending(rng):
    if not NUMPY_DESCENDING:
        pytest.skip(f"NumPy {np.__version__} has no descending=True")
    for dtype in ("float32", "float64", "int16", "uint8"):
        for dist in ("special", "few_unique", "uniform"):
            a = make_keys(dist, dtype, 3001, rng)
            assert np.array_equal(lexsort_descending(a), np.argsort(a, descending=True, stable=True))
            assert_keys_equal(np.sort(a, descending=True), a[lexsort_descending(a)])


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "uint8", "bfloat16", "float64"])
@pytest.mark.parametrize("dist", ["special", "few_unique", "uniform", "all_equal"])
@pytest.mark.parametrize("descending", [False, True])
def test_every_operation_follows_numpy_order(dtype, dist, descending, rng):
    for n in (0, 1, 2, 17, 1000):
        a = make_keys(dist, dtype, n, rng)
        order = reference_argsort(a, descending)
        for stable in (False, True):
            assert_keys_equal(csk.sort(a, descending=descending, stable=stable, algorithm="numpy"),
                              a[order])
        got = csk.argsort(a, descending=descending, stable=True, algorithm="numpy")
        assert np.array_equal(got, order)
        values = rng.integers(0, 1 << 30, n).astype(np.int32)
        k, v = csk.sort_by_key(a, values, descending=descending, algorithm="numpy")
        assert_keys_equal(k, a[order])
        assert np.array_equal(v, values[order])


@pytest.mark.parametrize("dtype", ["float32", "int64", "bfloat16"])
@pytest.mark.parametrize("descending", [False, True])
def test_merge_follows_numpy_order(dtype, descending, rng):
    a = make_keys("special", dtype, 301, rng)
    b = make_keys("special", dtype, 157, rng)
    a, b = a[reference_argsort(a, descending)], b[reference_argsort(b, descending)]
    both = np.concatenate([a, b])
    order = reference_argsort(both, descending)
    assert_keys_equal(csk.merge(a, b, descending=descending), both[order])
    va, vb = np.arange(301, dtype=np.int64), np.arange(301, 301 + 157, dtype=np.int64)
    k, v = csk.merge_by_key(a, va, b, vb, descending=descending)
    assert_keys_equal(k, both[order])
    assert np.array_equal(v, order)


def test_merge_of_unsorted_host_inputs_is_a_permutation():
    a, b = np.array([5, 1, 3]), np.array([4, 2, 6, 0])
    got = csk.merge(a, b)
    assert sorted(got.tolist()) == sorted(a.tolist() + b.tolist())
    k, v = csk.merge_by_key(a, np.arange(3.0), b, np.arange(3.0, 7.0))
    pairs = sorted(zip(k.tolist(), v.tolist()))
    assert pairs == sorted(zip(a.tolist() + b.tolist(), range(7)))
