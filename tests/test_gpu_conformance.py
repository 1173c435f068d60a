"""Every registered GPU plugin against NumPy: all its dtypes, edge sizes,
distributions, descending, argsort (exactly NumPy's stable order when the
plugin is stable) and key-value pairs. Result buffers are poisoned first.

Quick tier (-m gpu): every plugin x dtype sorts and argsorts the "special"
distribution (NaNs, infinities, -0.0, subnormals, integer limits) both ways
and, if stable, sort_by_key with 4- and 8-byte values; edge sizes for
QUICK_EDGE_DTYPES. Slow tier (-m "gpu and slow"): the other distributions,
edge sizes of every dtype, 2^24 keys, the other value dtypes."""
import numpy as np
import pytest

import cudasortkit as csk
from cudasortkit.sdk import registry
from helpers import (DISTRIBUTIONS, EDGE_SIZES, LARGE_SIZES, assert_keys_equal,
                     assert_valid_argsort, make_keys, reference_argsort, reference_sort)

pytestmark = pytest.mark.gpu

GPU_PLUGINS = {n: p for n, p in registry.plugins().items()
               if p.device == "gpu" and not getattr(p, "conformance_exempt", False)}
CASES = [(n, d) for n, p in sorted(GPU_PLUGINS.items()) for d in p.dtypes]
#: Dtypes whose edge sizes the quick tier checks (1- and 8-byte keys).
QUICK_EDGE_DTYPES = ("int8", "float64")
slow = pytest.mark.slow


def _cupy():
    return pytest.importorskip("cupy")


def _check_all_ops(name, a, descending, rng):
    plugin = GPU_PLUGINS[name]
    dev = _cupy().asarray(a)
    got = csk.sort(dev, algorithm=name, descending=descending)
    assert_keys_equal(got, reference_sort(a, descending), f"{name} sort n={len(a)}")
    if plugin.pairs:
        order = csk.argsort(dev, algorithm=name, descending=descending, stable=plugin.stable)
        assert_valid_argsort(order, a, descending, stable=plugin.stable)
    assert np.array_equal(dev.get().view(np.uint8), a.view(np.uint8)), "input was modified"


@pytest.mark.parametrize("name, dtype", [case if case[1] in QUICK_EDGE_DTYPES
                                         else pytest.param(*case, marks=slow) for case in CASES])
def test_edge_sizes(name, dtype, rng):
    for n in EDGE_SIZES + [LARGE_SIZES[0]]:
        a = make_keys("uniform", dtype, n, rng)
        _check_all_ops(name, a, descending=False, rng=rng)


@pytest.mark.parametrize("name, dtype", CASES)
@pytest.mark.parametrize("dist", [d if d == "special" else pytest.param(d, marks=slow)
                                  for d in DISTRIBUTIONS])
def test_distributions(name, dtype, dist, rng):
    for descending in (False, True):
        a = make_keys(dist, dtype, 100_003, rng)
        _check_all_ops(name, a, descending, rng)


@slow
@pytest.mark.parametrize("name", sorted(GPU_PLUGINS))
@pytest.mark.parametrize("dtype", ["uint32", "float32", "int64"])
def test_large(name, dtype, rng):
    if dtype not in GPU_PLUGINS[name].dtypes:
        pytest.skip(f"{name} does not sort {dtype}")
    a = make_keys("uniform", dtype, LARGE_SIZES[1], rng)
    _check_all_ops(name, a, descending=False, rng=rng)


@pytest.mark.parametrize("name, dtype", [(n, d) for n, d in CASES
                                         if GPU_PLUGINS[n].pairs and GPU_PLUGINS[n].stable])
@pytest.mark.parametrize("value_dtype", ["int32", pytest.param("float32", marks=slow),
                                         pytest.param("int64", marks=slow), "float64"])
def test_sort_by_key(name, dtype, value_dtype, rng):
    """sort_by_key is stable, so only stable plugins serve it. Every key
    dtype with 4- and 8-byte values (quick: int32 and float64 values; the
    kernels move values as bytes, so float32 and int64 are the slow tier's)."""
    for descending in (False, True):
        keys = make_keys("few_unique", dtype, 65_537, rng)
        values = rng.integers(-1000, 1000, keys.size).astype(value_dtype)
        k, v = csk.sort_by_key(keys, values, algorithm=name, descending=descending)
        order = reference_argsort(keys, descending)
        assert_keys_equal(k, keys[order])
        assert np.array_equal(v, values[order])


@pytest.mark.parametrize("name", sorted(n for n, p in GPU_PLUGINS.items() if p.pairs and not p.stable))
def test_unstable_pairs_follow_their_keys(name, rng):
    """Unstable plugins still move each value with its key (unique keys)."""
    for descending in (False, True):
        keys = rng.permutation(65_537).astype(np.int32)
        order = csk.argsort(keys, algorithm=name, descending=descending)
        assert_valid_argsort(order, keys, descending)
