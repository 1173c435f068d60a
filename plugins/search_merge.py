"""searchsorted "merge": the queries sorted first (calls/search.py's
argsort), then one merge-path pass of a and the sorted queries, scattering
every answer to its query's place (kernels/search.cu's csk_search_merge).
One row without sorter only; measured slower than binary and tree (see
the costs below), so it runs when named."""
from __future__ import annotations

import math

from ..sdk.search import LAUNCH_UNITS, ROUND_UNITS, SearchPlugin, SearchQuery

#: Costs in the estimates' unit (one dependent global load of one query,
#: what binary's estimate counts), from an H200 at 2^24 float32 queries into
#: 2^24 keys: binary 1.78 ms for an estimate of 15 a query (so ~7 ps a
#: unit); merge 3.9 ms, its argsort of the queries ~0.7 ms (~6 units a
#: query) and its merge pass 3.2 ms over 2^25 keys and queries (~13 units
#: an item: a diagonal search a thread, queries read through their order).
#: So merge is declared slower than binary (and tree) wherever those serve:
#: it runs when named.
SORT_COST_PER_QUERY = 6.0
MERGE_COST_PER_ITEM = 13.0
#: Launches of the queries' argsort the merge waits for (a one-sweep
#: sort's count and passes).
SORT_LAUNCHES = 4


class MergeSearch(SearchPlugin):
    name = "merge"
    summary = "queries sorted, then merge path against a (long v)"
    templates = ("search.cu",)
    needs_query_order = True
    config = {"block_size": 256, "items_per_thread": 8}

    def unsupported(self, query: SearchQuery) -> str | None:
        if query.rows != 1:
            return "merges one row (batched a goes to binary)"
        if query.sorter:
            return "merges a without sorter"
        return None

    def estimate(self, query: SearchQuery) -> float:
        # The critical path: the argsort's launches (SORT_LAUNCHES), the
        # merge's launch after them, its diagonal search.
        chain = (SORT_LAUNCHES + 1) * LAUNCH_UNITS + ROUND_UNITS * math.log2(query.n + query.m + 1)
        return query.m * SORT_COST_PER_QUERY + (query.n + query.m) * MERGE_COST_PER_ITEM + chain

    def note(self, query: SearchQuery) -> str:
        return "an argsort of the queries, then a merge pass over keys and queries"

    def run(self, job, query: SearchQuery) -> None:
        kernel = job.kernel("search.cu", "csk_search_merge")
        block, items = job.config["block_size"], job.config["items_per_thread"]
        grid = job.blocks(query.n + query.m, block * items)
        job.launch(kernel, grid, block, query.a, query.n, query.v, query.query_order, query.m,
                   int(query.right), query.out)
