"""Exact splitters of a sample sort, computed on the host from small inputs.

The sort orders elements by (key, chunk, position in the sorted chunk), keys
in the requested order (NumPy's: NaNs last, also descending). That order is
total, so for every output boundary o there is exactly one set "the first o
elements", and each sorted input chunk holds a prefix of it: splits[i, j] is
how many elements of chunk i go to output chunks before j. When the local
sorts are stable, position order within a chunk is input order, so the same
order is (key, global index) and the result is stable.

The splits come in two rounds, both small:

1. Regular samples of every sorted chunk (positions (k * n) // s) bound the
   rank of each sample: passing a sample of chunk i fixes how many elements of
   chunk i lie before the next sample only up to the gap to its neighbour. For
   every boundary o, `brackets` picks a lower sample whose rank is surely <= o
   and an upper one whose rank is surely >= o.
2. Each chunk reports where the two brackets fall in it (an exact count) and
   the keys between them (its "window"). `exact_boundaries` merges the
   windows of all chunks stably: the (o - rank(lower))-th of them is the
   element of rank o, which it returns as (key, chunk, position); every chunk
   then finds its own split by the same exact count. Windows hold about
   2 * total / s keys per boundary, so duplicates and skew change nothing but
   which keys they hold, and nothing of size P x Q is ever made.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .. import api as csk
from .bounds import END, Bounds

class Brackets(NamedTuple):
    lower: Bounds
    upper: Bounds


def samples_per_chunk(total: int, n_in: int, n_out: int) -> int:
    """Samples taken from each chunk: sqrt(2 * total * n_out / n_in) balances
    the samples gathered (n_in * s) against the window keys (2 * n_out * total / s)."""
    return int(min(max(math.isqrt(2 * total * max(n_out, 1) // max(n_in, 1)), 16), 1 << 16))


def output_boundaries(out_chunks) -> np.ndarray:
    """Global ranks where output chunks 1..Q-1 start."""
    return np.cumsum(np.asarray(out_chunks, np.int64))[:-1]


def _neighbours(pos: np.ndarray, n: int):
    """Per sample of one chunk: the next sample's position (n after the last)
    and the end of the previous one (0 before the first)."""
    nxt = np.append(pos[1:], n)[: len(pos)]
    prev_end = np.concatenate([[0], pos[:-1] + 1])[: len(pos)]
    return nxt.astype(np.int64), prev_end.astype(np.int64)


def brackets(samples, sizes, targets, descending: bool) -> Brackets:
    """Lower and upper bounding samples of every target rank.

    samples[i] = (host keys, positions) of sorted chunk i, sizes[i] its length.
    """
    keys = np.concatenate([k for k, _ in samples])
    pos = np.concatenate([p for _, p in samples])
    chunk = np.repeat(np.arange(len(samples)), [len(p) for _, p in samples])
    nxt, prev_end = map(np.concatenate, zip(*(_neighbours(p, n) for (_, p), n in zip(samples, sizes))))
    # Samples in chunk order, each chunk's by position: a stable sort by key
    # puts them in (key, chunk, position) order.
    order = csk.argsort(keys, stable=True, descending=descending)
    keys, pos, chunk, nxt, prev_end = keys[order], pos[order], chunk[order], nxt[order], prev_end[order]
    # Elements before sample m: at least lower[m], at most upper[m].
    lower = np.concatenate([[0], np.cumsum(pos + 1 - prev_end)[:-1]])
    upper = np.concatenate([[0], np.cumsum(nxt - pos)[:-1]])
    lo = np.searchsorted(upper, targets, side="right") - 1   # last with upper <= o
    hi = np.searchsorted(lower, targets, side="left")        # first with lower >= o
    past = hi >= len(keys)
    hi = np.minimum(hi, len(keys) - 1)
    return Brackets(Bounds(keys[lo], chunk[lo], pos[lo]),
                    Bounds(keys[hi], np.where(past, END, chunk[hi]), pos[hi]))


def exact_boundaries(windows, brackets_: Brackets, targets, descending: bool) -> Bounds:
    """The element at each target rank o, as a bound (key, chunk, position;
    chunk END when o is the total): every chunk then counts exactly how many
    of its elements go before it (chunks.bound_positions), so this O(Q)
    answer replaces a P x Q table of splits.

    windows[i] = (lo_at, lo_step, keys, boundary, pos) of sorted chunk i
    (chunks.window): lo, the chunk's elements before each lower bracket, as
    its steps (lo[j] = sum of lo_step where lo_at <= j), and the keys between
    the brackets with the boundary each belongs to and its position.
    """
    q = len(targets)
    before = np.zeros(q, np.int64)   # elements of all chunks before each lower bracket
    for w in windows:
        np.add.at(before, w[0], w[1])
    before = np.cumsum(before)
    keys = np.concatenate([w[2] for w in windows])
    boundary = np.concatenate([w[3] for w in windows]).astype(np.int64)
    pos = np.concatenate([w[4] for w in windows]).astype(np.int64)
    chunk = np.repeat(np.arange(len(windows)), [len(w[2]) for w in windows])
    # Window keys in chunk order, each chunk's by position: a stable sort by
    # key, then a stable one by boundary, orders each boundary's window by
    # (key, chunk, position), the sort's total order.
    order = csk.argsort(keys, stable=True, descending=descending)
    order = order[np.argsort(boundary[order], kind="stable")]
    start = np.searchsorted(boundary[order], np.arange(q), side="left")
    count = np.searchsorted(boundary[order], np.arange(q), side="right") - start
    take = np.asarray(targets, np.int64) - before
    broken = (take < 0) | (take > count)
    if broken.any():  # the brackets' guarantee; never seen broken
        j = int(np.flatnonzero(broken)[0])
        raise RuntimeError(f"cudasortkit.dask: boundary {targets[j]} lies outside its brackets "
                           f"({take[j]} of {count[j]} window keys); please report this")
    # Rank o is the take-th window element, or the upper bracket itself when
    # the window holds all take elements before it.
    inside = take < count
    upper = brackets_.upper
    if not inside.any():
        return Bounds(upper.keys, upper.chunk.astype(np.int64), upper.pos.astype(np.int64))
    pick = order[np.minimum(start + take, len(order) - 1)]
    return Bounds(np.where(inside, keys[pick], upper.keys),
                  np.where(inside, chunk[pick], upper.chunk).astype(np.int64),
                  np.where(inside, pos[pick], upper.pos).astype(np.int64))
