"""GPU tests of cudasortkit.merge / merge_by_key (merge path kernels) and of the
merge_sort plugin at its tile boundaries and non-default configurations.
Fresh buffers are poisoned (conftest); results are compared with NumPy's
stable sort. test_gpu_conformance.py covers merge_sort's general conformance.

Quick tier (-m gpu): merge and merge_by_key of every dtype at every size
pair both ways, the "special" distribution, ties, NaNs and zeros, merge_sort
tile boundaries of two dtypes at its default config. Slow tier (-m "gpu and
slow"): the other distributions and dtypes, 2^22 and 2^24 keys, the config
sweep."""
import numpy as np
import pytest

import cudasortkit as csk
from cudasortkit.gpu.device import get_device
from cudasortkit.dtypes import KEY_DTYPES
from helpers import (DISTRIBUTIONS, assert_keys_equal, assert_valid_argsort, make_keys,
                     reference_argsort, reference_sort, to_numpy)

pytestmark = pytest.mark.gpu
slow = pytest.mark.slow


def quick(values, *keep):
    """`values` as parameters, all but those in `keep` marked slow."""
    return [v if v in keep else pytest.param(v, marks=slow) for v in values]

cp = pytest.importorskip("cupy")


def _plugin():
    from cudasortkit.sdk import registry

    return registry.plugins()["merge_sort"]


def _bits(x):
    x = to_numpy(x)
    return x.view(f"u{x.itemsize}")


def _sorted(dist, dtype, n, rng, descending=False):
    return reference_sort(make_keys(dist, dtype, n, rng), descending)


def _check_merge(a, b, descending=False):
    """merge and merge_by_key of host arrays a, b (on the device) vs NumPy."""
    both = np.concatenate([a, b])
    order = reference_argsort(both, descending)
    da, db = cp.asarray(a), cp.asarray(b)
    got = csk.merge(da, db, descending=descending)
    assert isinstance(got, cp.ndarray) and got.dtype == a.dtype and got.size == both.size
    assert np.array_equal(_bits(got), _bits(both[order])), (
        f"merge of {a.size} + {b.size} {a.dtype} keys differs (descending={descending})")
    ia = cp.arange(a.size, dtype=cp.int64)
    ib = cp.arange(a.size, both.size, dtype=cp.int64)
    k, v = csk.merge_by_key(da, ia, db, ib, descending=descending)
    assert np.array_equal(_bits(k), _bits(both[order]))
    assert np.array_equal(v.get(), order), "merge_by_key is not the stable merge (a's keys first)"
    assert np.array_equal(_bits(da), _bits(a)) and np.array_equal(_bits(db), _bits(b)), "input modified"


TILE = 256 * 15  # merge_sort's default tile; checked below
SIZES = [(0, 0), (0, 1), (1, 0), (1, 1), (0, 5000), (5000, 0), (TILE - 1, 1), (TILE, TILE),
         (TILE + 1, TILE - 1), (3 * TILE + 7, 2 * TILE - 3), (100_003, 99_991)]


def test_default_tile():
    assert _plugin().tile(_plugin().default_config()) == TILE


@pytest.mark.parametrize("dtype", KEY_DTYPES)
def test_merge_sizes_every_dtype(dtype, rng):
    for na, nb in SIZES:
        for descending in (False, True):
            _check_merge(_sorted("special", dtype, na, rng, descending),
                         _sorted("uniform", dtype, nb, rng, descending), descending)


@pytest.mark.parametrize("dist", quick(DISTRIBUTIONS, "special"))
@pytest.mark.parametrize("dtype", ["uint32", "float32", "int64", "float16"])
def test_merge_distributions(dist, dtype, rng):
    for descending in (False, True):
        _check_merge(_sorted(dist, dtype, 70_001, rng, descending),
                     _sorted(dist, dtype, 50_000, rng, descending), descending)


def test_merge_interleaved_all_equal_and_disjoint():
    n = 3 * TILE + 11
    evens, odds = np.arange(0, 2 * n, 2, dtype=np.int32), np.arange(1, 2 * n, 2, dtype=np.int32)
    _check_merge(evens, odds)
    _check_merge(odds, evens)
    _check_merge(np.full(n, 7, np.uint16), np.full(n + 5, 7, np.uint16))  # all ties: a first
    _check_merge(np.arange(n, dtype=np.int64), np.arange(n, 2 * n, dtype=np.int64))  # a < b
    _check_merge(np.arange(n, 2 * n, dtype=np.int64), np.arange(n, dtype=np.int64))  # b < a
    zeros = np.array([-0.0, 0.0, -0.0] * 1000, np.float32)
    _check_merge(zeros, zeros[::-1].copy())  # bit patterns must keep stable order
    nans = np.array([1.0, np.nan, -np.nan, np.nan] * 999, np.float64)
    nans.sort()
    _check_merge(nans, nans.copy())


@slow
def test_merge_huge_vs_tiny(rng):
    big = _sorted("uniform", "float32", (1 << 22) + 3, rng)
    for tiny in (np.array([np.float32(-np.inf)]), np.array([np.float32(np.nan)]),
                 np.sort(rng.standard_normal(5).astype(np.float32)), big[1000:1003].copy()):
        _check_merge(big, tiny)
        _check_merge(tiny, big)


@slow
def test_merge_large(rng):
    _check_merge(_sorted("uniform", "uint32", 1 << 24, rng), _sorted("uniform", "uint32", 1 << 24, rng))


def test_merge_host_inputs_and_out(rng):
    a, b = _sorted("uniform", "float64", 10_000, rng), _sorted("uniform", "float64", 777, rng)
    got = csk.merge(a, b)
    assert isinstance(got, np.ndarray)
    assert np.array_equal(got, np.sort(np.concatenate([a, b])))
    out = cp.empty(a.size + b.size, a.dtype)
    assert csk.merge(cp.asarray(a), b, out=out) is out
    assert np.array_equal(out.get(), got)
    with pytest.raises(ValueError):
        da = cp.asarray(np.concatenate([a, b]))
        csk.merge(da[:10], da[10:20], out=da[:20])  # overlaps the inputs


@pytest.mark.parametrize("x, y", [("int32", "int64"), ("int16", "float32"), ("uint8", "int8")])
def test_merge_of_two_dtypes_promotes_as_numpy(x, y, rng):
    """Device keys of two dtypes merge as NumPy's result_type (exact), the
    result an array of their library; host inputs on the GPU path too."""
    a = np.sort(rng.integers(0, 100, 5000).astype(x))
    b = np.sort(rng.integers(0, 100, 3001).astype(y))
    common = np.result_type(a.dtype, b.dtype)
    want = np.sort(np.concatenate([a, b]).astype(common), kind="stable")
    got = csk.merge(cp.asarray(a), cp.asarray(b))
    assert isinstance(got, cp.ndarray) and got.dtype == common
    np.testing.assert_array_equal(got.get(), want)
    host = csk.merge(a, b)
    assert host.dtype == common and np.array_equal(host, want)
    torch = pytest.importorskip("torch")
    t = csk.merge(torch.as_tensor(a, device="cuda"), torch.as_tensor(b, device="cuda"))
    assert t.is_cuda and np.array_equal(t.cpu().numpy(), want)
    keys, values = csk.merge_by_key(cp.asarray(a), cp.arange(5000.0), cp.asarray(b),
                                    cp.arange(3001.0))
    assert keys.dtype == common and np.array_equal(keys.get(), want)


def test_merge_values_4_bytes(rng):
    a = _sorted("few_unique", "int16", 20_000, rng)
    b = _sorted("few_unique", "int16", 30_000, rng)
    va = rng.random(a.size).astype(np.float32)
    vb = rng.random(b.size).astype(np.float32)
    k, v = csk.merge_by_key(cp.asarray(a), cp.asarray(va), cp.asarray(b), cp.asarray(vb))
    order = np.argsort(np.concatenate([a, b]), kind="stable")
    assert np.array_equal(k.get(), np.concatenate([a, b])[order])
    assert np.array_equal(v.get(), np.concatenate([va, vb])[order])


# ----------------------------------------------------------------- merge_sort

BOUNDARY_SIZES = [TILE - 1, TILE, TILE + 1, 2 * TILE - 1, 2 * TILE, 2 * TILE + 1, 3 * TILE,
                  4 * TILE + 1, 8 * TILE - 1, 8 * TILE, 17 * TILE + 5, 64 * TILE + 1]


@pytest.mark.parametrize("dtype", quick(["uint32", "float32", "int64", "float16", "int8", "float64"],
                                         "int8", "float64"))
def test_merge_sort_tile_boundaries(dtype, rng):
    for n in BOUNDARY_SIZES:
        for dist, descending in (("uniform", False), ("few_unique", True), ("special", False)):
            a = make_keys(dist, dtype, n, rng)
            dev = cp.asarray(a)
            assert_keys_equal(csk.sort(dev, algorithm="merge_sort", descending=descending),
                              reference_sort(a, descending), f"merge_sort n={n} {dist}")
            order = csk.argsort(dev, algorithm="merge_sort", stable=True, descending=descending)
            assert_valid_argsort(order, a, descending, stable=True)


def _run_config(config, a, values=None, descending=False):
    """Sort with the plugin at a given config through a Job, like api.py does."""
    from cudasortkit.gpu.device import get_device
    from cudasortkit.sdk.job import Job

    plugin = _plugin()
    state = get_device()
    dev = cp.asarray(a)
    out = cp.full(a.size, 0xA5, a.dtype) if a.dtype.kind != "f" else cp.full(a.size, np.nan, a.dtype)
    vin = cp.asarray(values) if values is not None else None
    vout = cp.empty_like(vin) if vin is not None else None
    job = Job(plugin, state, dtype=a.dtype.name, n=a.size, keys_in=dev.data.ptr, keys_out=out.data.ptr,
              values_in=vin.data.ptr if vin is not None else 0,
              values_out=vout.data.ptr if vout is not None else 0,
              value_bytes=values.itemsize if values is not None else 0,
              descending=descending, config=config)
    cp.cuda.runtime.deviceSynchronize()
    try:
        plugin.run(job)
    finally:
        job.finish()
    return out.get(), (vout.get() if vout is not None else None)


@pytest.mark.parametrize("block_size, items_per_thread", [
    (b, i) if (b, i) == (256, 15) else pytest.param(b, i, marks=slow)  # quick: the default
    for b in (128, 256, 512) for i in (7, 8, 11, 15, 16)])
def test_merge_sort_configs(block_size, items_per_thread, rng):
    plugin = _plugin()
    config = {"block_size": block_size, "items_per_thread": items_per_thread}
    for dtype in ("uint32", "float64"):
        if not plugin.valid_config(config, dtype, 8, get_device().limits):
            continue
        tile = block_size * items_per_thread
        for n in (2, tile - 1, tile + 1, 5 * tile + 3, 200_003):
            a = make_keys("few_unique", dtype, n, rng)
            for descending in (False, True):
                keys, order = _run_config(config, a, np.arange(n, dtype=np.int64), descending)
                expected = reference_argsort(a, descending)
                assert_keys_equal(keys, a[expected], f"{config} {dtype} n={n}")
                assert np.array_equal(order, expected), f"{config} {dtype} n={n}: not stable"
