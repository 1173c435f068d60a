"""csk.unique and csk.searchsorted of device arrays against NumPy. Fresh
result buffers are poisoned (conftest), so a value the kernels never write
shows up as a mismatch.

unique: values equal as values and bit for bit the first occurrence's
(NumPy's return_index path keeps that one: -0.0 vs +0.0, NaN payloads),
first indices, inverse (the input's shape) and counts exactly NumPy's.
bfloat16 is compared against float32's np.unique (NumPy does not see
ml_dtypes' bfloat16 NaNs as NaN). searchsorted: exactly np.searchsorted,
both sides, every plugin, with and without sorter, batched rows; the tree
plugin at sizes around its fanout and top boundaries, with a tiny top
(deep trees), from CuPy and PyTorch arrays.

Quick tier (-m gpu): every key dtype on the "special" distribution at a
few sizes, the other distributions for two dtypes, edge cases. Slow tier:
every distribution x dtype, 2^24 keys."""
import numpy as np
import pytest

import cudasortkit as csk
from cudasortkit import api
from cudasortkit.dtypes import KEY_DTYPES
from helpers import (DISTRIBUTIONS, is_bf16, make_keys, numpy_searchsorted, sorted_keys,
                     to_device, to_numpy)

pytestmark = pytest.mark.gpu
slow = pytest.mark.slow
SIZES = [0, 1, 2, 33, 1025, 4099, 65537]
FLAGS = (True, True, True)


def _numpy_unique(a: np.ndarray, equal_nan: bool):
    """np.unique(a, True, True, True) of the flat keys (bfloat16 through float32)."""
    flat = a.reshape(-1)
    ref = flat.astype(np.float32) if is_bf16(a.dtype) else flat
    values, index, inverse, counts = np.unique(ref, True, True, True, equal_nan=equal_nan)
    return flat[index], index, inverse.reshape(a.shape), counts


def _bits(x: np.ndarray) -> np.ndarray:
    return x.view(f"u{x.itemsize}") if x.dtype != np.bool_ else x


def check_unique(a: np.ndarray, device_a, equal_nan=True):
    values, index, inverse, counts = (to_numpy(x) for x in
                                      csk.unique(device_a, *FLAGS, equal_nan=equal_nan))
    ev, ei, einv, ec = _numpy_unique(a, equal_nan)
    assert values.dtype == a.dtype and values.shape == ev.shape
    assert np.array_equal(_bits(values), _bits(ev)), "values (first occurrences, bit for bit)"
    for got, expected, what in ((index, ei, "index"), (inverse, einv, "inverse"),
                                (counts, ec, "counts")):
        assert got.dtype == np.int64, what
        assert got.shape == expected.shape, what
        assert np.array_equal(got, expected), what


def _dtypes(keep):
    return [d if d in keep else pytest.param(d, marks=slow) for d in KEY_DTYPES]


# ------------------------------------------------------------------ unique
@pytest.mark.parametrize("dtype", [*KEY_DTYPES, "bool"])
@pytest.mark.parametrize("n", SIZES)
def test_unique_special_every_dtype(dtype, n, rng):
    a = make_keys("special", dtype, n, rng) if dtype != "bool" else rng.random(n) < 0.5
    check_unique(a, to_device(a))


@pytest.mark.parametrize("dist", DISTRIBUTIONS)
@pytest.mark.parametrize("dtype", _dtypes(("float32", "int16")))
def test_unique_distributions(dist, dtype, rng):
    a = make_keys(dist, dtype, 10007, rng)
    check_unique(a, to_device(a))


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_unique_nan_and_zero_rules(dtype):
    a = np.array([np.nan, 0.0, -0.0, 1.0, -np.nan, np.nan, -0.0, 1.0], dtype)
    for equal_nan in (True, False):
        check_unique(a, to_device(a), equal_nan)
    b = np.array([-0.0, 0.0, 0.0], dtype)
    values = to_numpy(csk.unique(to_device(b)))
    assert values.shape == (1,) and np.signbit(values[0])  # the first occurrence's zero


def test_unique_only_values_is_one_array():
    cupy = pytest.importorskip("cupy")
    got = csk.unique(cupy.asarray([3, 1, 3]))
    assert isinstance(got, cupy.ndarray) and got.tolist() == [1, 3]
    got = csk.unique(cupy.asarray([3, 1, 3]), return_counts=True)
    assert isinstance(got, tuple) and len(got) == 2


def test_unique_n_d_and_non_contiguous(rng):
    cupy = pytest.importorskip("cupy")
    a = rng.integers(0, 50, size=(40, 30)).astype(np.int32)
    d = cupy.asarray(a)
    check_unique(a, d)
    check_unique(a[:, ::3].copy(), d[:, ::3])
    check_unique(a.T.copy(), d.T)


def test_unique_torch(rng):
    torch = pytest.importorskip("torch")
    a = make_keys("special", "float32", 5000, rng)
    t = torch.from_numpy(a).cuda()
    check_unique(a, t)
    values = csk.unique(t)
    assert isinstance(values, torch.Tensor) and values.is_cuda


def test_unique_all_equal_and_single():
    cupy = pytest.importorskip("cupy")
    for a in (np.full(70000, 7, np.int64), np.array([np.nan]), np.zeros(1, np.uint8)):
        check_unique(a, cupy.asarray(a))


def test_unique_stream(rng):
    cupy = pytest.importorskip("cupy")
    a = make_keys("uniform", "uint16", 100003, rng)
    got, (ev, ei, einv, ec) = _unique_on_a_side_stream(cupy, a)
    assert np.array_equal(got[0].get(), ev) and np.array_equal(got[3].get(), ec)


def _unique_on_a_side_stream(cupy, a):
    """csk.unique of `a` uploaded and sorted on a non-blocking CuPy stream
    (stream=), every flag; and NumPy's."""
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        got = csk.unique(cupy.asarray(a), *FLAGS, stream=s)
    s.synchronize()
    return got, _numpy_unique(a, True)


# The inverse: scattered below INVERSE_SORT_MIN keys, a sort of (order, run
# ids) from it on (calls/unique.py's inverse_by_sort).
INVERSE_PATH_SIZES = ("below", "at", "above")


def _inverse_path_size(where: str) -> int:
    from cudasortkit.calls.unique import INVERSE_SORT_MIN, inverse_by_sort

    n = {"below": INVERSE_SORT_MIN - 1, "at": INVERSE_SORT_MIN,
         "above": INVERSE_SORT_MIN + 4097}[where]  # (2^23 and more: kept to a tile past it)
    assert inverse_by_sort(n) == (where != "below")
    return n


@pytest.mark.parametrize("where", INVERSE_PATH_SIZES)
@pytest.mark.parametrize("dtype", _dtypes(("float32", "bfloat16", "int32")) + ["bool"])
def test_unique_inverse_paths(dtype, where, rng):
    """Both inverse paths, exactly NumPy's: NaNs (both signs), -0.0 and +0.0,
    ties (special's pool, few_unique), nearly all unique (uniform)."""
    n = _inverse_path_size(where)
    if dtype == "bool":
        a = rng.random(n) < 0.5
        check_unique(a, to_device(a))
        return
    a = make_keys("special", dtype, n, rng)
    d = to_device(a)
    for equal_nan in (True, False):
        check_unique(a, d, equal_nan)
    for dist in ("few_unique", "uniform"):
        b = make_keys(dist, dtype, n, rng)
        check_unique(b, to_device(b))


@pytest.mark.parametrize("where", ["below", "above"])
def test_unique_inverse_paths_torch_stream_and_shape(where, rng):
    """The inverse sort's run ids are arrays of the caller's library (torch
    int32), ordered in the caller's stream; the inverse has the input's
    shape."""
    torch = pytest.importorskip("torch")
    n = _inverse_path_size(where)
    a = make_keys("special", "float32", n, rng)
    t = torch.from_numpy(a).cuda()
    check_unique(a, t)
    cupy = pytest.importorskip("cupy")
    rows = n // 1024
    b = make_keys("special", "float64", rows * 1024, rng).reshape(rows, 1024)
    got, (ev, ei, einv, ec) = _unique_on_a_side_stream(cupy, b)
    assert got[2].shape == b.shape
    for g, e in zip(got, (ev, ei, einv, ec)):
        assert np.array_equal(_bits(g.get()), _bits(e))


@slow
@pytest.mark.parametrize("dtype", ["float32", "int64", "uint8"])
def test_unique_2_24(dtype, rng):
    a = make_keys("uniform", dtype, 1 << 24, rng)
    check_unique(a, to_device(a))


def test_unique_axis0_rows_device(rng):
    pytest.importorskip("cudasortkit.calls.unique_rows")
    cupy = pytest.importorskip("cupy")
    a = rng.integers(0, 3, size=(1000, 4)).astype(np.uint8)
    got = csk.unique(cupy.asarray(a), True, True, True, axis=0)
    for g, e in zip(got, np.unique(a, True, True, True, axis=0)):
        assert np.array_equal(to_numpy(g), e)


@pytest.mark.parametrize("library", ["cupy", "torch"])
@pytest.mark.parametrize("axis", [0, -1])
@pytest.mark.parametrize("equal_nan", [True, False])
def test_unique_axis_of_a_1d_device_array_is_axis_none(library, axis, equal_nan, rng):
    """An axis of a 1-D array is axis=None (NumPy's rule): under equal_nan
    the NaNs are one value, bit for bit as axis=None gives them."""
    module = pytest.importorskip(library)
    for dtype in ("float16", "float32", "float64", "int16"):
        a = rng.integers(0, 5, 3000).astype(dtype)
        if a.dtype.kind == "f":
            a[::13] = np.nan
        d = cupy_or_torch(module, a)
        got = [to_numpy(x) for x in csk.unique(d, *FLAGS, axis=axis, equal_nan=equal_nan)]
        want = np.unique(a, *FLAGS, axis=axis, equal_nan=equal_nan)
        same = [to_numpy(x) for x in csk.unique(d, *FLAGS, equal_nan=equal_nan)]
        for g, w, s in zip(got, want, same):
            assert g.shape == w.shape and np.array_equal(g, w, equal_nan=g.dtype.kind == "f")
            assert np.array_equal(_bits(g), _bits(s))


@pytest.mark.parametrize("library", ["cupy", "torch"])
@pytest.mark.parametrize("shape, axis", [((4000,), None), ((4000,), 0), ((3000, 3), 0),
                                         ((500, 200), 0), ((3, 700, 2), 1)])
def test_unique_bools_of_other_bytes_compare_truth_values(library, shape, axis, rng):
    """Bools whose bytes are not 0 or 1 (a uint8 array viewed as bool) are
    equal by truth value, as NumPy compares them: 1-D (sorted as bytes, as
    NumPy sorts them) and rows (packed, and passes above 128 bits), bit for
    bit NumPy's values and rows, indices, inverse and counts."""
    module = pytest.importorskip(library)
    a = (rng.integers(0, 2, shape) * rng.integers(1, 4, shape)).astype(np.uint8)
    device = cupy_or_torch(module, a)
    device = device.view(module.bool) if library == "torch" else device.view(np.bool_)
    got = csk.unique(device, *FLAGS, axis=axis)
    want = np.unique(a.view(bool), *FLAGS, axis=axis)
    for g, w in zip(got, want):
        g = to_numpy(g)
        assert g.shape == w.shape
        assert np.array_equal(g.view(np.uint8) if g.dtype == bool else g,
                              w.view(np.uint8) if w.dtype == bool else w)


def cupy_or_torch(module, a: np.ndarray):
    """a on the GPU as a CuPy array or a CUDA tensor."""
    if module.__name__ == "torch":
        return module.from_numpy(a).cuda()
    return module.asarray(a)


# ------------------------------------------------------------ searchsorted




@pytest.mark.parametrize("algorithm", ["binary", "merge", "tree", "kary"])
@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("dtype", KEY_DTYPES)
@pytest.mark.parametrize("n, m", [(0, 5), (1, 7), (5000, 1), (4099, 65537), (100003, 3001)])
def test_searchsorted_every_dtype(n, m, dtype, side, algorithm, rng):
    a = sorted_keys("special", dtype, n, rng)
    v = np.concatenate([make_keys("special", dtype, m, rng), a[: m // 2]])[:m]
    got = to_numpy(csk.searchsorted(to_device(a), to_device(v), side, algorithm=algorithm))
    assert got.dtype == np.int64 and np.array_equal(got, numpy_searchsorted(a, v, side))


@pytest.mark.parametrize("dist", DISTRIBUTIONS)
def test_searchsorted_distributions(dist, rng):
    a = sorted_keys(dist, "float32", 70001, rng)
    v = make_keys(dist, "float32", 30011, rng)
    for algorithm in ("binary", "merge", "tree", "kary"):
        for side in ("left", "right"):
            got = to_numpy(csk.searchsorted(to_device(a), to_device(v), side, algorithm=algorithm))
            assert np.array_equal(got, numpy_searchsorted(a, v, side)), (algorithm, side)


def test_searchsorted_auto(rng):
    cupy = pytest.importorskip("cupy")
    a = np.sort(make_keys("uniform", "float32", 1 << 22, rng))
    for m, plugin in ((10, "kary"), (1 << 21, "tree")):
        v = make_keys("special", "float32", m, rng)
        assert csk.explain_searchsorted(a, v).plugin == plugin
        got = csk.searchsorted(cupy.asarray(a), cupy.asarray(v))
        assert np.array_equal(got.get(), np.searchsorted(a, v))


def test_searchsorted_sorter_and_shapes(rng):
    cupy = pytest.importorskip("cupy")
    a = make_keys("special", "float64", 9001, rng)
    s = np.argsort(a, kind="stable")
    v = make_keys("special", "float64", 600, rng).reshape(20, 30)
    for side in ("left", "right"):
        got = csk.searchsorted(cupy.asarray(a), cupy.asarray(v), side, cupy.asarray(s))
        assert got.shape == v.shape
        assert np.array_equal(got.get(), np.searchsorted(a, v, side, s))
    scalar = csk.searchsorted(cupy.asarray(np.sort(a)), 0.5)
    assert scalar.shape == () and int(scalar) == np.searchsorted(np.sort(a), 0.5)
    with pytest.raises(ValueError, match="Sorter index out of range"):
        csk.searchsorted(cupy.asarray(a), cupy.asarray(v), sorter=cupy.asarray(s + 1))
    with pytest.raises(TypeError, match="one dtype"):
        csk.searchsorted(cupy.asarray(a), cupy.asarray(v).astype(cupy.float32))


@pytest.mark.parametrize("side", ["left", "right"])
def test_searchsorted_batched(side, rng):
    torch = pytest.importorskip("torch")
    a = np.sort(rng.integers(0, 100, size=(3, 4, 513)).astype(np.int32), axis=-1)
    v = rng.integers(-5, 105, size=(3, 4, 77)).astype(np.int32)
    got = csk.searchsorted(torch.from_numpy(a).cuda(), torch.from_numpy(v).cuda(), side)
    assert isinstance(got, torch.Tensor) and got.is_cuda and tuple(got.shape) == v.shape
    got = got.cpu().numpy()
    for i in range(3):
        for j in range(4):
            assert np.array_equal(got[i, j], np.searchsorted(a[i, j], v[i, j], side))
    expected = torch.searchsorted(torch.from_numpy(a), torch.from_numpy(v), side=side)
    assert np.array_equal(got, expected.numpy())


def test_searchsorted_non_contiguous(rng):
    cupy = pytest.importorskip("cupy")
    a = np.sort(make_keys("uniform", "int64", 20000, rng))
    v = make_keys("uniform", "int64", 9000, rng)
    got = csk.searchsorted(cupy.asarray(a)[::2], cupy.asarray(v)[::3])
    assert np.array_equal(got.get(), np.searchsorted(a[::2], v[::3]))


@slow
@pytest.mark.parametrize("algorithm", ["binary", "merge", "tree", "kary"])
def test_searchsorted_2_24(algorithm, rng):
    a = np.sort(make_keys("uniform", "float32", 1 << 24, rng))
    v = make_keys("uniform", "float32", 1 << 24, rng)
    got = to_numpy(csk.searchsorted(to_device(a), to_device(v), algorithm=algorithm))
    assert np.array_equal(got, np.searchsorted(a, v))


# ------------------------------------------------- searchsorted "tree"
#: Around the fanout (8) and the top (4096): no level, one, two, three, four.
TREE_SIZES = [0, 1, 15, 16, 17, 255, 256, 257, 4095, 4096, 4097, 65537, 300007, (1 << 20) + 3]


def _tree_inputs(dtype, n, m, rng):
    """Sorted keys (the special distribution: NaNs, zeros of both signs,
    infinities, extremes; bool: both values) and queries: as many special
    keys again plus m of a's own keys (ties)."""
    if dtype == "bool":
        a = np.sort(rng.random(n) < 0.5)
        v = rng.random(2 * m) < 0.5
        return a, v
    a = sorted_keys("special", dtype, n, rng)
    v = make_keys("special", dtype, m, rng)
    return a, (np.concatenate([v, a[rng.integers(0, n, m)]]) if n else v)


def _check_tree(a, v, device_a, device_v):
    for side in ("left", "right"):
        got = to_numpy(csk.searchsorted(device_a, device_v, side, algorithm="tree"))
        assert got.dtype == np.int64 and got.shape == v.shape
        expected = numpy_searchsorted(a, v, side)
        bad = np.flatnonzero(got != expected)
        assert not len(bad), (f"n={len(a)} side={side}: {len(bad)} wrong, first at query "
                              f"{bad[0]}: {v[bad[0]]!r} -> {got[bad[0]]}, NumPy {expected[bad[0]]}")


@pytest.mark.parametrize("dtype", [*KEY_DTYPES, "bool"])
def test_searchsorted_tree_sizes(dtype, rng):
    """Every key dtype, both sides, at sizes around every level boundary;
    the largest also with more queries than the grid has threads."""
    for n in TREE_SIZES:
        a, v = _tree_inputs(dtype, n, 200003 if n > 1 << 20 else 3001, rng)
        _check_tree(a, v, to_device(a), to_device(v))


@pytest.mark.parametrize("config", [{"block_size": 64, "fanout": 8, "top": 16},
                                    {"block_size": 128, "fanout": 4, "top": 8},
                                    {"block_size": 256, "fanout": 16, "top": 64},
                                    {"block_size": 256, "fanout": 32, "top": 64}])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int16", "uint8", "bfloat16"])
def test_searchsorted_tree_deep(dtype, config, rng, monkeypatch, request):
    """Small tops and every fanout (the config patched; test_kernels_compile's
    TREE_VARIANTS): four to eight levels above a at the largest size, many
    blocks striding."""
    from cudasortkit.plugins.search_tree import TreeSearch, tree_levels

    monkeypatch.setattr(TreeSearch, "config", config)
    # no prepared search of another config replays for these shapes, now or after
    api.searches.forget()
    request.addfinalizer(api.searches.forget)
    assert len(tree_levels(300007, config["fanout"], config["top"])) >= 3
    for n in (15, 16, 17, 129, 4097, 65537, 300007):
        a, v = _tree_inputs(dtype, n, 30011, rng)
        _check_tree(a, v, to_device(a), to_device(v))


def test_searchsorted_tree_nan_right_and_misaligned_keys(rng):
    """NaN queries, side right, past every pad; a starting 1 key past an
    aligned address (the groups of a then straddle sectors), and strided."""
    cupy = pytest.importorskip("cupy")
    a = np.sort(make_keys("special", "float32", 70001, rng))
    v = np.concatenate([np.full(100, np.nan, np.float32), make_keys("special", "float32", 5000,
                                                                     rng)])
    da = cupy.asarray(a)
    _check_tree(a, v, da, cupy.asarray(v))
    _check_tree(a[1:], v, da[1:], cupy.asarray(v))
    _check_tree(a[::3], v, da[::3], cupy.asarray(v))
    nan_keys = np.full(5003, np.nan, np.float32)
    _check_tree(nan_keys, v, cupy.asarray(nan_keys), cupy.asarray(v))


@pytest.mark.parametrize("dtype", ["float32", "int64", "bfloat16"])
def test_searchsorted_tree_torch(dtype, rng):
    torch = pytest.importorskip("torch")
    a, v = _tree_inputs(dtype, 100003, 7001, rng)
    da, dv = to_device(a), to_device(v)
    if not isinstance(da, torch.Tensor):
        da, dv = torch.as_tensor(a).cuda(), torch.as_tensor(v).cuda()
    got = csk.searchsorted(da, dv, "right", algorithm="tree")
    assert isinstance(got, torch.Tensor) and got.is_cuda and got.dtype == torch.int64
    _check_tree(a, v, da, dv)
    assert csk.explain_searchsorted(da, dv, algorithm="tree").plugin == "tree"
