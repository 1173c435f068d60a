"""NumPy 2.5's order on every GPU plugin: NaNs last in both directions, a
stable descending sort keeps equal keys (NaNs, -0.0/+0.0) in input order;
bfloat16 keys (torch tensors and ml_dtypes arrays) sorted like float16."""
import numpy as np
import pytest

import cudasortkit as csk
from cudasortkit.sdk import registry
from helpers import (assert_keys_equal, assert_valid_argsort, make_keys, reference_argsort,
                     sorts_one_array, to_device, to_numpy)

pytestmark = pytest.mark.gpu

GPU = {n: p for n, p in registry.plugins().items() if sorts_one_array(p)}
FLOAT_CASES = [(n, d) for n, p in sorted(GPU.items()) for d in ("float16", "bfloat16", "float32",
                                                                  "float64") if d in p.dtypes]


def test_issue_example_on_every_stable_gpu_plugin():
    a = np.array([1., np.nan, 2., 2., -np.nan, 1., -0., 0.])
    for name, p in sorted(GPU.items()):
        if p.stable and p.pairs and "float64" in p.dtypes:
            got = csk.argsort(to_device(a), descending=True, stable=True, algorithm=name)
            assert to_numpy(got).tolist() == [2, 3, 0, 5, 6, 7, 1, 4], name


@pytest.mark.parametrize("name, dtype", FLOAT_CASES)
@pytest.mark.parametrize("descending", [False, True])
def test_special_floats(name, dtype, descending, rng):
    plugin = GPU[name]
    for n in (7, 4099):
        a = make_keys("special", dtype, n, rng)
        order = reference_argsort(a, descending)
        dev = to_device(a)
        assert_keys_equal(csk.sort(dev, descending=descending, algorithm=name), a[order],
                          f"{name} sort")
        if plugin.pairs:
            got = csk.argsort(dev, descending=descending, stable=plugin.stable, algorithm=name)
            assert_valid_argsort(got, a, descending, stable=plugin.stable)
        if plugin.pairs and plugin.stable:
            values = np.arange(n, dtype=np.int32)
            k, v = csk.sort_by_key(dev, to_device(values), descending=descending, algorithm=name)
            assert_keys_equal(k, a[order])
            assert np.array_equal(to_numpy(v), order)


@pytest.mark.parametrize("descending", [False, True])
def test_merge_descending_keeps_nans_last(descending, rng):
    a = make_keys("special", "float32", 3001, rng)
    b = make_keys("special", "float32", 1234, rng)
    a, b = a[reference_argsort(a, descending)], b[reference_argsort(b, descending)]
    both = np.concatenate([a, b])
    order = reference_argsort(both, descending)
    k, v = csk.merge_by_key(to_device(a), to_device(np.arange(len(a), dtype=np.int64)),
                            to_device(b), to_device(np.arange(len(a), len(both), dtype=np.int64)),
                            descending=descending)
    assert_keys_equal(k, both[order])
    assert np.array_equal(to_numpy(v), order)


def test_torch_bfloat16_tensors_come_back_as_bfloat16_tensors(rng):
    torch = pytest.importorskip("torch")
    pytest.importorskip("ml_dtypes")
    a = make_keys("special", "bfloat16", 10_001, rng)
    t = to_device(a)
    got = csk.sort(t)
    assert isinstance(got, torch.Tensor) and got.dtype == torch.bfloat16 and got.is_cuda
    assert_keys_equal(got, a[reference_argsort(a)])
    order = csk.argsort(t, descending=True, stable=True)
    assert np.array_equal(to_numpy(order), reference_argsort(a, True))


def test_ml_dtypes_bfloat16_host_arrays_sort_on_the_gpu(rng):
    a = make_keys("special", "bfloat16", 70_001, rng)
    for name, p in sorted(GPU.items()):
        if "bfloat16" in p.dtypes:
            got = csk.sort(a, algorithm=name)
            assert got.dtype == a.dtype
            assert_keys_equal(got, a[reference_argsort(a)], name)


def test_float8_tensors_raise_type_error():
    torch = pytest.importorskip("torch")
    if not hasattr(torch, "float8_e4m3fn"):
        pytest.skip("no float8 in this torch")
    t = torch.zeros(16, device="cuda").to(torch.float8_e4m3fn)
    with pytest.raises(TypeError, match="not supported.*bfloat16"):
        csk.sort(t)


def test_cai_dtype_that_numpy_cannot_describe(rng):
    cupy = pytest.importorskip("cupy")
    x = cupy.zeros(8, np.float32)

    class Opaque:
        @property
        def __cuda_array_interface__(self):
            cai = dict(x.__cuda_array_interface__)
            cai["typestr"] = "<V4"
            return cai

    with pytest.raises(TypeError, match="not supported"):
        csk.sort(Opaque())
