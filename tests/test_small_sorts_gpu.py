"""1-D sorts short enough for one row of a row plugin (block_radix: up to
4,096 keys of at most 4 bytes), against NumPy: every dtype it sorts, edge
sizes, every distribution, both directions, sort, stable argsort (exactly
NumPy's order) and sort_by_key; auto's choice for a 1,000-key CuPy array
(with an empty cache); and the input left as it was. block_radix's other
1-D kernels (its tunables: the radix sort at 1024 threads, the bitonic
network at each block) at the sizes around their widths, every key width,
both orders, against NumPy and bit for bit against the default kernel.
Result buffers are poisoned by the library's debug setting in the test
session."""
import numpy as np
import pytest

import cudasortkit as csk
from cudasortkit.sdk import registry
from helpers import (DISTRIBUTIONS, assert_keys_equal, assert_valid_argsort, make_keys,
                     reference_argsort, reference_sort, small_key_dtypes, to_numpy)

pytestmark = pytest.mark.gpu

ROW_PLUGINS = {n: p for n, p in registry.plugins().items()
               if p.device == "gpu" and getattr(p, "one_array_up_to", None)}
SIZES = [1, 2, 3, 5, 31, 32, 33, 127, 255, 256, 257, 509, 1000, 1023, 1024, 1025, 2047,
         2053, 4093, 4095, 4096]
slow = pytest.mark.slow


def _check(name, a, descending, rng):
    cupy = pytest.importorskip("cupy")
    dev = cupy.asarray(a)
    got = csk.sort(dev, algorithm=name, descending=descending)
    assert_keys_equal(got, reference_sort(a, descending), f"{name} sort n={a.size}")
    order = csk.argsort(dev, algorithm=name, descending=descending, stable=True)
    assert_valid_argsort(order, a, descending, stable=True)
    values = rng.integers(-1000, 1000, a.size).astype(np.int64)
    k, v = csk.sort_by_key(dev, cupy.asarray(values), algorithm=name, descending=descending)
    ref = reference_argsort(a, descending)
    assert_keys_equal(k, a[ref])
    assert np.array_equal(cupy.asnumpy(v), values[ref])
    assert np.array_equal(dev.get().view(np.uint8), a.view(np.uint8)), "input was modified"


@pytest.mark.parametrize("name", sorted(ROW_PLUGINS))
@pytest.mark.parametrize("dtype", small_key_dtypes())
def test_every_size_of_one_row(name, dtype, rng):
    if dtype not in ROW_PLUGINS[name].dtypes:
        pytest.skip(f"{name} does not sort {dtype}")
    for n in SIZES:
        for descending in (False, True):
            _check(name, make_keys("uniform", dtype, n, rng), descending, rng)


@pytest.mark.parametrize("name", sorted(ROW_PLUGINS))
@pytest.mark.parametrize("dist", DISTRIBUTIONS)
def test_distributions(name, dist, rng):
    for dtype in ("float32", "int16"):
        for descending in (False, True):
            _check(name, make_keys(dist, dtype, 1021, rng), descending, rng)


def test_auto_takes_block_radix_for_a_small_device_array(tmp_path, monkeypatch, rng):
    cupy = pytest.importorskip("cupy")
    from cudasortkit.tuning import cache, runtime

    monkeypatch.setenv(cache.ENV_DIR, str(tmp_path))  # nothing measured
    runtime.reset()
    try:
        a = make_keys("uniform", "uint32", 1000, rng)
        dev = cupy.asarray(a)
        assert csk.explain(dev).name == "block_radix"
        for _ in range(3):  # the general path, then prepared repeats
            assert_keys_equal(csk.sort(dev), np.sort(a))
            out = cupy.empty_like(dev)
            p = csk.plan(like=dev)
            assert p(dev, out=out) is out
            assert_keys_equal(out, np.sort(a))
    finally:
        runtime.reset()


#: block_radix's 1-D array kernels besides its default (512-thread radix
#: sort), by tunable: 1024 threads with 16-bit digit counters, and the
#: bitonic network (keys alone; argsort and pairs stay with the radix sort),
#: its stages in a loop and (at 256 threads) unrolled.
ARRAY_VARIANTS = {"radix1024": {"array_kernel": 0, "array_block": 1024},
                  "network128": {"array_kernel": 1, "network_threads": 128},
                  "network256": {"array_kernel": 1, "network_threads": 256},
                  "network512": {"array_kernel": 1, "network_threads": 512},
                  "network256unrolled": {"array_kernel": 1, "network_threads": 256,
                                         "network_unroll": 1}}
#: Around the widths: 64-key networks and several-rows tiles, 1, 2 and 4
#: keys a thread at 1024 threads, networks of 1024, 2048 and 4096.
VARIANT_SIZES = [1, 2, 31, 32, 33, 1023, 1024, 1025, 2047, 2048, 2049, 3001, 4095, 4096]


def _run_block_radix(variant, dev, kind, descending, values=None):
    """block_radix with a variant's config (None: the default config)."""
    from cudasortkit.dispatch.execute import run_plugin

    plugin = registry.plugins()["block_radix"]
    config = None if variant is None else {**plugin.default_config(), **ARRAY_VARIANTS[variant]}
    return run_plugin(plugin, config, kind, dev, values, descending=descending)


@pytest.mark.parametrize("variant", sorted(ARRAY_VARIANTS))
@pytest.mark.parametrize("dtype", ["uint8", "int16", "uint32", "int32", "float16", "float32",
                                   pytest.param("bfloat16", marks=slow)])
def test_array_variants_sort(variant, dtype, rng):
    """Special values (NaN, -0.0 and +0.0, infinities, integer limits) among
    the keys; padding words must never reach the output."""
    cupy = pytest.importorskip("cupy")
    for n in VARIANT_SIZES:
        a = make_keys("special", dtype, n, rng)
        dev = cupy.asarray(a)
        for descending in (False, True):
            what = f"{variant} {dtype} n={n} desc={descending}"
            got, _ = _run_block_radix(variant, dev, "sort", descending)
            assert_keys_equal(got, reference_sort(a, descending), what)
            base, _ = _run_block_radix(None, dev, "sort", descending)
            assert np.array_equal(to_numpy(got).view(np.uint8), to_numpy(base).view(np.uint8)), \
                what + ": not bit for bit the default kernel's"
        assert np.array_equal(to_numpy(dev).view(np.uint8), a.view(np.uint8)), "input was modified"


@pytest.mark.parametrize("variant", sorted(ARRAY_VARIANTS))
def test_array_variants_distributions(variant, rng):
    cupy = pytest.importorskip("cupy")
    for dist in DISTRIBUTIONS:
        for dtype, n in (("float32", 4096), ("uint32", 3001), ("int16", 2048)):
            a = make_keys(dist, dtype, n, rng)
            for descending in (False, True):
                got, _ = _run_block_radix(variant, cupy.asarray(a), "sort", descending)
                assert_keys_equal(got, reference_sort(a, descending),
                                  f"{variant} {dist} {dtype} n={n} desc={descending}")


@pytest.mark.parametrize("variant", sorted(ARRAY_VARIANTS))
def test_array_variants_argsort_and_pairs(variant, rng):
    """Stable argsort and sort_by_key with each variant's config (the
    network passes them to the radix sort; 1024 threads hold positions up
    to 2,048 keys, 256 x 16 above)."""
    cupy = pytest.importorskip("cupy")
    for n in (33, 1024, 2048, 2049, 4096):
        a = make_keys("few_unique", "float32", n, rng)  # ties: stability shows
        dev = cupy.asarray(a)
        payload = rng.integers(-1000, 1000, n).astype(np.int64)
        for descending in (False, True):
            order = reference_argsort(a, descending)
            what = f"{variant} n={n} desc={descending}"
            _, got = _run_block_radix(variant, dev, "argsort", descending)
            assert np.array_equal(to_numpy(got), order), what + " argsort"
            k, v = _run_block_radix(variant, dev, "pairs", descending, cupy.asarray(payload))
            assert_keys_equal(k, a[order], what + " pairs keys")
            assert np.array_equal(to_numpy(v), payload[order]), what + " pairs values"
