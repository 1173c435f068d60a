"""One worker's part of a collective sort: its input chunks in, its slice of
the global order out, talking to the other workers through a communicator
(comm.py) instead of through Dask tasks.

Every worker (logical rank r of W; `members` maps logical ranks to the
communicator's):

1. local sort: concatenates its chunks in chunk order and sorts them with
   cudasortkit (argsort and sort_by_key: sort_by_key with the keys' int64
   global indices as values, stable, so equal keys stay in index order);
2. splitters: output chunk j goes to the rank whose local keys' range (in
   rank order) holds the chunk's midpoint, so rank r owns the global ranks
   [starts[r], starts[r+1]) (worker_starts); for each inner start t every
   rank finds exactly how many of its elements come before global rank t
   (exact_cuts: a batched (K + 1)-ary search over the keys' ordered bits with
   counts summed over the ranks, then among the keys equal to the t-th one either
   rank order (plain sort: ties may split anyhow) or a second search over
   their global indices (argsort, sort_by_key: ties go by index));
3. exchange: one alltoallv per array (keys, global indices, values); the
   runs of interleaved chunks (below) arrive as one array each, the
   received buffer itself where it can be, not a copy;
4. merge: the W received sorted runs: plain sort merges them pairwise
   (cudasortkit.merge); argsort and sort_by_key merge them pairwise
   stably (merge_by_key) when the ranks' chunks are contiguous in rank
   order (every rank's indices below the next rank's), else
   (merge_interleaved) merge them by (key, global index) packed in one
   uint64 where that loses nothing the result needs and fits (the rank's
   key range above its smallest key, and the global indices: packing),
   else order them by (key, global index) with cudasortkit.lexsort.

Step 2 is cuts.py's, step 4's merges runs.py's. Nothing here knows Dask;
the parts are tested against NumPy directly (tests/test_dask_collective_cpu.py).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from .. import api as csk
from ..gpu.device import get_device
from . import chunks
from .comm import CollectiveAborted, offsets
from .cuts import exact_cuts, worker_starts
from .runs import merge_interleaved, merge_runs

OPS = ("sort", "argsort", "sort_by_key")

#: Keys whose global indices sort_by_key's local sort computes at a time
#: (the searches' temporaries: 8 bytes a key, three times).
INDEX_SLICE = 1 << 26

#: A plain sort of integer keys (4 bytes at most) whose values all lie in a
#: range narrower than this moves no keys: each rank counts its keys per
#: value, the counts are summed over the ranks, and each rank writes its part
#: of the output from them (one fill per value it holds).
NARROW = 256


@dataclass(frozen=True)
class Spec:
    """What every rank of one collective sort knows before it starts."""
    op: str                 # one of OPS
    descending: bool
    dtype: np.dtype         # the keys'
    out_bounds: tuple       # Q + 1 global ranks: output chunk j is [out_bounds[j], out_bounds[j+1])
    declared: tuple         # per logical rank: the keys its chunks declare
    members: tuple          # communicator rank of each logical rank
    contiguous: bool        # every logical rank's chunks before the next rank's, in chunk order
    value_dtype: np.dtype | None = None   # sort_by_key's values'
    module: str = "numpy"   # the chunks' array module, "numpy" or "cupy" (ranks without chunks too)
    timings: bool = False   # time the phases (device synchronised at each boundary)


@dataclass
class Local:
    """One rank's input: its nonempty chunks in chunk order, their global
    start indices, their chunk numbers and declared lengths (for errors)."""
    keys: list
    starts: list
    index: list
    sizes: list
    values: list | None = None
    times: dict = field(default_factory=dict)


# ------------------------------------------------------------ the whole sort
class Timer:
    def __init__(self, times: dict, on: bool, xp):
        self.times, self.on, self.xp = times, on, xp
        self.t = time.perf_counter() if on else 0.0

    def __call__(self, phase: str) -> None:
        if self.on:
            synchronize(self.xp)
            now = time.perf_counter()
            self.times[phase] = now - self.t
            self.t = now


def synchronize(xp) -> None:
    if xp is not np:
        xp.cuda.get_current_stream().synchronize()


def checkpoint(comm, error, *numbers) -> np.ndarray:
    """Every rank's numbers, once all ranks got here: a rank that failed
    raises its error, the others CollectiveAborted, so none waits forever."""
    rows = comm.allgather(np.asarray([error is None, *numbers], np.int64))
    if error is not None:
        raise error
    if not rows[:, 0].all():
        raise CollectiveAborted("cudasortkit.dask: another worker of this collective sort failed "
                                "(its error is the sort's)")
    return rows[:, 1:]


def local_sort(spec: Spec, local: Local):
    """(sorted keys, their global indices or None, values in that order or None)."""
    for k, i, n in zip(local.keys, local.index, local.sizes):
        chunks.check_chunk(k, i, n, spec.dtype)
    if local.values is not None:
        for v, i, n in zip(local.values, local.index, local.sizes):
            if len(v) != n:
                raise ValueError(f"cudasortkit.dask: values chunk {i} has {len(v)} elements, not {n}")
    if not local.keys:
        return None, None, None
    xp = chunks.array_module(local.keys[0])
    keys = local.keys[0] if len(local.keys) == 1 else xp.concatenate(local.keys)
    if spec.op == "sort":
        return csk.sort(keys, descending=spec.descending), None, None
    if spec.op == "argsort":
        # Sorted with their global indices (12-byte pairs): one sort, no
        # index to rebuild after it (positions were slower on 2 x H100).
        index = xp.concatenate([xp.arange(s, s + len(k), dtype=np.int64)
                                for s, k in zip(local.starts, local.keys)])
        keys, index = csk.sort_by_key(keys, index, descending=spec.descending)
        return keys, index, None
    # sort_by_key: the keys sorted with their positions in the concatenation
    # (int32 where they fit: 8-byte pairs, not 12), stably, so equal keys
    # keep index order; the values are gathered by position once, and a
    # position p of chunk c has global index p + starts[c] - first[c].
    n = len(keys)
    pos = xp.arange(n, dtype=np.int32 if n < 1 << 31 else np.int64)
    keys, pos = csk.sort_by_key(keys, pos, descending=spec.descending)
    # Next: the global indices (8 bytes a key) and the values' gather.
    make_room(xp, n * (8 + 8 + np.dtype(spec.value_dtype).itemsize))
    first = offsets([len(k) for k in local.keys])[:-1]
    shift = np.asarray(local.starts, np.int64) - first  # per chunk: global - local
    index = pos.astype(np.int64)
    if (shift == shift[0]).all():  # one chunk, or chunks of one global run
        index += int(shift[0])
    else:  # a slice at a time: the search's temporaries stay small
        first, shift = xp.asarray(first), xp.asarray(shift)
        for at in range(0, n, INDEX_SLICE):
            part = pos[at:at + INDEX_SLICE]
            index[at:at + INDEX_SLICE] += shift[xp.searchsorted(first, part, side="right") - 1]
    values = local.values[0] if len(local.values) == 1 else xp.concatenate(local.values)
    return keys, index, values[pos]


def make_room(xp, need: int) -> None:
    """Before a step that allocates about `need` bytes from the array
    library's pool: where the driver has less free, the blocks
    cudasortkit's pool keeps from a sort (and the libraries' unused ones) go
    back to it first."""
    if xp is np:
        return
    if xp.cuda.runtime.memGetInfo()[0] < need:
        get_device(xp.cuda.Device().id).free_unused()


class Ordered:
    """The communicator seen in logical rank order (spec.members)."""

    def __init__(self, comm, members):
        self.comm, self.members = comm, list(members)
        self.rank, self.size = self.members.index(comm.rank), len(self.members)

    def allgather(self, a):
        return self.comm.allgather(a)[self.members]

    def allreduce_sum(self, a):
        return self.comm.allreduce_sum(a)   # a sum: the same in any rank order

    def alltoallv(self, buf, cuts, recv_counts, joined: bool = False):
        """Logical rank s gets buf[cuts[s]:cuts[s+1]]; the runs received, in
        logical order: a list, or (joined) one array of them, which is the
        received buffer itself (no copy) where logical order is the
        communicator's."""
        send_starts = np.zeros(self.size, np.int64)
        send_counts = np.zeros(self.size, np.int64)
        recv = np.zeros(self.size, np.int64)
        for logical, member in enumerate(self.members):
            send_starts[member], send_counts[member] = cuts[logical], cuts[logical + 1] - cuts[logical]
            recv[member] = recv_counts[logical]
        out = self.comm.alltoallv(buf, send_starts, send_counts, recv)
        if joined and self.members == list(range(self.size)):
            return out
        at = offsets(recv)
        runs = [out[at[m]:at[m + 1]] for m in self.members]
        return chunks.array_module(out).concatenate(runs) if joined else runs


def from_counts(comm, spec: Spec, keys, lo: int, hi: int, begin: int, end: int, xp):
    """This rank's output, global ranks [begin, end), written from how many
    keys of each value in [lo, hi] all ranks hold (a narrow range: no key
    moves between ranks, only NARROW counts)."""
    ordered = np.arange(lo, hi + 1)[::-1 if spec.descending else 1].astype(spec.dtype)   # the requested order
    probe = chunks.ascending(xp.asarray(ordered), spec.descending)
    asc = chunks.ascending(keys, spec.descending)
    first = (chunks.to_host(xp.searchsorted(asc, probe, side="left")).astype(np.int64) if len(keys)
             else np.zeros(len(ordered), np.int64))
    mine = np.diff(np.append(first, len(keys)))
    at = offsets(comm.allreduce_sum(mine))     # value i's keys are global ranks [at[i], at[i+1])
    out = xp.empty(end - begin, spec.dtype)
    for i in np.flatnonzero((at[1:] > begin) & (at[:-1] < end)):
        out[max(at[i], begin) - begin:min(at[i + 1], end) - begin] = ordered[i]
    return out


def sort_on_rank(comm, spec: Spec, local: Local):
    """This rank's (keys, values or None) of global ranks [starts[r],
    starts[r+1]) (worker_starts), in the requested order."""
    comm = Ordered(comm, spec.members)
    xp = np if spec.module == "numpy" else __import__(spec.module)
    timer = Timer(local.times, spec.timings, xp)
    error, sorted_ = None, (None, None, None)
    try:
        sorted_ = local_sort(spec, local)
    except Exception as e:   # reported to every rank at the checkpoint
        error = e
    keys, index, values = sorted_
    sorted_ = None               # each array freed once sent (rebound below)
    countable = spec.op == "sort" and spec.dtype.kind in "biu" and spec.dtype.itemsize <= 4
    ends = (1, 0)                # (smallest, largest) key of this rank; none: an empty range
    if error is None and countable and keys is not None and len(keys):
        ends = tuple(int(v) for v in chunks.to_host(keys[[0, -1]]))[::-1 if spec.descending else 1]
    rows = checkpoint(comm, error, sum(local.sizes), *ends)
    counts = rows[:, 0]
    if keys is None:             # a rank without chunks still takes part
        keys = xp.empty(0, spec.dtype)
        index = None if spec.op == "sort" else xp.empty(0, np.int64)
        values = None if spec.value_dtype is None else xp.empty(0, spec.value_dtype)
    # The exchange and the merge: about three times the sorted arrays.
    make_room(xp, 3 * sum(a.nbytes for a in (keys, index, values) if a is not None))
    timer("local sort")

    total = int(counts.sum())
    starts, _ = worker_starts(counts, spec.out_bounds)
    held = rows[:, 1] <= rows[:, 2]
    if countable and held.any() and rows[held, 2].max() - rows[held, 1].min() < NARROW:
        out = from_counts(comm, spec, keys, int(rows[held, 1].min()), int(rows[held, 2].max()),
                          int(starts[comm.rank]), int(starts[comm.rank + 1]), xp)
        timer("counts and fill")
        return out, None
    stable = spec.op != "sort"
    asc = chunks.ascending(keys, spec.descending)
    inner = exact_cuts(comm, asc, index, starts[1:-1], total, stable)
    del asc
    cuts = np.concatenate([[0], inner, [len(keys)]]).astype(np.int64)
    sent = np.diff(cuts)
    recv = comm.allgather(sent)[:, comm.rank]
    timer("splitters")

    # Runs from interleaved chunks are ordered by (key, global index)
    # together (merge_interleaved): received joined, the buffer itself, so
    # that no concatenated copy shares the memory with their ordering.
    joined = spec.op != "sort" and not spec.contiguous

    def exchange(a):
        return comm.alltoallv(xp.ascontiguousarray(a), cuts, recv, joined)

    keys = exchange(keys)
    if spec.op == "argsort":
        values, index = exchange(index), None
    elif spec.op == "sort_by_key":
        values = exchange(values)
        index = None if spec.contiguous else exchange(index)
    timer("exchange")

    if spec.op == "sort":
        out = merge_runs([(k, None) for k in keys], spec.descending)
    elif spec.contiguous:
        out = merge_runs(list(zip(keys, values)), spec.descending)
    else:
        received = {"keys": keys, "index": index, "values": values}
        keys = index = values = None
        out = merge_interleaved(spec, received, offsets(recv), total, xp)
    timer("merge")
    ended = len(out[1] if out[0] is None else out[0])
    if ended != starts[comm.rank + 1] - starts[comm.rank]:
        raise RuntimeError(f"cudasortkit.dask: rank {comm.rank} ended with {ended} keys, not the "
                           f"{starts[comm.rank + 1] - starts[comm.rank]} of its output chunks; please report this")
    return out
