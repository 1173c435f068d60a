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
