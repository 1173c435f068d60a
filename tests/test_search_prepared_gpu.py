"""searchsorted on the device against NumPy: the "kary" plugin
(kernels/search_kary.cu) at sizes around its lane counts, every key dtype,
both sides, NaNs, -0.0, ties, sorter and batched rows, every lane count;
prepared searches (calls/search_prepared.py): repeated calls of one shape
on new data, from CuPy and PyTorch, on the legacy and on a created stream,
each result still right after the calls after it; and auto on every cell of
the benchmark's grid (queries x keys in {2^10, 2^16, 2^20, 2^24}, float32
and int64; the 2^24 rows in the slow tier). Result buffers are poisoned
(conftest)."""
import numpy as np
import pytest

import cudasortkit as csk
from cudasortkit import api
from cudasortkit.dtypes import KEY_DTYPES
from helpers import make_keys, numpy_searchsorted, sorted_keys, to_device, to_numpy

pytestmark = pytest.mark.gpu
slow = pytest.mark.slow
#: Around 32 lanes (a range of <= 32 keys: no round) and 33^k, primes.
KARY_SIZES = [0, 1, 2, 3, 31, 32, 33, 34, 1088, 1089, 1090, 7919, 35937, 35938, 104729,
              (1 << 20) + 1]
PLUGINS = ["auto", "binary", "tree", "kary"]






def _queries(a, dtype, m, rng):
    """Special keys (NaNs, zeros of both signs, infinities, extremes) and a's
    own keys (ties)."""
    v = make_keys("special", dtype, m, rng)
    if len(a):
        v[: m // 2] = a[rng.integers(0, len(a), m // 2)]
    return v


def _check(a, v, side, **kwargs):
    got = to_numpy(csk.searchsorted(to_device(a), to_device(v), side, **kwargs))
    expected = numpy_searchsorted(a, v, side, kwargs.get("sorter"))
    assert got.dtype == np.int64 and got.shape == v.shape
    bad = np.flatnonzero(got.reshape(-1) != expected.reshape(-1))
    assert not len(bad), (f"n={len(a)} side={side} {kwargs}: {len(bad)} wrong, first query "
                          f"{v.reshape(-1)[bad[0]]!r} -> {got.reshape(-1)[bad[0]]}, NumPy "
                          f"{expected.reshape(-1)[bad[0]]}")


# ------------------------------------------------------------------ kary
@pytest.mark.parametrize("dtype", KEY_DTYPES)
def test_kary_sizes_every_dtype(dtype, rng):
    for n in KARY_SIZES:
        a = sorted_keys("special", dtype, n, rng)
        v = _queries(a, dtype, 2001, rng)
        for side in ("left", "right"):
            _check(a, v, side, algorithm="kary")


@pytest.mark.parametrize("lanes", [4, 8, 16, 32])
@pytest.mark.parametrize("dtype", ["float32", "int64", "float16", "uint8"])
def test_kary_every_lane_count(lanes, dtype, rng, monkeypatch, request):
    """Every LANES (the config patched, as test_kernels_compile's
    KARY_VARIANTS compiles), more queries than the grid has threads."""
    from cudasortkit.plugins.search_kary import KarySearch

    monkeypatch.setattr(KarySearch, "config", {"block_size": 128, "lanes": lanes})
    # no prepared search of another config replays for these shapes, now or after
    api.searches.forget()
    request.addfinalizer(api.searches.forget)
    for n in (lanes - 1, lanes, lanes + 1, (lanes + 1) ** 2 + 1, 65537):
        a = sorted_keys("uniform", dtype, n, rng)
        for m in (1, 37, 300007):
            v = _queries(a, dtype, m, rng)
            for side in ("left", "right"):
                _check(a, v, side, algorithm="kary")


def test_kary_nans_zeros_and_all_equal(rng):
    cupy = pytest.importorskip("cupy")
    for a in (np.sort(np.concatenate([np.full(5000, np.nan), np.zeros(3000), -np.zeros(3000),
                                      rng.standard_normal(9000)])).astype(np.float32),
              np.full(70001, np.nan, np.float32), np.zeros(70001, np.float32),
              np.full(70001, 3, np.float32)):
        v = np.array([np.nan, 0.0, -0.0, 3.0, np.inf, -np.inf, 1.0], np.float32)
        for side in ("left", "right"):
            got = csk.searchsorted(cupy.asarray(a), cupy.asarray(v), side, algorithm="kary")
            assert np.array_equal(got.get(), np.searchsorted(a, v, side)), side


@pytest.mark.parametrize("side", ["left", "right"])
def test_kary_sorter_and_batched_rows(side, rng):
    cupy = pytest.importorskip("cupy")
    a = make_keys("special", "float64", 90001, rng)
    s = np.argsort(a, kind="stable")
    v = _queries(np.sort(a), "float64", 3000, rng).reshape(30, 100)
    got = csk.searchsorted(cupy.asarray(a), cupy.asarray(v), side, cupy.asarray(s),
                           algorithm="kary")
    assert np.array_equal(got.get(), np.searchsorted(a, v, side, s))
    rows = np.sort(rng.integers(-50, 50, size=(5, 3, 4099)).astype(np.int32), axis=-1)
    q = rng.integers(-60, 60, size=(5, 3, 77)).astype(np.int32)
    got = csk.searchsorted(cupy.asarray(rows), cupy.asarray(q), side, algorithm="kary").get()
    for i in range(5):
        for j in range(3):
            assert np.array_equal(got[i, j], np.searchsorted(rows[i, j], q[i, j], side))


# ----------------------------------------------------- prepared searches
def _library_arrays(library):
    if library == "cupy":
        cupy = pytest.importorskip("cupy")
        return cupy.asarray, lambda x: x.get()
    torch = pytest.importorskip("torch")
    return (lambda x: torch.from_numpy(x).cuda()), (lambda x: x.cpu().numpy())


@pytest.mark.parametrize("library", ["cupy", "torch"])
@pytest.mark.parametrize("algorithm", PLUGINS)
@pytest.mark.parametrize("n, m", [(1 << 10, 1 << 10), (1 << 20, 1 << 10), (5000, 70001),
                                  (1 << 16, 1 << 16), (1, 3)])
def test_prepared_repeats_on_new_data(library, algorithm, n, m, rng):
    """The second and later calls of a shape are prepared (replayed), each
    on new keys and queries: every result is NumPy's, and still is after
    the calls after it (no result array reused while held)."""
    to, back = _library_arrays(library)
    calls = []
    for i in range(4):
        a = np.sort(make_keys("uniform" if i % 2 else "special", "float32", n, rng))
        v = _queries(a, "float32", m, rng)
        for side in ("left", "right"):
            da, dv = to(a), to(v)
            got = csk.searchsorted(da, dv, side, algorithm=algorithm)
            assert type(got) is type(da)
            calls.append((got, np.searchsorted(a, v, side)))
            assert api.searches.find(da, dv, side, algorithm) is not None, (i, side)
            del da, dv  # their memory back to the pool: the next call's arrays may reuse it
    for k, (got, expected) in enumerate(calls):
        assert np.array_equal(back(got), expected), k


def test_prepared_on_a_created_stream_and_shapes(rng):
    """Prepared calls on a CuPy stream (joined with events), a 2-D v, a 0-d v,
    batched rows, int64 keys."""
    cupy = pytest.importorskip("cupy")
    a = np.sort(rng.integers(-1000, 1000, 50000))
    v = rng.integers(-1100, 1100, (40, 50))
    rows = np.sort(rng.integers(0, 100, (6, 2000)), axis=-1)
    q = rng.integers(0, 100, (6, 33))
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        for _ in range(3):
            da, dv, drows, dq = (cupy.asarray(x) for x in (a, v, rows, q))
            got = csk.searchsorted(da, dv, "right")
            scalar = csk.searchsorted(da, cupy.asarray(np.int64(7)))
            batched = csk.searchsorted(drows, dq)
            stream.synchronize()
            assert np.array_equal(got.get(), np.searchsorted(a, v, "right"))
            assert scalar.shape == () and int(scalar) == np.searchsorted(a, 7)
            assert np.array_equal(batched.get(),
                                  np.stack([np.searchsorted(r, x) for r, x in zip(rows, q)]))
    assert api.searches.find(da, dv, "right", "auto") is not None


def test_prepared_calls_leave_the_general_path_rules():
    """Another dtype, a host v, a sorter, a non-contiguous a: the general
    path (results and errors as before)."""
    cupy = pytest.importorskip("cupy")
    a = cupy.arange(0, 2000, 2, dtype=cupy.float32)
    v = cupy.asarray([3.0, 5.0], dtype=cupy.float32)
    for _ in range(2):
        assert csk.searchsorted(a, v).get().tolist() == [2, 3]
    assert csk.searchsorted(a, 5.0).item() == 3
    with pytest.raises(TypeError, match="one dtype"):
        csk.searchsorted(a, v.astype(cupy.float64))
    s = cupy.arange(1000, dtype=cupy.int64)
    assert csk.searchsorted(a, v, sorter=s).get().tolist() == [2, 3]
    assert csk.searchsorted(a[::2], v).get().tolist() == [1, 2]


# ---------------------------------------------------- the benchmark grid
GRID = [1 << 10, 1 << 16, 1 << 20]


@pytest.mark.parametrize("dtype", ["float32", "int64"])
@pytest.mark.parametrize("m", GRID + [pytest.param(1 << 24, marks=slow)])
@pytest.mark.parametrize("n", GRID + [pytest.param(1 << 24, marks=slow)])
def test_auto_on_the_benchmark_grid(n, m, dtype, rng):
    """What `bench --family` times: auto (whichever plugin it takes) on
    every cell, random queries into sorted random keys, both sides."""
    a = np.sort(make_keys("uniform", dtype, n, rng))
    v = make_keys("uniform", dtype, m, rng)
    v[: m // 4] = a[rng.integers(0, n, m // 4)]
    for side in ("left", "right"):
        _check(a, v, side)
