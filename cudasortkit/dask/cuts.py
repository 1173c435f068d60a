"""Where each rank's sorted runs are cut so that the ranks' pieces make the
global order (collective.py, step 2): which output chunks, so which global
ranks, each logical rank owns (worker_starts), and for each global rank t
how many elements of every run of every rank come before it (exact_cuts).

exact_cuts searches the ordered words (counting.py) of the element at rank
t: rounds of CANDIDATES candidate words per target, made on the device,
counted against the rank's runs there (counting.count_words), summed over
the ranks by one allreduce of the counts that stays on the device; each
round narrows every target's range 2^CANDIDATE_BITS-fold, so 4-byte keys
take 2 rounds and 8-byte keys 4, and nothing waits for the host until the
word is found. Among the keys equal to the t-th one, a plain sort takes them
by (rank, run) order; argsort and sort_by_key by global index, found by the
same search over the indices of the equal keys.

Nothing here knows Dask; tests/test_dask_collective_cpu.py checks it
against NumPy with ranks as threads.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import counting
from .comm import offsets

#: Candidates per target and round are 2^CANDIDATE_BITS - 1 on GPUs, fewer
#: when there are many targets (COUNTS_PER_ROUND counts a round at most,
#: summed over the ranks in one allreduce), never under 2^8 - 1; on the host
#: (NumPy ranks: a search each, no device to keep busy) 2^HOST_CANDIDATE_BITS - 1.
CANDIDATE_BITS = 16
HOST_CANDIDATE_BITS = 8
COUNTS_PER_ROUND = 1 << 21


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


# ------------------------------------------------------------ the rank's runs
@dataclass
class Run:
    """One sorted run of a rank (the requested order): its keys, and for a
    stable sort the positions of its elements in the run as it was before
    the sort (ascending among equal keys), the element at position p having
    global index start + p."""
    keys: object
    pos: object = None
    start: int = 0


def candidate_bits(targets: int, xp) -> int:
    """Bits of the candidates' spacing per round for `targets` targets."""
    bits = HOST_CANDIDATE_BITS if xp is np else CANDIDATE_BITS
    while bits > 8 and targets << bits > COUNTS_PER_ROUND:
        bits -= 1
    return bits


def rounds(width_bits: int, bits: int) -> int:
    """Rounds that narrow a range of 2^width_bits values to one."""
    return max(1, -(-width_bits // bits))


def _candidates(xp, lo, hi, bits: int):
    """(targets, 2^bits - 1) uint64 words lo + floor((hi - lo) * c / 2^bits),
    c = 1 .. 2^bits - 1, computed exactly in 64 bits."""
    step = np.uint64(bits)
    c = xp.arange(1, 1 << bits, dtype=np.uint64)[None, :]
    width = (hi - lo)[:, None]
    low = width & np.uint64((1 << bits) - 1)
    return lo[:, None] + (width >> step) * c + ((low * c) >> step)


def smallest_above(comm, xp, count, targets, lo, hi, width_bits: int):
    """For every target t_i the smallest word u in [lo_i, hi_i] with F_i(u) >
    t_i, where F_i(u), nondecreasing in u, is the sum over ranks of
    count(candidates)[i] and F_i(hi_i) > t_i. `count(words)` returns this
    rank's int64 counts of the (targets, k) words. All ranks call it alike:
    a fixed number of rounds (every range of 2^width_bits values narrowed
    to one), the counts summed by an allreduce, and nothing read back to the
    host: lo, hi and targets are arrays of `xp` and so is the result."""
    bits = candidate_bits(len(targets), xp)
    rows = xp.arange(len(targets))
    for _ in range(rounds(width_bits, bits)):
        cand = _candidates(xp, lo, hi, bits)
        total = comm.allreduce_sum(count(cand))
        above = total > targets[:, None]
        found = above.any(axis=1)
        j = above.astype(np.int8).argmax(axis=1)
        before = cand[rows, xp.maximum(j - 1, 0)] + np.uint64(1)
        new_lo = xp.where(found, xp.where(j > 0, before, lo), cand[:, -1] + np.uint64(1))
        hi = xp.where(found, cand[rows, j], hi)
        lo = new_lo
    return lo


def exact_cuts(comm, runs: list, targets, total: int, stable: bool, descending: bool, dtype, xp,
               indices: int | None = None) -> np.ndarray:
    """For every global rank t in `targets`: how many elements of each of
    this rank's runs come before it, so that the counts of all runs of all
    ranks add up to t and the elements before the cuts are the first t of
    the global order. Returns int64 (len(targets), len(runs)).

    runs: Run (keys sorted in the requested order, `descending`; pos and
    start when `stable`). The order is (key, rank, run) for a plain sort and
    (key, global index) when `stable`; global indices lie below `indices`
    (default `total`: every element of the order is a run's). xp: the
    arrays' module (numpy or cupy; a rank without runs still takes part)."""
    targets = [int(t) for t in targets]
    sizes = np.array([len(r.keys) for r in runs], np.int64)
    cuts = np.array([[0 if t <= 0 else n for n in sizes] for t in targets], np.int64).reshape(len(targets),
                                                                                              len(runs))
    inner = [i for i, t in enumerate(targets) if 0 < t < total]
    if not inner:
        return cuts
    want = np.asarray([targets[i] for i in inner], np.int64)
    count_t = len(inner)
    zero = xp.zeros(count_t, np.int64)

    def key_counts(words, side=1):
        out = xp.zeros(words.shape, np.int64)
        for r in runs:
            if len(r.keys):
                counting.count_words(r.keys, words, zero, xp.full(count_t, len(r.keys), np.int64),
                                     descending, side, out)
        return out

    u = smallest_above(comm, xp, key_counts, xp.asarray(want), xp.zeros(count_t, np.uint64),
                       xp.full(count_t, np.uint64(counting.top(dtype)), np.uint64), counting.key_bits(dtype))
    ends = xp.zeros((2, count_t, len(runs)), np.int64)   # per run: keys below u, keys up to u
    for i, r in enumerate(runs):
        if len(r.keys):
            full = xp.full(count_t, len(r.keys), np.int64)
            for side in (0, 1):
                ends[side, :, i] = counting.count_words(r.keys, u[:, None], zero, full, descending, side)[:, 0]
    left, right = _host(ends)        # the one wait for the device in the search
    equal = right - left
    every = comm.allgather(np.stack([left.sum(axis=1), equal.sum(axis=1)]))   # (ranks, 2, targets)
    need = want - every[:, 0].sum(axis=0)                                     # of the equal keys, before t
    if not stable:
        earlier = np.cumsum(every[:, 1], axis=0) - every[:, 1]                # equal keys of lower ranks
        mine = np.clip(need - earlier[comm.rank], 0, equal.sum(axis=1))
        take = np.clip(mine[:, None] - (np.cumsum(equal, axis=1) - equal), 0, equal)   # runs in order
    else:
        lo_dev, hi_dev = xp.asarray(left), xp.asarray(right)

        def below(i, cand):
            """Equal keys of run i whose global index is below each candidate."""
            r = runs[i]
            return counting.count_words(r.pos, _pos_words(xp, cand, r), lo_dev[:, i], hi_dev[:, i], False, 0)

        def index_counts(cand):
            out = xp.zeros(cand.shape, np.int64)
            for i, r in enumerate(runs):
                if len(r.keys):
                    out += below(i, cand)
            return out

        # the smallest g with `need` equal keys of index < g: F(g) > need - 1
        bound = int(total if indices is None else indices)
        g = smallest_above(comm, xp, index_counts, xp.asarray(need - 1), xp.zeros(count_t, np.uint64),
                           xp.full(count_t, np.uint64(bound), np.uint64), bound.bit_length())
        taken = xp.zeros((count_t, len(runs)), np.int64)
        for i, r in enumerate(runs):
            if len(r.keys):
                taken[:, i] = below(i, g[:, None])[:, 0]
        take = _host(taken)
    cuts[inner] = left + take
    return cuts


def _pos_words(xp, cand, run):
    """The ordered words of positions in `run` that candidate global indices
    `cand` (uint64) stand for: cand - start, clamped to the positions' range
    (below 0: no element is before it; past the last: all are)."""
    pos = run.pos
    rel = cand.astype(np.int64) - np.int64(run.start)
    limit = (1 << (8 * pos.dtype.itemsize - (1 if pos.dtype.kind == "i" else 0))) - 1
    rel = xp.clip(rel, 0, limit)
    if pos.dtype.kind == "i":   # signed positions' words have the sign bit flipped
        return rel.astype(np.uint64) ^ np.uint64(1 << (8 * pos.dtype.itemsize - 1))
    return rel.astype(np.uint64)


def _host(a) -> np.ndarray:
    return a.get() if hasattr(a, "get") and not isinstance(a, np.ndarray) else np.asarray(a)
