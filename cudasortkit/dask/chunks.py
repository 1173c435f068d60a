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


def check_chunk(keys, index: int, size: int, dtype) -> None:
    """Chunk `index` is what the graph was planned for (splits count on the
    known length, output chunks on the dtype): anything else is an error,
    never a silently wrong result."""
    if getattr(keys, "ndim", None) != 1 or len(keys) != size:
        raise ValueError(f"cudasortkit.dask: input chunk {index} has shape {getattr(keys, 'shape', None)}, "
                         f"not the ({size},) its dask array declares; fix the chunks or call "
                         "x.compute_chunk_sizes()")
    if keys.dtype != dtype:
        raise TypeError(f"cudasortkit.dask: input chunk {index} has dtype {keys.dtype}, not the "
                        f"{dtype} its dask array declares; astype() the chunks to one dtype")


def sort_input(keys, values, index: int, size: int, dtype, descending: bool):
    """sort_chunk of input chunk `index`, checked against its declared shape and dtype."""
    check_chunk(keys, index, size, dtype)
    if values is not None and len(values) != size:
        raise ValueError(f"cudasortkit.dask: values chunk {index} has {len(values)} elements, not {size}")
    return sort_chunk(keys, values, descending)


def sort_input_with_indices(keys, offset: int, index: int, size: int, dtype, descending: bool):
    """sort_input with the keys' global indices (offset + position) as values."""
    check_chunk(keys, index, size, dtype)
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
    """What sorted chunk `index` tells exact_boundaries: (lo_at, lo_step,
    keys, boundary, pos), all host arrays, none longer than the chunk:
    lo[j] (its elements before lower bracket j) as steps, lo[j] =
    sum(lo_step[lo_at <= j]), and its keys between the brackets of every
    boundary with that boundary's index and their positions."""
    keys = chunk[0]
    lo = bound_positions(keys, brackets.lower, index, descending)
    hi = bound_positions(keys, brackets.upper, index, descending)
    step = np.diff(lo, prepend=0)
    at = np.flatnonzero(step)
    count = hi - lo
    boundary = np.repeat(np.arange(len(lo)), count)
    pos = np.arange(len(boundary), dtype=np.int64) + np.repeat(lo - (np.cumsum(count) - count), count)
    return at, step[at], to_host(keys[array_module(keys).asarray(pos)]), boundary, pos


def split_row(keys, bounds: Bounds, index: int, descending: bool) -> np.ndarray:
    """(Q + 1) positions: sorted chunk `index`'s part for output chunk j is
    [row[j], row[j + 1]), from the exact boundaries."""
    inner = bound_positions(keys, bounds, index, descending)
    return np.concatenate([[0], inner, [len(keys)]]).astype(np.int64)


def splits(chunk, bounds: Bounds, index: int, descending: bool) -> np.ndarray:
    return split_row(chunk[0], bounds, index, descending)


def piece(chunk, row: np.ndarray, out: int):
    """The part of sorted chunk `index` that goes to output chunk `out`."""
    a, b = int(row[out]), int(row[out + 1])
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
