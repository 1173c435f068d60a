"""One worker's part of a collective sort: its input chunks in, its slice of
the global order out, talking to the other workers through a communicator
(comm.py) instead of through Dask tasks.

Every worker (logical rank r of W; `members` maps logical ranks to the
communicator's), as the options (options.py) say:

1. local sort: its chunks as runs (layout.py: each group of chunks adjacent
   in the global order one run; or, runs=joined and a plain sort, all of
   them as one), each sorted by cudasortkit straight into the rank's send
   arena (buffers.py) one after another: keys alone (sort); keys with
   their positions in the run, 4-byte while they fit (argsort: the global
   index is made at the receiver, start of the run + position); keys with
   their positions, then the values gathered once by position
   (sort_by_key). Every local sort is stable, so equal keys keep their
   positions' order.
2. splitters: output chunk j goes to the rank whose keys (ranks in order)
   hold the chunk's midpoint, so rank r owns the global ranks [starts[r],
   starts[r+1]) (cuts.worker_starts); for each inner start every rank
   finds exactly how many elements of each of its runs come before it
   (cuts.exact_cuts: rounds of candidate words counted on the device);
   every rank's runs and cuts are then known to all (two allgathers), and
   so is every piece (layout.pieces).
3. exchange: every piece to its receiver (exchange.py: NCCL send/recv, or
   CUDA IPC and copy engines), laid out in the global run order; a rank's
   pieces for itself are read where they are (no copy) when the runs are
   merged pairwise.
4. merge: the received runs, in global index order, merged pairwise with
   ties to the earlier run (runs.merge_runs: so equal keys keep global index
   order), or sorted stably as one array where there are many of them.
   argsort's indices are made first, run start + position, as int64.

Integer keys of a narrow range (plain sort) move nowhere: from_counts.

Nothing here knows Dask; the parts are tested against NumPy directly
(tests/test_dask_collective_cpu.py), every step with threads for ranks.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from .. import api as csk
from ..gpu.device import get_device
from . import chunks, counting, layout, options
from .buffers import Arena, aligned, receive_buffers
from .comm import CollectiveAborted, offsets
from .cuts import Run, exact_cuts, worker_starts
from .exchange import exchange
from .runs import merge_runs

OPS = ("sort", "argsort", "sort_by_key")

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
    """Seconds per phase into `times` (when on; the device synchronised at
    each mark): __call__(phase) ends a phase, sub("phase: part") a part of
    the current one (parts of one name add up)."""

    def __init__(self, times: dict, on: bool, xp):
        self.times, self.on, self.xp = times, on, xp
        self.t = self.phase = time.perf_counter() if on else 0.0

    def sub(self, name: str) -> None:
        if self.on:
            synchronize(self.xp)
            now = time.perf_counter()
            self.times[name] = self.times.get(name, 0.0) + now - self.t
            self.t = now

    def __call__(self, phase: str) -> None:
        if self.on:
            synchronize(self.xp)
            now = time.perf_counter()
            self.times[phase] = now - self.phase
            self.t = self.phase = now


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


def make_room(xp, need: int, arena: Arena | None = None) -> bool:
    """Before a step that allocates about `need` bytes from the array
    library's pool: where the driver has less free, `arena` (one no peer
    keeps mapped) and the blocks cudasortkit's pool keeps from a sort (and
    the libraries' unused ones) go back to it first. Whether they did."""
    if xp is np:
        return False
    if xp.cuda.runtime.memGetInfo()[0] >= need:
        return False
    if arena is not None:
        arena.release()
    get_device(xp.cuda.Device().id).free_unused()
    return True


class Ordered:
    """The communicator seen in logical rank order (spec.members)."""

    def __init__(self, comm, members):
        self.comm, self.members = comm, list(members)
        self.rank, self.size = self.members.index(comm.rank), len(self.members)
        self.arenas = comm.arenas
        self.ipc_ready = bool(getattr(comm, "ipc_ready", False))

    def allgather(self, a):
        return self.comm.allgather(a)[self.members]

    def allreduce_sum(self, a):
        return self.comm.allreduce_sum(a)   # a sum: the same in any rank order

    def send_recv(self, sends, recvs):
        self.comm.send_recv([(self.members[p], a) for p, a in sends], [(self.members[p], a) for p, a in recvs])

    def share(self, arrays, keep: bool = False) -> list:
        shared = self.comm.share(arrays, keep)
        return [shared[m] for m in self.members]

    def unshare(self, keep: bool = False) -> None:
        self.comm.unshare(keep)

    def barrier(self) -> None:
        self.comm.barrier()

    def copy_streams(self, count: int) -> list:
        return self.comm.copy_streams(count)

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


# ------------------------------------------------------------- local sort
def position_dtype(spec: Spec) -> np.dtype:
    """Positions within a run: uint32 while every rank's keys fit (the
    exact cuts clamp queries to 2^32 - 1, above every position), else int64."""
    return np.dtype(np.uint32 if max(spec.declared, default=0) < (1 << 32) - 1 else np.int64)


def value_dtype(spec: Spec):
    """What the send arrays carry besides keys: positions (argsort), the
    values (sort_by_key), nothing (sort)."""
    return {"sort": None, "argsort": position_dtype(spec), "sort_by_key": spec.value_dtype}[spec.op]


@dataclass
class Sorted:
    """A rank's sorted runs (cuts.Run, views of its send arena) and its send
    arrays (name -> the arena's view holding every run one after another)."""
    runs: list
    send: dict
    arena: Arena


def check_input(spec: Spec, local: Local) -> None:
    for k, i, n in zip(local.keys, local.index, local.sizes):
        chunks.check_chunk(k, i, n, spec.dtype)
    if local.values is not None:
        for v, i, n in zip(local.values, local.index, local.sizes):
            if len(v) != n:
                raise ValueError(f"cudasortkit.dask: values chunk {i} has {len(v)} elements, not {n}")


def local_sort(spec: Spec, local: Local, opts, arenas: dict, xp, timer) -> Sorted:
    """Step 1: this rank's runs, each sorted (stably) into its send arena."""
    groups = layout.group_chunks(local.starts, local.sizes, opts.joined() and spec.op == "sort")
    n = int(sum(local.sizes))
    vdtype = value_dtype(spec)
    kbytes = aligned(n * spec.dtype.itemsize)
    arena = arenas.setdefault("send", Arena()).take(kbytes + (n * vdtype.itemsize if vdtype else 0), xp,
                                                    keep=bool(opts.keep))
    keys_all = arena.view(0, n, spec.dtype)
    values_all = arena.view(kbytes, n, vdtype) if vdtype is not None else None
    pdtype = position_dtype(spec)
    runs, at = [], 0
    for group in groups:
        m = int(sum(local.sizes[i] for i in group))
        src = local.keys[group[0]] if len(group) == 1 else joined([local.keys[i] for i in group], arenas, xp)
        timer.sub("local sort: concatenate")
        out = keys_all[at:at + m]
        pos = None
        if spec.op == "sort":
            csk.sort(src, descending=spec.descending, out=out)
        else:
            pos = values_all[at:at + m] if spec.op == "argsort" else xp.empty(m, pdtype)
            csk.sort_by_key(src, xp.arange(m, dtype=pdtype), descending=spec.descending, out=out, values_out=pos)
        timer.sub("local sort: sort")
        if spec.op == "sort_by_key":
            values = local.values[group[0]] if len(group) == 1 else xp.concatenate([local.values[i] for i in group])
            xp.take(values, pos, out=values_all[at:at + m])
            timer.sub("local sort: gather values")
        runs.append(Run(out, pos, int(local.starts[group[0]])))
        at += m
    send = {"keys": keys_all}
    if values_all is not None:
        send["values"] = values_all
    return Sorted(runs, send, arena)


def joined(arrays: list, arenas: dict, xp):
    """The arrays one after another in the rank's "join" arena: kept between
    sorts like the send arena (never shared with peers), so joining a rank's
    chunks for one local sort allocates nothing and copies at memory speed."""
    n, dtype = sum(len(a) for a in arrays), arrays[0].dtype
    out = arenas.setdefault("join", Arena()).take(n * dtype.itemsize, xp).view(0, n, dtype)
    at = 0
    for a in arrays:
        out[at:at + len(a)] = a
        at += len(a)
    return out


def key_ends(runs, xp) -> tuple:
    """(smallest, largest) key value of the rank's sorted key arrays (one host read)."""
    held = [k[[0, -1]] for k in runs if len(k)]
    if not held:
        return 1, 0      # an empty range
    ends = [int(v) for v in chunks.to_host(xp.concatenate(held))]
    return min(ends), max(ends)


# ------------------------------------------------------------- narrow keys
def sorted_value_counts(runs: list, spec: Spec, lo: int, hi: int, xp) -> np.ndarray:
    """Per value of [lo, hi] in the requested order, how many keys of the
    sorted `runs` hold it (host int64)."""
    ordered = np.arange(lo, hi + 1)[::-1 if spec.descending else 1].astype(spec.dtype)
    words = xp.asarray(counting.encode(ordered, spec.descending)[None, :])
    first = np.zeros(len(ordered), np.int64)     # per value: keys before it
    for keys in runs:
        if len(keys):
            full = xp.full(1, len(keys), np.int64)
            first += chunks.to_host(counting.count_words(keys, words, xp.zeros(1, np.int64), full,
                                                         spec.descending, 0))[0]
    return np.diff(np.append(first, sum(len(k) for k in runs)))


def value_counts(keys: list, spec: Spec, lo: int, hi: int, xp) -> np.ndarray:
    """sorted_value_counts of unsorted integer key arrays (a bincount each)."""
    held = np.zeros(hi - lo + 1, np.int64)
    for k in keys:
        if len(k):
            held += chunks.to_host(xp.bincount((k.astype(np.int64) - lo), minlength=hi - lo + 1))
    return held[::-1].copy() if spec.descending else held


def key_range(keys: list, xp) -> tuple:
    """(smallest, largest) value of unsorted integer key arrays (one host read)."""
    held = [xp.stack([k.min(), k.max()]).astype(np.int64) for k in keys if len(k)]
    if not held:
        return 1, 0
    ends = chunks.to_host(xp.stack(held))
    return int(ends[:, 0].min()), int(ends[:, 1].max())


def from_counts(comm, spec: Spec, held: np.ndarray, lo: int, hi: int, begin: int, end: int, xp):
    """This rank's output, global ranks [begin, end), written from how many
    keys of each value in [lo, hi] all ranks hold (a narrow range: no key
    moves between ranks, only NARROW counts). held: this rank's counts per
    value, in the requested order."""
    ordered = np.arange(lo, hi + 1)[::-1 if spec.descending else 1].astype(spec.dtype)   # the requested order
    at = offsets(comm.allreduce_sum(np.asarray(held, np.int64)))   # value i's keys are global ranks [at[i], at[i+1])
    out = xp.empty(end - begin, spec.dtype)
    for i in np.flatnonzero((at[1:] > begin) & (at[:-1] < end)):
        out[max(at[i], begin) - begin:min(at[i + 1], end) - begin] = ordered[i]
    return out


# ------------------------------------------------------------------ steps
def transport_of(opts, comm) -> str:
    if opts.exchange != "auto":
        return opts.exchange
    return "ipc" if comm.ipc_ready else "nccl"


def sort_on_rank(comm, spec: Spec, local: Local):
    """This rank's (keys, values or None) of global ranks [starts[r],
    starts[r+1]) (worker_starts), in the requested order."""
    comm = Ordered(comm, spec.members)
    xp = np if spec.module == "numpy" else __import__(spec.module)
    timer = Timer(local.times, spec.timings, xp)
    error, opts, mine = None, options.Options(), None
    countable = spec.op == "sort" and spec.dtype.kind in "biu" and spec.dtype.itemsize <= 4
    ends = (1, 0)                # (smallest, largest) key of this rank; none: an empty range
    try:
        opts = options.current()
        check_input(spec, local)
        if not opts.partition():
            mine = local_sort(spec, local, opts, comm.arenas, xp, timer)
        if countable:
            ends = key_ends([r.keys for r in mine.runs], xp) if mine else key_range(local.keys, xp)
    except Exception as e:   # reported to every rank at the checkpoint
        error = e
    runs = mine.runs if mine is not None else []
    rows = checkpoint(comm, error, sum(local.sizes), *ends, len(runs) if mine else len(local.keys),
                      opts.fingerprint)
    if len(set(rows[:, 4].tolist())) > 1:
        raise ValueError("cudasortkit.dask: the workers of this collective sort were given different "
                         "CUDASORTKIT_DASK_COLLECTIVE settings; set the same on every worker")
    counts = rows[:, 0]
    timer.sub("local sort: checkpoint" if mine else "checkpoint")
    timer("local sort" if mine else "checkpoint")

    total = int(counts.sum())
    starts, _ = worker_starts(counts, spec.out_bounds)
    begin, end = int(starts[comm.rank]), int(starts[comm.rank + 1])
    held = rows[:, 1] <= rows[:, 2]
    if countable and held.any() and rows[held, 2].max() - rows[held, 1].min() < NARROW:
        lo, hi = int(rows[held, 1].min()), int(rows[held, 2].max())
        held_counts = (sorted_value_counts([r.keys for r in runs], spec, lo, hi, xp) if mine else
                       value_counts(local.keys, spec, lo, hi, xp))
        out = from_counts(comm, spec, held_counts, lo, hi, begin, end, xp)
        timer("counts and fill")
        return out, None
    if not mine:    # partition first (partition.py)
        from .partition import partition_on_rank

        out = partition_on_rank(comm, spec, local, opts, xp, timer, counts, starts, transport_of(opts, comm),
                                value_dtype(spec), max(1, int(rows[:, 3].max())))
        ended = len(out[1] if out[0] is None else out[0])
        if ended != end - begin:
            raise RuntimeError(f"cudasortkit.dask: rank {comm.rank} ended with {ended} keys, not the "
                               f"{end - begin} of its output chunks; please report this")
        return out

    # Step 2: the cuts of every run, known to every rank.
    sizes = [len(r.keys) for r in runs]
    width = max(1, int(rows[:, 3].max()))
    table = comm.allgather(layout.run_row([r.start for r in runs], sizes, width))
    all_runs = layout.run_table(table)
    inner = exact_cuts(comm, runs, starts[1:-1], total, spec.op != "sort", spec.descending, spec.dtype, xp)
    mine_cuts = np.zeros((comm.size + 1, width), np.int64)
    mine_cuts[:, :len(sizes)] = layout.cut_rows(inner, sizes)
    every = comm.allgather(mine_cuts)
    cut_of = {s: every[s] for s in range(comm.size)}
    plan, _ = layout.pieces(all_runs, cut_of, comm.size)
    # Receivers that merge pairwise read their own pieces where they are.
    pairwise = {d for d in range(comm.size) if merges_pairwise(opts, layout.incoming(plan, d))}
    plan, received = layout.pieces(all_runs, cut_of, comm.size, pairwise)
    for r in runs:
        r.pos = None             # the positions searched ties; argsort's are still in the arena
    timer("splitters")

    # Step 3: the pieces to their receivers.
    pairs = comm.rank in pairwise
    n_in = int(received[comm.rank])
    transport = transport_of(opts, comm)
    push = transport == "ipc" and opts.direction == "push"
    nbytes = sum(a.dtype.itemsize for a in mine.send.values()) * n_in
    make_room(xp, 2 * nbytes, comm.arenas.get("join"))
    recv = receive_buffers(comm.arenas, mine.send, n_in, xp, push, bool(opts.keep))
    timer.sub("exchange: buffers")
    exchange(comm, opts, plan, mine.send, recv, transport, timer if spec.timings else None)
    received_runs = []          # (keys, values or None, run start, in an arena) in the global run order
    for p in plan:
        if p.dst != comm.rank:
            continue
        if p.dst_offset < 0:      # this rank's own piece, read in place: no copy
            got = {k: a[p.src_offset:p.src_offset + p.n] for k, a in mine.send.items()}
        else:
            got = {k: a[p.dst_offset:p.dst_offset + p.n] for k, a in recv.items()}
            if p.src == comm.rank:
                for k, a in mine.send.items():
                    got[k][...] = a[p.src_offset:p.src_offset + p.n]
        received_runs.append((got["keys"], got.get("values"), all_runs[p.run].start, push or p.dst_offset < 0))
    for arena in comm.arenas.values():    # after the barrier: no peer maps a replaced allocation
        arena.free_retired()
    timer("exchange")

    # Step 4: merged in the global run order (the arrays handed over: each
    # level of merges frees what it consumed).
    received = {"runs": received_runs, "joined": recv}
    received_runs = recv = got = None
    out = merge_received(spec, received, pairs, n_in, xp, timer)
    timer("merge")
    ended = len(out[1] if out[0] is None else out[0])
    if ended != end - begin:
        raise RuntimeError(f"cudasortkit.dask: rank {comm.rank} ended with {ended} keys, not the "
                           f"{end - begin} of its output chunks; please report this")
    return out


def merges_pairwise(opts, runs: int) -> bool:
    """Whether a receiver of `runs` pieces merges them pairwise (else it
    sorts them as one array)."""
    return opts.merge == "pairs" or (opts.merge == "auto" and runs <= options.PAIRS_MAX)


def merge_received(spec: Spec, received: dict, pairs: bool, n: int, xp, timer):
    """(keys or None, values or None) of the received runs, in the
    requested order with ties in global index order. received: "runs", a
    list of (keys, values, run start, whether they are an arena's) in the
    global run order, and "joined", the received arrays by name (taken out
    of the dict, so that what is merged goes back as the merges go on).
    Never an arena's memory: the next sort writes there."""
    runs, joined = received.pop("runs"), received.pop("joined")
    if spec.op == "argsort":   # global indices: run start + position
        if pairs:
            runs[:] = [(k, xp.add(v, np.int64(start), dtype=np.int64), start, False) for k, v, start, _ in runs]
        else:
            index = xp.empty(n, np.int64)
            at = 0
            for k, v, start, _ in runs:
                xp.add(v, np.int64(start), out=index[at:at + len(k)], dtype=np.int64)
                at += len(k)
            joined["values"] = index
        timer.sub("merge: indices")
    if pairs:
        joined = None
    runs[:] = [r for r in runs if len(r[0])]
    if not runs:
        keys = xp.empty(0, spec.dtype)
        values = None if spec.op == "sort" else xp.empty(0, np.int64 if spec.op == "argsort" else spec.value_dtype)
    elif pairs and len(runs) == 1:
        keys, values, _, in_arena = runs.pop()
        if in_arena:
            keys, values = keys.copy(), None if values is None else values.copy()
    elif pairs:
        pending = [(k, v) for k, v, _, _ in runs]
        runs.clear()
        keys, values = merge_runs(pending, spec.descending)
    elif spec.op == "sort":
        keys, values = csk.sort(joined.pop("keys"), descending=spec.descending), None
    else:   # stable: the runs lie in global index order
        keys, values = csk.sort_by_key(joined.pop("keys"), joined.pop("values"), descending=spec.descending)
    if spec.op == "argsort":
        return None, values
    return keys, values
