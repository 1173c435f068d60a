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

Nothing here knows Dask; collective_cuts and the search are tested against
NumPy directly (tests/test_dask_collective_cpu.py).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from .. import api as csk
from ..calls.merging import merge, merge_by_key
from ..gpu.device import get_device
from . import chunks
from .comm import CollectiveAborted, offsets

#: Candidates per target and round of the search: each round narrows every
#: target's range 256-fold, so 4-byte keys take 4 rounds and 8-byte keys 8
#: (a round costs one searchsorted of K keys per target and one allreduce of
#: K counts per target: latency, not bandwidth).
K = 255

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


# ------------------------------------------------------------ output ranges
def worker_starts(counts, out_bounds) -> tuple:
    """(starts, first): logical rank r owns output chunks first[r] ..
    first[r+1] - 1, which are the global ranks [starts[r], starts[r+1]).
    Chunk j goes to the rank whose keys (counts[r] of them, ranks in order)
    hold its midpoint, so each rank receives about as many keys as it holds."""
    c = offsets(counts)
    b = np.asarray(out_bounds, np.int64)
    twice_mid = b[:-1] + b[1:]
    owner = np.minimum(np.searchsorted(2 * c[1:], twice_mid, side="right"), len(counts) - 1)
    first = np.searchsorted(owner, np.arange(len(counts) + 1), side="left")
    return b[first], first


# ------------------------------------------------------- the ordered bits
def top(dtype) -> int:
    """The largest ordered value of `dtype`'s keys (bool: 1)."""
    dt = np.dtype(dtype)
    return 1 if dt.kind == "b" else (1 << (8 * dt.itemsize)) - 1


def decode(u, dtype) -> np.ndarray:
    """Keys of `dtype` for ordered values u (ints in [0, top]), nondecreasing
    in u in NumPy's ascending order: unsigned as is, signed with the sign bit
    flipped, floats IEEE-ordered (negatives' bits inverted) with -inf below
    the negative NaN patterns and NaN (last, as NumPy sorts it) above +inf."""
    dt = np.dtype(dtype)
    u = np.asarray([int(v) for v in u], dtype=np.uint64)
    if dt.kind == "b":
        return u.astype(bool)
    if dt.kind == "u":
        return u.astype(dt)
    bits = 8 * dt.itemsize
    uint = np.dtype(f"u{dt.itemsize}")
    sign = np.uint64(1 << (bits - 1))
    if dt.kind == "i":
        return (u ^ sign).astype(uint).view(dt)
    mask = np.uint64((1 << bits) - 1)
    negative = u < sign
    keys = np.where(negative, ~u & mask, u & ~sign).astype(uint).view(dt)
    nan = np.isnan(keys)
    keys[nan & negative] = -np.inf
    keys[nan & ~negative] = np.nan
    return keys


def smallest_above(comm, local_counts, targets, lo, hi) -> list:
    """For every target t_i the smallest u in [lo_i, hi_i] with F_i(u) > t_i,
    where F_i(u) is the sum over ranks of local_counts(i, u), nondecreasing in
    u, and F_i(hi_i) > t_i. All ranks call it alike (they see the same global
    counts, so they take the same rounds). local_counts(active, candidates)
    returns an int64 array of shape (len(active), K) for candidates[row]."""
    lo, hi = [int(v) for v in lo], [int(v) for v in hi]
    while True:
        active = [i for i in range(len(targets)) if lo[i] < hi[i]]
        if not active:
            return lo
        cand = [[lo[i] + (hi[i] - lo[i]) * c // (K + 1) for c in range(1, K + 1)] for i in active]
        # the global counts: a sum, not every rank's counts (W x 255 a
        # boundary, where an allgather would move W times that to each rank)
        total = comm.allreduce_sum(np.asarray(local_counts(active, cand), np.int64))
        for row, i in enumerate(active):
            above = np.flatnonzero(total[row] > targets[i])
            if len(above):
                c = int(above[0])
                hi[i] = cand[row][c]
                if c:
                    lo[i] = cand[row][c - 1] + 1
            else:
                lo[i] = cand[row][-1] + 1


def exact_cuts(comm, asc, index, targets, total: int, stable: bool) -> np.ndarray:
    """For every global rank t in `targets`: how many of this rank's sorted
    elements come before it, so that the ranks' counts add up to t and the
    elements before the cuts are the first t of the global order.

    asc: this rank's sorted keys in an ascending order (chunks.ascending of
    the requested one); index: their global indices (stable only: sorted
    within equal keys). The order is (key, rank) for a plain sort and
    (key, global index) when `stable`."""
    xp = chunks.array_module(asc)
    n = len(asc)
    targets = [int(t) for t in targets]
    inner = [i for i, t in enumerate(targets) if 0 < t < total]
    cuts = np.array([0 if t <= 0 else n for t in targets], np.int64)
    if not inner:
        return cuts
    t_inner = [targets[i] for i in inner]

    def search(values, side):
        if not n:   # a rank without keys: no device call on an empty array
            return np.zeros(len(values), np.int64)
        return chunks.to_host(xp.searchsorted(asc, xp.asarray(values), side=side)).astype(np.int64)

    def before(run, g):
        """Elements of `run` (indices, sorted) below each g."""
        if not len(run):
            return np.zeros(len(g), np.int64)
        return chunks.to_host(xp.searchsorted(run, xp.asarray(np.asarray(g, np.int64)), side="left"))

    def key_counts(active, cand):
        return search(decode([u for row in cand for u in row], asc.dtype), "right").reshape(len(active), K)

    u = smallest_above(comm, key_counts, t_inner, [0] * len(inner), [top(asc.dtype)] * len(inner))
    kth = decode(u, asc.dtype)                       # the key of rank t, per target
    left, right = search(kth, "left"), search(kth, "right")
    every = comm.allgather(np.stack([left, right - left]))      # (ranks, 2, targets)
    need = np.asarray(t_inner, np.int64) - every[:, 0].sum(axis=0)  # of the equal keys, before t
    if not stable:
        earlier = np.cumsum(every[:, 1], axis=0) - every[:, 1]     # equal keys of lower ranks
        take = np.clip(need - earlier[comm.rank], 0, right - left)
    else:
        runs = [index[int(a):int(b)] for a, b in zip(left, right)]  # sorted by index

        def index_counts(active, cand):
            return np.stack([before(runs[i], cand[row]) for row, i in enumerate(active)])

        # the smallest g with need elements of index < g among the equal keys
        g = smallest_above(comm, index_counts, [int(v) - 1 for v in need], [0] * len(inner),
                           [total] * len(inner))
        take = np.array([int(before(runs[i], [g[i]])[0]) for i in range(len(inner))], np.int64)
    cuts[inner] = left + take
    return cuts


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


def merge_runs(runs: list, descending: bool):
    """Merge sorted runs (keys, values or None) pairwise, earlier runs first
    on equal keys (with values: merge_by_key, stable). The list is consumed:
    each level of merges replaces its runs, so that their memory goes back
    (given no other reference) while the next level merges."""
    runs[:] = [r for r in runs if len(r[0])] or runs[:1]
    while len(runs) > 1:
        runs[:] = [_merge_pair(*runs[i:i + 2], descending) for i in range(0, len(runs) - 1, 2)] \
            + runs[len(runs) - len(runs) % 2:]
    return runs.pop()


def _merge_pair(a, b, descending: bool):
    if a[1] is None:
        return merge(a[0], b[0], descending=descending), None
    return merge_by_key(a[0], a[1], b[0], b[1], descending=descending)


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


def packable(spec: Spec) -> bool:
    """Whether (key, global index) pairs may be packed into one uint64 at
    all (merge_interleaved: where the rank's key range and the indices fit):
    keys and values come back exactly, so float keys only for argsort
    (their -0.0 and NaN payloads are folded together, and argsort returns
    no keys)."""
    kind = spec.dtype.kind
    return kind in "biu" or (kind == "f" and spec.op == "argsort")


def ordered_bits(keys, descending: bool, xp):
    """uint64 words ordering like the keys in the requested order: unsigned
    keys as they are, signed with the sign bit flipped, floats by their IEEE
    bits (negatives inverted) after -0.0 -> +0.0 and every NaN -> one NaN
    (last, as NumPy)."""
    k = chunks.ascending(keys, descending)
    bits = 8 * k.dtype.itemsize
    if k.dtype.kind == "f":
        k = xp.where(xp.isnan(k), k.dtype.type(np.nan), k) + k.dtype.type(0)   # x + 0: -0.0 -> +0.0
        u = k.view(f"u{k.dtype.itemsize}").astype(np.uint64)
        top = np.uint64(1 << (bits - 1))
        return xp.where(u >= top, ~u & np.uint64((1 << bits) - 1), u | top)
    if k.dtype.kind == "i":
        unsigned = np.dtype(f"u{k.dtype.itemsize}")
        return (k.view(unsigned) ^ unsigned.type(1 << (bits - 1))).astype(np.uint64)
    return k.astype(np.uint64)


def packing(spec: Spec, keys, at, total: int, xp):
    """(base, shift) of words ((ordered bits - base) << shift) | global index
    for this rank's runs (joined `keys`, run r at [at[r], at[r+1])), each
    sorted in the requested order, or None where they do not fit 64 bits.
    base: the smallest ordered key the rank holds (its runs' first keys);
    shift: the bits of the largest global index."""
    if not packable(spec):
        return None
    ends = [e for a, b in zip(at[:-1], at[1:]) if b > a for e in (int(a), int(b) - 1)]
    shift = max(1, (int(total) - 1).bit_length())
    if not ends:
        return 0, shift
    u = chunks.to_host(ordered_bits(keys[xp.asarray(np.asarray(ends, np.int64))], spec.descending, xp))
    base, width = int(u.min()), int(u.max()) - int(u.min())
    return (base, shift) if width.bit_length() + shift <= 64 else None


def merge_interleaved(spec: Spec, received: dict, at, total: int, xp):
    """Runs from ranks whose chunks interleave, each sorted by (key, global
    index), in the order of (key, global index): merged as packed words
    where they fit (packing), else ordered by cudasortkit.lexsort. argsort
    -> (None, indices); sort_by_key -> (keys, values). received: the joined
    runs ("keys", "index": their global indices, or None for argsort, whose
    "values" are its indices, "values"; run r at [at[r], at[r+1])), taken
    out of the dict so that each array's memory goes back once used."""
    keys, index, values = received.pop("keys"), received.pop("index"), received.pop("values")
    if index is None:
        index = values
    pack = packing(spec, keys, at, total, xp)
    if pack is None:
        order = csk.lexsort((index, chunks.ascending(keys, spec.descending)))
        return (None, index[order]) if spec.op == "argsort" else (keys[order], values[order])
    base, shift = pack

    def runs(a):
        return [a[int(b):int(e)] for b, e in zip(at[:-1], at[1:])]

    words = ordered_bits(keys, spec.descending, xp)   # in place from here: one uint64 a key
    keys = None
    words -= np.uint64(base)
    words <<= np.uint64(shift)
    words |= index.view(np.uint64)                     # global indices are never negative
    index = None
    low = np.uint64((1 << shift) - 1)
    if spec.op == "argsort":
        pairs, words, values = [(w, None) for w in runs(words)], None, None
        merged, _ = merge_runs(pairs, False)
        return None, (merged & low).astype(np.int64)
    pairs, words, values = list(zip(runs(words), runs(values))), None, None
    merged, vals = merge_runs(pairs, False)
    u = ((merged >> np.uint64(shift)) + np.uint64(base)).astype(f"u{spec.dtype.itemsize}")
    merged = None
    if spec.dtype.kind == "b":
        k = u.astype(bool)
    elif spec.dtype.kind == "i":
        bits = 8 * spec.dtype.itemsize
        k = (u ^ u.dtype.type(1 << (bits - 1))).view(spec.dtype)
    else:
        k = u.view(spec.dtype)
    return chunks.ascending(k, spec.descending), vals


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
