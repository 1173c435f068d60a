"""The search plugin "kary" without a GPU: kernels/search_kary.cu's rounds
emulated in NumPy, rule for rule (the probes lo + (j + 1) len / (L + 1),
the ballot's count t, the range [p_{t-1} + 1, p_t], the last read of at
most L keys), against np.searchsorted on both sides, with ties, NaNs,
-0.0, sorter and rows, at sizes around every lane count; its round count,
declarations, launch geometry and where auto takes it."""
import numpy as np
import pytest

from cudasortkit.plugins.search_kary import KarySearch, kary_rounds
from cudasortkit.sdk import registry
from cudasortkit.sdk.search import SearchPlugin, SearchQuery

from test_search_tree_cpu import _ordered

SIZES = [0, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 34, 97, 1088, 1089, 4099, 65537]
LANES = (4, 8, 16, 32)


def _kary(words, x, right, lanes, sorter=None) -> tuple:
    """(answer, rounds) of one query, as csk_search_kary's group computes
    them; `words` the row's ordered keys (read through `sorter` if given)."""
    def key(k):
        return words[k if sorter is None else sorter[k]]

    def before(w):
        return w <= x if right else w < x

    lo, hi, rounds = 0, len(words), 0
    while hi - lo > lanes:
        length = hi - lo
        probes = [lo + (j + 1) * length // (lanes + 1) for j in range(lanes)]
        assert lo < probes[0] and all(p < q for p, q in zip(probes, probes[1:])) and probes[-1] < hi
        votes = [before(key(p)) for p in probes]
        t = sum(votes)
        assert votes == [True] * t + [False] * (lanes - t)  # a prefix: a is sorted
        new_lo = lo + t * length // (lanes + 1) + 1 if t > 0 else lo
        if t < lanes:
            hi = lo + (t + 1) * length // (lanes + 1)
        lo = new_lo
        rounds += 1
    count = sum(before(key(lo + j)) for j in range(hi - lo))
    return lo + count, rounds


def _keys(rng, n, dtype):
    if np.dtype(dtype).kind == "f":
        pool = np.array([np.nan, -0.0, 0.0, 1.0, -1.0, np.inf, -np.inf, 2.5, 3.0], dtype)
        a = np.concatenate([pool[rng.integers(0, len(pool), n // 2)],
                            rng.standard_normal(n - n // 2).astype(dtype)])
    else:
        a = rng.integers(-20, 20, n).astype(dtype)
    return np.sort(a)


@pytest.mark.parametrize("lanes", LANES)
@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_kary_rounds_are_numpys_searchsorted(lanes, side, dtype):
    rng = np.random.default_rng(lanes)
    for n in SIZES:
        a = _keys(rng, n, dtype)
        v = np.concatenate([a[rng.integers(0, max(n, 1), 20)] if n else a[:0],
                            _keys(rng, 20, dtype)]).astype(dtype)
        words, queries = _ordered(a), _ordered(v)
        expected = np.searchsorted(a, v, side)
        for x, want in zip(queries, expected):
            got, rounds = _kary(words, x, side == "right", lanes)
            assert got == want, (n, lanes, side)
            assert rounds <= kary_rounds(n, lanes), (n, lanes)


@pytest.mark.parametrize("side", ["left", "right"])
def test_kary_through_a_sorter_and_rows(side):
    """Row r reads a[r n + sorter[r n + k]]: each row as NumPy's searchsorted
    with that row's sorter."""
    rng = np.random.default_rng(3)
    rows, n, m = 3, 1000, 50
    a = rng.standard_normal((rows, n)).astype(np.float32)
    a[0, :7] = np.nan
    sorter = np.argsort(a, axis=1, kind="stable")
    v = rng.standard_normal((rows, m)).astype(np.float32)
    for r in range(rows):
        expected = np.searchsorted(a[r], v[r], side, sorter[r])
        got = [_kary(_ordered(a[r]), x, side == "right", 32, sorter[r])[0]
               for x in _ordered(v[r])]
        assert np.array_equal(got, expected)


def test_kary_round_counts():
    """Each round leaves at most ceil(len / (L + 1)) keys: 2^24 keys take four
    rounds of 32 lanes (and the last read: five loads), 2^10 one; the
    emulation never takes more (test above)."""
    assert kary_rounds(1 << 24, 32) == 4 and kary_rounds(1 << 24, 16) == 5
    assert kary_rounds(1 << 10, 32) == 1
    assert kary_rounds(32, 32) == 0 and kary_rounds(33, 32) == 1 and kary_rounds(0, 32) == 0


def test_kary_is_registered_and_declared():
    plugins = registry.plugins(SearchPlugin.entry_point_group)
    assert isinstance(plugins["kary"], KarySearch)
    SearchPlugin.check_declarations(KarySearch, "kary")
    assert KarySearch.replayable and not KarySearch.needs_query_order
    assert KarySearch().unsupported(SearchQuery("float32", 10, 10, 3, True, sorter=1)) is None


class _Job:
    class limits:
        sm_count = 132

    def __init__(self, config):
        self.config, self.launches = config, []

    def kernel(self, template, name):
        return (template, name)

    def blocks(self, items, per_block):
        return -(-int(items) // int(per_block))

    def launch(self, kernel, grid, block, *args):
        self.launches.append((kernel, grid, block, args))


def test_kary_launch_geometry():
    """One launch of csk_search_kary with the kernel's eight arguments; a
    thread a lane, blocks capped at 16 an SM."""
    plugin = KarySearch()
    for m, grid in ((1024, 128), (1, 1), (1 << 20, 132 * 16)):
        query = SearchQuery("float32", 1 << 24, m, 1, False, a=16, v=32, out=48)
        job = _Job(plugin.default_config("float32"))
        plugin.run(job, query)
        (kernel, g, block, args), = job.launches
        assert kernel == ("search_kary.cu", "csk_search_kary") and (g, block) == (grid, 256)
        assert args == (16, 0, 1 << 24, 32, m, 1, 0, 48)


@pytest.mark.parametrize("m, n, plugin", [(1 << 10, 1 << 16, "kary"), (1 << 10, 1 << 24, "kary"),
                                          (1 << 16, 1 << 24, "binary"),
                                          (1 << 20, 1 << 24, "tree"),
                                          (1 << 10, 1 << 10, "tree")])
def test_auto_takes_kary_for_few_queries_into_many_keys(m, n, plugin):
    """Declared estimates: few queries are bound by their dependent loads
    (kary's five against binary's fifteen at 2^24 keys); many by traffic,
    where kary's 32 reads a round lose."""
    from cudasortkit.calls.search import _decide

    for dtype in ("float32", "int64"):
        assert _decide(SearchQuery(dtype, n, m, 1, False), "auto").plugin == plugin, (m, n, dtype)

