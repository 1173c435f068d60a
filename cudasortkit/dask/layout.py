"""Where the collective sort's elements are (collective.py): a rank's runs,
every rank's runs in the global order, and the pieces that move from run to
receiver. Index arithmetic only; tests/test_dask_collective_cpu.py checks it.

Runs. A rank sorts its chunks as runs: each run is a maximal group of its
chunks that are adjacent in the global order (one chunk's last index + 1 is
the next one's first), so every run is an interval of global indices and
runs ordered by their first index are in global index order; or, joined,
all of the rank's chunks as one run (a plain sort only: that run's indices
need not be an interval). A rank's sorted runs lie one after another in its
send arrays (buffers.py's send arena): run i at element offset
offsets[i].

Pieces. With every run cut at the receivers' boundaries (cuts.py: cut[d]
elements of the run go to receivers below d), receiver d gets from every
run in the global order the elements [cut[d], cut[d+1]), and lays them out
in that order: its received runs are then in global index order too, so
merging them with ties to the earlier run (or sorting them stably as one
array) keeps equal keys in global index order.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .comm import offsets


def group_chunks(starts, sizes, joined: bool) -> list:
    """A rank's runs as lists of indices into its (nonempty, chunk-ordered)
    chunks: maximal groups of globally adjacent chunks, or all of them as
    one run when `joined`."""
    if not len(sizes):
        return []
    if joined:
        return [list(range(len(sizes)))]
    groups = [[0]]
    for i in range(1, len(sizes)):
        if int(starts[i]) == int(starts[i - 1]) + int(sizes[i - 1]):
            groups[-1].append(i)
        else:
            groups.append([i])
    return groups


@dataclass(frozen=True)
class RunInfo:
    """One run of one rank, as every rank knows it."""
    rank: int         # logical rank holding it
    index: int        # its place among that rank's runs
    start: int        # global index of its first element (before sorting)
    n: int            # elements
    offset: int       # element offset of the run in its rank's send arrays


def run_table(rows) -> list:
    """Every rank's runs in the global order, from every rank's row of
    run_row(): (ranks, 1 + 2 * R) int64."""
    runs = []
    for rank, row in enumerate(np.asarray(rows, np.int64)):
        count = int(row[0])
        starts, sizes = row[1:1 + count], row[1 + count:1 + 2 * count]
        at = offsets(sizes)
        runs += [RunInfo(rank, i, int(s), int(n), int(at[i])) for i, (s, n) in enumerate(zip(starts, sizes))]
    return sorted(runs, key=lambda r: (r.start, r.rank, r.index))


def run_row(starts, sizes, width: int) -> np.ndarray:
    """This rank's row for run_table: its run count, then its runs' first
    global indices and lengths, each padded to `width` runs."""
    row = np.zeros(1 + 2 * width, np.int64)
    row[0] = len(sizes)
    row[1:1 + len(starts)] = starts
    row[1 + len(sizes):1 + 2 * len(sizes)] = sizes
    return row


@dataclass(frozen=True)
class Piece:
    """Elements [src_offset, + n) of rank src's send arrays (the
    src_array-th of each name) go to elements [dst_offset, + n) of rank
    dst's received arrays: the part of run `run` (its place in the global
    run order) that receiver dst owns."""
    src: int
    dst: int
    src_offset: int
    n: int
    dst_offset: int
    run: int
    src_array: int = 0


def pieces(runs: list, cuts: dict, ranks: int, in_place=()) -> tuple:
    """(pieces, received): every nonempty piece, receiver by receiver and
    within one in the global run order (so the pieces between any two ranks
    come in one order on both sides), and how many elements each rank
    receives into its received arrays. runs: run_table's; cuts[rank]: its
    (ranks + 1, its run count) cut positions (row d: elements of each run
    before receiver d's). Ranks in `in_place` read their pieces for
    themselves where they are: those take no room (dst_offset -1)."""
    out, received = [], np.zeros(ranks, np.int64)
    for d in range(ranks):
        at = 0
        for g, run in enumerate(runs):
            cut = cuts[run.rank]
            a, b = int(cut[d, run.index]), int(cut[d + 1, run.index])
            if b > a:
                own = run.rank == d and d in in_place
                out.append(Piece(run.rank, d, run.offset + a, b - a, -1 if own else at, g))
                at += 0 if own else b - a
        received[d] = at
    return out, received


def incoming(plan, rank: int) -> int:
    """How many pieces `rank` receives (its own included)."""
    return sum(p.dst == rank for p in plan)


def cut_rows(inner: np.ndarray, sizes) -> np.ndarray:
    """(ranks + 1, runs) cut positions of one rank's runs from exact_cuts'
    (ranks - 1, runs) inner cuts: 0 above, the run lengths below."""
    sizes = np.asarray(sizes, np.int64)
    return np.concatenate([np.zeros((1, len(sizes)), np.int64), np.asarray(inner, np.int64), sizes[None, :]])


# ------------------------------------------------- partition-first (partition.py)
@dataclass(frozen=True)
class ChunkInfo:
    """One chunk of one rank, as every rank knows it (partition method):
    its elements lie bucket after bucket from `offset` in its rank's send
    arrays, and its elements of the split buckets, sorted, from
    `union_offset` in its rank's union arrays."""
    rank: int
    index: int
    start: int
    n: int
    offset: int
    union_offset: int


def chunk_row(starts, sizes, buckets, width: int) -> np.ndarray:
    """This rank's row for chunk_table: its chunk count, then per chunk its
    first global index, length and bucket sizes, padded to `width` chunks.
    buckets: (chunks, B) sizes."""
    b = np.asarray(buckets, np.int64)
    row = np.zeros(1 + width * (2 + b.shape[1]), np.int64)
    row[0] = len(sizes)
    per = np.concatenate([np.asarray(starts, np.int64)[:, None], np.asarray(sizes, np.int64)[:, None], b], axis=1)
    row[1:1 + per.size] = per.reshape(-1)
    return row


def chunk_table(rows, buckets: int, split) -> tuple:
    """(chunks in the global order, their (chunks, buckets) sizes) from every
    rank's chunk_row; union offsets count the `split` buckets' elements."""
    split = list(split)
    found = []
    for rank, row in enumerate(np.asarray(rows, np.int64)):
        count = int(row[0])
        per = row[1:1 + count * (2 + buckets)].reshape(count, 2 + buckets)
        at, union = 0, 0
        for i, (start, n, *sizes) in enumerate(per):
            found.append((ChunkInfo(rank, i, int(start), int(n), at, union), np.asarray(sizes, np.int64)))
            at += int(n)
            union += int(np.asarray(sizes)[split].sum()) if split else 0
    found.sort(key=lambda c: (c[0].start, c[0].rank, c[0].index))
    sizes = np.stack([s for _, s in found]) if found else np.zeros((0, buckets), np.int64)
    return [c for c, _ in found], sizes


def split_buckets(sizes, inner) -> list:
    """Buckets that hold a receiver boundary (a global rank in `inner`)
    strictly inside: their elements are cut exactly (partition.py)."""
    total = np.asarray(sizes, np.int64).sum(axis=0)
    begin = offsets(total)
    return [b for b in range(len(total)) if any(begin[b] < t < begin[b + 1] for t in inner)]


def union_targets(sizes, split, inner) -> tuple:
    """(targets, total) of the exact cuts over the split buckets' elements:
    per boundary t in `inner`, how many of them come before global rank t."""
    total = np.asarray(sizes, np.int64).sum(axis=0)
    begin = offsets(total)
    targets = [int(sum(min(max(int(t) - int(begin[b]), 0), int(total[b])) for b in split)) for t in inner]
    return targets, int(sum(int(total[b]) for b in split))


def segment_plan(chunks, sizes, starts, split, cuts, ranks: int) -> tuple:
    """(pieces, segments): receiver d's output is its buckets in key order,
    each a segment [begin, begin + length) of its received arrays, made of
    the bucket's pieces from every chunk in global order (so equal keys in
    global index order): a whole bucket's from the send arrays (src_array
    0); of a split bucket, the part between d's boundaries from the union
    arrays (src_array 1), cuts[c] being chunk c's union-run cut positions
    (ranks + 1 of them). segments[d]: (bucket, begin, length) in order."""
    sizes = np.asarray(sizes, np.int64)
    total = sizes.sum(axis=0)
    begin = offsets(total)
    within = np.cumsum(sizes, axis=1) - sizes          # a bucket's offset in its chunk
    split_set = set(split)
    union_at = np.zeros_like(sizes)
    for c in range(len(chunks)):
        at = 0
        for b in split:
            union_at[c, b] = at
            at += int(sizes[c, b])
    plan, segments = [], [[] for _ in range(ranks)]
    for d in range(ranks):
        lo, hi = int(starts[d]), int(starts[d + 1])
        at = 0
        for b in range(len(total)):
            if not total[b] or begin[b + 1] <= lo or begin[b] >= hi:
                continue
            first = at
            for g, c in enumerate(chunks):
                n = int(sizes[g, b])
                if not n:
                    continue
                if b not in split_set:
                    plan.append(Piece(c.rank, d, c.offset + int(within[g, b]), n, at, g, 0))
                    at += n
                    continue
                a = max(int(union_at[g, b]), int(cuts[g][d]))
                e = min(int(union_at[g, b]) + n, int(cuts[g][d + 1]))
                if e > a:
                    plan.append(Piece(c.rank, d, c.union_offset + a, e - a, at, g, 1))
                    at += e - a
            if at > first:
                segments[d].append((b, first, at - first))
        if at != hi - lo:
            raise RuntimeError(f"cudasortkit.dask: receiver {d} would get {at} keys, not {hi - lo}; please report this")
    return plan, segments
