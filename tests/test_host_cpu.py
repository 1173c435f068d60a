"""Host pipeline pieces that need no GPU: the device memory limit (parsing,
the config function, the environment), out-of-core planning (pieces,
buckets, splitters, runs of buckets)."""
import numpy as np
import pytest

import cudasortkit as csk
from cudasortkit.host import memlimit
from cudasortkit.host import outofcore
from cudasortkit.host import placement
from cudasortkit.settings import parse_size


@pytest.fixture(autouse=True)
def _no_limit(monkeypatch):
    monkeypatch.delenv(memlimit.ENV, raising=False)
    csk.set_device_memory_limit(None)
    yield
    csk.set_device_memory_limit(None)


@pytest.mark.parametrize("text, expected", [
    ("1GiB", 2**30), ("1 GiB", 2**30), ("512MiB", 512 * 2**20), ("8mib", 8 * 2**20),
    ("2GB", 2 * 10**9), ("1.5GiB", 3 * 2**29), ("1e9", 10**9), ("4096", 4096),
    ("100kb", 100_000), ("1KiB", 1024), ("3T", 3 * 10**12), (12345, 12345), ("7 b", 7),
])
def test_sizes_parse_with_units(text, expected):
    assert parse_size(text, memlimit.ENV, positive=True) == expected


@pytest.mark.parametrize("text", ["", "GiB", "1 GiBs", "one", "-1GiB", "0", "1..2MB", "1 G i B"])
def test_bad_sizes_are_refused_naming_the_variable(text):
    with pytest.raises(ValueError, match="CUDASORTKIT_DEVICE_MEMORY_LIMIT"):
        parse_size(text, memlimit.ENV, positive=True)


def test_a_bool_is_not_a_size():
    with pytest.raises(TypeError):
        csk.set_device_memory_limit(True)


def test_the_config_function_wins_over_the_environment(monkeypatch):
    assert csk.device_memory_limit() is None
    monkeypatch.setenv(memlimit.ENV, "1GiB")
    assert csk.device_memory_limit() == 2**30
    csk.set_device_memory_limit("8MiB")
    assert csk.device_memory_limit() == 8 * 2**20
    csk.set_device_memory_limit(None)
    assert csk.device_memory_limit() == 2**30
    monkeypatch.setenv(memlimit.ENV, "lots")
    with pytest.raises(ValueError, match="lots"):
        csk.device_memory_limit()
    with pytest.raises(ValueError, match="set_device_memory_limit"):
        csk.set_device_memory_limit("0 MiB")


@pytest.mark.parametrize("n, piece", [(n, p) for n in (1, 2, 7, 4096, 4097, 10**5 + 3)
                                       for p in (1, 3, 4096, 611_669)]
                         + [(2**30, 89_478_485), (2**30 + 1, 2**28)])
def test_chunks_cover_every_key_once_and_fit(n, piece):
    parts = outofcore.chunks(n, piece)
    assert parts[0][0] == 0 and parts[-1][1] == n
    assert all(a < b <= a + piece for a, b in parts)
    assert all(parts[i][1] == parts[i + 1][0] for i in range(len(parts) - 1))
    assert len(parts) == -(-n // piece)


def test_plan_fits_the_budget_and_refuses_a_tiny_one():
    piece, buckets = outofcore.plan(2**30, 12, 2**30)
    assert piece * 12 <= 2**30 and piece > 2**26
    assert buckets >= 2**30 / (piece * outofcore.FILL)
    with pytest.raises(MemoryError, match="set_device_memory_limit"):
        outofcore.plan(10**6, 48, 100_000)
    with pytest.raises(MemoryError, match="buckets"):
        outofcore.plan(2**40, 12, 8 << 20)


def test_splitters_are_unique_ascending_and_heavy_words_get_their_own_bucket():
    rng = np.random.default_rng(5)
    words = np.concatenate([rng.integers(0, 1000, 5000), np.full(5000, 500)]).astype(np.uint64)
    sp = outofcore.splitters_from_sample(words, 16, 2**32 - 1)
    assert np.all(np.diff(sp.astype(np.int64)) > 0)
    b = int(np.searchsorted(sp, 500, side="right"))  # the bucket of 500
    assert outofcore.one_value(sp, b, 2**32 - 1)
    assert sp[b - 1] == 500 and sp[b] == 501
    assert outofcore.splitters_from_sample(np.zeros(0, np.uint64), 4, 255).size == 0


def test_the_last_bucket_at_the_largest_word_holds_one_value():
    top = 2**64 - 1
    sp = outofcore.splitters_from_sample(np.full(100, top, np.uint64), 4, top)
    assert list(sp) == [top]  # no top + 1
    assert outofcore.one_value(sp, 1, top) and not outofcore.one_value(sp, 0, top)


def test_bucket_runs_skip_settled_buckets_and_fit_a_piece():
    totals = [5, 5, 0, 1, 9, 3, 3, 3, 20]
    single = [False, False, False, False, False, True, False, False, False]
    runs = outofcore.groups(totals, single, 10)
    assert runs == [(0, 2), (4, 5), (6, 8), (8, 9)]
    covered = {b for first, stop in runs for b in range(first, stop)}
    assert covered == {0, 1, 4, 6, 7, 8}


@pytest.mark.parametrize("counts, n", [([3, 0, 5, 1], 1000), ([0, 0, 0], 7), ([1], 5),
                                       ([10**6, 1, 1], 3), ([2, 2], 0)])
def test_estimates_sum_to_n_in_proportion(counts, n):
    est = placement.estimates(np.array(counts), n)
    assert est.sum() == n and (est >= 0).all() and len(est) == len(counts)
    if sum(counts):
        share = np.array(counts) / sum(counts) * n
        assert np.all(np.abs(est - share) <= 1)


@pytest.mark.parametrize("totals, piece", [([5, 5, 5], 10), ([0, 25, 3, 0, 9], 10),
                                           ([1] * 30, 7), ([30], 10), ([10, 10], 10)])
def test_placed_parts_tile_the_result_and_fit(totals, piece):
    parts = outofcore.placed_parts(totals, piece)
    edges = np.concatenate([[0], np.cumsum(totals)])
    assert [p[0] for p in parts] == [0] + [p[1] for p in parts[:-1]]
    assert parts[-1][1] == sum(totals)
    assert all(0 < hi - lo <= piece for lo, hi, _ in parts)
    for lo, hi, sort in parts:  # a sorted part holds whole buckets; a moved one lies in one bucket
        if sort:
            assert lo in edges and hi in edges
        else:
            b = np.searchsorted(edges, lo, side="right") - 1
            assert totals[b] > piece and hi <= edges[b + 1]


def test_protect_saves_unread_parts_and_keeps_their_order():
    out = np.arange(20, dtype=np.int64)
    place = placement.Placement([out], [10, 10], limit=1 << 20)
    place.fill[:] = [10, 10]
    place.start_reading()
    first = place.take(4)
    assert [list(k) for k, in first] == [[0, 1, 2, 3]]
    place.protect(2, 15)  # 4..9 of bucket 0 and 10..14 of bucket 1 are unread there
    out[2:15] = -1
    rest = np.concatenate([k for k, in place.take(16)])
    assert list(rest) == list(range(4, 20))
    with pytest.raises(placement.SpillFull):
        placement.Placement([out], [20], limit=15).place(0, 22)
