"""The caller's CUDA stream, and ordering cudasortkit's work inside it.

A call's work is ordered on the caller's stream: it starts after everything
the caller queued there before the call, and whatever the caller queues
there after the call starts after the result is written. The call returns
without waiting for the GPU (host results excepted: they are downloaded).

The caller's stream is, in this order: the ``stream=`` argument (an object
with ``__cuda_stream__``, a CuPy, PyTorch or pycuda stream, or a raw
``CUstream`` handle as an int); else the current stream of the library the
arrays come from (CuPy's ``get_current_stream()``, ``torch.cuda.current_stream()``);
else the legacy default stream. A ``__cuda_array_interface__`` (v3) that
names a stream is honoured too, as the protocol asks of a consumer: the work
starts after that stream's work.

pycuda launches only on its own Stream objects, so cudasortkit runs on one
blocking stream per device and joins it to the caller's with events
(``cuEventRecord`` + ``cuStreamWaitEvent`` through the driver, gpu/libcuda.py,
a microsecond each). The legacy default stream needs no events: a blocking
stream is already ordered with it both ways.
"""
from __future__ import annotations

import contextlib
import ctypes
import threading

from . import libcuda

#: The legacy default stream's CUstream handle (the driver API's
#: CU_STREAM_LEGACY; 0 means it too). Other handles, the per-thread default
#: stream's 2 among them, are joined with events.
LEGACY = 1

_CU_EVENT_DISABLE_TIMING = 0x2

_STREAM_KINDS = ("None", "an object with __cuda_stream__ (PyTorch, numba-cuda, RMM, cuda.core)",
                 "a cupy.cuda.Stream", "a torch.cuda.Stream", "a pycuda.driver.Stream",
                 "an int CUstream handle")


def handle_of(stream) -> int:
    """The CUstream handle of a stream object or raw handle (0 and 1 both
    mean the legacy default stream and come back as LEGACY)."""
    if isinstance(stream, bool):
        raise TypeError(f"stream must be one of: {', '.join(_STREAM_KINDS)}; got a bool")
    if isinstance(stream, int):
        handle = stream
    elif hasattr(stream, "__cuda_stream__"):
        protocol = stream.__cuda_stream__
        _, handle = protocol() if callable(protocol) else protocol
    elif isinstance(getattr(stream, "ptr", None), int):  # CuPy
        handle = stream.ptr
    elif isinstance(getattr(stream, "cuda_stream", None), int):  # PyTorch
        handle = stream.cuda_stream
    elif isinstance(getattr(stream, "handle", None), int):  # pycuda
        handle = stream.handle
    else:
        raise TypeError(f"stream must be one of: {', '.join(_STREAM_KINDS)}; "
                        f"got {type(stream).__name__}")
    handle = int(handle)
    if handle < 0:
        raise ValueError(f"stream handle must not be negative, got {handle}")
    return LEGACY if handle == 0 else handle


class StreamRef:
    """A raw CUstream handle behind the CUDA Stream Protocol (for libraries
    that adopt foreign streams through it, such as CuPy's Stream.from_external)."""

    def __init__(self, handle: int):
        self.handle = int(handle)

    def __cuda_stream__(self):
        return (0, self.handle)


def cupy_stream(handle: int):
    """A CuPy stream object for a raw handle (CuPy 14 prefers from_external)."""
    import cupy

    if hasattr(cupy.cuda.Stream, "from_external"):
        return cupy.cuda.Stream.from_external(StreamRef(handle))
    return cupy.cuda.ExternalStream(handle)


def library_stream(library: str, stream, ordinal: int | None = None):
    """A context in which the array library's own operations ("cupy" or
    "torch"; any other: none) are issued to `stream` (anything handle_of
    takes; LEGACY: the legacy default stream; None: the library's current
    stream, left as it is) on the device of that ordinal, the array's
    (None: the current device). A stream is one device's, so the library's
    current device becomes the array's while it is current: the operations
    then run where the array lives, in the caller's order."""
    if stream is None or library not in ("cupy", "torch"):
        return contextlib.nullcontext()
    handle = handle_of(stream)
    if library == "cupy":
        return _cupy_device_stream(ordinal, handle)
    import torch

    # torch.cuda.stream makes the stream's device current, as CuPy's Device below
    return torch.cuda.stream(torch.cuda.default_stream(ordinal) if handle == LEGACY
                             else torch.cuda.ExternalStream(handle, device=ordinal))


@contextlib.contextmanager
def _cupy_device_stream(ordinal: int | None, handle: int):
    import cupy

    with cupy.cuda.Device(ordinal) if ordinal is not None else contextlib.nullcontext():
        # (made inside: CuPy takes an external stream as the current device's)
        with cupy.cuda.Stream.null if handle == LEGACY else cupy_stream(handle):
            yield


def interface_stream(cai: dict) -> int | None:
    """The stream a __cuda_array_interface__ asks its consumer to order after,
    or None (no 'stream' entry, or None: nothing to wait for)."""
    stream = cai.get("stream")
    if stream is None:
        return None
    if stream == 0:
        raise ValueError("__cuda_array_interface__ 'stream' must not be 0 (the protocol "
                         "reserves it); use 1 for the legacy default stream")
    return int(stream)


def current_stream(library: str, device) -> int:
    """The current stream of CuPy or PyTorch (LEGACY for any other library)."""
    if library == "cupy":
        import cupy

        stream = cupy.cuda.get_current_stream() if device is None else \
            cupy.cuda.get_current_stream(device)  # (device: an ordinal)
        return stream.ptr or LEGACY  # an address (never negative)
    if library == "torch":
        return torch_current_stream(device)
    return LEGACY


def torch_current_stream(device) -> int:
    """PyTorch's current stream on `device` (a torch.device) as a handle.
    torch.cuda.current_stream(device).cuda_stream builds a Stream object in
    Python (microseconds); torch._C._cuda_getCurrentRawStream(index), which
    PyTorch's own compiled code calls, returns the same handle
    (getCurrentCUDAStream(index).stream()) directly. Used where this PyTorch
    has it and the device names its index (a CUDA tensor's always does)."""
    import torch

    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    index = device.index if device is not None else None
    if raw is None or index is None:
        return handle_of(torch.cuda.current_stream(device).cuda_stream)
    return raw(index) or LEGACY  # a CUstream address (never negative); 0: the legacy default


class Joiner:
    """Joins one device's own stream to callers' streams with events.

    One event serves every join: a stream waits on the event's most recent
    record as of the cuStreamWaitEvent call, so record-then-wait pairs only
    need to be atomic (a lock), not separate events.
    """

    def __init__(self, state):
        self._driver = libcuda.driver  # loads libcuda on the first join
        self.own = int(state.stream.handle)
        self._event = None
        self._lock = threading.Lock()

    def _event_handle(self, driver):
        if self._event is None:  # the device's context is current (get_device)
            event = ctypes.c_void_p()
            driver.check(driver.cuEventCreate(ctypes.byref(event), _CU_EVENT_DISABLE_TIMING),
                         "cuEventCreate")
            self._event = event
        return self._event

    def join_caller(self, caller: int) -> bool:
        """A prepared call's start: our stream waits for the work queued on the
        caller's stream (a handle) so far. Whether it had to (the legacy
        default stream and our own need no join): then the call's end
        signals the caller's stream back."""
        if caller == LEGACY or caller == self.own:
            return False
        self._join((caller,), into_own=True)
        return True

    def wait_for(self, handles) -> None:
        """Our stream's later work starts after the work queued on `handles` so far."""
        self._join(handles, into_own=True)

    def signal(self, handles) -> None:
        """Work queued later on `handles` starts after our stream's work so far."""
        self._join(handles, into_own=False)

    def _join(self, handles, into_own: bool) -> None:
        handles = [h for h in handles if h != LEGACY and h != self.own]
        if not handles:
            return
        driver = self._driver()
        with self._lock:
            event = self._event_handle(driver)
            if into_own:
                for h in handles:
                    driver.check(driver.cuEventRecord(event, h), "cuEventRecord on the caller's stream")
                    driver.check(driver.cuStreamWaitEvent(self.own, event, 0), "cuStreamWaitEvent")
            else:
                driver.check(driver.cuEventRecord(event, self.own), "cuEventRecord")
                for h in handles:
                    driver.check(driver.cuStreamWaitEvent(h, event, 0), "cuStreamWaitEvent on the caller's stream")


class Ordering:
    """One call's place in the caller's stream: `begin()` before any of the
    call's GPU work (reads of the inputs included), `end()` after all of it,
    also when the call fails. `current`: `caller` was read as the current
    stream of the arrays' library (no stream= given)."""

    def __init__(self, state, caller: int, waits=(), current: bool = False):
        self.joiner = state.joiner
        self.caller = caller
        #: The stream new result arrays of the caller's library are allocated
        #: in the order of: None for the library's current stream (the
        #: caller's here: allocated as the library does, without asking
        #: for it again), else the caller's handle.
        self.allocate_on = None if current else caller
        self.waits = tuple({caller, *waits}) if waits else (caller,)

    def begin(self) -> None:
        self.joiner.wait_for(self.waits)

    def end(self) -> None:
        self.joiner.signal((self.caller,))
