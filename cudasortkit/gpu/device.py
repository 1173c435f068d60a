"""The GPU as cudasortkit uses it: pycuda, the primary context, a stream, a pool.

Everything here is lazy: importing cudasortkit never touches pycuda or the
driver, so machines without either can still list plugins and sort on the CPU.
The device's primary context is the one CuPy, PyTorch and Numba use, so their
device memory can be sorted in place with no copies.
"""
from __future__ import annotations

import atexit
import functools
import sys
import threading
from dataclasses import dataclass

from . import caches
from .. import settings
from .streams import Joiner

_lock = threading.Lock()


class _ThreadState(threading.local):
    """Per thread: the device whose context cudasortkit made current
    (None: none), and what pops it when the thread ends. Class defaults, so
    reading them on a thread that set nothing raises nothing (a caught
    AttributeError costs half a microsecond)."""
    ordinal: int | None = None
    pop_at_exit = None


_thread = _ThreadState()
_devices: dict = {}
_limits: dict = {}  # ordinal -> DeviceLimits


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


#: Registers are given to a warp in units of this many (every architecture
#: since sm_50; the driver has no attribute for it).
REGISTER_UNIT = 256


@dataclass(frozen=True)
class DeviceLimits:
    """What one block and one SM of a device can hold, read from the device.

    `shared_per_block` is what a block may use as is (static + dynamic);
    more, up to `shared_per_block_optin`, needs the kernel's opt-in (which
    Job.launch makes). The driver keeps `shared_reserved_per_block` of an
    SM's `shared_per_sm` for each resident block. DeviceLimits.sm90() gives
    an H100's values where there is no device to ask (CI, compile tests).
    """

    sm_count: int
    warp_size: int
    max_threads_per_block: int
    max_threads_per_sm: int
    max_blocks_per_sm: int
    registers_per_block: int
    registers_per_sm: int
    shared_per_block: int
    shared_per_block_optin: int
    shared_per_sm: int
    shared_reserved_per_block: int

    @classmethod
    def sm90(cls) -> "DeviceLimits":
        """An H100 SXM's limits (sm_90): the default without a device."""
        return cls(sm_count=132, warp_size=32, max_threads_per_block=1024,
                   max_threads_per_sm=2048, max_blocks_per_sm=32,
                   registers_per_block=65536, registers_per_sm=65536,
                   shared_per_block=48 * 1024, shared_per_block_optin=227 * 1024,
                   shared_per_sm=228 * 1024, shared_reserved_per_block=1024)

    @classmethod
    def from_attributes(cls, attrs: dict, names) -> "DeviceLimits":
        """From pycuda's Device.get_attributes() and pycuda.driver.device_attribute.
        An attribute the driver does not report (older CUDA) falls back to
        the nearest one it does: the per-block limit for the opt-in one, no
        reserve, 32 blocks per SM."""
        def get(name, default=None):
            attr = getattr(names, name, None)
            value = attrs.get(attr) if attr is not None else None
            return default if value is None else int(value)

        shared_per_block = get("MAX_SHARED_MEMORY_PER_BLOCK")
        return cls(sm_count=get("MULTIPROCESSOR_COUNT"), warp_size=get("WARP_SIZE"),
                   max_threads_per_block=get("MAX_THREADS_PER_BLOCK"),
                   max_threads_per_sm=get("MAX_THREADS_PER_MULTIPROCESSOR"),
                   max_blocks_per_sm=get("MAX_BLOCKS_PER_MULTIPROCESSOR", 32),
                   registers_per_block=get("MAX_REGISTERS_PER_BLOCK"),
                   registers_per_sm=get("MAX_REGISTERS_PER_MULTIPROCESSOR"),
                   shared_per_block=shared_per_block,
                   shared_per_block_optin=get("MAX_SHARED_MEMORY_PER_BLOCK_OPTIN", shared_per_block),
                   shared_per_sm=get("MAX_SHARED_MEMORY_PER_MULTIPROCESSOR"),
                   shared_reserved_per_block=get("RESERVED_SHARED_MEMORY_PER_BLOCK", 0))

    def resident_blocks(self, block_size: int, registers: int, shared_bytes: int) -> int:
        """Blocks of a kernel that one SM holds at once: the least of what
        its threads, its registers (`registers` per thread, the function's
        NUM_REGS) and its shared memory (static + dynamic bytes) allow, and
        the SM's block limit. 0 if one block does not fit."""
        if block_size > self.max_threads_per_block:
            return 0
        warps = -(-int(block_size) // self.warp_size)
        warp_registers = -(-max(int(registers), 1) * self.warp_size // REGISTER_UNIT) * REGISTER_UNIT
        if warp_registers * warps > self.registers_per_block:
            return 0
        if shared_bytes > self.shared_per_block_optin:
            return 0
        by_threads = self.max_threads_per_sm // (warps * self.warp_size)
        by_registers = self.registers_per_sm // (warp_registers * warps)
        by_shared = self.shared_per_sm // (int(shared_bytes) + self.shared_reserved_per_block)
        return max(0, min(by_threads, by_registers, by_shared, self.max_blocks_per_sm))

    def shared_for_resident(self, blocks: int) -> int:
        """The most shared memory a block may use so that `blocks` blocks fit
        on one SM together (never above the per-block opt-in limit)."""
        share = self.shared_per_sm // int(blocks) - self.shared_reserved_per_block
        return max(0, min(share, self.shared_per_block_optin))


default_ordinal = settings.device_ordinal  # CUDASORTKIT_DEVICE, else 0


class DeviceState:
    """One device's primary context, stream, memory pool and properties.

    Everything cudasortkit queues runs on `stream`, joined to the caller's
    stream by `joiner` (cudasortkit/gpu/streams.py). The pool's blocks are only
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

            self.name = self.device.name()
            self.compute_capability = self.device.compute_capability()
            #: Shared memory, registers, threads and SMs (DeviceLimits).
            self.limits = device_limits(ordinal)
            self.sm_count = self.limits.sm_count
            self.total_memory = self.device.total_memory()
            self.stream = cuda.Stream()  # blocking: ordered with the legacy default stream
            self.joiner = Joiner(self)
            self.pool = DeviceMemoryPool()
        finally:
            self.context.pop()
        #: Pinned words and events of read_back, free for the next (one
        #: each per read in flight: threads may read at once).
        self._readbacks: list = []
        self._readbacks_lock = threading.Lock()

    @property
    def arch(self) -> str:
        major, minor = self.compute_capability
        return f"sm_{major}{minor}"

    def activate(self) -> "DeviceState":
        """Make this device's primary context current on the calling thread."""
        current = _thread.ordinal
        if current != self.ordinal:
            if current is not None:
                self.cuda.Context.pop()
            self.context.push()
            _thread.ordinal = self.ordinal
            if current is None and threading.current_thread() is not threading.main_thread():
                _thread.pop_at_exit = _PopAtThreadExit(self.cuda)
        return self

    def allocate(self, nbytes: int, who="cudasortkit"):
        """nbytes from the memory pool; out of memory is a MemoryError naming
        `who` (a string, or a function making it: only built on failure).
        The pool gives back its own unused blocks before it fails; then what
        cudasortkit keeps for reuse (caches.release_kept: back to the pool)
        and the other libraries' unused blocks are given back
        (release_unused_elsewhere), and the allocation is tried once more."""
        nbytes = max(int(nbytes), 1)
        try:
            return self.pool.allocate(nbytes)
        except self.cuda.MemoryError:
            caches.release_kept()
            release_unused_elsewhere()
        try:
            return self.pool.allocate(nbytes)
        except self.cuda.MemoryError as exc:
            who = who() if callable(who) else who
            raise MemoryError(f"{who}: out of GPU memory allocating {nbytes:,} bytes on "
                              f"{self.name}") from exc

    def read_back(self, ptr: int, nbytes: int, then=None) -> int:
        """The unsigned word of `nbytes` (4 or 8) at device address `ptr`,
        as the work queued so far on `stream` leaves it. The copy goes to a
        pinned word with an event behind it; then() queues more work (not
        waited for) while the copy runs, and the host then waits for the
        copy alone. A copy to pageable memory would return only once done,
        after then()'s host time instead of beside it."""
        with self._readbacks_lock:
            slot = self._readbacks.pop() if self._readbacks else None
        if slot is None:
            flags = self.cuda.event_flags.DISABLE_TIMING
            slot = (self.cuda.pagelocked_empty(1, "u8"), self.cuda.Event(flags))
        word, done = slot
        try:
            view = word.view("u4")[:1] if nbytes == 4 else word
            self.cuda.memcpy_dtoh_async(view, ptr, self.stream)
            done.record(self.stream)
            if then is not None:
                then()
            done.synchronize()
            return int(view[0])
        finally:
            with self._readbacks_lock:
                self._readbacks.append(slot)

    def allocating(self, make, *args):
        """make(*args): an allocation by CuPy or PyTorch (a result array). If
        it runs out of memory, this pool's and the other libraries' unused
        blocks are given back and it runs once more."""
        try:
            return make(*args)
        except Exception as exc:  # noqa: BLE001 - CuPy's and PyTorch's out-of-memory types
            if not is_out_of_memory(exc):
                raise
        self.free_unused()
        return make(*args)

    def free_unused(self) -> None:
        """Give the driver back the blocks this device's pool and the other
        libraries' pools keep for reuse, and what cudasortkit keeps for reuse
        (caches.release_kept; no array's memory)."""
        self.activate()
        caches.release_kept()
        self.pool.free_held()
        release_unused_elsewhere()

    def free_memory(self) -> int:
        self.activate()
        return self.cuda.mem_get_info()[0]


def release_unused_elsewhere() -> None:
    """Give the driver back the blocks that array libraries already loaded
    in this process keep cached but unused: CuPy's default pool, PyTorch's
    caching allocator (neither is imported here). No array's memory is freed."""
    cupy = sys.modules.get("cupy")
    if cupy is not None:
        cupy.get_default_memory_pool().free_all_blocks()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        torch.cuda.empty_cache()


def is_out_of_memory(exc: BaseException) -> bool:
    """Whether exc is an array library's out-of-memory error (CuPy's is a
    MemoryError, PyTorch's a RuntimeError named OutOfMemoryError)."""
    return isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError"


class _PopAtThreadExit:
    """Kept in a thread's locals once a context is pushed on it, so that the
    context is popped when the thread ends: pycuda aborts the process when a
    thread ends with a context on its stack (a worker thread of a pool, of
    Dask, ...). The main thread's is popped at exit (_release_all)."""

    def __init__(self, cuda):
        self.cuda = cuda
        self.armed = True

    def __del__(self):
        if not self.armed:
            return
        try:
            self.cuda.Context.pop()
        except Exception:  # nothing pushed any more, or CUDA already shut down
            pass


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


def active_ordinal() -> int:
    """The device of the call this thread is making: every call makes its
    arrays' device current (get_device) before it chooses a plugin, so the
    device this thread activated last, else the default one. Choices read
    that device's measurements; asking never changes the current context
    (a call on device 1 that activated device 0 to read a table would load
    and launch its kernels in the wrong context). A call on host arrays
    chooses by the device this thread used last, the default one unless the
    thread has called on another device's arrays."""
    ordinal = _thread.ordinal
    return default_ordinal() if ordinal is None else ordinal


def active_device() -> DeviceState:
    """get_device(active_ordinal()): the state of the call's device."""
    return get_device(active_ordinal())


def keeps_current_device(call):
    """`call` (a public call) made to leave this thread's current CUDA
    device as it found it: a call on another device's arrays makes that
    device's context current for its work (get_device), and hands the
    thread back the one it had before (hand_back) when it returns or
    raises. It costs a call frame and two thread-local reads (0.3-0.5 us
    on an H200 machine's CPU), so paths that touch no GPU (sort's tiny
    host arrays) run before it."""
    @functools.wraps(call)
    def keeping(*args, **kwargs):
        before = _thread.ordinal
        try:
            return call(*args, **kwargs)
        finally:
            if _thread.ordinal != before:
                hand_back(before)
    return keeping


def hand_back(before: int | None) -> None:
    """Make current again the device this thread had activated before a
    call (`before`; None: none, so the context below cudasortkit's, the
    caller's own, becomes current again). A thread whose first call was on
    the default device keeps its context current, as it does between calls
    on that device: the caller's current device is the default one unless
    the caller chose another, and a push and a pop on every call would cost
    microseconds."""
    now = _thread.ordinal
    if now is None or now == before:
        return
    if before is not None:
        get_device(before)
        return
    if now == default_ordinal():
        return
    _driver().Context.pop()
    _thread.ordinal = None
    keeper = _thread.pop_at_exit
    if keeper is not None:  # nothing of ours is left to pop at the thread's end
        keeper.armed = False
        _thread.pop_at_exit = None


def _release_all() -> None:
    """At exit: free pooled memory and compiled modules while the context is
    still current, then pop it (pycuda aborts if a context is left pushed)."""
    caches.clear_all()
    for state in _devices.values():
        state.pool.stop_holding()
    if _thread.ordinal is not None:
        _driver().Context.pop()
        _thread.ordinal = None
    from pycuda.tools import clear_context_caches

    clear_context_caches()


def device_limits(ordinal: int | None = None) -> DeviceLimits:
    """A device's limits, read once per process from its attributes (which
    needs the driver, not a context: asking costs no context creation)."""
    ordinal = default_ordinal() if ordinal is None else ordinal
    limits = _limits.get(ordinal)
    if limits is None:
        cuda = _driver()
        # No lock: get_device() calls this holding _lock, and two threads
        # reading the same attributes at once store equal values.
        limits = _limits[ordinal] = DeviceLimits.from_attributes(
            cuda.Device(ordinal).get_attributes(), cuda.device_attribute)
    return limits


def current_limits() -> DeviceLimits:
    """The limits of the device sorts run on (CUDASORTKIT_DEVICE), or
    DeviceLimits.sm90() where no GPU is available."""
    if not gpu_available():
        return DeviceLimits.sm90()
    return device_limits()


def driver_version() -> str | None:
    try:
        v = _driver().get_driver_version()
    except GPUUnavailable:
        return None
    return f"{v // 1000}.{(v % 1000) // 10}"
