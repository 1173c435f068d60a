"""Arenas: device (or host) buffers a rank of the collective sort keeps
between sorts, apart from the array libraries' pools: its sorted runs (the
send arena, which the local sort writes straight into and the exchange reads
from, shared with the peers when they copy from it), the chunks it joins
for one local sort (the join arena, never shared) and, when senders copy
into the receivers (exchange.py, direction=push), what it receives.

An arena only grows. A rank keeps it between sorts unless memory is short
(collective.make_room releases it, when no peer keeps it mapped). A grown
arena's old allocation is freed at once, or, where peers may still keep it
mapped (options keep=1), retired and freed after the next exchange's
barrier (ipc.py: peers close a mapping their peer no longer shares at that
exchange).
"""
from __future__ import annotations

import numpy as np

#: Regions of an arena start at multiples of this many bytes.
ALIGN = 256


def aligned(nbytes: int) -> int:
    return -(-int(nbytes) // ALIGN) * ALIGN


class Arena:
    """One growing buffer of `xp` (numpy or cupy) memory."""

    def __init__(self):
        self.memory = None    # cupy.cuda.Memory or a NumPy uint8 array
        self.size = 0
        self.module = None    # numpy or cupy
        self.retired = []

    def take(self, nbytes: int, xp, keep: bool = False):
        """The arena, at least nbytes long (grown if needed: the old
        allocation freed, or retired when `keep`)."""
        if self.memory is not None and self.size >= nbytes and self.module is xp:
            return self
        if self.memory is not None and keep:
            self.retired.append(self.memory)
        self.memory, self.size = None, 0
        nbytes = max(aligned(nbytes), ALIGN)
        self.memory = np.empty(nbytes, np.uint8) if xp is np else _device_memory(xp, nbytes)
        self.size, self.module = nbytes, xp
        return self

    def view(self, offset: int, n: int, dtype):
        """n elements of `dtype` at byte `offset` (an array of the arena's library)."""
        dtype = np.dtype(dtype)
        if offset + n * dtype.itemsize > self.size:
            raise ValueError(f"cudasortkit.dask: arena view [{offset}, +{n * dtype.itemsize}) past its "
                             f"{self.size} bytes; please report this")
        if self.module is np:
            return self.memory[offset:offset + n * dtype.itemsize].view(dtype)
        xp = self.module
        return xp.ndarray(n, dtype, memptr=xp.cuda.MemoryPointer(self.memory, offset))

    def free_retired(self) -> None:
        self.retired.clear()

    def release(self) -> None:
        """Free it (the caller knows no peer keeps it mapped)."""
        self.memory, self.size = None, 0
        self.retired.clear()


def _device_memory(xp, nbytes: int):
    """cudaMalloc'd memory (no pool's), after the pools' unused blocks went
    back to the driver if it had too little free."""
    try:
        return xp.cuda.Memory(nbytes)
    except Exception:   # CuPy raises CUDARuntimeError (cudaErrorMemoryAllocation) here
        from ..gpu.device import get_device

        get_device(xp.cuda.Device().id).free_unused()
        return xp.cuda.Memory(nbytes)


def receive_buffers(arenas: dict, send: dict, n: int, xp, push: bool, keep: bool) -> dict:
    """Where a rank receives n elements of each of its send arrays (name ->
    array): regions of its "recv" arena when senders copy into it (push),
    else new arrays of the library's pool."""
    if not push:
        return {name: xp.empty(n, a.dtype) for name, a in send.items()}
    sink = arenas.setdefault("recv", Arena()).take(
        sum(aligned(n * a.dtype.itemsize) for a in send.values()), xp, keep=keep)
    recv, at = {}, 0
    for name, a in send.items():
        recv[name] = sink.view(at, n, a.dtype)
        at += aligned(n * a.dtype.itemsize)
    return recv
