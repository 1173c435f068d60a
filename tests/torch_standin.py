"""Real CPU PyTorch made to pass for CUDA PyTorch, for timing cudasortkit's
host (Python) path on a machine without a GPU (tests/select_call_cpu.py):
every tensor says `is_cuda` and is on device cuda:0 (its storage stays on
the CPU: torch.empty, which takes device= and leaves it out, reshape,
detach, stride, data_ptr are PyTorch's own), and the CUDA stream
functions the path calls are Python fakes with the real ones' cost
structure (torch.cuda.current_stream: a lazy-init check, _get_device_index,
a Stream built through a Python __new__, then the cuda_stream getter;
torch._C._cuda_getCurrentRawStream, a C function in a CUDA build: one call).
`torch.cuda.stream(s)` makes `s` current, as the real context does, so the
stream rules can be followed too. `install()` patches torch in place and
returns the module."""
import threading

import torch
from torch.cuda._utils import _get_device_index

#: The current stream's handle (0: the legacy default stream), per thread.
_local = threading.local()
_initialized = [True]


def _is_initialized():
    return _initialized[0]


def _lazy_init():  # torch.cuda._lazy_init's common path
    if _is_initialized() or hasattr(_local, "is_initializing"):
        return


class Stream:
    """torch.cuda.Stream's Python part: __new__ with keyword arguments."""

    def __new__(cls, device=None, priority=0, **kwargs):
        torch.backends.cuda.is_built()  # the real check (a CPU build says False: not raised on)
        self = object.__new__(cls)
        self.stream_id = kwargs.get("stream_id", 0)
        self.device_index = kwargs.get("device_index", 0)
        return self

    @property
    def cuda_stream(self):
        return self.stream_id


class ExternalStream(Stream):
    def __new__(cls, stream_ptr, device=None, **kwargs):
        return super().__new__(cls, stream_id=stream_ptr, device_index=0)


def current_stream(device=None):
    _lazy_init()
    index = _get_device_index(device, optional=True)
    return Stream(stream_id=getattr(_local, "handle", 0), device_index=index, device_type=1)


class stream:  # noqa: N801  (torch.cuda.stream)
    def __init__(self, s):
        self.s = s

    def __enter__(self):
        self.before = getattr(_local, "handle", 0)
        _local.handle = self.s.cuda_stream

    def __exit__(self, *exc):
        _local.handle = self.before
        return False


def _current_raw_stream(index):
    return getattr(_local, "handle", 0)


_CUDA0 = torch.device("cuda", 0)
_empty = torch.empty


def empty(*args, device=None, **kwargs):
    return _empty(*args, **kwargs)


def install():
    torch.Tensor.is_cuda = property(lambda self: True)
    torch.Tensor.device = property(lambda self: _CUDA0)
    torch.empty = empty
    torch.cuda.current_stream = current_stream
    torch._C._cuda_getCurrentRawStream = _current_raw_stream
    torch.cuda.Stream, torch.cuda.ExternalStream = Stream, ExternalStream
    torch.cuda.stream = stream
    return torch
