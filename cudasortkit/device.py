"""The GPU as cudasortkit uses it: pycuda, the primary context, a stream, a pool.

Everything here is lazy: importing cudasortkit never touches pycuda or the
driver, so machines without either can still list plugins and sort on the CPU.
The device's primary context is the one CuPy, PyTorch and Numba use, so their
device memory can be sorted in place with no copies.
"""
from __future__ import annotations

import atexit
import os
import threading

from .streams import Joiner

_lock = threading.Lock()
_thread = threading.local()
_devices: dict = {}


class GPUUnavailable(RuntimeError):
    """No pycuda, no driver or no device: GPU plugins cannot run here."""


_driver_state: list = []  # [pycuda.driver] or [GPUUnavailable]: decided once


def _driver():
    """pycuda.driver, initialised; GPUUnavailable (remembered) if it cannot be."""
    if not _driver_state:
        try:
            _driver_state.append(_start_driver())
        except GPUUnavailable as exc:
            _driver_state.append(exc)
    result = _driver_state[0]
    if isinstance(result, GPUUnavailable):
        raise result
    return result


def _start_driver():
    try:
        import pycuda.driver as cuda
    except ImportError as exc:
        raise GPUUnavailable(f"pycuda is not installed ({exc}); install cudasortkit[cuda]") from exc
    try:
        cuda.init()
        count = cuda.Device.count()
    except cuda.Error as exc:
        raise GPUUnavailable(f"the CUDA driver could not start: {exc}") from exc
    if count == 0:
        raise GPUUnavailable("the CUDA driver sees no device")
    return cuda


def gpu_available() -> bool:
    try:
        _driver()
        return True
    except GPUUnavailable:
        return False


def unavailable_reason() -> str | None:
    try:
        _driver()
        return None
    except GPUUnavailable as exc:
        return str(exc)


def default_ordinal() -> int:
    return int(os.environ.get("CUDASORTKIT_DEVICE", "0"))


class DeviceState:
    """One device's primary context, stream, memory pool and properties.

    Everything cudasortkit queues runs on `stream`, joined to the caller's
    stream by `joiner` (cudasortkit/streams.py). The pool's blocks are only
    ever used on `stream`, so a block freed while kernels still use it is
    safe to hand out again: its next user is queued after them.
    """

    def __init__(self, ordinal: int):
        cuda = _driver()
        self.cuda = cuda
        self.ordinal = ordinal
        self.device = cuda.Device(ordinal)
        self.context = self.device.retain_primary_context()
        self.context.push()
        try:
            from pycuda.tools import DeviceMemoryPool

            attrs = self.device.get_attributes()
            a = cuda.device_attribute
            self.name = self.device.name()
            self.compute_capability = self.device.compute_capability()
            self.sm_count = attrs[a.MULTIPROCESSOR_COUNT]
            self.max_shared_per_block = attrs.get(
                a.MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, attrs[a.MAX_SHARED_MEMORY_PER_BLOCK])
            self.max_threads_per_block = attrs[a.MAX_THREADS_PER_BLOCK]
            self.total_memory = self.device.total_memory()
            self.stream = cuda.Stream()  # blocking: ordered with the legacy default stream
            self.joiner = Joiner(self)
            self.pool = DeviceMemoryPool()
        finally:
            self.context.pop()

    @property
    def arch(self) -> str:
        major, minor = self.compute_capability
        return f"sm_{major}{minor}"

    def activate(self) -> "DeviceState":
        """Make this device's primary context current on the calling thread."""
        current = getattr(_thread, "ordinal", None)
        if current != self.ordinal:
            if current is not None:
                self.cuda.Context.pop()
            self.context.push()
            _thread.ordinal = self.ordinal
        return self

    def allocate(self, nbytes: int, who="cudasortkit"):
        """nbytes from the memory pool; out of memory is a MemoryError naming
        `who` (a string, or a function making it: only built on failure)."""
        nbytes = max(int(nbytes), 1)
        try:
            return self.pool.allocate(nbytes)
        except self.cuda.MemoryError as exc:
            who = who() if callable(who) else who
            raise MemoryError(f"{who}: out of GPU memory allocating {nbytes:,} bytes on "
                              f"{self.name}") from exc

    def free_memory(self) -> int:
        self.activate()
        return self.cuda.mem_get_info()[0]


def get_device(ordinal: int | None = None) -> DeviceState:
    """The (activated) state of a device, created on first use."""
    ordinal = default_ordinal() if ordinal is None else ordinal
    with _lock:
        state = _devices.get(ordinal)
        if state is None:
            if not _devices:
                atexit.register(_release_all)
            state = _devices[ordinal] = DeviceState(ordinal)
    return state.activate()


def _release_all() -> None:
    """At exit: free pooled memory and compiled modules while the context is
    still current, then pop it (pycuda aborts if a context is left pushed)."""
    from . import compiler

    compiler.forget_modules()
    for state in _devices.values():
        state.pool.stop_holding()
    if getattr(_thread, "ordinal", None) is not None:
        _driver().Context.pop()
        _thread.ordinal = None
    from pycuda.tools import clear_context_caches

    clear_context_caches()


def driver_version() -> str | None:
    try:
        v = _driver().get_driver_version()
    except GPUUnavailable:
        return None
    return f"{v // 1000}.{(v % 1000) // 10}"
