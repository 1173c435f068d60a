"""searchsorted "binary": one thread per query, a binary search in global
memory after one in shared memory over SAMPLES evenly spaced keys (one-row
searches), kernels/search.cu's csk_search_binary. Any rows, any sorter."""
from __future__ import annotations

import math

from ..sdk.search import ROUND_UNITS, SearchPlugin, SearchQuery

#: Grid-stride launches: blocks per SM at most.
BLOCKS_PER_SM = 16


class BinarySearch(SearchPlugin):
    name = "binary"
    summary = "a thread per query; the top of the search in shared memory"
    templates = ("search.cu",)
    config = {
        "block_size": 256,
        # keys of a one-row search cached in shared memory (0: none)
        "samples": 1024,
    }
    #: Repeats replay its launch: the grid comes from the query's shape and
    #: the device alone.
    replayable = True

    def _levels(self, query: SearchQuery) -> float:
        # Every query pays one dependent global load per halving of its
        # range; the shared samples take log2(SAMPLES) of them off one row.
        levels = math.log2(query.n + 1)
        if self._sampled(query):
            levels = max(1.0, levels - math.log2(self.config["samples"]))
        return levels

    def _sampled(self, query: SearchQuery) -> bool:
        return query.rows == 1 and query.n >= 2 * self.config["samples"]

    def estimate(self, query: SearchQuery) -> float:
        # The critical path: the samples' load, then a load a level (two
        # through a sorter).
        chain = (math.ceil(self._levels(query)) * (2 if query.sorter else 1)
                 + self._sampled(query))
        return query.rows * query.m * (self._levels(query) + 1) + ROUND_UNITS * chain

    def note(self, query: SearchQuery) -> str:
        return f"about {self._levels(query):.0f} dependent global loads a query"

    def run(self, job, query: SearchQuery) -> None:
        kernel = job.kernel("search.cu", "csk_search_binary")
        block = job.config["block_size"]
        grid = min(job.blocks(query.rows * query.m, block),
                   job.limits.sm_count * BLOCKS_PER_SM)
        job.launch(kernel, max(grid, 1), block, query.a, query.sorter, query.n, query.v, query.m,
                   query.rows, int(query.right), query.out)
