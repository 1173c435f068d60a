"""API behaviour that needs no GPU: validation, errors, the numpy plugin."""
import numpy as np
import pytest

import cudasortkit as csk
from helpers import (DISTRIBUTIONS, assert_keys_equal, assert_valid_argsort,
                     make_keys, reference_sort)
from cudasortkit.dtypes import KEY_DTYPES


@pytest.mark.parametrize("dtype", KEY_DTYPES)
@pytest.mark.parametrize("dist", DISTRIBUTIONS)
@pytest.mark.parametrize("descending", [False, True])
def test_numpy_plugin_matches_numpy(dtype, dist, descending, rng):
    for n in (0, 1, 2, 3, 257, 4097):
        a = make_keys(dist, dtype, n, rng)
        before = a.copy()
        got = csk.sort(a, algorithm="numpy", descending=descending)
        assert_keys_equal(got, reference_sort(a, descending))
        order = csk.argsort(a, algorithm="numpy", stable=True, descending=descending)
        assert_valid_argsort(order, a, descending, stable=True)
        assert np.array_equal(a.view(np.uint8), before.view(np.uint8)), "input was modified"


def test_sort_by_key_numpy(rng):
    keys = make_keys("few_unique", "int32", 1000, rng)
    values = rng.random(1000)
    k, v = csk.sort_by_key(keys, values, algorithm="numpy")
    order = np.argsort(keys, kind="stable")
    assert_keys_equal(k, keys[order])
    assert np.array_equal(v, values[order])


def test_bool_sorts_like_uint8(rng):
    a = rng.integers(0, 2, 100).astype(bool)
    got = csk.sort(a, algorithm="numpy")
    assert got.dtype == bool and np.array_equal(got, np.sort(a))


def test_out_and_in_place_on_host(rng):
    a = rng.random(100)
    out = np.full(100, np.nan)
    assert csk.sort(a, algorithm="numpy", out=out) is out
    assert np.array_equal(out, np.sort(a))
    b = a.copy()
    csk.sort(b, algorithm="numpy", out=b)
    assert np.array_equal(b, np.sort(a))


def test_noncontiguous_input_is_sorted(rng):
    a = rng.random(200)[::2]
    assert np.array_equal(csk.sort(a, algorithm="numpy"), np.sort(a))


@pytest.mark.parametrize("bad, error", [
    (np.zeros(4, np.complex64), TypeError),
    (np.array(["a", "b"]), TypeError),
    (np.array([object(), object()]), TypeError),
])
def test_bad_input_names_what_is_supported(bad, error):
    with pytest.raises(error, match="supported"):
        csk.sort(bad)


def test_unknown_algorithm_lists_known():
    with pytest.raises(ValueError, match="unknown algorithm 'nope'.*numpy"):
        csk.sort(np.arange(3), algorithm="nope")


def test_algorithm_that_cannot_serve_request_lists_those_that_can():
    with pytest.raises(ValueError, match="algorithms that can: .*numpy"):
        csk.argsort(np.arange(3.0), algorithm="bitonic", stable=True)


def test_mismatched_lengths_and_bad_values():
    with pytest.raises(ValueError, match="differ in length"):
        csk.sort_by_key(np.arange(3), np.arange(4))
    with pytest.raises(TypeError, match="4 or 8 bytes"):
        csk.sort_by_key(np.arange(3), np.arange(3, dtype=np.int16))


def test_out_must_match():
    with pytest.raises(ValueError, match="out must be"):
        csk.sort(np.arange(3.0), algorithm="numpy", out=np.empty(4))


def test_algorithms_lists_builtins():
    rows = {r["name"]: r for r in csk.algorithms()}
    assert rows["numpy"]["status"] == "ok" and rows["numpy"]["stable"]
    assert rows["bitonic"]["status"] == "ok" and not rows["bitonic"]["stable"]
    assert "block_size" in rows["bitonic"]["tunables"]


def test_make_request_builds_the_request_the_dataclass_would():
    from cudasortkit.dispatch.request import make_request
    from cudasortkit.gpu.arrays import Operand

    keys, values = Operand(np.arange(5, dtype=np.int16)), Operand(np.zeros(5, np.float32))
    got = make_request("pairs", keys, values, 1, 0, (0, 4), hint=2)
    assert got == csk.Request(kind="pairs", dtype="int16", n=5, stable=False, descending=True,
                              value_bytes=4, on_device=False, key_range=(0, 4), options={"hint": 2})
    assert repr(got) == repr(csk.Request("pairs", "int16", 5, False, True, 4, False, (0, 4), {"hint": 2}))
    assert got.keys_range() == (0, 4)
    with pytest.raises(AttributeError):
        got.n = 6
