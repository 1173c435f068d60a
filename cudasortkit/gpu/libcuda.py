"""The one ctypes binding to the CUDA driver library (libcuda), for the
driver calls pycuda's build lacks or gets wrong: stream events
(gpu/streams.py), page-locking the caller's host memory
(host/transfer.py) and CUDA graphs (launch/graphs.py).

Rules it keeps: the library is loaded once per process, on first use
(pycuda has loaded it already); a function is declared (argument and result
types, below in SIGNATURES) the first time it is used, so a driver that
lacks one fails only the feature that calls it (AttributeError naming it);
and every failing CUresult is told in one format, `describe()`: the call,
the status number and the driver's own name and string for it
(cuGetErrorName, cuGetErrorString).

Tests stand in for the driver by setting `_driver` to a `Driver` over an
object whose attributes are the cu* functions (plain callables).
"""
from __future__ import annotations

import ctypes
import threading

_handle, _out = ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)
_text = ctypes.POINTER(ctypes.c_char_p)

#: The driver functions cudasortkit calls, and their argument types (every
#: one returns a CUresult, an int; 0 is CUDA_SUCCESS).
SIGNATURES = {
    "cuGetErrorName": (ctypes.c_int, _text),
    "cuGetErrorString": (ctypes.c_int, _text),
    "cuCtxGetCurrent": (_out,),
    "cuCtxSetCurrent": (_handle,),
    "cuEventCreate": (_out, ctypes.c_uint),
    "cuEventRecord": (_handle, _handle),
    "cuStreamWaitEvent": (_handle, _handle, ctypes.c_uint),
    "cuMemHostRegister_v2": (_handle, ctypes.c_size_t, ctypes.c_uint),
    "cuMemHostUnregister": (_handle,),
    "cuStreamBeginCapture_v2": (_handle, ctypes.c_int),
    "cuStreamEndCapture": (_handle, _out),
    "cuGraphInstantiateWithFlags": (_out, _handle, ctypes.c_ulonglong),
    "cuGraphDestroy": (_handle,),
    "cuGraphLaunch": (_handle, _handle),
    "cuGraphExecDestroy": (_handle,),
}


class CudaError(RuntimeError):
    """A driver call failed; the message is `describe()`'s."""

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.status = status


class Driver:
    """libcuda's functions as attributes by their C names (driver.cuEventRecord),
    each declared on first use."""

    def __init__(self, lib):
        self._lib = lib

    def __getattr__(self, name: str):
        if name not in SIGNATURES:
            raise AttributeError(f"cudasortkit.gpu.libcuda declares no driver function {name!r}")
        try:
            function = getattr(self._lib, name)
        except AttributeError:
            raise AttributeError(f"the CUDA driver library has no {name} (driver too old)") from None
        if isinstance(self._lib, ctypes.CDLL):  # stand-ins are plain callables
            function.argtypes, function.restype = SIGNATURES[name], ctypes.c_int
        setattr(self, name, function)  # later lookups skip __getattr__
        return function

    def _error_text(self, lookup, status: int) -> str | None:
        text = ctypes.c_char_p()
        if lookup(status, ctypes.byref(text)) or not text.value:
            return None
        return text.value.decode(errors="replace")

    def describe(self, status: int, what: str) -> str:
        """The one message of a failed call: `what` (the call's name, and
        what it worked on where that helps) and the CUDA error."""
        try:
            name = self._error_text(self.cuGetErrorName, status)
            text = self._error_text(self.cuGetErrorString, status)
        except AttributeError:
            name = text = None
        told = ": ".join(t for t in (name, text) if t)
        return f"{what} failed with CUDA error {status}" + (f" ({told})" if told else "")

    def check(self, status: int, what: str) -> None:
        """Raise CudaError ("cudasortkit: " and describe's message) unless
        status is 0."""
        if status:
            raise CudaError("cudasortkit: " + self.describe(status, what), status)


_driver = None  # Driver, made on first use
_lock = threading.Lock()


def driver() -> Driver:
    """libcuda, loaded on first use (OSError where it cannot be loaded)."""
    global _driver
    if _driver is None:
        with _lock:
            if _driver is None:
                _driver = Driver(ctypes.CDLL("libcuda.so.1"))
    return _driver
