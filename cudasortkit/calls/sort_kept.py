"""What prepared calls (calls/sort_prepared.py) keep between calls: their launch
plan's temporaries, the next call's result array made ahead, and the last
results handed out, one of which becomes the array made ahead once its
caller dropped it (RETURNED_KEPT).

One `KeptBuffers` serves every prepared call of one device, launch plan,
array library, shape and result dtype: auto's call and a call naming the
same plugin, or a stable and a default call that chose the same kernels,
do the same work on the same temporaries and hold one set, within one
budget. (Kept per call, two such calls of 2^26 4-byte keys each held 512 MB
and, within the 640 MB budget, took them from each other at every call:
uint32 2^26, 1.09x CUB prepared by auto against 1.13x by name, H100.) Sharing is safe for the same reason keeping is: all of a
device's prepared work runs in one order (calls/sort_prepared.py), so one call's
kernels are done with the temporaries before the next call's start, which
call it is.
"""
from __future__ import annotations

import itertools
import threading
import weakref

from ..gpu import caches
from ..gpu.device import is_out_of_memory

#: A launch plan whose temporaries take at most this share of the device's
#: memory has them kept from its first call on, instead of taken from the
#: pool and freed on each call: no Job and no pool calls, and its graph
#: launched on the legacy default stream itself where that is the caller's.
#: That is microseconds of host time a call before the GPU starts, a tenth
#: of a call at 2^16-2^21 keys and a few percent up to 2^26
#: (docs/benchmarks.md). The pool would keep the same blocks after
#: each call anyway; kept here, they go back to it when memory runs short
#: (caches.release_kept).
OWN_TEMPORARIES_SHARE = 1 / 128
#: All kept buffers together take at most this share of the device's
#: memory; past it those used least recently are given back (and taken
#: again on their next call) until a new set fits. Memory kept here is per
#: process, and several processes often share a GPU (pytest-xdist workers,
#: Dask workers, notebooks), where one cannot take back what another keeps:
#: 1/128 is 640 MB of an 80 GB H100, the temporaries of one 2^27-key sort
#: of 4-byte keys. (First come, first kept, a process that had sorted
#: 2^24-2^26 keys once kept that memory while its later calls of 2^20-2^22
#: keys took theirs from the pool on every call: 15-20% slower, H100.)
OWNED_TOTAL_SHARE = 1 / 128
#: A prepared call makes the result array of its next call right after it
#: launched this call's work, while the GPU runs it, so that a call starts
#: the GPU without waiting on its array library's allocator first: a few
#: microseconds of a 20-60 us call, and 8-20 us at 2^22-2^26 keys, where a
#: big block comes slowly out of a pool after a synchronisation (H100,
#: uint32: 1.16 -> 1.26x CUB prepared at 2^22, 1.06-1.09 -> 1.10x at 2^24
#: and 2^26; docs/benchmarks.md). It does so where its result takes
#: at most AHEAD_RESULT_BYTES, or where its temporaries are kept and they
#: and the result together take at most OWN_TEMPORARIES_SHARE of the
#: device's memory: such a result counts towards OWNED_TOTAL_SHARE with
#: them. An array made ahead serves only a call on the stream it was made
#: on (each library's pool orders the reuse of its blocks by stream).
#: 1 MiB takes in the int64 results of 2^16-2^17 queries or indices, whose
#: calls are host-bound (a searchsorted of 2^16 queries took 9.3 us of host
#: time a call, and no longer with its GPU work, H200), so a result taken
#: back (RETURNED_KEPT) instead of allocated is time off the whole call.
AHEAD_RESULT_BYTES = 1 << 20
#: Where an array library says who holds a result (its adapter's `holders`:
#: CuPy's), a call keeps the last RETURNED_KEPT small results it handed out
#: (of at most AHEAD_RESULT_BYTES), and makes the next call's result ahead
#: by taking back one of them that nothing else holds any more, nor its
#: memory, nor a weak reference: the caller dropped it, so no one can tell
#: it from a new array (NumPy elides temporaries on the same rule, a
#: reference count). Only where none is free does it allocate one. It looks
#: after launching the call's work, as it would allocate, so the call's
#: start pays nothing for it. Three, since `r = csk.sort(x)` in a loop
#: still holds the last result while the next call runs and the one before
#: has just been dropped: that loop's calls cycle through three arrays, a
#: loop dropping each result through two. Of the results still held, the
#: two newest stay kept; an older one is left to its holders. A result is
#: taken back for a call on the stream it was made on, after the work
#: queued there, as CuPy's pool reuses a freed block. The results of a
#: library whose allocator also keeps blocks for other streams' work
#: (PyTorch's `record_stream`) are never taken back, nor big ones: their
#: calls wait on the GPU, which hides allocating them ahead.
RETURNED_KEPT = 3

#: The kept buffers holding temporaries now (those no prepared call uses
#: any more leave the set, and their blocks go back to the pool).
_owning = weakref.WeakSet()
_owning_lock = threading.RLock()  # taken again where memory runs short inside take()
#: Numbers the uses in order (KeptBuffers.last_use), for giving back the
#: least recently used temporaries first.
_uses = itertools.count()
#: The kept buffers that make results ahead.
_making_ahead = weakref.WeakSet()
#: Every KeptBuffers in use, by (device state, launch plan, adapter, shape,
#: result dtype): shared by the prepared calls of one key.
_shared = weakref.WeakValueDictionary()


def kept_for(state, plan, adapter, shape, result_dtype, result_bytes: int) -> "KeptBuffers":
    """The KeptBuffers of this launch plan's calls returning arrays of
    `adapter`'s library of this shape and dtype (made on first use)."""
    key = (state, plan, adapter, shape, result_dtype)
    with _owning_lock:
        kept = _shared.get(key)
        if kept is None:
            kept = _shared[key] = KeptBuffers(state, plan, result_bytes, adapter, shape)
    return kept


def popped(returned: list, at: int, holders) -> tuple:
    """(stream, array, holders(array)) of the (stream, array) popped off
    `returned` at `at`, the counts read while this frame's local is the one
    reference the pop left (IndexError where another thread took it).
    sole_holders() reads them the same way, so the two compare."""
    stream, array = returned.pop(at)
    return stream, array, holders(array)


def sole_holders(holders, make) -> tuple | None:
    """holders() of a new array, make(), that nothing else holds: what
    holders() reads of a result the caller dropped (an adapter's `alone`);
    None where make() runs out of memory (then nothing is taken back: the
    call that prepares the adapter has its result already)."""
    try:
        return popped([(None, make())], 0, holders)[2]
    except Exception as exc:  # noqa: BLE001 - CuPy's and PyTorch's out-of-memory types
        if not is_out_of_memory(exc):
            raise
        return None


class KeptBuffers:
    """One launch plan's kept temporaries (`temporaries`: their addresses
    once taken, else None), results made ahead (`ahead`: a list of
    (caller's stream, array), or None where this plan's calls make none; a
    list, since its pop() and append() are atomic: two threads calling at
    once never take the same array) and results handed out, to take back
    (`returned`, RETURNED_KEPT). `nbytes` is what is kept while taken."""

    __slots__ = ("state", "plan", "owns", "owned", "temporaries", "ahead", "nbytes",
                 "last_use", "returned", "holders", "alone", "shape", "__weakref__")

    def __init__(self, state, plan, result_bytes: int, adapter=None, shape=None):
        self.state, self.plan, self.shape = state, plan, shape
        share = state.total_memory * OWN_TEMPORARIES_SHARE
        temporaries = sum(plan.temporaries)
        self.owns = temporaries <= share
        self.owned = self.temporaries = None
        big = result_bytes > AHEAD_RESULT_BYTES
        ahead = not big or (self.owns and temporaries + result_bytes <= share)
        self.nbytes = temporaries + (result_bytes if big and ahead else 0)
        self.ahead = [] if ahead else None
        self.holders = getattr(adapter, "holders", None)
        self.alone = getattr(adapter, "alone", None)
        #: The last results handed out, oldest first, as (caller's stream,
        #: array), to take back (RETURNED_KEPT); None for a big result, or
        #: where the adapter reads no holders (its `alone` None or missing).
        self.returned = [] if not big and self.alone is not None else None
        self.last_use = 0
        if ahead:
            _making_ahead.add(self)

    def taken_back(self, caller):
        """A result kept (hand_out), other than the newest (the call's own),
        handed out on `caller`'s stream, that nothing else holds, nor its
        memory, nor a weak reference, and whose shape is still the calls' (a
        CuPy array's shape can be set), taken back, oldest first; else None.
        Of the others, the two newest stay kept; older ones, still held, are
        let go to their holders (as is one whose shape changed)."""
        returned = self.returned
        at = 0
        while returned and at < len(returned) - 1:  # (None: this call keeps none)
            recent = at >= len(returned) - 2
            try:
                stream, array, counts = popped(returned, at, self.holders)
            except IndexError:  # another thread took it
                return None
            if array.shape != self.shape:
                continue
            if stream == caller and counts == self.alone:
                return array
            if recent:
                returned.insert(at, (stream, array))
                at += 1
        return None

    def hand_out(self, caller, array) -> None:
        """Keep the result this call hands out on `caller`'s stream, to take
        back (taken_back) once its caller drops it, and the RETURNED_KEPT - 1
        kept before it."""
        returned = self.returned
        if returned is not None:
            returned.append((caller, array))
            if len(returned) > RETURNED_KEPT:
                del returned[0]

    def made_ahead(self, caller):
        """The result array made ahead for `caller`'s stream, taken; None if
        there is none for it (one made for another stream is dropped)."""
        ahead = self.ahead
        if ahead:
            try:
                stream, array = ahead.pop()
            except IndexError:  # another thread took it
                return None
            if stream == caller:
                return array
        return None

    def make_ahead(self, caller, make, a) -> None:
        """Make the next call's result on `caller`'s stream and keep it: a
        result taken back (taken_back), else make(a). Out of memory, none is
        made (the call's result stands)."""
        ahead = self.ahead
        if ahead is None:  # take(), in another thread, found no room for it
            return
        array = self.taken_back(caller)
        try:
            ahead.append((caller, make(a) if array is None else array))
        except Exception as exc:  # noqa: BLE001 - CuPy's and PyTorch's out-of-memory types
            if not is_out_of_memory(exc):
                raise

    def used(self):
        """Note a use; the kept temporaries' addresses, taken now if they are
        to be kept and are not, or None (the call takes them from the pool)."""
        self.last_use = next(_uses)
        temporaries = self.temporaries
        if temporaries is None and self.owns:
            temporaries = self.take()
        return temporaries

    def take(self) -> tuple | None:
        """Take the temporaries to keep; their addresses, or None when they
        alone exceed OWNED_TOTAL_SHARE of the device's memory (the calls then
        take them from the pool on each call). Those used less recently are
        given back until these fit (_make_room). (Two threads racing here
        each take a set, and the set dropped goes back to the pool, ordered
        on the device's stream as every freed block is.)"""
        with _owning_lock:
            budget = self.state.total_memory * OWNED_TOTAL_SHARE
            temporaries = sum(self.plan.temporaries)
            if self.nbytes > budget and self.nbytes > temporaries:
                self.nbytes, self.ahead = temporaries, None  # never room for a big result ahead
                _making_ahead.discard(self)
            if self.nbytes > budget:
                self.owns = False
                return None
            _make_room(self.nbytes, budget)
            owned = [self.state.allocate(size, "a prepared call's temporaries")
                     for size in self.plan.temporaries]
            self.owned, self.temporaries = owned, tuple(int(buf) for buf in owned)
            _owning.add(self)
        return self.temporaries

    def give_back(self) -> None:
        """Give back the kept temporaries, and a big result made ahead; the
        next call takes them again (take)."""
        with _owning_lock:
            owned, self.owned, self.temporaries = self.owned, None, None
            _owning.discard(self)
            if self.ahead:
                self.ahead.clear()
            if self.returned:
                self.returned.clear()
        for buf in owned or ():
            buf.free()


def _make_room(nbytes: int, budget: float) -> None:
    """Give back kept temporaries, least recently used first, until
    `nbytes` more fit `budget` (caller holds _owning_lock)."""
    kept = sum(k.nbytes for k in _owning)
    for k in sorted(_owning, key=lambda k: k.last_use):
        if kept + nbytes <= budget:
            return
        kept -= k.nbytes
        k.give_back()


def _release_owned() -> None:
    """Give back every kept set of temporaries, with the other context
    caches (gpu.caches.clear_all: before a context goes, at exit among
    others) and when memory runs short (gpu.caches.release_kept); a call
    still in use takes a new set on its next call. The blocks go back to
    the pool, ordered on the device's stream."""
    with _owning_lock:
        for kept in list(_owning):
            kept.give_back()


def _drop_ahead() -> None:
    """Drop the result arrays made ahead and those kept to take back (they go
    back to their library's pool, unless their caller still holds them);
    each call makes its next one again."""
    for kept in list(_making_ahead):
        for arrays in (kept.ahead, kept.returned):
            if arrays is not None:  # None: none kept (take() found no room; a big result)
                arrays.clear()


caches.register_kept(_release_owned)
caches.register_kept(_drop_ahead)
