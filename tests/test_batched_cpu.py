"""Sorting along an axis and ragged segments on host arrays (the CPU
plugin), argument checks, and the segment shape in auto's decision key."""
import numpy as np
import pytest

import cudasortkit as csk
from cudasortkit.sdk.plugin import Request
from cudasortkit.sdk.segments import Segments, check_offsets
from cudasortkit.dispatch.select import Selector
from helpers import make_keys, reference_argsort

SHAPES = [((4, 5, 6), (0, 1, 2, -1, -2, -3, None)), ((7,), (0, -1, None)), ((3, 0, 2), (0, 1, 2)),
          ((1, 9), (0, 1)), ((), (None,))]


@pytest.mark.parametrize("dtype", ["float32", "int16", "uint64", "bool"])
def test_axes_match_numpy(dtype, rng):
    for shape, axes in SHAPES:
        n = int(np.prod(shape))
        a = make_keys("special" if dtype != "bool" else "uniform", dtype, n, rng).reshape(shape)
        for axis in axes:
            expected_order = np.argsort(a, axis=axis, kind="stable")
            got = csk.sort(a, axis=axis)
            assert got.shape == np.sort(a, axis=axis).shape
            assert np.array_equal(got, np.sort(a, axis=axis), equal_nan=a.dtype.kind == "f")
            assert np.array_equal(csk.argsort(a, axis=axis, stable=True), expected_order)
            values = np.arange(n, dtype=np.int64).reshape(shape)
            k, v = csk.sort_by_key(a, values, axis=axis)
            src = values.reshape(-1) if axis is None else values
            assert np.array_equal(v, np.take_along_axis(src, expected_order, -1 if axis is None else axis))


def test_descending_rows_are_stable_with_nans_last(rng):
    a = make_keys("special", "float64", 6 * 50, rng).reshape(6, 50)
    order = csk.argsort(a, axis=1, descending=True, stable=True)
    for r in range(6):
        assert np.array_equal(order[r], reference_argsort(a[r], descending=True))


def test_out_and_in_place():
    a = np.random.default_rng(1).integers(-50, 50, (8, 9)).astype(np.int32)
    out = np.empty_like(a)
    assert csk.sort(a, axis=0, out=out) is out and np.array_equal(out, np.sort(a, axis=0))
    b = a.copy()
    csk.sort(b, axis=0, out=b)
    assert np.array_equal(b, np.sort(a, axis=0))
    for bad in (np.empty((9, 8), np.int32), np.empty((8, 9), np.int64)):
        with pytest.raises(ValueError, match="shape"):
            csk.sort(a, axis=0, out=bad)
    assert np.array_equal(a, np.random.default_rng(1).integers(-50, 50, (8, 9)).astype(np.int32))


def test_axis_errors():
    a = np.zeros((2, 3), np.float32)
    for axis in (2, -3):
        with pytest.raises(np.exceptions.AxisError):
            csk.sort(a, axis=axis)
    for axis in (1.0, "0", True):
        with pytest.raises(TypeError, match="axis"):
            csk.argsort(a, axis=axis)
    with pytest.raises(np.exceptions.AxisError):
        csk.sort(np.float32(3.0), axis=0)
    with pytest.raises(ValueError, match="shape"):
        csk.sort_by_key(a, np.zeros((3, 2), np.int32), axis=0)
    with pytest.raises(TypeError, match="supported"):
        csk.sort(np.zeros((2, 2), object), axis=0)


def test_ragged_host(rng):
    lengths = [0, 3, 0, 0, 17, 1, 2, 0]
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    keys = make_keys("special", "float32", int(offsets[-1]), rng)
    for descending in (False, True):
        expected = np.concatenate([lo + reference_argsort(keys[lo:hi], descending)
                                   for lo, hi in zip(offsets[:-1], offsets[1:])])
        for odt in (np.int32, np.int64, list):
            off = offsets.tolist() if odt is list else offsets.astype(odt)
            assert np.array_equal(csk.segmented_argsort(keys, off, descending=descending,
                                                        stable=True), expected)
            got = csk.segmented_sort(keys, off, descending=descending)
            assert np.array_equal(got, keys[expected], equal_nan=True)
            k, v = csk.segmented_sort(keys, off, np.arange(len(keys), dtype=np.float32),
                                      descending=descending)
            assert np.array_equal(v, expected.astype(np.float32))
    assert len(csk.segmented_sort(np.zeros(0, np.int8), [0])) == 0
    assert len(csk.segmented_sort(np.zeros(0, np.int8), [0, 0, 0])) == 0


@pytest.mark.parametrize("bad, error, match", [
    ([0, 5, 3, 10], ValueError, "must not decrease"), ([0, 5, 11], ValueError, "number of keys"),
    ([2, 5, 10], ValueError, r"\[0\] must be 0"), ([], ValueError, "at least one"),
    (np.zeros((2, 2), np.int64), ValueError, "1-D"), (np.array([0, 10], np.int16), TypeError, "int32"),
    ([0.0, 10.0], TypeError, "int32 or int64"), ("abc", TypeError, "int32 or int64")])
def test_bad_offsets(bad, error, match):
    keys = np.arange(10, dtype=np.float32)[::-1].copy()
    before = keys.copy()
    with pytest.raises(error, match=match):
        csk.segmented_sort(keys, bad)
    with pytest.raises(error, match=match):
        check_offsets(bad, 10)
    assert np.array_equal(keys, before)


def test_segment_shape_is_in_the_decision_key():
    sel = Selector()

    def request(segments):
        return Request.from_fields(kind="sort", dtype="float32", n=1 << 16, stable=False,
                                   descending=False, value_bytes=0, on_device=True,
                                   key_range=None, options={}, range_probe=None,
                                   segments=segments)

    keys = {sel.key(request(s), "auto") for s in (None, Segments.rows(16, 4096),
                                                   Segments.rows(4096, 16), Segments.rows(2, 32768),
                                                   Segments.ragged(np.array([0, 1 << 16], np.int64)))}
    assert len(keys) == 5
    assert sel.key(request(Segments.rows(16, 4096)), "auto") == \
        sel.key(request(Segments.rows(15, 2049)), "auto")
    assert sel.key(request(Segments.rows(16, 4096)), "auto") != \
        sel.key(request(Segments.rows(16, 4097)), "auto")


def test_plugins_declare_segments_and_priorities():
    from cudasortkit.sdk import registry

    plugins = registry.plugins()
    segmented = {n for n, p in plugins.items() if p.segmented}
    assert {"rows", "segmented_radix", "numpy"} <= segmented
    r = Request(kind="sort", dtype="float32", n=1000 * 1000, segments=Segments.rows(1000, 1000))
    assert plugins["rows"].unsupported(r) is None
    assert plugins["radix"].unsupported(r) is not None  # 1-D plugins never see segments
    assert plugins["rows"].priority_for_segments(r.segments) < \
        plugins["segmented_radix"].priority_for_segments(r.segments)
    long = Request(kind="sort", dtype="float32", n=16 << 20, segments=Segments.rows(16, 1 << 20))
    assert "4096" in plugins["rows"].unsupported(long)
    assert plugins["segmented_radix"].unsupported(long) is None
    one = Request(kind="sort", dtype="float32", n=1000)
    assert plugins["rows"].unsupported(one) is not None


def test_explain_and_errors_name_the_segment_shape():
    a = np.zeros((100, 5000), np.float32)
    assert csk.explain(a, axis=1).name in ("segmented_radix", "numpy")
    assert csk.explain(a, axis=0).name in ("rows", "numpy")
    with pytest.raises(ValueError, match="100 rows of 5000.*no rows or segments"):
        csk.explain(a, axis=1, algorithm="radix")
    with pytest.raises(ValueError, match="2 ragged segments, the longest 6"):
        csk.explain(np.zeros(10, np.float32), offsets=[0, 4, 10], algorithm="onesweep")
