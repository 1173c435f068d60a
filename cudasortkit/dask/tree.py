"""The tasks exchange on Dask's local schedulers (sync, threads, processes):
every output chunk gathered from every sorted input chunk through a tree of
tasks, about max(P, Q) tasks a level over ceil(log_FAN(max(P, Q))) levels,
instead of P x Q piece tasks.

Without a distributed client every task's result lives in one process (the
threaded and sync schedulers share it; the processes scheduler keeps results
in the parent and pickles each task's arguments to its pool), so a task can
take several sorted chunks whole and keep references to them: nothing is
copied until an output chunk is merged.

Level l (1..L) has a node for every (input group, output range): input
groups of FI**l consecutive chunks, output ranges of FO**(L - l)
consecutive output chunks (FI**L >= P, FO**L >= Q, both at most FAN). A
node (Runs) holds its group's sorted chunks and a table: where each of its
range's output chunks starts in each chunk. Level 1 takes the sorted chunks
and their split rows (chunks.splits, one task per chunk, as the pieces
layout has); level l > 1 joins the FI nodes of level l - 1 under its input
group that share its parent range and keeps the columns of its own range.
At level L every node is one output chunk and its whole input: its parts
are concatenated in chunk order and merged (stably with values, so ties
keep the global order). Only the merge slices chunks (P parts an output
chunk); the levels above it copy table columns.

Tasks: sum over levels of ceil(P / FI**l) * ceil(Q / FO**(L - l)), about
L * max(P, Q); inputs at most 2 * FAN a task, about 2 * FAN * L * max(P, Q)
in all (P log P). The processes scheduler pickles a level-1 task's FI
whole chunks to its pool (about FO times the data in all at level 1) and a
Runs as the views of its parts only.

With a distributed client the pieces layout stays (SortPlan.stages): there a
task that took whole chunks would pull them across the network.
"""
from __future__ import annotations

from itertools import chain

import numpy as np

from . import chunks

#: The most inputs a tree task takes: the levels' fan-in and fan-out.
FAN = 32


def _root(n: int, levels: int) -> int:
    """The smallest f >= 1 with f ** levels >= n."""
    f = max(1, int(round(n ** (1.0 / levels))))
    while f ** levels < n:
        f += 1
    while f > 1 and (f - 1) ** levels >= n:
        f -= 1
    return f


def levels(p: int, q: int, fan: int = FAN) -> tuple:
    """((input group size, output range size) of levels 1..L): the fewest
    levels whose fans are at most `fan`."""
    depth = 1
    while fan ** depth < max(p, q, 1):
        depth += 1
    fi, fo = _root(p, depth), _root(q, depth)
    return tuple((fi ** level, fo ** (depth - level)) for level in range(1, depth + 1))


def _count(n: int, size: int) -> int:
    return -(-n // size)


def layers(plan, local: str, rows: str) -> dict:
    """{layer name: {key: task}} of the tree, level by level, on top of the
    sorted chunks (local, i) and their split rows (rows, i): the merged
    (keys, values) of output chunk j at (plan.merged_name, j), as the
    pieces layout leaves them."""
    p, q, desc = len(plan.sizes), len(plan.out_chunks), plan.descending
    shape = levels(p, q)
    out = {}
    previous = None
    for level, (gi, go) in enumerate(shape, 1):
        last = level == len(shape)
        name = plan.merged_name if last else plan.name(f"tree-{level}")
        dsk = out[name] = {}
        for c in range(_count(p, gi)):
            for r in range(_count(q, go)):
                j0, j1 = r * go, min((r + 1) * go, q)
                if level == 1:
                    group = range(c * gi, min((c + 1) * gi, p))
                    task = (cut, [(local, i) for i in group], [(rows, i) for i in group], j0, j1)
                else:
                    pgi, pgo = shape[level - 2]
                    groups = range(c * gi // pgi, min(_count(p, pgi), (c + 1) * gi // pgi))
                    parent = j0 // pgo
                    task = (join, [(previous, g, parent) for g in groups], j0 - parent * pgo,
                            j1 - parent * pgo)
                dsk[(name, j0) if last else (name, c, r)] = (merge, task, desc) if last else task
        previous = name
    return out


# ------------------------------------------------------ in the tasks
class Runs:
    """Consecutive sorted chunks' parts for consecutive output chunks,
    without copying them: chunk c's part for the k-th output chunk is
    keys[c][table[c, k]:table[c, k + 1]] (and the same of values[c]).
    Narrowing and joining only slice the small table; pickled (the
    processes scheduler), a Runs carries only its parts' views."""

    def __init__(self, keys: list, values: list | None, table: np.ndarray):
        self.keys, self.values, self.table = keys, values, table

    def __reduce__(self):
        a, b = self.table[:, 0], self.table[:, -1]
        keys = [k[x:y] for k, x, y in zip(self.keys, a, b)]
        values = None if self.values is None else [v[x:y] for v, x, y in zip(self.values, a, b)]
        return Runs, (keys, values, self.table - a[:, None])


def cut(sorted_chunks, rows, j0: int, j1: int) -> Runs:
    """The sorted chunks' parts for output chunks [j0, j1), by their split rows."""
    keys = [k for k, _ in sorted_chunks]
    values = None if sorted_chunks[0][1] is None else [v for _, v in sorted_chunks]
    return Runs(keys, values, np.stack(rows)[:, j0:j1 + 1])


def join(parents, k0: int, k1: int) -> Runs:
    """The parents' runs (each for the same output chunks, in chunk order)
    narrowed to their k0-th to (k1 - 1)-th output chunks."""
    keys = list(chain.from_iterable(r.keys for r in parents))
    values = None if parents[0].values is None else list(chain.from_iterable(r.values for r in parents))
    return Runs(keys, values, np.concatenate([r.table[:, k0:k1 + 1] for r in parents]))


def merge(runs: Runs, descending: bool):
    """One output chunk's (keys, values or None) from its runs, in chunk order."""
    a, b = runs.table[:, 0], runs.table[:, 1]
    held = np.flatnonzero(b > a)
    if not len(held):
        held = np.zeros(1, np.int64)     # empty: chunk 0's empty part gives the dtypes
    pieces = [chunks.piece((runs.keys[c], None if runs.values is None else runs.values[c]),
                           runs.table[c], 0) for c in held.tolist()]
    return chunks.merge(chunks.concatenate(pieces), descending)
