"""Every registered GPU plugin against NumPy: all its dtypes, edge sizes,
distributions, descending, argsort (exactly NumPy's stable order when the
plugin is stable) and key-value pairs. Result buffers are poisoned first."""
import numpy as np
import pytest

import cudasortkit as csk
from cudasortkit import registry
from helpers import (DISTRIBUTIONS, EDGE_SIZES, LARGE_SIZES, assert_keys_equal,
                     assert_valid_argsort, make_keys, reference_argsort, reference_sort)

pytestmark = pytest.mark.gpu

GPU_PLUGINS = {n: p for n, p in registry.plugins().items()
               if p.device == "gpu" and not getattr(p, "conformance_exempt", False)}
CASES = [(n, d) for n, p in sorted(GPU_PLUGINS.items()) for d in p.dtypes]


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


@pytest.mark.parametrize("name, dtype", CASES)
def test_edge_sizes(name, dtype, rng):
    for n in EDGE_SIZES + [LARGE_SIZES[0]]:
        a = make_keys("uniform", dtype, n, rng)
        _check_all_ops(name, a, descending=False, rng=rng)


@pytest.mark.parametrize("name, dtype", CASES)
@pytest.mark.parametrize("dist", DISTRIBUTIONS)
def test_distributions(name, dtype, dist, rng):
    for descending in (False, True):
        a = make_keys(dist, dtype, 100_003, rng)
        _check_all_ops(name, a, descending, rng)


@pytest.mark.parametrize("name", sorted(GPU_PLUGINS))
@pytest.mark.parametrize("dtype", ["uint32", "float32", "int64"])
def test_large(name, dtype, rng):
    if dtype not in GPU_PLUGINS[name].dtypes:
        pytest.skip(f"{name} does not sort {dtype}")
    a = make_keys("uniform", dtype, LARGE_SIZES[1], rng)
    _check_all_ops(name, a, descending=False, rng=rng)


@pytest.mark.parametrize("name", sorted(n for n, p in GPU_PLUGINS.items() if p.pairs and p.stable))
@pytest.mark.parametrize("value_dtype", ["int32", "float32", "int64", "float64"])
def test_sort_by_key(name, value_dtype, rng):
    """sort_by_key is stable, so only stable plugins serve it."""
    plugin = GPU_PLUGINS[name]
    dtype = "int32" if "int32" in plugin.dtypes else plugin.dtypes[0]
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
        values = keys.astype(np.float64) * 3.0
        order = csk.argsort(keys, algorithm=name, descending=descending)
        assert_valid_argsort(order, keys, descending)
