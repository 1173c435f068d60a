"""GPU inputs and outputs: CuPy, PyTorch, pycuda and bare CUDA-array-interface
objects in, the same library out; out=, in-place, non-contiguous, host arrays."""
import numpy as np
import pytest

import cudasortkit as csk
from helpers import assert_keys_equal, assert_valid_argsort, make_keys, reference_sort

pytestmark = pytest.mark.gpu
ALGO = "bitonic"


def test_cupy_in_cupy_out(rng):
    cupy = pytest.importorskip("cupy")
    a = make_keys("special", "float32", 10_007, rng)
    got = csk.sort(cupy.asarray(a), algorithm=ALGO)
    assert isinstance(got, cupy.ndarray)
    assert_keys_equal(got, reference_sort(a))


def test_torch_in_torch_out(rng):
    torch = pytest.importorskip("torch")
    a = make_keys("uniform", "int64", 10_007, rng)
    t = torch.from_numpy(a).cuda()
    got = csk.sort(t, algorithm=ALGO, descending=True)
    assert isinstance(got, torch.Tensor) and got.is_cuda
    assert_keys_equal(got.cpu().numpy(), reference_sort(a, True))
    order = csk.argsort(t, algorithm=ALGO)
    assert isinstance(order, torch.Tensor) and order.dtype == torch.int64
    assert_valid_argsort(order.cpu().numpy(), a)


def test_gpuarray_and_bare_cai(rng):
    from pycuda import gpuarray

    from cudasortkit.gpu.device import get_device

    get_device()  # pycuda's arrays need a current context: this test may run first in its process
    a = make_keys("uniform", "uint16", 4099, rng)
    g = gpuarray.to_gpu(a)
    got = csk.sort(g, algorithm=ALGO)
    assert isinstance(got, gpuarray.GPUArray)
    assert_keys_equal(got.get(), np.sort(a))

    class Bare:
        def __init__(self, arr):
            self.__cuda_array_interface__ = arr.__cuda_array_interface__
            self._keep = arr

    got = csk.sort(Bare(g), algorithm=ALGO)
    assert isinstance(got, gpuarray.GPUArray)
    assert_keys_equal(got.get(), np.sort(a))


def test_numpy_in_numpy_out(rng):
    a = make_keys("uniform", "float64", 70_001, rng)
    got = csk.sort(a, algorithm=ALGO)
    assert isinstance(got, np.ndarray)
    assert_keys_equal(got, reference_sort(a))


def test_out_and_in_place(rng):
    cupy = pytest.importorskip("cupy")
    a = make_keys("uniform", "int32", 50_001, rng)
    out = cupy.full(a.size, 0x5A5A5A5A, dtype=cupy.int32)  # poisoned
    d = cupy.asarray(a)
    assert csk.sort(d, algorithm=ALGO, out=out) is out
    assert_keys_equal(out, np.sort(a))
    assert np.array_equal(d.get(), a)
    assert csk.sort(d, algorithm=ALGO, out=d) is d
    assert_keys_equal(d, np.sort(a))
    host_out = np.zeros_like(a)
    csk.sort(cupy.asarray(a), algorithm=ALGO, out=host_out)
    assert_keys_equal(host_out, np.sort(a))


def test_noncontiguous_device_input(rng):
    cupy = pytest.importorskip("cupy")
    a = make_keys("uniform", "float32", 20_000, rng)
    d = cupy.asarray(a)[::3]
    got = csk.sort(d, algorithm=ALGO)
    assert_keys_equal(got, np.sort(a[::3]))


def test_bool_keys(rng):
    cupy = pytest.importorskip("cupy")
    a = rng.integers(0, 2, 10_000).astype(bool)
    got = csk.sort(cupy.asarray(a), algorithm=ALGO)
    assert got.dtype == cupy.bool_ and np.array_equal(got.get(), np.sort(a))


def test_auto_uses_the_gpu_for_device_arrays(rng):
    cupy = pytest.importorskip("cupy")
    a = make_keys("uniform", "uint32", 1 << 20, rng)
    got = csk.sort(cupy.asarray(a))
    assert_keys_equal(got, np.sort(a))


def test_kernel_errors_name_plugin_and_config(rng, monkeypatch):
    cupy = pytest.importorskip("cupy")
    from cudasortkit import api
    from cudasortkit.sdk import registry
    from cudasortkit.errors import KernelError
    from cudasortkit.dispatch.select import Choice, Selector

    plugin = registry.plugins()[ALGO]
    bad = dict(plugin.default_config(), block_size=4096)  # more threads than a block allows

    class BadConfig:  # a policy that hands auto a config no block can run
        generation = "bad-config"

        def choose(self, request, candidates):
            return Choice(plugin, bad, "test")

    selector = Selector(BadConfig())
    monkeypatch.setattr(api, "selector", selector)
    monkeypatch.setattr(api.prepared, "selector", selector)  # the general path's
    with pytest.raises(KernelError, match=r"plugin 'bitonic'.*block_size=4096"):
        csk.sort(cupy.asarray(make_keys("uniform", "uint32", 1 << 16, rng)))
    assert registry.entries()[ALGO].ok  # a kernel error is the config's, not a broken plugin


def test_in_place_sort_restores_input_when_a_plugin_fails(rng, monkeypatch):
    """The plugin writes into out (= the input), then fails: the input comes back intact."""
    cupy = pytest.importorskip("cupy")
    from cudasortkit.sdk import registry

    plugin = registry.plugins()[ALGO]
    real_run = type(plugin).run

    def run_then_fail(self, job):
        real_run(self, job)
        raise MemoryError("simulated: out of GPU memory mid-sort")

    monkeypatch.setattr(type(plugin), "run", run_then_fail)
    a = make_keys("uniform", "float32", 100_003, rng)
    d = cupy.asarray(a)
    with pytest.raises(MemoryError, match="simulated"):
        csk.sort(d, algorithm=ALGO, out=d)
    assert np.array_equal(d.get(), a)


def test_compile_failure_names_plugin_and_leaves_input(rng, monkeypatch):
    cupy = pytest.importorskip("cupy")
    from cudasortkit.build import template
    from cudasortkit.errors import KernelCompileError

    real_render = template.render_source
    monkeypatch.setattr(template, "render_source",
                        lambda *a, **k: real_render(*a, **k) + "\nthis is not C++;\n")
    monkeypatch.setattr(template, "_sources", {})  # the broken text must not outlive the test
    a = make_keys("uniform", "int16", 5000, rng)
    d = cupy.asarray(a)
    with pytest.raises(KernelCompileError, match=r"plugin 'bitonic'.*keys int16.*block_size="):
        csk.sort(d, algorithm=ALGO, out=d)
    assert np.array_equal(d.get(), a)


def test_out_of_memory_is_a_clear_memory_error():
    from cudasortkit.gpu.device import get_device

    with pytest.raises(MemoryError, match=r"radix-test: out of GPU memory allocating"):
        get_device().allocate(1 << 50, "radix-test")
