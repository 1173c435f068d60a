"""Arrays on a GPU other than the current one, with a stream of that GPU given
as stream= (or current there, where none is given): every call runs where
its arrays live, starts after what the caller queued on that stream, and
its results are written before what the caller queues there next (the array
library's own reshapes and casts inside a call included). Each test keeps
the stream busy, then overwrites the input on it, calls, and copies the
results on it before any synchronisation, so a call that reads early or
writes late, or works on the current GPU's stream, shows as wrong data; and
each call leaves GPU 0 current, as it found it. Needs two GPUs; skips with
one."""
import numpy as np
import pytest

import cudasortkit as csk
from cudasortkit.gpu.streams import cupy_stream
from helpers import spin, to_numpy

pytestmark = pytest.mark.gpu

#: The arrays' GPU; GPU 0 stays current.
OTHER = 1
N = 1 << 16
SPIN_MS = 30


def _cupy():
    cupy = pytest.importorskip("cupy")
    if cupy.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("needs two GPUs")
    return cupy


def _busy(handle: int):
    """Keep stream `handle` of the other GPU busy for about SPIN_MS ms."""
    cupy = _cupy()
    with cupy.cuda.Device(OTHER), cupy_stream(handle):
        spin(SPIN_MS)


class Lane:
    """One library's arrays and stream on the other GPU."""

    def __init__(self, library: str):
        cupy = _cupy()
        self.library = library
        if library == "torch":
            torch = pytest.importorskip("torch")
            self.stream = torch.cuda.Stream(device=OTHER)
            self.handle = self.stream.cuda_stream
        else:
            with cupy.cuda.Device(OTHER):
                self.stream = cupy.cuda.Stream(non_blocking=True)
            self.handle = self.stream.ptr

    def upload(self, host: np.ndarray):
        """host on the other GPU, written before the test's streams start."""
        if self.library == "torch":
            import torch

            out = torch.from_numpy(np.ascontiguousarray(host)).to(f"cuda:{OTHER}")
            torch.cuda.synchronize(OTHER)
            return out
        cupy = _cupy()
        with cupy.cuda.Device(OTHER):
            out = cupy.asarray(host)
            cupy.cuda.Device(OTHER).synchronize()
        return out

    def overwrite(self, target, source):
        """target[...] = source, queued on the lane's stream behind a busy kernel."""
        _busy(self.handle)
        if self.library == "torch":
            import torch

            with torch.cuda.stream(self.stream):
                target.copy_(source)
        else:
            cupy = _cupy()
            with cupy.cuda.Device(OTHER), self.stream:
                target[...] = source

    def copy(self, result):
        """A copy of a device result made on the lane's stream (host results as they are)."""
        if isinstance(result, np.ndarray):
            return result
        if self.library == "torch":
            import torch

            assert result.device == torch.device("cuda", OTHER)
            with torch.cuda.stream(self.stream):
                return result.clone()
        cupy = _cupy()
        assert result.data.device_id == OTHER
        with cupy.cuda.Device(OTHER), self.stream:
            return result.copy()

    def current_on_other(self, current: bool):
        """Make the lane's stream the library's current stream on the other
        GPU (current=False: its default stream again), GPU 0 staying current."""
        if self.library == "torch":
            import torch

            torch.cuda.set_stream(self.stream if current else torch.cuda.default_stream(OTHER))
            torch.cuda.set_device(0)  # (set_stream makes the stream's device current)
        else:
            cupy = _cupy()
            with cupy.cuda.Device(OTHER):
                (self.stream if current else cupy.cuda.Stream.null).use()

    def call(self, fn, old: list, new: list, given: bool = True):
        """fn(*arrays, stream=the lane's stream) on arrays that held `old`
        and were overwritten with `new` on the stream; the results' copies
        on the stream, as NumPy arrays after the stream finished. given=False:
        fn(*arrays) with the lane's stream current on the arrays' GPU."""
        arrays = [self.upload(h) for h in old]
        sources = [self.upload(h) for h in new]
        for target, source in zip(arrays, sources):
            self.overwrite(target, source)
        if given:
            results = fn(*arrays, stream=self.handle)
        else:
            self.current_on_other(True)
            try:
                results = fn(*arrays)
            finally:
                self.current_on_other(False)
        assert _cupy().cuda.runtime.getDevice() == 0, "the call left the current device changed"
        single = not isinstance(results, tuple)
        copies = [self.copy(r) for r in ((results,) if single else results)]
        self.stream.synchronize()
        host = [to_numpy(c) for c in copies]
        return host[0] if single else tuple(host)


LIBRARIES = ["cupy", "torch"]


def _pair(rng, n=N, dtype=np.int32, high=1 << 20):
    """(old, new) keys: contents the call must not see, and ones it must."""
    old = np.full(n, -7, dtype)
    new = rng.integers(0, high, n).astype(dtype)
    return old, new


@pytest.mark.parametrize("library", LIBRARIES)
def test_sort_argsort_and_pairs(library, rng):
    lane = Lane(library)
    old, new = _pair(rng)
    np.testing.assert_array_equal(lane.call(csk.sort, [old], [new]), np.sort(new))
    got = lane.call(lambda x, stream: csk.argsort(x, stable=True, stream=stream), [old], [new])
    np.testing.assert_array_equal(got, np.argsort(new, kind="stable"))
    values_old, values = np.zeros(N, np.int64), rng.integers(-(1 << 40), 1 << 40, N)
    keys_got, values_got = lane.call(csk.sort_by_key, [old, values_old], [new, values])
    order = np.argsort(new, kind="stable")
    np.testing.assert_array_equal(keys_got, new[order])
    np.testing.assert_array_equal(values_got, values[order])


@pytest.mark.parametrize("library", LIBRARIES)
def test_along_an_axis(library, rng):
    lane = Lane(library)
    old, new = _pair(rng)
    old, new = old.reshape(256, 256), new.reshape(256, 256)
    got = lane.call(lambda x, stream: csk.sort(x, axis=0, stream=stream), [old], [new])
    np.testing.assert_array_equal(got, np.sort(new, axis=0))
    got = lane.call(lambda x, stream: csk.argsort(x, axis=0, stable=True, stream=stream),
                    [old], [new])
    np.testing.assert_array_equal(got, np.argsort(new, axis=0, kind="stable"))


@pytest.mark.parametrize("library", LIBRARIES)
def test_merge_of_two_dtypes(library, rng):
    """int32 and int64 keys merge as int64: a cast in the library's own
    operations, on the caller's stream."""
    lane = Lane(library)
    a = np.sort(rng.integers(0, 1 << 20, N)).astype(np.int32)
    b = np.sort(rng.integers(0, 1 << 40, N // 2 + 1))
    got = lane.call(csk.merge, [np.zeros_like(a), np.zeros_like(b)], [a, b])
    np.testing.assert_array_equal(got, np.sort(np.concatenate([a, b]), kind="stable"))


@pytest.mark.parametrize("library", LIBRARIES)
def test_lexsort_of_rows(library, rng):
    """N-D keys: the rows' reshapes and the row numbers on the caller's stream."""
    lane = Lane(library)
    primary = rng.integers(0, 8, (64, 1000)).astype(np.int32)
    secondary = rng.integers(0, 1 << 20, (64, 1000)).astype(np.int32)
    got = lane.call(lambda k0, k1, stream: csk.lexsort([k0, k1], axis=-1, stream=stream),
                    [np.zeros_like(secondary), np.zeros_like(primary)], [secondary, primary])
    np.testing.assert_array_equal(got, np.lexsort([secondary, primary], axis=-1))


@pytest.mark.parametrize("library", LIBRARIES)
def test_unique(library, rng):
    lane = Lane(library)
    old, new = _pair(rng, high=5000)
    got = lane.call(lambda x, stream: csk.unique(x, return_inverse=True, return_counts=True,
                                                 stream=stream), [old], [new])
    want = np.unique(new, return_inverse=True, return_counts=True)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("library", LIBRARIES)
@pytest.mark.parametrize("dtype", [np.bool_, np.int32])
def test_unique_rows(library, dtype, rng):
    """Rows are sorted by their columns (strided views of the rows); bool
    rows compare by truth value, 0/1 rows made with the library's own
    operations on the caller's stream on the rows' GPU."""
    lane = Lane(library)
    rows = rng.integers(0, 3, (N // 4, 4)).astype(dtype)
    got = lane.call(lambda x, stream: csk.unique(x, axis=0, return_counts=True, stream=stream),
                    [np.zeros_like(rows)], [rows])
    for g, w in zip(got, np.unique(rows, axis=0, return_counts=True)):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("library", LIBRARIES)
def test_strided_keys(library, rng):
    """A strided array's contiguous copy is made on its own GPU."""
    lane = Lane(library)
    old, new = _pair(rng)
    got = lane.call(lambda x, stream: csk.sort(x[::3], stream=stream), [old], [new])
    np.testing.assert_array_equal(got, np.sort(new[::3]))


@pytest.mark.parametrize("library", LIBRARIES)
def test_no_stream_given(library, rng):
    """Without stream=, the caller's stream is the library's current stream
    on the arrays' GPU (not on the current GPU)."""
    lane = Lane(library)
    old, new = _pair(rng)
    got = lane.call(csk.sort, [old], [new], given=False)
    np.testing.assert_array_equal(got, np.sort(new))
    got = lane.call(lambda x: csk.argsort(x, stable=True), [old], [new], given=False)
    np.testing.assert_array_equal(got, np.argsort(new, kind="stable"))


@pytest.mark.parametrize("library", LIBRARIES)
def test_searchsorted_and_topk(library, rng):
    lane = Lane(library)
    a = np.sort(rng.integers(0, 1 << 20, N)).astype(np.int32)
    v = rng.integers(-5, (1 << 20) + 5, 1000).astype(np.int32)
    got = lane.call(lambda x, y, stream: csk.searchsorted(x, y, side="right", stream=stream),
                    [np.zeros_like(a), np.zeros_like(v)], [a, v])
    np.testing.assert_array_equal(got, np.searchsorted(a, v, side="right"))
    old, new = _pair(rng)
    values, _ = lane.call(lambda x, stream: csk.topk(x, 100, stream=stream), [old], [new])
    np.testing.assert_array_equal(values, np.sort(new)[::-1][:100])


@pytest.mark.parametrize("library", LIBRARIES)
def test_plan_and_explain(library, rng):
    """A plan made like, and an explanation of, arrays on the other GPU
    choose on that GPU and leave GPU 0 current; the plan's calls (no
    stream=: the lane's stream current there) sort in the stream's order."""
    cupy = _cupy()
    lane = Lane(library)
    old, new = _pair(rng)
    like = lane.upload(new)
    sorter = csk.plan(like=like)
    assert cupy.cuda.runtime.getDevice() == 0, "plan() left the current device changed"
    assert str(csk.explain(like)).startswith("auto -> ")
    assert cupy.cuda.runtime.getDevice() == 0, "explain() left the current device changed"
    for _ in range(2):  # the first call records, the second may replay
        got = lane.call(sorter, [old], [new], given=False)
        np.testing.assert_array_equal(got, np.sort(new))
