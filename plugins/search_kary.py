"""searchsorted "kary": LANES lanes a query read LANES evenly spaced keys of
its range at once and vote, so the range shrinks (LANES + 1)-fold a
dependent load (kernels/search_kary.cu's csk_search_kary). Nothing is built
and nothing read beyond the probes: one launch, no temporaries. For few
queries into many keys, whose time is their chain of dependent loads
(2^10 queries into 2^24 keys: five loads a query where "binary" waits on
about fifteen); with many queries its LANES reads a round cost bandwidth
the others do not spend. Any rows, any sorter."""
from __future__ import annotations

from ..sdk.search import ROUND_UNITS, SearchPlugin, SearchQuery

#: Grid-stride launches: blocks per SM at most.
BLOCKS_PER_SM = 16


def kary_rounds(n: int, lanes: int) -> int:
    """The rounds of probes before the range holds at most `lanes` keys
    (each leaves at most ceil(len / (lanes + 1)) of len keys)."""
    rounds, length = 0, int(n)
    while length > lanes:
        length = -(-length // (lanes + 1))
        rounds += 1
    return rounds


class KarySearch(SearchPlugin):
    name = "kary"
    summary = "lanes a query probe its range together: few dependent loads (few queries)"
    templates = ("search_kary.cu",)
    #: 32 lanes: a 2^24-key range in four rounds and the last read (16: five).
    config = {"block_size": 256, "lanes": 32}
    #: run() depends on the query's shape only: repeats replay its launch.
    replayable = True

    def _loads(self, query: SearchQuery) -> int:
        """Dependent loads of one query: the rounds and the last read, twice
        through a sorter."""
        loads = kary_rounds(query.n, self.config["lanes"]) + 1
        return loads * (2 if query.sorter else 1)

    def estimate(self, query: SearchQuery) -> float:
        # Every lane's read is one load (the lower rounds' probes lie in
        # sectors of their own), and a query's loads wait on each other.
        loads = self._loads(query)
        return query.rows * query.m * self.config["lanes"] * loads + ROUND_UNITS * loads

    def note(self, query: SearchQuery) -> str:
        return (f"{self._loads(query)} dependent loads a query, {self.config['lanes']} lanes "
                "reading together")

    def run(self, job, query: SearchQuery) -> None:
        kernel = job.kernel("search_kary.cu", "csk_search_kary")
        block = job.config["block_size"]
        threads = query.rows * query.m * job.config["lanes"]
        grid = min(job.blocks(threads, block), job.limits.sm_count * BLOCKS_PER_SM)
        job.launch(kernel, max(grid, 1), block, query.a, query.sorter, query.n, query.v, query.m,
                   query.rows, int(query.right), query.out)
