"""The search plugin "tree" without a GPU: kernels/search_tree.cu's level
layout and counting emulated in NumPy (build kernel's word -> (level,
entry) walk, the shared top's Eytzinger walk, one group a level with the
count kept at the level's end, the clamp to n) against np.searchsorted,
both sides, on ties, NaNs, -0.0, pads and sizes around every fanout and top
boundary; its geometry, declarations and where auto takes it."""
import numpy as np
import pytest

import cudasortkit as csk
from cudasortkit.plugins.search_tree import TreeSearch, levels_words, tree_levels
from cudasortkit.sdk import registry
from cudasortkit.sdk.search import SearchPlugin, SearchQuery

SIZES = [0, 1, 2, 15, 16, 17, 255, 256, 257, 4095, 4096, 4097, 65537]


def _ordered(k: np.ndarray) -> np.ndarray:
    """keys.cuh's csk_to_ordered in NumPy, as uint64: NaNs all ones (the
    pad word), -0.0 as +0.0, unsigned order = NumPy's order."""
    bits = 8 * k.dtype.itemsize
    ones, sign = np.uint64((1 << bits) - 1), np.uint64(1 << (bits - 1))
    u = k.view(f"u{k.dtype.itemsize}").astype(np.uint64)
    if k.dtype.kind == "i":
        return u ^ sign
    if k.dtype.kind == "f":
        u = np.where(k == 0, np.uint64(0), u)
        u = np.where(u & sign != 0, ~u & ones, u | sign)
        return np.where(np.isnan(k), ones, u)
    return u


def _build(words: np.ndarray, fanout: int, top: int, ones) -> np.ndarray:
    """csk_search_tree_build: buffer word t is entry g of level k, found by
    walking the levels' rooms; it holds a[F^k (g + 1) - 1] or the pad."""
    n = len(words)
    lengths = tree_levels(n, fanout, top)
    total = levels_words(lengths, fanout)
    g, k = np.arange(total), np.zeros(total, np.int64)
    done = np.zeros(total, bool)
    length = n
    for level in range(1, len(lengths) + 1):
        length = -(-length // fanout)
        room = -(-length // fanout) * fanout
        here = ~done & ((g < room) | (level == len(lengths)))
        k[here], done[here] = level, True
        g = np.where(done, g, g - room)
    last = (g + 1) * fanout ** k - 1
    return np.where(last < n, words[np.minimum(last, max(n - 1, 0))], ones)


def _top_rank(p: int, top: int) -> int:
    """csk_tree_top_rank: the sorted entry at Eytzinger slot p of the top."""
    if p == 0:
        return top - 1
    d, bits = p.bit_length() - 1, top.bit_length() - 1
    return ((((p - (1 << d)) << 1) + 1) << (bits - 1 - d)) - 1


def _tree_search(words, x, right, fanout, top, ones) -> np.ndarray:
    """csk_search_tree's counts for queries x (ordered words)."""
    n = len(words)
    lengths = tree_levels(n, fanout, top)
    buf = _build(words, fanout, top, ones)
    at = np.concatenate([[0], np.cumsum([-(-ln // fanout) * fanout for ln in lengths])])
    level = {0: words}
    for k, length in enumerate(lengths, start=1):
        level[k] = buf[at[k - 1]:at[k - 1] + length]
        assert len(level[k]) == length
    depth = len(lengths)

    def before(w, q):
        return w <= q if right else w < q

    top_len = lengths[-1] if lengths else n
    entries = np.full(top, ones, np.uint64)  # the top, pads up to TOP
    entries[:top_len] = level[depth]
    shared = entries[[_top_rank(p, top) for p in range(top)]]  # Eytzinger order
    p = np.ones(len(x), np.int64)
    for _ in range(top.bit_length() - 1):  # the walk ends at TOP + count in 0 .. TOP-2
        p = 2 * p + before(shared[p], x)
    c = p - top
    c += (c == top - 1) & before(shared[0], x)
    c = np.minimum(c, top_len)
    member = np.arange(fanout)
    for k in range(depth - 1, -1, -1):
        length = len(level[k])
        index = c[:, None] * fanout + member
        w = np.where(index < length, level[k][np.minimum(index, max(length - 1, 0))], ones)
        c = c * fanout + before(w, x[:, None]).sum(axis=1)
        if k:  # levels above a keep a count past their end at their end
            assert c.max(initial=0) < 1 << 32
            c = np.minimum(c, length)
    return np.minimum(c, n)


def _inputs(dtype, n, rng):
    """Sorted keys with ties, NaNs, zeros of both signs, infinities (floats),
    extremes (integers); queries: keys of a, the specials, random values."""
    dt = np.dtype(dtype)
    if dt.kind == "f":
        pool = np.array([np.nan, -np.inf, np.inf, -0.0, 0.0, 1.0, -1.0, 2.5], dt)
        a = np.concatenate([pool, rng.standard_normal(n).astype(dt),
                            rng.integers(-3, 3, n).astype(dt)])
    else:
        info = np.iinfo(dt)
        pool = np.array([info.min, info.max, 0, 1], dt)
        a = np.concatenate([pool, rng.integers(info.min, info.max, n, dtype=dt, endpoint=True),
                            rng.integers(0, 3, n).astype(dt)])
    # kind="stable": NumPy 2.4's default float16 sort (x86-simd-sort, AVX512_ICL)
    # returned unsorted arrays here, 34 of 100 of 65,537 keys (as order.numpy_kind says).
    a = np.sort(rng.choice(a, n), kind="stable") if n else a[:0]
    v = np.concatenate([pool, a[: 200], rng.choice(a, 200) if n else pool,
                        rng.choice(pool, 100)])
    return a, v


@pytest.mark.parametrize("fanout, top", [(8, 16), (16, 32), (4, 8), (32, 64), (8, 4096),
                                         (16, 4096)])
@pytest.mark.parametrize("dtype", ["float32", "float16", "int8", "uint16", "int64", "float64"])
def test_emulated_counting_is_searchsorted(fanout, top, dtype, rng):
    dt = np.dtype(dtype)
    ones = np.uint64((1 << (8 * dt.itemsize)) - 1)
    for n in SIZES:
        a, v = _inputs(dtype, n, rng)
        for side in ("left", "right"):
            got = _tree_search(_ordered(a), _ordered(v), side == "right", fanout, top, ones)
            assert np.array_equal(got, np.searchsorted(a, v, side)), (n, side)


def test_emulated_counting_deep_tree(rng):
    """Six levels above a (fanout 4, top 8), n off every boundary."""
    ones = np.uint64(0xFFFFFFFF)
    for n in (32769, 40000, 65535):
        a = np.sort(rng.integers(-50, 50, n).astype(np.float32))
        a[-7:] = np.nan
        v = np.concatenate([a[::97], [np.nan, -0.0, 100.0, -100.0]]).astype(np.float32)
        assert len(tree_levels(n, 4, 8)) >= 6
        for side in ("left", "right"):
            got = _tree_search(_ordered(a), _ordered(v), side == "right", 4, 8, ones)
            assert np.array_equal(got, np.searchsorted(a, v, side))


def test_tree_levels_geometry():
    assert tree_levels(1 << 24, 8, 4096) == [1 << 21, 1 << 18, 1 << 15, 1 << 12]
    assert tree_levels(1 << 24, 16, 4096) == [1 << 20, 1 << 16, 1 << 12]
    assert tree_levels(4096, 8, 4096) == [] and tree_levels(0, 8, 4096) == []
    assert tree_levels(4097, 8, 4096) == [513]
    assert levels_words([513, 65], 8) == 520 + 72


def test_top_ranks_are_eytzinger_order():
    """Slots 1 .. TOP-1 hold a complete binary search tree of entries
    0 .. TOP-2 (node p's children 2p, 2p+1), slot 0 entry TOP-1."""
    for top in (2, 4, 16, 4096):
        ranks = [_top_rank(p, top) for p in range(top)]
        assert sorted(ranks) == list(range(top)) and ranks[0] == top - 1

        def inorder(p):
            return inorder(2 * p) + [ranks[p]] + inorder(2 * p + 1) if p < top else []

        assert inorder(1) == list(range(top - 1))


def test_tree_config():
    plugin = registry.plugins(SearchPlugin.entry_point_group)["tree"]
    assert isinstance(plugin, TreeSearch)
    config = plugin.default_config("float32")
    assert config["fanout"] in (4, 8, 16, 32) and 32 % config["fanout"] == 0
    assert config["top"] & (config["top"] - 1) == 0  # the Eytzinger walk's complete tree
    assert config["block_size"] % 32 == 0


def test_tree_serves_one_row_without_sorter():
    plugin = registry.plugins(SearchPlugin.entry_point_group)["tree"]
    one = SearchQuery("float32", n=1000, m=10, rows=1, right=False)
    assert plugin.unsupported(one) is None
    assert "one row" in plugin.unsupported(SearchQuery("float32", 1000, 10, 2, False))
    assert "sorter" in plugin.unsupported(SearchQuery("float32", 1000, 10, 1, False, sorter=1))
    huge = SearchQuery("uint8", n=(8 << 31) + 1, m=10, rows=1, right=False)
    assert "at most" in plugin.unsupported(huge)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int16", "uint8"])
def test_auto_takes_tree_for_long_one_row_searches(dtype):
    for n in (1 << 16, 1 << 24):
        decision = csk.explain_searchsorted(np.zeros(n, dtype), np.zeros(n, dtype))
        assert decision.plugin == "tree", str(decision)
    # few queries into many keys: the build (every fanout-th key, a launch
    # more to wait for) is not paid back
    few = csk.explain_searchsorted(np.zeros(1 << 24, dtype), np.zeros(1000, dtype))
    assert few.plugin == "kary", str(few)
    assert few.estimates["tree"] > few.estimates["binary"], str(few)
    from test_unique_search_cpu import _OnDevice  # a name is for device arrays

    named = csk.explain_searchsorted(_OnDevice((10,), dtype), _OnDevice((3,), dtype),
                                     algorithm="tree")
    assert named.plugin == "tree" and "all 10 keys in shared memory" in str(named)
