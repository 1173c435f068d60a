"""The one ctypes binding to the CUDA driver library (libcuda), for the
driver calls pycuda's build lacks or gets wrong: stream events
(gpu/streams.py), page-locking the caller's host memory
(host/transfer.py), CUDA graphs (launch/graphs.py), overlapped launches
(build/compiler.py, build/template.py: pycuda launches no kernel with
launch attributes and hands out no CUfunction, so such kernels are loaded
here too), and mapping other processes' device memory (CUDA IPC) with the
copies between it and ours (dask/ipc.py).

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
_address = ctypes.c_ulonglong


class _IpcMemHandle(ctypes.Structure):
    """CUipcMemHandle: 64 opaque bytes, passed by value."""

    _fields_ = [("reserved", ctypes.c_char * 64)]


#: The driver functions cudasortkit calls, and their argument types (every
#: one returns a CUresult, an int; 0 is CUDA_SUCCESS).
SIGNATURES = {
    "cuInit": (ctypes.c_uint,),
    "cuDeviceGetCount": (ctypes.POINTER(ctypes.c_int),),
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
    "cuModuleLoadData": (_out, ctypes.c_char_p),
    "cuModuleGetFunction": (_out, _handle, ctypes.c_char_p),
    "cuModuleUnload": (_handle,),
    "cuFuncSetAttribute": (_handle, ctypes.c_int, ctypes.c_int),
    "cuLaunchKernelEx": (ctypes.c_void_p, _handle, _handle, ctypes.c_void_p),
    "cuMemGetAddressRange_v2": (ctypes.POINTER(_address), ctypes.POINTER(ctypes.c_size_t), _address),
    "cuIpcGetMemHandle": (ctypes.POINTER(_IpcMemHandle), _address),
    "cuIpcOpenMemHandle_v2": (ctypes.POINTER(_address), _IpcMemHandle, ctypes.c_uint),
    "cuIpcCloseMemHandle": (_address,),
    "cuMemcpyAsync": (_address, _address, ctypes.c_size_t, _handle),
}

_CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6
_CU_LAUNCH_PARAM_BUFFER_POINTER, _CU_LAUNCH_PARAM_BUFFER_SIZE = 1, 2
_CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
_CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS = 1


class _LaunchAttribute(ctypes.Structure):
    """CUlaunchAttribute: an id, padding to 8 bytes, a 64-byte value union
    (here its first int, the only member the attribute below reads)."""

    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4),
                ("value", ctypes.c_int), ("value_rest", ctypes.c_char * 60)]


class _LaunchConfig(ctypes.Structure):
    """CUlaunchConfig."""

    _fields_ = [("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3),
                ("shared", ctypes.c_uint), ("stream", ctypes.c_void_p),
                ("attrs", ctypes.POINTER(_LaunchAttribute)), ("num_attrs", ctypes.c_uint)]


_OVERLAP = _LaunchAttribute(id=_CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, value=1)


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


#: The CUDA driver's library (Linux), which the NVIDIA driver installs.
DRIVER_LIBRARY = "libcuda.so.1"
_driver = None  # Driver, made on first use
_lock = threading.Lock()


def driver() -> Driver:
    """libcuda, loaded on first use (OSError where it cannot be loaded)."""
    global _driver
    if _driver is None:
        with _lock:
            if _driver is None:
                _driver = Driver(ctypes.CDLL(DRIVER_LIBRARY))
    return _driver


def library_problem() -> str | None:
    """Why the CUDA driver cannot run kernels here, asked of the library
    directly (so also without pycuda): None when it loads, initialises and
    sees a device."""
    try:
        lib = driver()
    except OSError:
        return f"{DRIVER_LIBRARY} not found: no NVIDIA driver is installed"
    count = ctypes.c_int(0)
    rc = lib.cuInit(0)
    if rc == 0:
        rc = lib.cuDeviceGetCount(ctypes.byref(count))
    if rc != 0:
        return f"the CUDA driver could not start (CUresult {rc})"
    return None if count.value else "the CUDA driver sees no device"


def launch_overlapped(function: int, grid: tuple, block: tuple, shared: int, stream: int,
                      packed: bytes) -> None:
    """Launch CUfunction `function` with its packed parameter buffer on
    CUstream `stream` (0: the legacy default stream), allowed to start
    before the grid queued ahead of it has finished (programmatic stream
    serialization: the kernel waits for that grid itself,
    kernels/include/overlap.cuh). CudaError if the launch fails."""
    config = _LaunchConfig((ctypes.c_uint * 3)(*grid, *(1,) * (3 - len(grid))),
                           (ctypes.c_uint * 3)(*block, *(1,) * (3 - len(block))),
                           shared, stream, ctypes.pointer(_OVERLAP), 1)
    buffer = ctypes.create_string_buffer(packed, len(packed))
    size = ctypes.c_size_t(len(packed))
    extra = (ctypes.c_void_p * 5)(_CU_LAUNCH_PARAM_BUFFER_POINTER, ctypes.addressof(buffer),
                                  _CU_LAUNCH_PARAM_BUFFER_SIZE, ctypes.addressof(size), 0)
    lib = driver()
    lib.check(lib.cuLaunchKernelEx(ctypes.byref(config), function, None, extra), "cuLaunchKernelEx")


def load_module(image: bytes) -> int:
    """Load a module image (a cubin) into the current context: its CUmodule
    (cuModuleUnload gives it back). CudaError if the driver refuses it."""
    lib = driver()
    module = ctypes.c_void_p()
    lib.check(lib.cuModuleLoadData(ctypes.byref(module), image), "cuModuleLoadData")
    return module.value


def module_function(module: int, name: str) -> int:
    """The CUfunction of kernel `name` in CUmodule `module`."""
    lib = driver()
    function = ctypes.c_void_p()
    lib.check(lib.cuModuleGetFunction(ctypes.byref(function), module, name.encode()),
              f"cuModuleGetFunction({name!r})")
    return function.value


def allow_dynamic_shared(function: int, nbytes: int) -> None:
    """Let CUfunction `function` take up to `nbytes` of dynamic shared memory
    a block (the opt-in above the default limit). CudaError if refused."""
    lib = driver()
    lib.check(lib.cuFuncSetAttribute(function, _CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                     nbytes), "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)")


def address_range(ptr: int) -> tuple:
    """(base, size) of the device allocation that holds address `ptr` (an
    array library's pool hands out parts of larger allocations)."""
    lib = driver()
    base, size = _address(), ctypes.c_size_t()
    lib.check(lib.cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(size), ptr),
              f"cuMemGetAddressRange({ptr:#x})")
    return base.value, size.value


def ipc_handle(base: int) -> bytes:
    """The 64-byte handle another process opens allocation `base` with."""
    lib = driver()
    handle = _IpcMemHandle()
    lib.check(lib.cuIpcGetMemHandle(ctypes.byref(handle), base), f"cuIpcGetMemHandle({base:#x})")
    return ctypes.string_at(ctypes.addressof(handle), 64)


def ipc_open(handle: bytes) -> int:
    """Another process's allocation mapped into the current context (peer
    access enabled as needed): its base address here. ipc_close undoes it."""
    lib = driver()
    value = _IpcMemHandle()
    ctypes.memmove(ctypes.addressof(value), bytes(handle), 64)
    ptr = _address()
    lib.check(lib.cuIpcOpenMemHandle_v2(ctypes.byref(ptr), value, _CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
              "cuIpcOpenMemHandle")
    return ptr.value


def ipc_close(ptr: int) -> None:
    lib = driver()
    lib.check(lib.cuIpcCloseMemHandle(ptr), f"cuIpcCloseMemHandle({ptr:#x})")


def copy_async(dst: int, src: int, nbytes: int, stream: int) -> None:
    """Copy nbytes between device addresses (unified addressing: either may
    be another GPU's, mapped) on CUstream `stream`: the copy engines."""
    lib = driver()
    lib.check(lib.cuMemcpyAsync(dst, src, nbytes, stream), f"cuMemcpyAsync({nbytes} bytes)")
