"""searchsorted "merge": for long query arrays, the queries sorted first
(calls/search.py's argsort), then one merge-path pass of a and the sorted
queries, scattering every answer to its query's place (kernels/search.cu's
csk_search_merge). One row without sorter only."""
from __future__ import annotations

from ..sdk.search import SearchPlugin, SearchQuery

#: What the query argsort costs per query, in the units of the merge pass
#: (one key or query read): a declared guess until the tuner measures it.
SORT_COST_PER_QUERY = 6.0


class MergeSearch(SearchPlugin):
    name = "merge"
    summary = "queries sorted, then merge path against a (long v)"
    templates = ("search.cu",)
    needs_query_order = True
    config = {"block_size": 256, "samples": 0, "items_per_thread": 8}

    def unsupported(self, query: SearchQuery) -> str | None:
        if query.rows != 1:
            return "merges one row (batched a goes to binary)"
        if query.sorter:
            return "merges a without sorter"
        return None

    def estimate(self, query: SearchQuery) -> float:
        return query.m * (SORT_COST_PER_QUERY + 1) + query.n

    def run(self, job, query: SearchQuery) -> None:
        kernel = job.kernel("search.cu", "csk_search_merge")
        block, items = job.config["block_size"], job.config["items_per_thread"]
        grid = job.blocks(query.n + query.m, block * items)
        job.launch(kernel, grid, block, query.a, query.n, query.v, query.query_order, query.m,
                   int(query.right), query.out)
