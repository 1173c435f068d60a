"""Host <-> device copies of large host arrays at PCIe speed, overlapped.

A `Pipe` serves one host sort. Uploads run on the device state's stream (so
the sort queued after them waits for them), downloads on a second stream of
the device, so data going up and data coming down cross PCIe at once.

Two ways to move the bytes (CUDASORTKIT_HOST_TRANSFER, default "auto":
`transfer_mode` picks staged in core and registered out of core):

- "staged": through a ring of page-locked slots from the pinned pool
  (cudasortkit/host/pinned.py). Worker threads copy the caller's pageable memory
  into a slot (NumPy copies release the GIL) while earlier slots are in
  flight to the device, and copy slots that came down into the result while
  later ones still come down. Each byte crosses host memory three times.
- "registered": the caller's arrays themselves are page-locked for the call
  (cuMemHostRegister, in aligned pieces) and copied by DMA directly, once
  through host memory; an out-of-core sort, which moves each byte four
  times, pins its arrays whole, once, the pieces on the worker threads at
  once (Pipe.pin).

docs/algorithms/host.md has the measurements that chose the defaults.

Rules the code keeps: a slot is written by a host copy only after its last
DMA finished (its event), and read by a DMA only after its host copy
finished (its future); every slot goes back to the pool and every
registration is undone in `close()`, which waits for all queued copies
first, also when the call fails or is interrupted.
"""
from __future__ import annotations

import ctypes
import os
import time
from collections import deque

import numpy as np

from .. import settings
from ..gpu import libcuda
from .pinned import pool as pinned_pool
from .pool import LazyPool

MODES = ("staged", "registered")
#: What "auto" picks, in core and out of core.
AUTO_MODES = {False: "staged", True: "registered"}
#: Slots per direction beyond one per copy thread (DMAs queued while every
#: thread copies).
RING_SPARE = 4
#: How long the thread driving a pipe sleeps when no copy moved on.
POLL_S = 50e-6
#: Staged mode cuts a transfer into pieces of one slot at most and at least
#: MIN_PIECE_BYTES, aiming at PIECES_PER_THREAD pieces per copy thread: the
#: first DMA waits for one piece's host copy and the last host copy for one
#: piece's DMA, so small transfers want small pieces (CUDASORTKIT_HOST_PIECE
#: fixes the size instead).
MIN_PIECE_BYTES = 1 << 20
PIECES_PER_THREAD = 2
PIECE_ALIGN = 64 << 10
#: Registered mode pins the caller's memory in pieces of this many bytes
#: (aligned to it, so no two pieces share a page).
REGISTER_PIECE = 64 << 20

_CU_MEMHOSTREGISTER_READ_ONLY = 0x08



def _host_register():
    """libcuda (gpu/libcuda.py), for cuMemHostRegister_v2 / cuMemHostUnregister
    (pycuda's register_host_memory fails on NumPy 2 arrays) and the
    current-context calls that let worker threads make them."""
    try:
        return libcuda.driver()
    except OSError as exc:
        raise RuntimeError(f"cudasortkit: registered host transfers need the CUDA driver "
                           f"library: {exc}") from None


def _current_context(driver) -> ctypes.c_void_p:
    context = ctypes.c_void_p()
    driver.check(driver.cuCtxGetCurrent(ctypes.byref(context)), "cuCtxGetCurrent")
    return context


def _register_flags(buf: np.ndarray) -> int:
    """cuMemHostRegister flags for buf: read-only where the caller's array is."""
    return 0 if buf.flags.writeable else _CU_MEMHOSTREGISTER_READ_ONLY


def _registering(nbytes: int) -> str:
    return f"cuMemHostRegister of {nbytes:,} host bytes"


def _in_context(driver, context, call, *args) -> int:
    """call(*args) on a worker thread with `context` current there; the
    CUDA status (0: success)."""
    status = driver.cuCtxSetCurrent(context)
    return status or call(*args)


_streams: dict = {}  # device ordinal -> download stream


def copy_threads() -> int:
    """Worker threads for host copies: CUDASORTKIT_COPY_THREADS, else the
    CPUs less two (2..12)."""
    threads = settings.copy_threads()
    if threads is not None:
        return max(1, threads)
    return max(2, min(12, (os.cpu_count() or 4) - 2))


def staged_piece_bytes(nbytes: int) -> int:
    """Bytes of one staged piece of an `nbytes` transfer (see MIN_PIECE_BYTES)."""
    slot = pinned_pool.slot_bytes
    fixed = settings.host_piece()
    if fixed:
        return max(1, min(slot, fixed))
    want = -(-nbytes // (PIECES_PER_THREAD * copy_threads()))
    want = -(-want // PIECE_ALIGN) * PIECE_ALIGN
    return max(min(MIN_PIECE_BYTES, slot), min(slot, want))


#: The host-copy worker threads: workers() is the pool (made on first use).
workers = LazyPool(copy_threads, "csk-copy")


def transfer_mode(out_of_core: bool = False) -> str:
    """CUDASORTKIT_HOST_TRANSFER if it names a mode, else (unset or "auto")
    AUTO_MODES' pick for an in-core or out-of-core sort."""
    mode = settings.host_transfer() or "auto"
    if mode == "auto":
        return AUTO_MODES[bool(out_of_core)]
    if mode not in MODES:
        raise ValueError(f"CUDASORTKIT_HOST_TRANSFER must be one of auto, {', '.join(MODES)}, "
                         f"got {mode!r}")
    return mode


def mode_chosen() -> bool:
    """True if CUDASORTKIT_HOST_TRANSFER names a mode (not unset or "auto")."""
    return settings.host_transfer() not in ("", "auto")


def download_stream(state):
    """The device's second stream (downloads), made once per device."""
    stream = _streams.get(state.ordinal)
    if stream is None:
        stream = _streams[state.ordinal] = state.cuda.Stream()
    return stream


def _host_copy(dst: np.ndarray, src: np.ndarray) -> None:
    """One piece between pageable and page-locked memory (a worker thread)."""
    np.copyto(dst, src)


def _on_workers(calls) -> None:
    """Run each (function, *args) on the worker threads; wait for all of
    them, also when one fails or the caller is interrupted (so no copy is
    still writing when this returns)."""
    futures = [workers().submit(*call) for call in calls]
    try:
        for future in futures:
            future.result()
    finally:
        for future in futures:
            future.exception()


def parallel_copy(dst: np.ndarray, src: np.ndarray, piece_bytes: int = 64 << 20) -> None:
    """dst[...] = src (1-D, same length) by the worker threads, in pieces."""
    step = max(1, piece_bytes // max(1, src.itemsize))
    _on_workers((np.copyto, dst[i:i + step], src[i:i + step]) for i in range(0, len(src), step))


def parallel_take(dst: np.ndarray, src: np.ndarray, indices: np.ndarray,
                  piece: int = 1 << 22) -> None:
    """dst[i] = src[indices[i]] (1-D; valid indices) by the worker threads, in pieces."""
    _on_workers((np.take, src, indices[i:i + piece], None, dst[i:i + piece], "clip")
                for i in range(0, len(indices), piece))


def as_bytes(a: np.ndarray) -> np.ndarray:
    """A 1-D contiguous array as its bytes (uint8), without copying."""
    return a.reshape(-1).view(np.uint8)


class _Slot:
    __slots__ = ("buf", "event", "future", "busy")

    def __init__(self, buf, event):
        self.buf, self.event, self.future, self.busy = buf, event, None, False


class Pipe:
    """One host sort's copies. Use as a context manager (or call close())."""

    def __init__(self, state, mode: str | None = None, progress=None, slots: int | None = None):
        self.state = state
        self.cuda = cuda = state.cuda
        self.mode = mode or transfer_mode()
        self.up = state.stream
        self.down = download_stream(state)
        self.progress = progress  # callable(nbytes) or None
        self.workers = workers()
        self._registered = []  # addresses to cuMemHostUnregister at close
        self._spans = []  # (start, end) addresses registered
        self._up, self._down = [], []
        if self.mode == "staged":
            per_ring = slots or copy_threads() + RING_SPARE
            bufs = pinned_pool.take(2 * per_ring, at_least=4)
            half = len(bufs) // 2
            flags = cuda.event_flags.DISABLE_TIMING
            self._up = [_Slot(b, cuda.Event(flags)) for b in bufs[:half]]
            self._down = [_Slot(b, cuda.Event(flags)) for b in bufs[half:]]
        self._scratch = {}  # dtype -> host array (scratch())
        self._kept = []  # scratch arrays outgrown: kept until close (they may be pinned)
        self._up_count = 0
        self._wanted = deque()  # downloads not yet issued: [host bytes, dptr, offset, event, piece]
        self._after = None  # event the next download request waits for (after_device_work)
        self._pending = deque()  # down slots whose DMA is queued: (slot, host piece)
        self._copying = deque()  # down slots whose host copy runs
        self._free_down = deque(self._down)
        self._closed = False

    def _wait_until(self, ready) -> None:
        """Return once ready() is true, moving queued downloads on meanwhile
        (so copies up and copies down overlap)."""
        while not ready():
            if not self.pump():
                time.sleep(POLL_S)

    # ---------------------------------------------------------------- up
    def upload(self, dptr: int, host: np.ndarray) -> None:
        """Queue host (1-D, contiguous) -> device memory at dptr on the upload
        stream; returns once the caller's memory has been read (staged) or
        pinned (registered)."""
        src = as_bytes(host)
        if not len(src):
            return
        if self.mode == "registered":
            for offset, piece in self._register(src):
                self.cuda.memcpy_htod_async(int(dptr) + offset, piece, self.up)
                self._tick(len(piece))
            return
        size = staged_piece_bytes(len(src))
        pieces = [(o, src[o:o + size]) for o in range(0, len(src), size)]
        ring, k = self._up, len(self._up)
        copied = issued = 0  # pieces whose host copy was submitted / whose DMA was queued
        try:
            # A piece's slot takes its host copy once the slot's last DMA
            # finished; its DMA is queued once that copy finished, in order.
            while issued < len(pieces):
                moved = False
                while issued < copied:
                    slot = ring[(self._up_count + issued) % k]
                    if not slot.future.done():
                        break
                    future, slot.future = slot.future, None
                    future.result()
                    offset, piece = pieces[issued]
                    self.cuda.memcpy_htod_async(int(dptr) + offset, slot.buf[:len(piece)], self.up)
                    slot.event.record(self.up)
                    slot.busy = True
                    self._tick(len(piece))
                    issued += 1
                    moved = True
                while copied < len(pieces) and copied - issued < k:
                    slot = ring[(self._up_count + copied) % k]
                    if slot.busy:
                        if not slot.event.query():
                            break
                        slot.busy = False
                    piece = pieces[copied][1]
                    slot.future = self.workers.submit(_host_copy, slot.buf[:len(piece)], piece)
                    copied += 1
                    moved = True
                if not (self.pump() or moved):
                    time.sleep(POLL_S)
        finally:
            for slot in ring:  # a failure left copies running: let them end
                if slot.future is not None:
                    slot.future.exception()
                    slot.future = None
            self._up_count += copied

    # -------------------------------------------------------------- down
    def after_device_work(self) -> None:
        """Downloads requested from now on start after the work queued so far
        on the device state's stream (the sort whose result they fetch)."""
        self._after = self.cuda.Event(self.cuda.event_flags.DISABLE_TIMING)
        self._after.record(self.up)

    def download(self, host: np.ndarray, dptr: int) -> None:
        """Request device memory at dptr -> host (1-D, contiguous, writeable)
        on the download stream; call after_device_work() first. Returns at
        once (staged): the DMAs are queued as download slots come free, while
        later uploads run; downloads_done_event() queues them all, and the
        host copies finish in drain()/close()."""
        dst = as_bytes(host)
        if not len(dst):
            return
        if self.mode == "registered":
            if self._after is not None:
                self.down.wait_for_event(self._after)
                self._after = None
            for offset, piece in self._register(dst):
                self.cuda.memcpy_dtoh_async(piece, int(dptr) + offset, self.down)
                self._tick(len(piece))
            return
        self._wanted.append([dst, int(dptr), 0, self._after, staged_piece_bytes(len(dst))])
        self._after = None
        self.pump()

    def downloads_done_event(self):
        """An event after every download DMA requested so far (not the host
        copies): queues the ones still waiting for a slot first."""
        self._wait_until(lambda: not self._wanted)
        event = self.cuda.Event(self.cuda.event_flags.DISABLE_TIMING)
        event.record(self.down)
        return event

    def wait_for(self, event) -> None:
        """Return once `event` has happened, moving queued downloads on meanwhile."""
        self._wait_until(event.query)

    def settle(self) -> None:
        """Before device buffers that downloads read are freed: forget the
        downloads not yet queued (only a failed call leaves any) and wait for
        the queued DMAs."""
        self._wanted.clear()
        self.down.synchronize()

    def pump(self) -> bool:
        """Move finished download DMAs on to their host copies, finished host
        copies back to the free slots, and requested downloads into free
        slots; True if anything moved."""
        moved = False
        while self._pending and self._pending[0][0].event.query():
            slot, piece = self._pending.popleft()
            slot.future = self.workers.submit(_host_copy, piece, slot.buf[:len(piece)])
            self._copying.append((slot, len(piece)))
            moved = True
        while self._copying and self._copying[0][0].future.done():
            slot, nbytes = self._copying.popleft()
            future, slot.future = slot.future, None
            self._free_down.append(slot)
            moved = True
            future.result()
            self._tick(nbytes)
        while self._wanted and self._free_down:
            request = self._wanted[0]
            dst, dptr, offset, after, size = request
            if after is not None:
                self.down.wait_for_event(after)
                request[3] = None
            piece = dst[offset:offset + size]
            slot = self._free_down.popleft()
            self.cuda.memcpy_dtoh_async(slot.buf[:len(piece)], dptr + offset, self.down)
            slot.event.record(self.down)
            self._pending.append((slot, piece))
            request[2] = offset + len(piece)
            if request[2] >= len(dst):
                self._wanted.popleft()
            moved = True
        return moved

    def drain(self) -> None:
        """Wait for every queued copy, both ways, host copies included."""
        self._wait_until(lambda: not (self._wanted or self._pending or self._copying))
        self.up.synchronize()
        self.down.synchronize()

    def _tick(self, nbytes: int) -> None:
        if self.progress is not None:
            self.progress(nbytes)

    # -------------------------------------------------------- registered
    def pin(self, array: np.ndarray) -> None:
        """Registered mode: page-lock all of `array` (1-D, contiguous) now,
        for the rest of the call, so that every later copy of a part of it
        is a plain DMA (out of core copies many parts of the same arrays).
        The pieces are registered by the worker threads at once; if one
        fails, the others stay registered until close() and this raises."""
        if self.mode != "registered" or array is None or not array.size:
            return
        driver = _host_register()
        context = _current_context(driver)
        buf = as_bytes(array)
        spans = [span for _, _, span in self._pieces(buf) if not self._covered(*span)]
        flags = _register_flags(buf)
        futures = [self.workers.submit(_in_context, driver, context, driver.cuMemHostRegister_v2,
                                       ctypes.c_void_p(lo), ctypes.c_size_t(hi - lo), flags)
                   for lo, hi in spans]
        failed = None
        for (lo, hi), future in zip(spans, futures):
            status = future.result()
            if status:
                failed = failed or (hi - lo, status)
            else:
                self._registered.append(lo)
                self._spans.append((lo, hi))
        if failed:
            driver.check(failed[1], _registering(failed[0]))

    def scratch(self, n: int, dtype) -> np.ndarray:
        """n items of host memory that live as long as this pipe (one array
        a dtype, grown when asked for more), pinned whole in registered mode:
        for data a call stages on the host itself. Memory once pinned is
        never freed before close() unpins it."""
        dtype = np.dtype(dtype)
        have = self._scratch.get(dtype)
        if have is None or len(have) < n:
            if have is not None:
                self._kept.append(have)
            have = self._scratch[dtype] = np.empty(n, dtype)
            self.pin(have)
        return have[:n]

    def _covered(self, lo: int, hi: int) -> bool:
        return any(a <= lo and hi <= b for a, b in self._spans)

    @staticmethod
    def _pieces(buf: np.ndarray):
        """(offset, end, (lo, hi)) of buf's pieces: offsets into buf and the
        addresses they span; pieces end on REGISTER_PIECE boundaries of the
        address space, so the pieces of two views of one array are the same
        pieces or lie inside them."""
        start = buf.__array_interface__["data"][0]
        offset = 0
        while offset < len(buf):
            end = min(len(buf), ((start + offset) // REGISTER_PIECE + 1) * REGISTER_PIECE - start)
            yield offset, end, (start + offset, start + end)
            offset = end

    def _register(self, buf: np.ndarray):
        """(offset, piece) for the bytes of buf, each piece page-locked
        (cuMemHostRegister) for the rest of the call, one after another (a
        piece's DMA runs while the next is registered)."""
        driver = _host_register()
        flags = _register_flags(buf)
        for offset, end, (lo, hi) in self._pieces(buf):
            if not self._covered(lo, hi):
                driver.check(driver.cuMemHostRegister_v2(ctypes.c_void_p(lo),
                                                         ctypes.c_size_t(hi - lo), flags),
                             _registering(hi - lo))
                self._registered.append(lo)
                self._spans.append((lo, hi))
            yield offset, buf[offset:end]

    # ------------------------------------------------------------ close
    def close(self) -> None:
        """Wait for everything queued (errors of a failed call are not raised
        again here), then give the slots back and undo registrations."""
        if self._closed:
            return
        self._closed = True
        self._wanted.clear()
        try:
            for slot, _ in list(self._copying):
                slot.future.exception()
            for slot in self._up + self._down:
                if slot.future is not None:
                    slot.future.exception()
            self.up.synchronize()
            self.down.synchronize()
        finally:
            if self._registered:
                # On the worker threads at once, like pin(); errors are not
                # raised (the call's own error, if any, matters more).
                driver = _host_register()
                try:
                    context = _current_context(driver)
                    _on_workers((_in_context, driver, context, driver.cuMemHostUnregister,
                                 ctypes.c_void_p(a)) for a in self._registered)
                except RuntimeError:  # no context here to hand on: one by one, in this thread
                    for address in self._registered:
                        driver.cuMemHostUnregister(ctypes.c_void_p(address))
            self._registered.clear()
            self._spans.clear()
            self._scratch.clear()
            self._kept.clear()
            pinned_pool.give([s.buf for s in self._up + self._down])
            self._up, self._down = [], []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
