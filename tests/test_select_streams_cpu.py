"""The selection calls' stream rules for CUDA torch tensors, without a GPU:
real CPU PyTorch whose tensors say is_cuda on cuda:0, its CUDA stream functions
fakes that count how often they are asked, a faked device whose joiner
records the streams it orders on, and a GPU selection plugin that only
records its jobs. The work is ordered on the caller's stream (stream=, else
torch's current stream, asked for once per call, never remembered from an
earlier call) and the results are allocated in that stream's order."""
import numpy as np
import pytest

import cudasortkit as csk
from cudasortkit.calls import select as select_calls
from cudasortkit.dispatch import request as dispatch_request
from cudasortkit.dispatch import select as dispatch_select
from cudasortkit.dispatch import selection as choosing
from cudasortkit.gpu import arrays, device, streams
from cudasortkit.sdk import registry
from cudasortkit.sdk.plugin import Tunable
from cudasortkit.sdk.selection import SelectPlugin
from helpers import FakeState, fake_device

torch = pytest.importorskip("torch")

LEGACY = streams.LEGACY


class _Joiner:
    def __init__(self):
        self.waited, self.signalled = [], []

    def wait_for(self, handles):
        self.waited.append(tuple(handles))

    def signal(self, handles):
        self.signalled.append(tuple(handles))


class _Cuda:
    @staticmethod
    def memset_d8_async(*args):  # the tests' poisoned results
        pass


class _State(FakeState):
    stream = type("Stream", (), {"handle": 7})()
    cuda = _Cuda

    def __init__(self):
        self.joiner = _Joiner()


class RecordingSelect(SelectPlugin):
    """A GPU selection plugin that writes nothing: it keeps its jobs."""

    name, dtypes, device, ops, priority = ("recording_select", ("float32", "int16"), "gpu",
                                           ("topk", "partition"), 1000)
    templates = ("radix_select.cu",)  # declared, never compiled
    tunables = {"block_size": Tunable(256, (256,))}
    jobs: list = []

    def run(self, job):
        type(self).jobs.append(job)


class _Torch:
    """torch.cuda's stream functions as fakes: the current stream's handle
    (0: the legacy default stream), how often it was asked, and the current
    stream at each torch.empty."""

    def __init__(self, monkeypatch):
        self.handle, self.asked, self.allocated_on = 0, 0, []
        fake = self
        real_empty = torch.empty

        class Stream:
            def __init__(self, handle):
                self.cuda_stream = handle

        class StreamContext:
            def __init__(self, s):
                self.s = s

            def __enter__(self):
                self.before, fake.handle = fake.handle, self.s.cuda_stream

            def __exit__(self, *exc):
                fake.handle = self.before

        def current_stream(device=None):
            fake.asked += 1
            return Stream(fake.handle)

        def raw_stream(index):
            fake.asked += 1
            return fake.handle

        def empty(*args, device=None, **kwargs):  # on the CPU, wherever it is asked
            assert device == cuda0
            fake.allocated_on.append(fake.handle or LEGACY)
            return real_empty(*args, **kwargs)

        cuda0 = torch.device("cuda", 0)
        monkeypatch.setattr(torch.Tensor, "is_cuda", property(lambda t: True), raising=False)
        monkeypatch.setattr(torch.Tensor, "device", property(lambda t: cuda0), raising=False)
        monkeypatch.setattr(torch.cuda, "current_stream", current_stream)
        monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", raw_stream, raising=False)
        monkeypatch.setattr(torch.cuda, "ExternalStream", lambda h, device=None: Stream(h))
        monkeypatch.setattr(torch.cuda, "stream", StreamContext)
        monkeypatch.setattr(torch, "empty", empty)
        self.Stream = Stream

    def current(self, handle):
        """A context making `handle` torch's current stream."""
        return torch.cuda.stream(self.Stream(handle))


@pytest.fixture
def cuda_torch(tmp_path, monkeypatch):
    state = _State()
    fake_device(tmp_path, monkeypatch, choosing, dispatch_select)
    for module in (device, dispatch_request, select_calls):
        monkeypatch.setattr(module, "get_device", lambda ordinal=None: state)
    fake = _Torch(monkeypatch)
    RecordingSelect.jobs = []
    registry.register(RecordingSelect)
    yield state, fake
    registry.refresh()


def topk(t, k, **kwargs):
    return csk.topk(t, k, algorithm="recording_select", **kwargs)


def check_results(values, indices, shape, dtype):
    job = RecordingSelect.jobs[-1]
    assert values.dtype == dtype and indices.dtype == torch.int64
    assert tuple(values.shape) == tuple(indices.shape) == shape
    assert values.is_contiguous() and indices.is_contiguous()
    if job.k == shape[-1]:  # the axis last: the plugin wrote the caller's arrays
        assert (values.data_ptr(), indices.data_ptr()) == (job.keys_out, job.values_out)


@pytest.mark.parametrize("current", [0, 0xABC])
def test_the_current_stream_is_asked_once_and_results_allocated_on_it(cuda_torch, current):
    state, fake = cuda_torch
    t = torch.zeros((3, 50), dtype=torch.float32)
    with fake.current(current):
        fake.asked = 0
        values, indices = topk(t, 4)
    handle = current or LEGACY
    assert fake.asked == 1
    assert fake.allocated_on == [handle, handle]
    assert state.joiner.waited == [(handle,)] and state.joiner.signalled == [(handle,)]
    check_results(values, indices, (3, 4), torch.float32)


def test_a_later_call_orders_on_the_stream_current_then(cuda_torch):
    state, fake = cuda_torch
    t = torch.zeros((2, 10), dtype=torch.float32)
    for handle in (0xA1, 0xB2, 0xA1):
        with fake.current(handle):
            topk(t, 3)
    assert [w for w, in state.joiner.waited] == [0xA1, 0xB2, 0xA1]
    assert fake.allocated_on == [0xA1, 0xA1, 0xB2, 0xB2, 0xA1, 0xA1]


@pytest.mark.parametrize("given, allocated_on", [(0xDEF, 0xDEF),  # another stream: switched to
                                                 (0xABC, 0xABC),  # the current one
                                                 (1, 0xABC)])  # legacy: allocated as torch does
def test_a_stream_given_orders_the_work_and_the_results(cuda_torch, given, allocated_on):
    state, fake = cuda_torch
    t = torch.zeros((2, 10), dtype=torch.float32)
    with fake.current(0xABC):
        fake.asked = 0
        values, indices = topk(t, 3, stream=given)
        assert fake.handle == 0xABC  # the current stream is the caller's again
    assert fake.asked <= 1
    assert fake.allocated_on == [allocated_on, allocated_on]
    assert state.joiner.waited == [(given,)] and state.joiner.signalled == [(given,)]
    check_results(values, indices, (2, 3), torch.float32)


def test_results_take_each_call_s_dtype_and_shape(cuda_torch):
    """Nothing about the outputs is kept from an earlier call: the keys'
    dtype, the shape and the axis of each call."""
    state, fake = cuda_torch
    for t, k, axis, shape in ((torch.zeros((2, 10), dtype=torch.float32), 3, -1, (2, 3)),
                              (torch.zeros((2, 10), dtype=torch.int16), 3, -1, (2, 3)),
                              (torch.zeros((4, 10), dtype=torch.float32), 5, -1, (4, 5)),
                              (torch.zeros((2, 5, 4), dtype=torch.int16), 2, 1, (2, 2, 4)),
                              (torch.zeros(7, dtype=torch.float32), 7, 0, (7,))):
        values, indices = topk(t, k, axis=axis)
        check_results(values, indices, shape, t.dtype)
    values = csk.partition(torch.zeros((3, 6), dtype=torch.int16), 2,
                           algorithm="recording_select")
    assert values.dtype == torch.int16 and tuple(values.shape) == (3, 6)


def test_numpy_to_torch_dtype_answers_each_dtype():
    for _ in range(2):  # the second round from the memo
        for dt, want in ((np.float32, torch.float32), (np.int64, torch.int64),
                         (np.bool_, torch.bool), (np.uint8, torch.uint8),
                         (np.float16, torch.float16), (">f8", torch.float64)):
            assert arrays.numpy_to_torch_dtype(np.dtype(dt)) is want
