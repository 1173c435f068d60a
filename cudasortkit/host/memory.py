"""Fresh host arrays paged in ahead of the copies that fill them.

A new NumPy array of a GiB is not yet backed by memory: the first write to
each page faults, and the kernel zeroes the page then. A host sort's
downloads would pay for that inside their copies, after the sort, when
nothing else is left to overlap with. `Prefault` asks the kernel to back an
array's pages (madvise MADV_POPULATE_WRITE, Linux 5.14 and newer) on
threads of its own, started when the array is made, so the paging runs
while the keys go up and are sorted.

Rules it keeps: it never reads or writes the array's contents (populating
a page that is already there does nothing), so copies may fill the array
while it runs; `wait()` returns only when no thread touches the array any
more, and every host sort calls it before it returns or raises. Where the
call is not supported (another OS, an older kernel) it does nothing.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os

from .pool import LazyPool

MADV_POPULATE_WRITE = 23  # linux/mman.h
#: Arrays below this many bytes are left to fault as they are written.
MIN_BYTES = 64 << 20
#: Bytes one madvise call populates (a thread's unit of work).
PIECE_BYTES = 64 << 20
#: Threads that populate at most: the copy threads run beside them.
MAX_THREADS = 4

_madvise = []  # [libc madvise, or None where it cannot populate]


def _libc_madvise():
    if not _madvise:
        fn = None
        if hasattr(os, "uname") and os.uname().sysname == "Linux":
            try:
                libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
                fn = libc.madvise
                fn.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
                fn.restype = ctypes.c_int
            except (OSError, AttributeError):
                fn = None
        _madvise.append(fn)
    return _madvise[0]


def _threads() -> int:
    return max(1, min(MAX_THREADS, (os.cpu_count() or 2) // 4))


_workers = LazyPool(_threads, "csk-prefault")


def _populate(madvise, address: int, nbytes: int) -> None:
    # A failure (EINVAL on kernels before 5.14, ENOMEM) only means the
    # pages fault later, as they would have without us.
    madvise(ctypes.c_void_p(address), ctypes.c_size_t(nbytes), MADV_POPULATE_WRITE)


class Prefault:
    """Populates the pages of `arrays` (NumPy, contiguous, None skipped) in
    the background; `wait()` before the arrays are handed back."""

    def __init__(self, *arrays):
        self._futures = []
        madvise = _libc_madvise()
        if madvise is None:
            return
        page = mmap.PAGESIZE
        for array in arrays:
            if array is None or array.nbytes < MIN_BYTES or not array.flags.c_contiguous:
                continue
            start = array.__array_interface__["data"][0]
            lo = -(-start // page) * page  # whole pages inside the array only
            hi = (start + array.nbytes) // page * page
            for at in range(lo, hi, PIECE_BYTES):
                self._futures.append(_workers().submit(_populate, madvise, at,
                                                       min(PIECE_BYTES, hi - at)))

    @property
    def pieces(self) -> int:
        """Pieces queued and not yet waited for."""
        return len(self._futures)

    def wait(self) -> None:
        """Return when no thread works on the arrays: pieces not begun are
        cancelled, running ones finished."""
        futures, self._futures = self._futures, []
        for future in futures:
            future.cancel()
        for future in futures:
            if not future.cancelled():
                future.exception()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.wait()
        return False

