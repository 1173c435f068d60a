"""The sample sort as a Dask graph, one method per stage.

    local sort   P tasks      each input chunk sorted by cudasortkit
    sample       P + 1        regular samples of each, one task brackets the boundaries
    partition    P + 1 + P*Q  each chunk's windows, one task makes the exact splits,
                              P*Q slices (views, on the chunk's worker)
    exchange     Q            output chunk j concatenates its P slices (Dask moves them)
    merge        Q            output chunk j sorts what it received

Every stage returns Delayed objects and can be persisted before the next one
(tools/dask_bench.py --phases times them that way); the public functions in
cudasortkit.dask chain them into one lazy graph.
"""
from __future__ import annotations

from dataclasses import dataclass
from operator import getitem

import dask
import dask.array as da
import numpy as np
from dask.highlevelgraph import HighLevelGraph

from . import chunks
from .splitters import brackets, exact_splits, output_boundaries, samples_per_chunk


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
