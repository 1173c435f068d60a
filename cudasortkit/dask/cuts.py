"""Where each rank's sorted keys are cut so that the ranks' pieces make the
global order (collective.py, step 2): which output chunks, so which global
ranks, each logical rank owns (worker_starts), and for each global rank t
how many of every rank's keys come before it (exact_cuts: a batched
(K + 1)-ary search over the keys' ordered bits, counts summed over the
ranks, then ties by rank or by global index).

Nothing here knows Dask; tests/test_dask_collective_cpu.py checks it
against NumPy with ranks as threads.
"""
from __future__ import annotations

import numpy as np

from . import chunks
from .comm import offsets

#: Candidates per target and round of the search: each round narrows every
#: target's range 256-fold, so 4-byte keys take 4 rounds and 8-byte keys 8
#: (a round costs one searchsorted of K keys per target and one allreduce of
#: K counts per target: latency, not bandwidth).
K = 255


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
