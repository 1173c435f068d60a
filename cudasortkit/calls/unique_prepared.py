"""Prepared uniques: a repeated unique of integer, bool or float device
keys of one exact length and one set of flags, made again without the
general path (calls/unique.py), as a repeated sort is
(calls/sort_prepared.py).

A call with axis=None and no stream= of a 1-D CuPy array or CUDA tensor of
integer, bool or float keys goes through the general path once; that path
sorts through a prepared sort: of the keys alone, or of (keys, positions)
where the flags or NaNs need the order (unique.needs_order). The next call
of the same (array type, dtype, length, flags, equal_nan) finds that sort
again (which checks what a repeated sort checks: its stamps, the array's
layout and device) and, if it is the one this prepared unique was made
with, runs it and then, with the kernels the first call compiled
(unique.unique_kernels), the general path's kernels: the one pass for
integer and bool keys sorted alone (unique.queue_compact), else the tile
counts, scan and write (queue_offsets, queue_write), and the counts
(queue_counts). Those kernels' launches are captured into a CUDA graph
of the call's addresses (input, sorted keys, order, results and the one
allocation of temporaries) on their second sighting, and a call on the
same addresses again launches that graph: one driver call, where issuing
them one by one left the GPU idle between them for the host's time (the
rules of launch/graphs.py, whose PlanGraphs keeps them). Every result is
made n long in the caller's library before the one wait and cut to u
after it (the inverse is n long). Nothing else is read, checked or chosen
again. Any other call, or a sort that is prepared anew (its decision
moved), takes the general path, which prepares the unique again.

Calls sorted alone are prepared from 2 to ONE_PASS_UP_TO keys; calls that
sort (keys, positions) below INVERSE_SORT_MIN keys, where the inverse is
the one scatter and the n-long results (up to three of 8 bytes a key)
stay under 200 MB. Beyond, the GPU's part dwarfs the general path's host
time. Their positions 0, 1, 2, ... are views of one int32 array a device
and library keep (made once, longer when a longer call is prepared):
the (keys, positions) sort reads its values and never writes them.
"""
from __future__ import annotations

import functools

import numpy as np

from ..build.corekernels import iota64
from ..dtypes import INDEX_DTYPE
from ..gpu.arrays import cut_is_view, library_of, torch_to_numpy_dtype
from ..launch.graphs import PlanGraphs
from ..launch.outputs import poison
from . import unique as uniques
from .sort_prepared import adapter_for

#: Prepared uniques kept at most (dropped all together past it, as prepared sorts).
MAX_CALLS = 1024
_calls: dict = {}  # (array type, dtype, shape, flags, equal_nan) -> PreparedUnique
_types: set = set()  # array types some prepared unique was made for
_positions: dict = {}  # (library, device ordinal) -> int32 array 0, 1, 2, ...


class PreparedUnique:
    """One length's and flags' unique: the prepared sort, then unique.cu's kernels."""

    __slots__ = ("sort", "state", "adapter", "job", "kernels", "dtype", "n", "flags",
                 "equal_nan", "positions", "tiles", "count_bytes", "cap", "dtypes", "makers",
                 "parts", "total_at", "graphs")

    def __init__(self, sort, state, adapter, job, kernels, dtype, n: int,
                 flags=(False, False, False), equal_nan: bool = True, positions=None):
        """`sort`: the prepared sort of the keys alone, or of (keys,
        `positions`) where positions (n int32 0, 1, 2, ... of the caller's
        library) are given; `job`: the Job unique's kernels run under
        (rebound for each call); `kernels`: its unique.UniqueKernels."""
        self.sort, self.state, self.adapter = sort, state, adapter
        self.job, self.kernels, self.positions = job, kernels, positions
        self.dtype, self.n = np.dtype(dtype), int(n)
        self.flags, self.equal_nan = tuple(bool(f) for f in flags), bool(equal_nan)
        self.tiles = job.blocks(self.n, uniques.UNIQUE_TILE)
        self.count_bytes = uniques.count_bytes_for(self.n)
        self.cap = uniques.counts_grid_cap(state) if self.flags[2] else 0  # the counts kernel's
        # values, first indices, inverse, counts (int64, NumPy's): each made n long, or None
        self.dtypes = (self.dtype, *(INDEX_DTYPE if f else None for f in self.flags))
        self.makers = tuple(None if d is None else adapter.maker((self.n,), d)
                            for d in self.dtypes)
        # a call's temporaries, one allocation: the runs' starts (counts
        # only), then the one pass's or the count-scan-write's parts
        self.parts = ([("starts", self.n * self.count_bytes)] if self.flags[2] else []) + (
            uniques.compact_parts(self.n) if kernels.compact is not None
            else uniques.offsets_parts(self.n))
        #: Where u lies among them: (part, byte offset in it).
        self.total_at = (("total", 0) if kernels.compact is not None
                         else uniques.offsets_total_at(self.n))
        #: The graphs of the kernels after the sort, by the call's addresses.
        self.graphs = PlanGraphs()

    def __call__(self, a):
        """numpy.unique's result of `a` (an array of the caller's library):
        the values, or the tuple of the values and the flags' results."""
        state = self.state.activate()
        adapter, n = self.adapter, self.n
        if self.positions is None:
            sorted_keys, order = self.sort(a)[0], None
        else:
            sorted_keys, order = self.sort(a, values=self.positions)
        # (both held until the kernels reading them have run: the wait below)
        caller = adapter.stream(a)
        joins = state.joiner.join_caller(caller)
        keys_in = adapter.pointer(a)
        job = self.job.rebound(keys_in, 0)
        try:
            results = [None if make is None else state.allocating(make, a) for make in self.makers]
            at = tuple(0 if r is None else adapter.pointer(r) for r in results)
            for ptr, dtype in zip(at, self.dtypes):
                if dtype is not None:
                    poison(state, ptr, n * dtype.itemsize)
            parts = job.alloc_parts(self.parts)
            buffers = (keys_in, adapter.pointer(sorted_keys),
                       0 if order is None else adapter.pointer(order), *at,
                       parts.get("starts", 0))
            # one graph launch where these addresses (and the temporaries'
            # base) ran before, as a launch plan's replay (launch/graphs.py)
            addresses = (*buffers, parts[self.parts[0][0]])
            if not self.graphs.launch(addresses, job):
                work = functools.partial(self._queue, job, buffers, parts)
                if not (job.graphable and self.graphs.wants(addresses)
                        and self.graphs.capture(addresses, job, work)):
                    work()
            part, offset = self.total_at
            u = state.read_back(parts[part] + offset, self.count_bytes)
            # the inverse stays n long; the rest is cut to u
            results = [r if r is None or i == 2 else self._cut(r, at[i], u, self.dtypes[i])
                       for i, r in enumerate(results)]
        finally:
            job.finish()
            if joins:
                state.joiner.signal((caller,))
        if not any(self.flags):
            return results[0]
        return tuple(r for r in results if r is not None)

    def _queue(self, job, buffers: tuple, parts: dict) -> None:
        """Queue unique.cu's kernels on the job's stream for one call:
        `buffers` (the input keys, sorted keys, order or 0, values, first
        indices, inverse and counts or 0, the runs' starts), `parts` the
        call's temporaries (self.parts). Only stream work: it may be
        captured into the graph of these addresses."""
        kernels, n, equal_nan = self.kernels, self.n, self.equal_nan
        keys_in, sorted_at, order_at, values, index, inverse, counts, starts = buffers
        if kernels.compact is not None:
            total = uniques.queue_compact(job, kernels.compact, sorted_at, n, equal_nan, values,
                                          starts, parts)
        else:
            offsets, first, total = uniques.queue_offsets(job, kernels.tiles, sorted_at, keys_in,
                                                          n, equal_nan, parts)
            uniques.queue_write(job, kernels.write, self.tiles, keys_in, sorted_at, order_at,
                                first, offsets, n, equal_nan, values, index, starts, 0, inverse)
        if counts:
            uniques.queue_counts(job, kernels.counts, self.cap, starts, total, n, n, counts)

    def _cut(self, result, at: int, u: int, dtype):
        """The first u elements of `result` (of `dtype`, at address `at`):
        the array, a view of it, or a copy (gpu.arrays.cut_is_view, as
        Result.finish_first), written on the device's stream."""
        if u == self.n:
            return result
        if cut_is_view(u, self.n, dtype.itemsize):
            return result[:u]
        state = self.state
        head = state.allocating(self.adapter.maker((u,), dtype), result)
        if u:
            state.cuda.memcpy_dtod_async(self.adapter.pointer(head), at, u * dtype.itemsize,
                                         state.stream)
        return head


def unique(prepared, a, return_index=False, return_inverse=False, return_counts=False,
           axis=None, equal_nan=True, stream=None):
    """calls/unique.unique, through a prepared unique where one serves the call."""
    flags = (bool(return_index), bool(return_inverse), bool(return_counts))
    direct = axis is None and stream is None
    if direct:
        call = find(prepared, a, flags, equal_nan)
        if call is not None:
            return call(a)
    result = uniques.unique(prepared, a, return_index, return_inverse, return_counts, axis,
                            equal_nan, stream)
    if direct:
        note(prepared, a, flags, equal_nan)
    return result


def _key(a, flags, equal_nan):
    return type(a), getattr(a, "dtype", None), getattr(a, "shape", None), flags, bool(equal_nan)


def _sort_of(prepared, a, positions):
    """The prepared sort a prepared unique of `a` runs: of the keys alone,
    or of (keys, positions of `positions`' dtype); None where there is none."""
    if positions is None:
        return prepared.find("sort", a, False, False, "auto")
    return prepared.find("pairs", a, False, True, "auto", positions.dtype)


def find(prepared, a, flags=(False, False, False), equal_nan=True):
    """The prepared unique for this call of `a`, or None."""
    call = _calls.get(_key(a, flags, equal_nan)) if type(a) in _types else None
    if call is None or _sort_of(prepared, a, call.positions) is not call.sort:
        return None
    return call


def note(prepared, a, flags=(False, False, False), equal_nan=True) -> None:
    """After the general path served a call of `a` (axis=None, no
    stream=): prepare its length and flags if they can be (see the module
    docstring)."""
    adapter = adapter_for(library_of(a))
    if adapter is None or len(a.shape) != 1:
        return
    dtype = torch_to_numpy_dtype(a.dtype) if adapter.library == "torch" else np.dtype(a.dtype)
    n = int(a.shape[0])
    by_order = uniques.needs_order(flags, dtype.kind == "f", equal_nan)
    up_to = uniques.INVERSE_SORT_MIN - 1 if by_order else uniques.ONE_PASS_UP_TO
    if dtype.kind not in "biuf" or not 2 <= n <= up_to:
        return
    if by_order:
        sort = prepared.find("pairs", a, False, True, "auto", adapter.index_dtype(4))
        positions = None if sort is None else _positions_for(adapter, sort.state, a, n)
    else:
        sort, positions = prepared.find("sort", a, False, False, "auto"), None
    if sort is None:
        return
    job = uniques.unique_job(sort.state, dtype, n)
    kernels = uniques.unique_kernels(job, dtype, n, flags, equal_nan)
    if len(_calls) >= MAX_CALLS:
        _calls.clear()
    _calls[_key(a, flags, equal_nan)] = PreparedUnique(sort, sort.state, adapter, job, kernels,
                                                       dtype, n, flags, equal_nan, positions)
    _types.add(type(a))


def _positions_for(adapter, state, a, n: int):
    """Positions 0 .. n-1 (int32, the caller's library) on the state's
    device: a view of the array this device and library keep, made longer
    (and filled, waited for once) where it is shorter than n."""
    key = (adapter.library, state.ordinal)
    kept = _positions.get(key)
    if kept is None or kept.shape[0] < n:
        kept = state.allocating(adapter.maker((n,), np.dtype(np.int32)), a)
        iota64(state, adapter.pointer(kept), n, owner="unique", index_bytes=4)
        state.stream.synchronize()  # ready before any stream's sort reads it
        _positions[key] = kept
    return kept[:n]
