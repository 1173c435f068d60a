"""What runs on the workers: one chunk (or one piece of one) in, arrays out.

A chunk is a NumPy or CuPy array and stays one: every sort goes through
cudasortkit (the worker's GPU for CuPy chunks, or NumPy's on a CPU worker),
which returns the kind of array it was given. A sorted chunk travels as the
pair (keys, values), values None for a plain sort. Small results (samples,
bracket positions, window keys) are NumPy arrays on the host.
"""
from __future__ import annotations

import numpy as np

from .. import api as csk

from .bounds import END, Bounds, sample_positions


def array_module(a):
    """numpy or cupy, whichever `a` belongs to."""
    if type(a).__module__.split(".")[0] == "cupy":
        import cupy

        return cupy
    return np


def to_host(a) -> np.ndarray:
    return a.get() if array_module(a) is not np else np.asarray(a)


def ascending(keys, descending: bool):
    """Keys whose ascending order is the requested order, for searchsorted:
    negated floats (NaNs stay last), inverted integers and bools."""
    if not descending:
        return keys
    return -keys if keys.dtype.kind == "f" else ~keys


# ------------------------------------------------------------ local sort
def sort_chunk(keys, values, descending: bool):
    """(sorted keys, values in the same order or None); stable with values."""
    if values is None:
        return csk.sort(keys, descending=descending), None
    return csk.sort_by_key(keys, values, descending=descending)


def sort_chunk_with_indices(keys, offset: int, descending: bool):
    """sort_chunk with the keys' global indices (offset + position) as values."""
    indices = array_module(keys).arange(offset, offset + len(keys), dtype=np.int64)
    return sort_chunk(keys, indices, descending)


# -------------------------------------------------------------- sampling
def sample(chunk, count: int):
    """(host keys, positions) of up to `count` regular samples of a sorted chunk."""
    keys = chunk[0]
    pos = sample_positions(len(keys), count)
    return to_host(keys[array_module(keys).asarray(pos)]), pos


# ------------------------------------------------------------- partition
def bound_positions(keys, bounds: Bounds, index: int, descending: bool) -> np.ndarray:
    """Elements of sorted chunk `index` that come before each bound: its own
    position in its own chunk; equal keys count as before it in earlier
    chunks and after it in later ones."""
    xp = array_module(keys)
    asc = ascending(keys, descending)
    query = xp.asarray(ascending(bounds.keys, descending))
    left = to_host(xp.searchsorted(asc, query, side="left"))
    right = to_host(xp.searchsorted(asc, query, side="right"))
    before = np.where(bounds.chunk > index, right, np.where(bounds.chunk < index, left, bounds.pos))
    return np.where(bounds.chunk == END, len(keys), before).astype(np.int64)


def window(chunk, index: int, brackets, descending: bool):
    """(positions of the lower brackets, host keys between each pair of brackets)."""
    keys = chunk[0]
    lo = bound_positions(keys, brackets.lower, index, descending)
    hi = bound_positions(keys, brackets.upper, index, descending)
    return lo, [to_host(keys[a:b]) for a, b in zip(lo, hi)]


def piece(chunk, splits: np.ndarray, index: int, out: int):
    """The part of sorted chunk `index` that goes to output chunk `out`."""
    a, b = int(splits[index, out]), int(splits[index, out + 1])
    keys, values = chunk
    return keys[a:b], None if values is None else values[a:b]


# ---------------------------------------------------------------- merge
def concatenate(pieces):
    """The pieces one output chunk received, in input chunk order."""
    xp = array_module(pieces[0][0])
    keys = xp.concatenate([k for k, _ in pieces])
    if pieces[0][1] is None:
        return keys, None
    return keys, xp.concatenate([v for _, v in pieces])


def merge(received, descending: bool):
    """Sort the received runs: stably with values, so equal keys keep input
    chunk order, which is global index order."""
    return sort_chunk(*received, descending)
