"""1-D sorts short enough for one row of a row plugin (block_radix: up to
4,096 keys of at most 4 bytes), against NumPy: every dtype it sorts, edge
sizes, every distribution, both directions, sort, stable argsort (exactly
NumPy's order) and sort_by_key; auto's choice for a 1,000-key CuPy array
(with an empty cache); and the input left as it was. Result buffers are
poisoned by the library's debug setting in the test session."""
import numpy as np
import pytest

import cudasortkit as csk
from cudasortkit.sdk import registry
from helpers import (DISTRIBUTIONS, assert_keys_equal, assert_valid_argsort, make_keys,
                     reference_argsort, reference_sort)

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
@pytest.mark.parametrize("dtype", ["uint32", "float32", "int8", "bfloat16",
                                   pytest.param("float16", marks=slow),
                                   pytest.param("int16", marks=slow),
                                   pytest.param("uint8", marks=slow),
                                   pytest.param("int32", marks=slow),
                                   pytest.param("uint16", marks=slow)])
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
