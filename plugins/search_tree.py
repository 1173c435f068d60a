"""searchsorted "tree": one row without sorter through an implicit static
search tree (kernels/search_tree.cu). Per call, one launch builds the levels
above a (every FANOUT-th key, then every FANOUT^2-th, ... until a level has
at most TOP entries); the search copies that top level to shared memory in
every block, counts the top entries before each query there, then goes
down one level at a time reading one group of FANOUT contiguous entries
(FANOUT lanes together), ending in a itself. For 2^24 float32 keys: levels
of 2M, 256K, 32K and 4K entries, four dependent global reads of one 32-byte
sector a query, where "binary" makes about fourteen."""
from __future__ import annotations

from ..sdk.search import LAUNCH_UNITS, ROUND_UNITS, SearchPlugin, SearchQuery

#: Levels above a the kernel has room for (CSK_TREE_MAX_DEPTH).
MAX_DEPTH = 32
#: The blocks a full device runs at once, for the estimate's top copies (an
#: H100's 132 SMs x 4 blocks of 256 threads).
DEVICE_BLOCKS = 528


def tree_levels(n: int, fanout: int, top: int) -> list:
    """Lengths of levels 1, 2, ...: ceil(n / fanout^k), up to the first one
    of at most `top` entries (none when n <= top: a is the top)."""
    lengths, length = [], int(n)
    while length > top:
        length = -(-length // fanout)
        lengths.append(length)
    return lengths


def levels_words(lengths, fanout: int) -> int:
    """Words of the levels buffer: each level rounded up to whole groups
    (the kernel's level offsets)."""
    return sum(-(-length // fanout) * fanout for length in lengths)


class TreeSearch(SearchPlugin):
    name = "tree"
    summary = "one row: a static search tree, its top in shared memory, one sector a level"
    templates = ("search_tree.cu",)
    #: fanout 8: a group of 1-, 2- and 4-byte keys lies in one 32-byte
    #: sector (8-byte keys: two; a fanout of 4 would add levels); 16 lanes a
    #: group would hold twice the registers (the compiled kernel with 8 keeps
    #: 3-4 blocks of 256 threads an SM, with 16 one or two) for one level
    #: less at 2^24 keys.
    config = {"block_size": 256, "fanout": 8, "top": 4096}
    #: Repeats replay its launches: the levels, their buffer and both grids
    #: come from the query's shape alone, and the build reads `a` again on
    #: every call.
    replayable = True

    def unsupported(self, query: SearchQuery) -> str | None:
        if query.rows != 1:
            return "searches one row (batched a goes to binary)"
        if query.sorter:
            return "searches a without sorter"
        config = self.default_config(query.dtype)
        most = config["fanout"] << 31
        if query.n > most:  # the kernel counts in levels 1.. in 32 bits
            return f"searches at most {most:,} keys of {query.dtype}"
        if len(tree_levels(query.n, config["fanout"], config["top"])) > MAX_DEPTH:
            return f"builds at most {MAX_DEPTH} levels (top {config['top']})"
        return None

    def estimate(self, query: SearchQuery) -> float:
        # In binary's unit (a query's dependent global load): one a level
        # and one for the shared top, reading every fanout-th key of a to
        # build level 1 (whole sectors of a), and every block's copy of the
        # top (coalesced, 32 keys a load).
        config = self.default_config(query.dtype)
        fanout, block = config["fanout"], config["block_size"]
        lengths = tree_levels(query.n, fanout, config["top"])
        top = lengths[-1] if lengths else query.n
        blocks = min(-(-query.m // block), DEVICE_BLOCKS)
        build = query.n / fanout if lengths else 0.0
        # The critical path: the build's launch and load (when there are
        # levels), the top's copy, a load a level, the last in a itself.
        chain = ROUND_UNITS * (len(lengths) + 2) + (LAUNCH_UNITS + ROUND_UNITS if lengths else 0)
        return query.m * (len(lengths) + 1) + build + blocks * top / 32 + chain

    def note(self, query: SearchQuery) -> str:
        config = self.default_config(query.dtype)
        lengths = tree_levels(query.n, config["fanout"], config["top"])
        if not lengths:
            return f"all {query.n:,} keys in shared memory"
        return (f"{len(lengths)} global reads a query (fanout {config['fanout']}) after a "
                f"{lengths[-1]:,}-entry top in shared memory; building the levels reads every "
                f"{config['fanout']}th key")

    def run(self, job, query: SearchQuery) -> None:
        config = job.config
        block, fanout = config["block_size"], config["fanout"]
        lengths = tree_levels(query.n, fanout, config["top"])  # at most MAX_DEPTH: unsupported()
        levels = 0
        if lengths:
            words = levels_words(lengths, fanout)
            levels = int(job.alloc(words * job.key_bytes))
            build = job.kernel("search_tree.cu", "csk_search_tree_build")
            grid = min(job.blocks(words, block), job.limits.sm_count * 32)
            job.launch(build, grid, block, query.a, query.n, levels, len(lengths), words)
        search = job.kernel("search_tree.cu", "csk_search_tree")
        resident = max(1, search.resident_blocks(job.limits, block))
        grid = min(job.blocks(query.m, block), job.limits.sm_count * resident)
        job.launch(search, max(grid, 1), block, query.a, query.n, levels, len(lengths), query.v,
                   query.m, int(query.right), query.out)
