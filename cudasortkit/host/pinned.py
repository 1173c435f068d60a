"""Page-locked (pinned) host staging buffers, pooled and reused.

Host-to-device and device-to-host copies run at full PCIe speed, and
asynchronously, only from and to page-locked memory; allocating it costs
milliseconds per megabyte, so the host pipeline (cudasortkit/host/transfer.py)
takes fixed-size slots from this pool and gives them back, and a sort never
allocates pinned memory of its own after the first. The pool never holds
more than `limit_bytes` (CUDASORTKIT_PINNED_LIMIT, default 512 MiB); what it
holds is freed by `release()`, at interpreter exit, and when the pool object
is collected. Slots are allocated in the current CUDA context, so the
primary context the device state holds (cudasortkit/gpu/device.py) must be the
current one when `take` first allocates.
"""
from __future__ import annotations

import atexit
import threading

import numpy as np

from .. import settings

#: One slot: big enough that a DMA of it runs at full speed, small enough
#: that a pipeline of several fits a modest budget.
SLOT_BYTES = 8 << 20
DEFAULT_LIMIT = 512 << 20


class PinnedPool:
    """Slots of `slot_bytes` page-locked bytes (uint8 NumPy arrays)."""

    def __init__(self, slot_bytes: int = SLOT_BYTES, limit_bytes: int | None = None):
        self.slot_bytes = int(slot_bytes)
        if limit_bytes is None:
            limit_bytes = settings.pinned_limit() or DEFAULT_LIMIT
        self.max_slots = max(2, int(limit_bytes) // self.slot_bytes)
        self._free: list = []
        self._taken = 0
        self._cond = threading.Condition()
        self._registered = False

    @property
    def held_bytes(self) -> int:
        """Page-locked bytes the pool holds, free or taken."""
        with self._cond:
            return (len(self._free) + self._taken) * self.slot_bytes

    @property
    def in_use_bytes(self) -> int:
        """Page-locked bytes taken and not yet given back."""
        with self._cond:
            return self._taken * self.slot_bytes

    def take(self, count: int, at_least: int = 2) -> list:
        """Up to `count` slots (never fewer than `at_least`: waits for others
        to give theirs back when the pool is at its limit)."""
        import pycuda.driver as cuda

        count = max(1, min(int(count), self.max_slots))
        at_least = min(max(1, int(at_least)), count)
        with self._cond:
            while True:
                room = self.max_slots - self._taken - len(self._free)
                available = len(self._free) + room
                if available >= at_least:
                    break
                self._cond.wait()
            got = [self._free.pop() for _ in range(min(count, len(self._free)))]
            new = min(count - len(got), room)
            self._taken += len(got) + new
        made = []
        try:
            for _ in range(new):
                made.append(cuda.pagelocked_empty(self.slot_bytes, np.uint8,
                                                  mem_flags=cuda.host_alloc_flags.PORTABLE))
        except BaseException:
            with self._cond:
                self._taken -= new - len(made)  # counted above, never made
            self.give(got + made)
            raise
        got += made
        if new and not self._registered:
            self._registered = True
            atexit.register(self.release)
        return got

    def give(self, slots) -> None:
        """Give slots back for reuse (their copies must be finished)."""
        with self._cond:
            for slot in slots:
                self._free.append(slot)
            self._taken -= len(slots)
            self._cond.notify_all()

    def release(self) -> None:
        """Free every slot not taken now (at exit: all of them)."""
        with self._cond:
            free, self._free = self._free, []
        for slot in free:
            base = getattr(slot, "base", None)
            try:
                if base is not None and hasattr(base, "free"):
                    base.free()
            except Exception:  # the context may be gone at exit: the driver frees it with it
                pass

    def __del__(self):
        try:
            self.release()
        except Exception:
            pass


#: The process's staging pool (all devices: slots are portable page-locked memory).
pool = PinnedPool()
