"""Work is ordered on the caller's stream. Each test keeps the caller's stream
busy with a long kernel before the input is written, so a missing
dependency shows as wrong data (the sort would read the old contents), and
reads the result on that stream right after the call, so a result that is
not yet written in the stream's order shows too."""
import numpy as np
import pytest

import cudasortkit as csk
from cudasortkit.gpu.streams import cupy_stream
from cudasortkit.sdk import registry
from helpers import (assert_keys_equal, assert_valid_argsort, reference_argsort, sorts_one_array,
                     spin as busy)

pytestmark = pytest.mark.gpu

GPU_PLUGINS = sorted(n for n, p in registry.plugins().items() if sorts_one_array(p)
                     and "int32" in p.dtypes)
N = 1 << 16
SPIN_MS = 30


def _cupy():
    return pytest.importorskip("cupy")


def spin(ms=SPIN_MS):
    """Keep CuPy's current stream busy for about `ms` milliseconds."""
    _cupy()
    busy(ms)


def _fresh(rng):
    """Old contents the sort must not see, and new ones it must."""
    old = rng.integers(-1000, 1000, N).astype(np.int32)
    new = rng.integers(0, 1 << 19, N).astype(np.int32)  # a range every plugin sorts
    return old, new


def _on_device(rng):
    """(cupy, new keys, x holding the old keys, new keys on the device), all
    written before the test's streams start."""
    cupy = _cupy()
    old, new = _fresh(rng)
    x, new_dev = cupy.asarray(old), cupy.asarray(new)
    cupy.cuda.Device().synchronize()
    return cupy, new, x, new_dev


def _run(name, x, new_dev, stream=None):
    """Overwrite x with new_dev on the busy current stream, sort, and copy the
    result on the same stream (before any synchronisation)."""
    spin()
    x[...] = new_dev
    kw = {} if stream is None else {"stream": stream}
    plugin = registry.plugins()[name]
    k = csk.sort(x, algorithm=name, **kw)
    o = csk.argsort(x, algorithm=name, stable=plugin.stable, **kw) if plugin.pairs else None
    return k.copy(), (o.copy() if o is not None else None)


@pytest.mark.parametrize("name", GPU_PLUGINS)
@pytest.mark.parametrize("non_blocking", [False, True])
def test_cupy_current_stream(name, non_blocking, rng):
    cupy, new, x, new_dev = _on_device(rng)
    s = cupy.cuda.Stream(non_blocking=non_blocking)
    with s:
        k, o = _run(name, x, new_dev)
    s.synchronize()
    assert_keys_equal(k, np.sort(new))
    if o is not None:
        assert_valid_argsort(o, new, stable=registry.plugins()[name].stable)


@pytest.mark.parametrize("kind", ["cupy", "int", "pycuda", "protocol"])
def test_explicit_stream_argument(kind, rng):
    cupy, new, x, new_dev = _on_device(rng)
    s = cupy.cuda.Stream(non_blocking=True)

    class Protocol:
        def __cuda_stream__(self):
            return (0, s.ptr)

    if kind == "pycuda":
        # a pycuda stream: work on it is ordered through cudasortkit's own
        # context, so the test busies it with CuPy on an external view of it
        import pycuda.driver as cuda

        from cudasortkit.gpu.device import get_device
        get_device()
        ps = cuda.Stream()
        s = cupy_stream(ps.handle)
        arg = ps
    else:
        arg = {"cupy": s, "int": s.ptr, "protocol": Protocol()}[kind]
    with s:  # busy s, write x on it
        spin()
        x[...] = new_dev
    k = csk.sort(x, algorithm="onesweep", stream=arg)  # CuPy's current stream is not s
    with s:
        k2 = k.copy()
    s.synchronize()
    assert_keys_equal(k2, np.sort(new))


@pytest.mark.parametrize("call", ["sort", "argsort", "multikey sort_by_key"])
def test_a_strided_array_is_read_in_the_given_streams_order(call, rng):
    """Its contiguous copy is made after the work queued on stream= (not on
    CuPy's current stream, which is not that one)."""
    cupy, new, x, new_dev = _on_device(rng)
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        spin()
        x[...] = new_dev
    view, keys = x[::3], new[::3]
    if call == "sort":
        got, want = csk.sort(view, stream=s), np.sort(keys)
    elif call == "argsort":
        got, want = csk.argsort(view, stable=True, stream=s), np.argsort(keys, kind="stable")
    else:
        values = cupy.arange(view.size, dtype=cupy.int64)
        cupy.cuda.Device().synchronize()
        got = csk.sort_by_key((view, view), values, stream=s)[1]
        want = np.argsort(keys, kind="stable")
    with s:
        got = got.copy()
    s.synchronize()
    np.testing.assert_array_equal(got.get(), want)


def test_interface_stream_field_is_honoured(rng):
    cupy, new, x, new_dev = _on_device(rng)
    s = cupy.cuda.Stream(non_blocking=True)

    class Producer:  # a foreign array that says which stream wrote it
        @property
        def __cuda_array_interface__(self):
            cai = dict(x.__cuda_array_interface__)
            cai.update(version=3, stream=s.ptr)
            return cai

    with s:
        spin()
        x[...] = new_dev
    k = csk.sort(Producer(), algorithm="onesweep")
    s.synchronize()
    cupy.cuda.Device().synchronize()
    got = k.get() if hasattr(k, "get") else np.asarray(k)
    assert_keys_equal(got, np.sort(new))


@pytest.mark.parametrize("name", ["onesweep", "merge_sort"])
def test_torch_side_stream(name, rng):
    torch = pytest.importorskip("torch")
    old, new = _fresh(rng)
    x = torch.from_numpy(old).cuda()
    new_dev = torch.from_numpy(new).cuda()
    torch.cuda.synchronize()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        torch.cuda._sleep(int(SPIN_MS * 1e6))  # cycles: ~20-30 ms at H100 clocks
        x.copy_(new_dev)
        k = csk.sort(x, algorithm=name)
        o = csk.argsort(x, algorithm=name, stable=True)
        k2, o2 = k.clone(), o.clone()
    s.synchronize()
    assert np.array_equal(k2.cpu().numpy(), np.sort(new))
    assert np.array_equal(o2.cpu().numpy(), reference_argsort(new))


def test_result_buffer_reused_by_the_callers_pool(rng):
    """The caller's stream-ordered pool hands the result a block that queued
    work on that stream still reads: the sort must not write it early."""
    cupy = _cupy()
    new = rng.integers(0, 1 << 30, N).astype(np.int32)
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        src = cupy.asarray(new)
        victim = cupy.arange(N, dtype=np.int32)
        spin()
        snapshot = victim * 1  # queued behind the spin: reads victim later
        del victim             # its block goes back to the pool, on s
        k = csk.sort(src, algorithm="onesweep")  # may get victim's block
        k2 = k.copy()
    s.synchronize()
    assert np.array_equal(snapshot.get(), np.arange(N, dtype=np.int32))
    assert_keys_equal(k2, np.sort(new))


def test_host_results_are_ready_on_return(rng):
    a = rng.standard_normal(N).astype(np.float32)
    assert_keys_equal(csk.sort(a, algorithm="onesweep"), np.sort(a))


def test_merge_on_a_busy_stream(rng):
    cupy = _cupy()
    a = np.sort(rng.integers(0, 1 << 20, N).astype(np.int32))
    b = np.sort(rng.integers(0, 1 << 20, N // 3).astype(np.int32))
    xa, xb = cupy.zeros(len(a), np.int32), cupy.zeros(len(b), np.int32)
    da, db = cupy.asarray(a), cupy.asarray(b)
    cupy.cuda.Device().synchronize()
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        spin()
        xa[...] = da
        xb[...] = db
        m = csk.merge(xa, xb).copy()
    s.synchronize()
    assert_keys_equal(m, np.concatenate([a, b])[np.argsort(np.concatenate([a, b]), kind="stable")])


@pytest.mark.parametrize("nbytes", [4, 8])
def test_read_back_waits_for_the_copy_not_for_the_work_queued_after_it(nbytes):
    """state.read_back: the word as the work queued before it leaves it;
    the work then() queues lands after the copy (it does not change the
    word read) and is still done in stream order."""
    from cudasortkit.gpu.device import get_device

    state = get_device().activate()
    words = state.allocate(1 << 26)
    value = (1 << (8 * nbytes - 1)) + 12345
    host = np.array([value], np.uint32 if nbytes == 4 else np.uint64)
    state.cuda.memcpy_htod_async(int(words), host, state.stream)
    big = state.allocate(1 << 28)
    got = state.read_back(int(words), nbytes, lambda: (
        state.cuda.memset_d32_async(int(words), 7, 2, state.stream),
        state.cuda.memset_d32_async(int(big), 0, 1 << 26, state.stream)))
    assert got == value
    state.stream.synchronize()
    after = np.zeros(1, np.uint32)
    state.cuda.memcpy_dtoh(after, int(words))
    assert after[0] == 7
