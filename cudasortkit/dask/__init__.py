"""Sorting 1-D dask arrays across a Dask cluster, with cudasortkit on every worker.

    import cudasortkit.dask as cskd
    s = cskd.sort(x)                    # x: 1-D dask array of NumPy or CuPy chunks
    i = cskd.argsort(x)                 # global int64 indices, numpy.argsort(kind="stable")
    k, v = cskd.sort_by_key(keys, values)

Results are lazy dask arrays with known chunks: by default the input's
chunking (`chunks=` asks for another), each output chunk holding exactly its
slice of the global order. Ordering is cudasortkit's (NumPy's): NaNs last in
both directions, and argsort and sort_by_key are stable, also descending.
The algorithm (a sample sort with exact splitters) is described in
SortPlan below, cudasortkit/dask/splitters.py and docs/dask.md.
Needs the `dask` extra: pip install "cudasortkit[dask]".
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from operator import getitem

import dask

import dask.array as da
import numpy as np
from dask.array.core import normalize_chunks
from dask.array.utils import meta_from_array
from dask.base import tokenize
from dask.highlevelgraph import HighLevelGraph

from ..dtypes import value_bytes
from . import chunks
from .splitters import brackets, exact_splits, output_boundaries, samples_per_chunk

__all__ = ["sort", "argsort", "sort_by_key", "SortPlan", "plan"]


# The sample sort as a Dask graph, one method per stage:
# The sample sort as a Dask graph, one method per stage.
#
#     local sort   P tasks      each input chunk sorted by cudasortkit
#     sample       P + 1        regular samples of each, one task brackets the boundaries
#     partition    P + 1 + P*Q  each chunk's windows, one task makes the exact splits,
#                               P*Q slices (views, on the chunk's worker)
#     exchange     Q            output chunk j concatenates its P slices (Dask moves them)
#     merge        Q            output chunk j sorts what it received
#
# Every stage returns Delayed objects and can be persisted before the next one
# (tools/dask_bench.py --phases times them that way); the public functions in
# cudasortkit.dask chain them into one lazy graph.
@dataclass(frozen=True)
class SortPlan:
    sizes: tuple          # input chunk lengths (P)
    out_chunks: tuple     # output chunk lengths (Q), same total
    descending: bool
    token: str            # names this sort's tasks

    @property
    def targets(self) -> np.ndarray:
        return output_boundaries(self.out_chunks)

    def _task(self, stage, func, *args, index=()):
        return dask.delayed(func, pure=True)(*args, dask_key_name=(f"csk-{stage}-{self.token}", *index))

    def local_sort(self, keys: da.Array, values: da.Array | None, with_indices: bool) -> list:
        """Sorted (keys, values) per input chunk; values are global indices
        when with_indices, else the chunks of `values` (or None)."""
        key_chunks = keys.to_delayed().ravel().tolist()
        if with_indices:
            offsets = np.concatenate([[0], np.cumsum(self.sizes)[:-1]])
            return [self._task("local-sort", chunks.sort_chunk_with_indices, k, int(o),
                               self.descending, index=(i,))
                    for i, (k, o) in enumerate(zip(key_chunks, offsets))]
        value_chunks = [None] * len(key_chunks) if values is None else values.to_delayed().ravel().tolist()
        return [self._task("local-sort", chunks.sort_chunk, k, v, self.descending, index=(i,))
                for i, (k, v) in enumerate(zip(key_chunks, value_chunks))]

    def sample(self, local: list):
        """The brackets of every output boundary, from regular samples."""
        count = samples_per_chunk(sum(self.sizes), len(self.sizes), len(self.out_chunks))
        samples = [self._task("sample", chunks.sample, c, count, index=(i,)) for i, c in enumerate(local)]
        return self._task("brackets", brackets, samples, self.sizes, self.targets, self.descending)

    def partition(self, local: list, bounds) -> list:
        """pieces[i][j]: what sorted chunk i sends to output chunk j."""
        windows = [self._task("window", chunks.window, c, i, bounds, self.descending, index=(i,))
                   for i, c in enumerate(local)]
        splits = self._task("splits", exact_splits, windows, self.sizes, self.targets, self.descending)
        return [[self._task("piece", chunks.piece, c, splits, i, j, index=(i, j))
                 for j in range(len(self.out_chunks))] for i, c in enumerate(local)]

    def exchange(self, pieces: list) -> list:
        """Per output chunk, its pieces from every input chunk, concatenated."""
        return [self._task("exchange", chunks.concatenate, [row[j] for row in pieces], index=(j,))
                for j in range(len(self.out_chunks))]

    def merge(self, received: list) -> list:
        """Per output chunk, its sorted (keys, values)."""
        return [self._task("merge", chunks.merge, r, self.descending, index=(j,))
                for j, r in enumerate(received)]

    def run(self, keys: da.Array, values: da.Array | None, with_indices: bool) -> list:
        """All stages: sorted (keys, values) per output chunk, as Delayed."""
        local = self.local_sort(keys, values, with_indices)
        return self.merge(self.exchange(self.partition(local, self.sample(local))))

    def assemble(self, merged: list, field: int, meta) -> da.Array:
        """Field 0 (keys) or 1 (values) of the merged chunks as one dask array
        with chunks out_chunks (empty ones too, which da.concatenate would drop)."""
        name = f"csk-result-{field}-{self.token}"
        layer = {(name, j): (getitem, m.key, field) for j, m in enumerate(merged)}
        graph = HighLevelGraph.from_collections(name, layer, dependencies=merged)
        return da.Array(graph, name, chunks=(self.out_chunks,), meta=meta)


def sort(x, descending=False, *, chunks=None):
    """Sorted copy of the 1-D dask array `x`, a dask array of the same chunk type."""
    p = _plan(x, descending, chunks, "sort")
    if not sum(p.sizes):
        return x.rechunk((p.out_chunks,))
    return p.assemble(p.run(x, None, with_indices=False), 0, meta_from_array(x, ndim=1))


def argsort(x, descending=False, *, chunks=None):
    """Global int64 indices that sort `x` stably (numpy.argsort(kind="stable"))."""
    p = _plan(x, descending, chunks, "argsort")
    if not sum(p.sizes):
        return x.astype(np.int64).rechunk((p.out_chunks,))
    meta = meta_from_array(x, ndim=1, dtype=np.int64)
    return p.assemble(p.run(x, None, with_indices=True), 1, meta)


def sort_by_key(keys, values, descending=False, *, chunks=None):
    """(sorted keys, values in the same order), stable; values are 1-D dask
    arrays of 4- or 8-byte numbers, as long as keys (rechunked to keys' chunks)."""
    values = _check_values(values, keys)
    p = _plan(keys, descending, chunks, "sort-by-key", values.name)
    if not sum(p.sizes):
        return keys.rechunk((p.out_chunks,)), values.rechunk((p.out_chunks,))
    merged = p.run(keys, values, with_indices=False)
    return (p.assemble(merged, 0, meta_from_array(keys, ndim=1)),
            p.assemble(merged, 1, meta_from_array(values, ndim=1)))


def plan(x, descending=False, chunks=None) -> SortPlan:
    """The stages of sort(x, descending, chunks=chunks), to run (and time) one
    by one: SortPlan.local_sort, sample, partition, exchange, merge."""
    return _plan(x, descending, chunks, "sort")


def _plan(x, descending, chunks, *names) -> SortPlan:
    """The SortPlan of sorting `x` (checked) into `chunks` (default: x's);
    `names` tell this sort's tasks from other sorts of x."""
    _check_keys(x)
    if not isinstance(descending, (bool, np.bool_)):
        raise TypeError(f"descending must be True or False, got {descending!r}")
    sizes = tuple(int(n) for n in x.chunks[0])
    out = sizes if chunks is None else _out_chunks(chunks, x)
    return SortPlan(sizes, out, bool(descending), tokenize(x.name, bool(descending), out, *names))


# ------------------------------------------------------------ argument checks
def _check_keys(x) -> None:
    if not isinstance(x, da.Array):
        raise TypeError(f"cudasortkit.dask sorts dask arrays, got {type(x).__module__}.{type(x).__name__}; "
                        "use cudasortkit.sort for NumPy/CuPy/PyTorch arrays")
    if x.ndim != 1:
        raise ValueError(f"cudasortkit.dask sorts 1-D dask arrays, got {x.ndim}-D")
    if any(math.isnan(n) for n in x.chunks[0]):
        raise ValueError("chunk sizes are unknown; call x.compute_chunk_sizes() first")
    if np.dtype(x.dtype).kind not in "biuf":
        raise TypeError(f"dtype {x.dtype} is not supported: keys are bool, integers or floats")


CHUNKS_ACCEPTED = ("a chunk length (an int >= 1), -1 (one chunk), a byte size or 'auto' (a str), "
                   "or the chunk lengths (ints >= 0 adding up to the number of keys)")


def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _out_chunks(chunks, x) -> tuple:
    """The output chunk lengths `chunks` asks for, read as dask.array reads a
    1-D chunk spec (CHUNKS_ACCEPTED; a one-item sequence is that item, as in
    dask), after checking it: dask itself divides by zero for a length of 0
    and makes negative lengths of one below -1."""
    spec = chunks[0] if isinstance(chunks, (tuple, list)) and len(chunks) == 1 else chunks
    if isinstance(spec, (tuple, list)):
        if not all(_is_int(c) for c in spec):
            raise TypeError(f"chunks={chunks!r}: chunk lengths must be ints; chunks is {CHUNKS_ACCEPTED}")
        if any(c < 0 for c in spec) or sum(spec) != x.shape[0]:
            raise ValueError(f"chunks={chunks!r}: chunk lengths must be >= 0 and add up to the "
                             f"{x.shape[0]} keys; chunks is {CHUNKS_ACCEPTED}")
    elif _is_int(spec):
        if spec < 1 and spec != -1:
            raise ValueError(f"chunks={chunks!r}: a chunk length must be at least 1; chunks is {CHUNKS_ACCEPTED}")
    elif not isinstance(spec, str):
        raise TypeError(f"chunks={chunks!r} is not a chunk spec; chunks is {CHUNKS_ACCEPTED}")
    return tuple(int(n) for n in normalize_chunks(chunks, shape=x.shape, dtype=x.dtype)[0])


def _check_values(values, keys):
    _check_keys(keys)
    if not isinstance(values, da.Array) or values.ndim != 1:
        raise TypeError(f"values must be a 1-D dask array, got {type(values).__name__}")
    if any(math.isnan(n) for n in values.chunks[0]):
        raise ValueError("values chunk sizes are unknown; call values.compute_chunk_sizes() first")
    if values.shape != keys.shape:
        raise ValueError(f"keys and values differ in length: {keys.shape[0]} != {values.shape[0]}")
    value_bytes(values.dtype)  # the rule cudasortkit.sort_by_key keeps (complex64 too)
    return values.rechunk(keys.chunks)
