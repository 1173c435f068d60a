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
   the keys between them (its "window"). `exact_splits` merges the windows of
   all chunks stably and takes the first o - rank(lower) of them: their count
   per chunk completes the split. Windows hold about 2 * total / s keys per
   boundary, so duplicates and skew change nothing but which keys they hold.
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


def exact_splits(windows, sizes, targets, descending: bool) -> np.ndarray:
    """(P, Q + 1) int64 splits from every chunk's (lower positions, window keys).

    windows[i] = (lo, keys) with lo[j] = elements of chunk i before boundary
    j's lower bracket and keys[j] the chunk's keys between the brackets.
    """
    p = len(sizes)
    splits = np.zeros((p, len(targets) + 2), np.int64)
    splits[:, -1] = sizes
    for j, target in enumerate(targets):
        lo = np.array([w[0][j] for w in windows], np.int64)
        parts = [w[1][j] for w in windows]
        source = np.repeat(np.arange(p), [len(k) for k in parts])
        order = csk.argsort(np.concatenate(parts), stable=True, descending=descending)
        take = int(target - lo.sum())
        if not 0 <= take <= len(order):  # the brackets' guarantee; never seen broken
            raise RuntimeError(f"cudasortkit.dask: boundary {target} lies outside its brackets "
                               f"({take} of {len(order)} window keys); please report this")
        splits[:, j + 1] = lo + np.bincount(source[order[:take]], minlength=p)
    return splits
