"""The collective sort behind exchange="nccl" (cudasortkit/dask/collective.py,
explicit.py), on the CPU: its exact cuts against NumPy directly (ranks as
threads), and whole sorts through Dask with the in-process thread
communicator on a LocalCluster(processes=False) with NumPy chunks: the same
code as on GPU workers, NCCL swapped for threads."""
import threading

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

import dask  # noqa: E402

import cudasortkit.dask as cskd  # noqa: E402
from cudasortkit.dask import (buffers, collective, comm, counting, cuts, exchange, explicit, layout,  # noqa: E402
                              options, partition)
from helpers import (assert_keys_equal, make_keys, on_thread_ranks, reference_argsort,  # noqa: E402
                     thread_cluster_client)


# ------------------------------------------------------- ranks as threads


def test_thread_comm_allgather_and_alltoallv():
    def body(c, rank):
        got = c.allgather(np.array([rank, 10 * rank]))
        buf = np.arange(6) + 100 * rank                      # 3 ranks: pieces of 1, 2, 3 from rank 0...
        starts, counts = [0, 1, 3], [1, 2, 3]
        recv = [[1, 2, 3][rank]] * 3
        return got, c.alltoallv(buf, starts, counts, recv), c.allreduce_sum(np.array([[rank, 1]]))

    results = on_thread_ranks(3, body)
    for rank, (got, recv, total) in enumerate(results):
        assert np.array_equal(got, [[0, 0], [1, 10], [2, 20]])
        assert total.dtype == np.int64 and np.array_equal(total, [[3, 3]])
        a, n = [0, 1, 3][rank], [1, 2, 3][rank]
        assert np.array_equal(recv, np.concatenate([np.arange(a, a + n) + 100 * s for s in range(3)]))


@pytest.mark.parametrize("members", [(0, 1, 2), (2, 0, 1)])
def test_ordered_alltoallv_gives_runs_or_one_array_in_logical_order(members):
    """Logical rank s sends its s-th piece; joined, the runs come as one
    array in logical order, the received buffer itself where logical order
    is the communicator's."""
    def body(c, rank):
        received = []
        real = c.alltoallv
        c.alltoallv = lambda *args: received.append(real(*args)) or received[-1]
        ordered = collective.Ordered(c, members)
        me = ordered.rank
        buf = np.arange(6) + 100 * me                       # pieces of 1, 2, 3 elements
        pieces, recv = [0, 1, 3, 6], [[1, 2, 3][me]] * 3
        got = ordered.alltoallv(buf, pieces, recv)
        joined = ordered.alltoallv(buf, pieces, recv, joined=True)
        return me, got, joined, joined is received[-1]

    for me, got, joined, uncopied in on_thread_ranks(3, body):
        a, n = [0, 1, 3][me], [1, 2, 3][me]
        assert [list(r) for r in got] == [list(np.arange(a, a + n) + 100 * s) for s in range(3)]
        assert np.array_equal(joined, np.concatenate(got))
        assert uncopied == (members == (0, 1, 2))


def test_a_failing_rank_releases_the_others():
    def body(c, rank):
        if rank == 1:
            raise KeyError("rank 1 failed")
        c.allgather(np.zeros(1))

    with pytest.raises(KeyError, match="rank 1 failed"):
        on_thread_ranks(3, body)


# ------------------------------------------------------ the ordered words
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("dtype", ["bool", "int8", "uint16", "int32", "uint64", "int64",
                                   "float16", "float32", "float64"])
def test_ordered_words_order_as_numpy_sorts(dtype, descending):
    """counting.encode (the kernels' csk_encode): words ascend in the
    requested order, equal keys (-0.0 and +0.0, every NaN) have one word,
    NaNs last both ways, the dtype's ends included."""
    rng = np.random.default_rng(3)
    a = make_keys("special" if dtype.startswith("float") else "uniform", dtype, 3000, rng)
    if dtype.startswith("float"):
        a[:4] = [-0.0, 0.0, np.nan, -np.nan]
    elif dtype != "bool":
        a[:2] = [np.iinfo(dtype).min, np.iinfo(dtype).max]
    words = counting.encode(a, descending)
    order = reference_argsort(a, descending)
    assert words.dtype == np.uint64 and (np.diff(words[order].astype(np.float64)) >= 0).all()
    ranks = np.empty(len(a), np.int64)
    ranks[order] = np.arange(len(a))
    same = words[:, None] == words[None, :]
    equal = (a[:, None] == a[None, :]) | (np.isnan(a.astype(np.float64))[:, None]
                                          & np.isnan(a.astype(np.float64))[None, :])
    assert np.array_equal(same, equal)
    assert int(words.max()) <= counting.top(dtype)


@pytest.mark.parametrize("side", [0, 1])
def test_count_words_counts_within_windows(side):
    rng = np.random.default_rng(4)
    a = np.sort(rng.integers(-50, 50, 400).astype(np.int32))[::-1].copy()      # descending
    words = counting.encode(np.array([[-60, -3, 0, 7, 49, 50], [0, 0, 1, 2, 3, 4]], np.int32), True)
    lo, hi = np.array([0, 17]), np.array([400, 230])
    got = counting.count_words(a, words.reshape(2, 6), lo, hi, True, side)
    w = counting.encode(a, True)
    for t in range(2):
        window = w[lo[t]:hi[t]]
        expect = [(window <= q).sum() if side else (window < q).sum() for q in words.reshape(2, 6)[t]]
        assert list(got[t]) == expect
    assert np.array_equal(counting.count_words(a, words.reshape(2, 6), lo, hi, True, side, out=got.copy()),
                          2 * got)


# ------------------------------------------------------- exact cuts
def sorted_runs(a, descending, ranks, rng, runs_per_rank=3):
    """a cut into intervals of global indices dealt to ranks at random,
    each rank's intervals sorted stably as its runs (cuts.Run: keys in the
    requested order, positions within the interval, its start)."""
    bounds = np.unique(np.concatenate([[0, len(a)], rng.integers(0, len(a), ranks * runs_per_rank)]))
    owner = rng.integers(0, ranks, len(bounds) - 1)
    out = [[] for _ in range(ranks)]
    for (b, e), r in zip(zip(bounds[:-1], bounds[1:]), owner):
        order = reference_argsort(a[b:e], descending)
        out[r].append(cuts.Run(a[b:e][order], order.astype(np.uint32), int(b)))
    return out


@pytest.mark.parametrize("bits", [8, 12])
@pytest.mark.parametrize("stable", [False, True])
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("dist, dtype", [("uniform", "uint32"), ("few_unique", "int64"), ("special", "float32"),
                                         ("all_equal", "float64"), ("uniform", "int8"), ("uniform", "bool"),
                                         ("special", "float16")])
def test_exact_cuts_take_the_first_t_of_the_global_order(dist, dtype, descending, stable, bits, monkeypatch):
    """Every run of every rank cut so that the elements before the cuts are
    the first t of (key, global index) (stable) or of the keys (plain), at
    any candidate spacing (the GPUs' 2^16 takes fewer rounds, same code)."""
    monkeypatch.setattr(cuts, "HOST_CANDIDATE_BITS", bits)
    rng = np.random.default_rng(11)
    a = make_keys(dist, dtype, 997, rng)
    parts = sorted_runs(a, descending, 3, rng)
    targets = [0, 1, 2, 100, 333, 500, 996, 997]
    expected = reference_argsort(a, descending)

    def body(c, rank):
        return cuts.exact_cuts(c, parts[rank], targets, len(a), stable, descending, a.dtype, np)

    counts = on_thread_ranks(3, body)
    for j, t in enumerate(targets):
        assert sum(int(c[j].sum()) for c in counts) == t
        taken = np.concatenate([np.asarray(r.start + r.pos[:c[j, i]], np.int64)
                                for runs, c in zip(parts, counts) for i, r in enumerate(runs)])
        if stable:   # exactly the first t of (key, global index)
            assert np.array_equal(np.sort(taken), np.sort(expected[:t])), f"target {t}"
        else:        # the first t keys as values, ties from any rank
            assert_keys_equal(np.sort(a[taken]), np.sort(a[expected[:t]]))


def test_candidates_are_exact_in_64_bits():
    lo = np.array([0, 5, 2**64 - 2**20, 0], np.uint64)
    hi = np.array([2**64 - 1, 5, 2**64 - 1, 3], np.uint64)
    cand = cuts._candidates(np, lo, hi, 16)
    for t in range(4):
        expect = [int(lo[t]) + (int(hi[t]) - int(lo[t])) * c // 2**16 for c in range(1, 2**16)]
        assert [int(v) for v in cand[t]] == expect


def test_worker_starts_split_output_chunks_by_the_ranks_key_counts():
    starts, first = cuts.worker_starts([10, 0, 30], [0, 4, 8, 12, 20, 30, 30, 40])
    assert list(first) == [0, 2, 2, 7] and list(starts) == [0, 8, 8, 40]
    starts, first = cuts.worker_starts([5, 5], [0, 0, 10, 10])    # a midpoint on a boundary: the later rank
    assert list(first) == [0, 1, 3] and list(starts) == [0, 0, 10]


# ------------------------------------------- whole sorts through Dask, threads
@pytest.fixture(scope="module")
def client():
    with thread_cluster_client(3) as c:
        yield c


def run(op, x, values=None, descending=False, out_chunks=None, timings=None):
    out = x.chunks[0] if out_chunks is None else out_chunks
    return explicit.run(op, x, values, descending, out, "threads", timings)


def check(result, expected, out_chunks):
    assert result.chunks == (tuple(out_chunks),)
    blocks = dask.compute(*result.to_delayed().ravel())
    assert [len(b) for b in blocks] == list(out_chunks)
    got = np.concatenate(blocks) if blocks else np.empty(0)
    if got.dtype.kind in "f":
        assert_keys_equal(got, expected)
    else:
        assert np.array_equal(got, expected)


CASES = [   # (dist, dtype, chunks): empty chunks, one key, primes, uneven, many chunks per worker
    ("uniform", "uint32", (0, 1, 0, 0)),
    ("uniform", "int64", (7, 0, 13, 0, 1, 101, 0, 3)),
    ("few_unique", "int16", (250,) * 12),
    ("special", "float64", (0, 401, 1, 0, 599)),
    ("all_equal", "float32", (97, 0, 89, 1)),
    ("reverse", "int32", (30,) * 40),
    ("uniform", "bool", (50, 50, 7)),
]


@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("dist, dtype, sizes", CASES)
def test_sort_argsort_sort_by_key_match_numpy(client, dist, dtype, sizes, descending):
    rng = np.random.default_rng(sum(sizes))
    a = make_keys(dist, dtype, sum(sizes), rng)
    before = a.copy()
    x = da.from_array(a, chunks=(sizes,))
    values = rng.integers(-2**40, 2**40, len(a))
    expected = reference_argsort(a, descending)
    s, = run("sort", x, descending=descending)
    check(s, a[expected], sizes)
    i, = run("argsort", x, descending=descending, out_chunks=(len(a),))
    check(i, expected, (len(a),))
    k, v = run("sort_by_key", x, da.from_array(values, chunks=(sizes,)), descending)
    check(k, a[expected], sizes)
    check(v, values[expected], sizes)
    assert np.array_equal(a.view(np.uint8), before.view(np.uint8)), "input was modified"


def place(client, a, sizes, owners):
    """A dask array of chunks `sizes` whose nonempty chunk i is held by worker owners[i].
    The workers come from the scheduler itself: the client's cached
    scheduler_info() may list none for a moment (a flake seen under load)."""
    workers = client.run_on_scheduler(lambda dask_scheduler: sorted(dask_scheduler.workers))
    at = np.concatenate([[0], np.cumsum(sizes)])
    parts = [client.scatter(a[at[i]:at[i + 1]], workers=[workers[w]], hash=False) for i, w in enumerate(owners)]
    arrays = [da.from_delayed(p, (n,), dtype=a.dtype) for p, n in zip(parts, sizes)]
    x = da.concatenate(arrays).rechunk((tuple(sizes),)).persist()
    distributed.wait(x)
    who = client.who_has(x)
    held = [workers.index(who[k][0]) for k in dask.core.flatten(x.__dask_keys__())]
    assert [w for w, n in zip(held, sizes) if n] == [w for w, n in zip(owners, sizes) if n]
    return x


@pytest.mark.parametrize("owners", [(0, 0, 1, 1, 2, 2), (2, 2, 0, 0, 1, 1), (0, 1, 2, 0, 1, 2), (1, 1, 1, 1, 1, 1)])
@pytest.mark.parametrize("op", ["argsort", "sort_by_key"])
def test_ties_keep_global_index_order_whatever_the_placement(client, owners, op):
    """Contiguous placement (pairwise stable merge in rank order), interleaved
    (ordered by (key, global index)) and all on one worker."""
    rng = np.random.default_rng(5)
    sizes = (40, 0, 33, 51, 12, 64)
    a = rng.integers(0, 4, sum(sizes)).astype(np.float64)
    a[::9] = np.nan
    x = place(client, a, sizes, owners)
    for descending in (False, True):
        expected = reference_argsort(a, descending)
        if op == "argsort":
            i, = run("argsort", x, descending=descending)
            check(i, expected, sizes)
        else:
            values = np.arange(len(a)) * 3
            k, v = run("sort_by_key", x, da.from_array(values, chunks=(sizes,)), descending, (100, 100))
            check(v, values[expected], (100, 100))


@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("dtype", ["int8", "uint16", "int32", "uint32", "bool", "float16", "float32", "int64"])
def test_interleaved_chunks_keep_ties_in_global_index_order(client, dtype, descending):
    """Chunks interleaved across workers: each chunk is its own run, the
    received runs lie in global index order and merge with ties to the
    earlier run; ties, the dtype's ends, NaN, -0.0 and +0.0 (keys come back
    bit for bit)."""
    rng = np.random.default_rng(len(dtype))
    sizes = (40, 0, 33, 51, 12, 64, 7)
    a = make_keys("special" if dtype.startswith("float") else "few_unique", dtype, sum(sizes), rng)
    if dtype.startswith("float"):
        a[::5], a[1::7], a[2::11] = -0.0, 0.0, np.nan
    elif dtype != "bool":
        info = np.iinfo(dtype)
        a[::13], a[1::17] = info.min, info.max
    x = place(client, a, sizes, (0, 1, 2, 0, 1, 2, 0))
    expected = reference_argsort(a, descending)
    times = []
    i, = run("argsort", x, descending=descending, timings=times)
    check(i, expected, sizes)
    values = rng.integers(-2**40, 2**40, len(a))
    k, v = run("sort_by_key", x, da.from_array(values, chunks=(sizes,)), descending, (100, 0, 107))
    check(v, values[expected], (100, 0, 107))
    got = np.concatenate(dask.compute(*k.to_delayed().ravel()))
    assert np.array_equal(got.view(np.uint8), a[expected].view(np.uint8)), "keys changed bits"


def test_workers_come_from_the_scheduler_not_the_clients_cached_identity(client, monkeypatch):
    """Client.scheduler_info() returns a cache that the client's periodic
    refresh can swap for one listing no workers (seen as a sort failing with
    no ranks, and would be a worker 'leaving' mid-sort): asked directly."""
    monkeypatch.setattr(client, "scheduler_info", lambda *a, **k: {"workers": {}})
    assert len(explicit._members(client)) == 3
    s, = run("sort", da.from_array(np.arange(50)[::-1].copy(), chunks=7))
    check(s, np.arange(50), (7,) * 7 + (1,))


def test_output_chunks_other_than_the_input(client):
    rng = np.random.default_rng(9)
    a = rng.lognormal(0, 4, 1000).astype(np.float32)
    x = da.from_array(a, chunks=100)
    for out in [(1000,), (1, 998, 1), (0, 500, 0, 500, 0), (250,) * 4]:
        s, = run("sort", x, out_chunks=out)
        check(s, np.sort(a), out)


def test_tasks_grow_linearly_with_the_chunks(client):
    """P input tasks, then W + Q: one task per worker and one per output chunk."""
    p = 300
    x = da.from_array(np.arange(p * 4)[::-1].copy(), chunks=4).persist()
    distributed.wait(x)

    def count(dask_scheduler):
        return len(dask_scheduler.tasks)

    before = client.run_on_scheduler(count)
    s, = run("sort", x)
    after = client.run_on_scheduler(count)
    assert len(s.__dask_graph__()) == p
    assert after - before <= 3 + p, f"{after - before} tasks for {p} chunks on 3 workers"
    assert np.array_equal(s.compute(), np.arange(p * 4))


def test_phase_timings_per_worker(client):
    times = []
    run("argsort", da.from_array(np.arange(100.0), chunks=10), timings=times)
    assert len(times) == 3
    phases = {"start", "local sort", "splitters", "exchange", "merge"}
    assert all(phases <= set(t) and all(k in phases or k.split(": ")[0] in phases for k in t) for t in times)
    assert all("exchange: barrier" in t and "local sort: sort" in t for t in times)
    # start: seconds from the client's submission to the rank's task (one machine's clock)
    assert all(0 <= t["start"] < 60 for t in times)


@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("dtype, lo, width", [
    ("uint8", 0, 256), ("int8", -128, 256), ("int16", -3, 7), ("uint16", 65_000, 256),
    ("int32", -2**31, 200), ("uint32", 2**32 - 256, 256), ("uint32", 5, 1), ("bool", 0, 2),
    ("int32", 1000, 257), ("uint32", 0, 2**32)])
def test_a_narrow_integer_range_is_sorted_from_counts(client, dtype, lo, width, descending):
    """Integer keys spanning at most collective.NARROW values are written
    from the summed counts (no exchange); one value more takes the exchange.
    Interleaved chunks, an empty worker's share, the dtype's extremes."""
    rng = np.random.default_rng(width)
    sizes = (300, 0, 1, 257, 64, 2, 130)
    a = (lo + rng.integers(0, width, sum(sizes), dtype=np.int64)).astype(dtype)
    a[:2] = [lo, lo + width - 1]             # both ends present: the range is exactly `width`
    x = place(client, a, sizes, (1, 1, 0, 1, 0, 0, 1))   # worker 2 holds nothing
    times = []
    for out in [sizes, (len(a),), (100, 0, 500, 154)]:
        s, = run("sort", x, descending=descending, out_chunks=out, timings=times)
        check(s, np.sort(a)[::-1] if descending else np.sort(a), out)
    narrow = width <= collective.NARROW
    assert all(("counts and fill" in t) == narrow and ("exchange" in t) != narrow for t in times)


def lying_chunks(dtype_of_block, declared_chunks, declared_dtype):
    def block(b):
        return np.arange(len(b) + dtype_of_block[1], dtype=dtype_of_block[0])[::-1]

    return da.zeros(sum(declared_chunks), chunks=(declared_chunks,)).map_blocks(
        block, dtype=declared_dtype, chunks=(declared_chunks,))


def test_bad_chunks_raise_their_own_error_and_the_next_sort_works(client):
    with pytest.raises(TypeError, match=r"input chunk \d has dtype float32, not the float64"):
        run("sort", lying_chunks((np.float32, 0), (10, 10, 10), np.float64))
    with pytest.raises(ValueError, match=r"input chunk \d has shape \(11,\), not the \(10,\)"):
        run("argsort", lying_chunks((np.float64, 1), (10, 10, 10), np.float64))
    s, = run("sort", da.from_array(np.arange(30)[::-1].copy(), chunks=10))
    assert np.array_equal(s.compute(), np.arange(30))


def test_the_public_functions_refuse_nccl_where_it_cannot_run(client):
    x = da.from_array(np.arange(10.0), chunks=5)
    with pytest.raises(ValueError, match="exchange='nccl' sorts device \\(CuPy\\) chunks"):
        cskd.sort(x, exchange="nccl")
    with pytest.raises(ValueError, match="exchange is one of 'auto', 'nccl', 'p2p', 'tasks'"):
        cskd.sort(x, exchange="mpi")
    assert cskd.plan(x).exchange in ("p2p", "tasks")   # NumPy chunks: never nccl
    with pytest.raises(ValueError, match="unknown"):
        cskd.sort(x[x > 3], exchange="nccl")
    with pytest.raises(ValueError, match="1-D"):
        cskd.sort(da.zeros((3, 3)), exchange="nccl")


def test_nccl_needs_a_distributed_client(monkeypatch):
    from types import SimpleNamespace

    from cudasortkit.dask import cluster

    class DeviceArray:   # stands for cupy.ndarray: only its module is read
        pass

    DeviceArray.__module__ = "cupy._core.core"
    x = SimpleNamespace(_meta=DeviceArray())
    assert not cskd._on_host(x)
    monkeypatch.setattr(cluster, "default_client", lambda: None)
    with pytest.raises(ValueError, match="exchange='nccl' runs on Dask's distributed scheduler"):
        cskd._exchange("nccl", False, None, 4)
    assert cskd._exchange("auto", False, None, 4) == "tasks"


def test_prepare_makes_the_communicator_and_warms_ahead_of_the_first_sort(client):
    """After prepare, a sort makes no communicator and warms nothing more."""
    explicit.prepare(("int16",), ("sort", "argsort"), (False, True), "threads", "numpy")
    made, warmed = dict(explicit._communicators), set(explicit._warmed)
    assert {(w[1], w[2], w[3]) for w in warmed} >= {(np.dtype("int16").str, op, d)
                                                     for op in ("sort", "argsort") for d in (False, True)}
    x = da.from_array(np.arange(50, dtype=np.int16)[::-1].copy(), chunks=7)
    i, = run("argsort", x, descending=True)
    assert np.array_equal(i.compute(), np.arange(50))
    assert explicit._communicators == made and explicit._warmed == warmed
    with pytest.raises(ValueError, match="op='topk': one of"):
        explicit.prepare(("int16",), ("topk",), (False,), "threads", "numpy")


def wait_for(name):
    return distributed.Event(name).wait(60)


def test_a_worker_leaving_during_the_collective_raises_instead_of_waiting(client):
    """The client stops waiting for the W tasks once one's worker is gone
    (it cannot move: the other ranks wait for it inside the collective)."""
    release = distributed.Event("csk-test-release")
    pending = client.submit(wait_for, "csk-test-release", pure=False)   # runs until released
    try:
        with pytest.raises(RuntimeError, match="worker tcp://gone:1 left the cluster during a collective sort"):
            explicit.wait_watching(client, [pending], ["tcp://gone:1"], poll=0.05)
    finally:
        release.set()
    done = client.submit(int, 3)
    explicit.wait_watching(client, [done], ["tcp://gone:1"], poll=0.05)   # finished: no error


# ------------------------------------------- NcclComm's offsets, NCCL faked
class FakeDeviceArray(np.ndarray):
    """A NumPy array with CuPy's .data.ptr and .get(): what NcclComm reads."""

    @property
    def data(self):
        from types import SimpleNamespace

        return SimpleNamespace(ptr=self.ctypes.data)

    def get(self, stream=None):
        return np.asarray(self).copy()


class FakeNccl:
    """cupy.cuda.nccl for ranks that are threads: send/recv/allGather copy
    bytes between raw pointers (ctypes) when each rank's group ends."""
    NCCL_UINT8 = 1
    NCCL_INT64 = 5
    NCCL_SUM = 0

    def __init__(self, size):
        self.barrier, self.mail, self.local = threading.Barrier(size, timeout=30), {}, threading.local()

    def get_unique_id(self):
        return (1, 2, 3)

    def groupStart(self):
        self.local.ops = []

    def groupEnd(self):
        import ctypes

        ops, me = self.local.ops, self.local.rank
        for op, ptr, n, peer in ops:
            if op == "send":
                self.mail[(me, peer)] = ctypes.string_at(ptr, n)
        self.barrier.wait()
        for op, ptr, n, peer in ops:
            if op == "recv":
                data = self.mail[(peer, me)]
                assert len(data) == n, f"rank {me} expects {n} bytes from {peer}, {len(data)} were sent"
                ctypes.memmove(ptr, data, n)
        self.barrier.wait()
        self.mail.clear() if me == 0 else None
        self.barrier.wait()

    def NcclCommunicator(self, size, uid, rank):
        fake = self

        class Comm:
            def __init__(self):
                fake.local.rank = rank

            def send(self, ptr, n, dtype, peer, stream):
                assert dtype == fake.NCCL_UINT8 and peer != rank
                fake.local.ops.append(("send", ptr, n, peer))

            def recv(self, ptr, n, dtype, peer, stream):
                assert dtype == fake.NCCL_UINT8 and peer != rank
                fake.local.ops.append(("recv", ptr, n, peer))

            def allGather(self, send, recv, n, dtype, stream):
                fake.groupStart()
                for peer in range(size):
                    if peer != rank:
                        self.send(send, n, dtype, peer, stream)
                        self.recv(recv + peer * n, n, dtype, peer, stream)
                import ctypes

                ctypes.memmove(recv + rank * n, send, n)
                fake.groupEnd()

            def allReduce(self, send, recv, n, dtype, op, stream):
                import ctypes

                assert (dtype, op) == (fake.NCCL_INT64, fake.NCCL_SUM)
                fake.mail[("sum", rank)] = np.frombuffer(ctypes.string_at(send, 8 * n), np.int64)
                fake.barrier.wait()
                total = np.sum([fake.mail[("sum", r)] for r in range(size)], axis=0, dtype=np.int64)
                ctypes.memmove(recv, total.tobytes(), 8 * n)
                fake.barrier.wait()
                fake.mail.clear() if rank == 0 else None
                fake.barrier.wait()

            def abort(self):
                fake.barrier.abort()

        return Comm()


@pytest.fixture
def fake_cupy(monkeypatch):
    import sys
    from types import ModuleType, SimpleNamespace

    nccl = FakeNccl(3)
    cupy = ModuleType("cupy")
    cupy.ndarray = FakeDeviceArray
    cupy.empty = lambda n, dtype: np.empty(n, dtype).view(FakeDeviceArray)
    cupy.zeros = lambda n, dtype: np.zeros(n, dtype).view(FakeDeviceArray)
    cupy.asarray = lambda a: np.array(a).view(FakeDeviceArray)
    cuda = ModuleType("cupy.cuda")
    cuda.nccl = nccl
    cuda.get_current_stream = lambda: SimpleNamespace(ptr=0, synchronize=lambda: None)
    cupy.cuda = cuda
    for name, module in (("cupy", cupy), ("cupy.cuda", cuda), ("cupy.cuda.nccl", nccl)):
        monkeypatch.setitem(sys.modules, name, module)
    return nccl


@pytest.mark.parametrize("dtype", ["uint8", "float32", "int64"])
def test_nccl_comm_moves_each_piece_to_its_peer(fake_cupy, dtype):
    """NcclComm's byte offsets and counts (pieces at any start, empty ones,
    the piece for itself) give what ThreadComm gives."""
    starts = [[5, 0, 8], [0, 0, 3], [2, 7, 7]]      # rank r sends buf[starts[r][s]:+counts[r][s]] to s
    counts = [[3, 0, 4], [2, 1, 6], [0, 4, 2]]

    def body(make):
        def run(c, rank):
            buf = (np.arange(12) + 100 * rank).astype(dtype)
            recv = [counts[s][rank] for s in range(3)]
            if make is not None:
                c = make(rank)
                buf = buf.view(FakeDeviceArray)
            got = c.alltoallv(buf, starts[rank], counts[rank], recv)
            return (np.asarray(got), c.allgather(np.array([rank, 7 * rank])),
                    c.allreduce_sum(np.array([[rank, 1 << 40], [-rank, 5]], np.int64)))
        return run

    expected = on_thread_ranks(3, body(None))
    got = on_thread_ranks(3, body(lambda rank: comm.NcclComm((1, 2, 3), 3, rank)))
    for (e_recv, e_all, e_sum), (g_recv, g_all, g_sum) in zip(expected, got):
        assert g_recv.dtype == np.dtype(dtype) and np.array_equal(g_recv, e_recv)
        assert np.array_equal(g_all, e_all)
        assert np.array_equal(g_sum, e_sum) and np.array_equal(g_sum, [[3, 3 << 40], [-3, 15]])


def test_nccl_send_recv_matches_pieces_in_order_and_probes_ipc(fake_cupy):
    """NcclComm.send_recv: the k-th piece a rank sends to a peer fills the
    k-th piece that peer receives from it (pieces for itself copied); a
    communicator whose ranks cannot map each other's memory says so."""
    def run(c, rank):
        c = comm.NcclComm((1, 2, 3), 3, rank)
        sends = [((rank + d) % 3, (np.arange(2 + d) + 10 * rank + 100 * d).view(FakeDeviceArray))
                 for d in (0, 1, 2, 1)]
        outs = [((rank - d) % 3, np.zeros(2 + d, np.int64).view(FakeDeviceArray)) for d in (0, 1, 2, 1)]
        c.send_recv(sends, outs)
        return c.ipc_ready, [np.asarray(o).tolist() for _, o in outs]

    for rank, (ready, got) in enumerate(on_thread_ranks(3, run)):
        assert ready is False      # the stand-in cupy has no device memory to map
        for (d, out) in zip((0, 1, 2, 1), got):
            src = (rank - d) % 3
            assert out == list(np.arange(2 + d) + 10 * src + 100 * d)


def test_auto_picks_nccl_for_device_chunks_where_the_workers_have_it(client, monkeypatch):
    from types import SimpleNamespace

    class DeviceArray:   # stands for cupy.ndarray: only its module is read
        pass

    DeviceArray.__module__ = "cupy._core.core"
    device, hosted = SimpleNamespace(_meta=DeviceArray()), SimpleNamespace(_meta=np.empty(0))
    assert not cskd._on_host(device) and cskd._on_host(hosted)
    assert explicit.nccl_ready(client) is False          # CPU workers: no cupy.cuda.nccl
    assert cskd._exchange("auto", False, client, 4) == "tasks"
    monkeypatch.setattr(explicit, "nccl_ready", lambda c: True)
    assert cskd._exchange("auto", False, client, 4) == "nccl"
    assert cskd._exchange("auto", True, client, 400) == "p2p"


@pytest.mark.parametrize("dtype, narrow", [("uint32", True), ("int16", True), ("float32", False)])
def test_warm_up_also_sorts_a_narrow_key_range_of_integers(monkeypatch, dtype, narrow):
    """Integer keys of a narrow range take other plugins (counting) than
    random bits do, so the warm-up sorts both (each as two runs, as a
    worker's chunks are): the first real sort after prepare finds those
    kernels compiled too."""
    from types import SimpleNamespace

    spans = []
    real = collective.csk.sort

    def recording(keys, **kwargs):
        spans.append(int(keys.max()) - int(keys.min()) if keys.dtype.kind in "iu" else None)
        return real(keys, **kwargs)

    monkeypatch.setattr(collective.csk, "sort", recording)
    worker = SimpleNamespace(plugins={explicit.NAME: explicit.Collectives()})
    explicit.warm_up(np.dtype(dtype), "sort", False, 4096, "numpy", dask_worker=worker)
    assert len(spans) == (4 if narrow else 2)
    if narrow:
        assert min(spans[:2]) > 1000 and max(spans[2:]) <= 15
    explicit.warm_up(np.dtype(dtype), "sort", False, 4096, "numpy", dask_worker=worker)
    assert len(spans) == (4 if narrow else 2)  # once per worker, dtype and op


@pytest.mark.parametrize("dtype, op, narrow", [
    ("uint32", "sort", True), ("int16", "sort", True), ("float32", "sort", False), ("int64", "sort", False),
    ("int32", "argsort", False), ("float32", "argsort", False), ("uint16", "sort_by_key", False)])
def test_warm_up_runs_the_narrow_fill_and_the_counts(monkeypatch, dtype, op, narrow):
    """The warm-up runs what a narrow range runs (collective.from_counts)
    and the exact cuts' counts, of the keys and (argsort, sort_by_key) of
    the positions, which a one-rank collective has no boundary for: the
    first sort after prepare compiles nothing (on a GPU: CuPy's kernels of
    those steps too)."""
    from types import SimpleNamespace

    calls = []
    real_fill, real_count = collective.from_counts, counting.count_words
    monkeypatch.setattr(collective, "from_counts", lambda *a: calls.append("fill") or real_fill(*a))
    monkeypatch.setattr(counting, "count_words",
                        lambda a, *rest: calls.append(("count", a.dtype.str, len(a))) or real_count(a, *rest))
    worker = SimpleNamespace(plugins={explicit.NAME: explicit.Collectives()})
    explicit.warm_up(np.dtype(dtype), op, False, 4096, "numpy", dask_worker=worker)
    hubs = len(comm._hubs)
    explicit.warm_up(np.dtype(dtype), op, True, 4096, "numpy", dask_worker=worker)
    assert len(comm._hubs) == hubs, "each warm-up left a communicator hub behind"
    calls = calls[:len(calls) // 2]   # the descending warm-up ran the same steps again
    assert calls.count("fill") == narrow
    assert any(c[:2] == ("count", np.dtype(dtype).str) and c[2] > 16 for c in calls)
    assert (("count", np.dtype(np.uint32).str, 16) in calls) == (op != "sort")   # the positions


def test_a_persisted_input_is_not_persisted_again(client, monkeypatch):
    """An input whose chunks are all finished futures goes straight to the
    collective (no update_graph message to wait behind); any other input is
    persisted first."""
    x = client.persist(da.from_array(np.arange(40, dtype=np.int32)[::-1].copy(), chunks=9))
    distributed.wait(x)
    calls = []
    persist = client.persist
    monkeypatch.setattr(client, "persist", lambda c, *a, **k: calls.append(c) or persist(c, *a, **k))
    s, = run("sort", x)
    assert np.array_equal(s.compute(), np.arange(40)) and calls == []
    lazy = da.from_array(np.arange(40, dtype=np.int32)[::-1].copy(), chunks=9)
    s, = run("sort", lazy)
    assert np.array_equal(s.compute(), np.arange(40)) and len(calls) == 1


@pytest.mark.parametrize("free, given_back", [(10_000, False), (2_999, True)])
def test_make_room_frees_cached_blocks_only_when_the_driver_is_short(free, given_back, monkeypatch):
    """Before a step that needs `need` bytes on a GPU rank: with less free on
    the driver, the pools' unused blocks go back."""
    from types import SimpleNamespace

    calls = []
    xp = SimpleNamespace(cuda=SimpleNamespace(runtime=SimpleNamespace(memGetInfo=lambda: (free, 10**6)),
                                              Device=lambda: SimpleNamespace(id=3)))
    monkeypatch.setattr(collective, "get_device",
                        lambda ordinal: SimpleNamespace(free_unused=lambda: calls.append(ordinal)))
    collective.make_room(xp, 3_000)
    assert calls == ([3] if given_back else [])
    collective.make_room(np, 10**12)    # host ranks: nothing to do


# ------------------------------------------- options, layout, exchange
def test_options_parse_and_refuse_what_they_do_not_know():
    assert options.parse("") == options.Options()
    o = options.parse(" exchange=ipc, runs=joined,order=ring,streams=3,split=64MiB,keep=1,merge=sort ")
    assert (o.exchange, o.runs, o.order, o.streams, o.split, o.keep, o.merge) == \
        ("ipc", "joined", "ring", 3, 64 << 20, 1, "sort")
    assert options.parse(o.text) == o and o.fingerprint != options.Options().fingerprint
    for bad, match in [("exchange=mpi", "not one of"), ("speed", "key=value"), ("keep=2", "out of range"),
                       ("color=red", "key=value")]:
        with pytest.raises(ValueError, match=match):
            options.parse(bad)


def test_runs_group_globally_adjacent_chunks():
    assert layout.group_chunks([0, 10, 31, 36], [10, 20, 5, 5], False) == [[0, 1], [2, 3]]
    assert layout.group_chunks([0, 10, 30, 35], [10, 20, 5, 5], False) == [[0, 1, 2, 3]]
    assert layout.group_chunks([0, 20, 40], [10, 10, 10], False) == [[0], [1], [2]]
    assert layout.group_chunks([0, 20, 40], [10, 10, 10], True) == [[0, 1, 2]]
    assert layout.group_chunks([], [], False) == []


def test_pieces_go_to_their_receivers_in_global_run_order():
    """Three ranks' runs (interleaved intervals), cut at the receivers'
    boundaries: every receiver lays its pieces out in the global run order,
    and the pieces between two ranks come in one order on both sides."""
    rows = np.array([layout.run_row([30, 0], [5, 10], 2), layout.run_row([10], [20], 2),
                     layout.run_row([], [], 2)])
    runs = layout.run_table(rows)
    assert [(r.rank, r.index, r.start, r.offset) for r in runs] == [(0, 1, 0, 5), (1, 0, 10, 0), (0, 0, 30, 0)]
    cuts = {0: layout.cut_rows(np.array([[2, 4], [5, 10]]), [5, 10]), 1: layout.cut_rows(np.array([[7], [20]]), [20]),
            2: layout.cut_rows(np.zeros((2, 0)), [])}
    plan, received = layout.pieces(runs, cuts, 3)
    assert list(received) == [4 + 7 + 2, 6 + 13 + 3, 0]
    _, in_place = layout.pieces(runs, cuts, 3, {0})     # rank 0 reads its own pieces where they are
    assert list(in_place) == [7, 6 + 13 + 3, 0]
    got = [(p.src, p.dst, p.src_offset, p.n, p.dst_offset, p.run) for p in plan]
    assert got == [(0, 0, 5, 4, 0, 0), (1, 0, 0, 7, 4, 1), (0, 0, 0, 2, 11, 2),
                   (0, 1, 9, 6, 0, 0), (1, 1, 7, 13, 6, 1), (0, 1, 2, 3, 19, 2)]


def test_an_arena_grows_and_its_views_are_its_bytes():
    arena = buffers.Arena()
    arena.take(300, np)
    a = arena.view(0, 10, np.int32)
    b = arena.view(buffers.aligned(40), 5, np.float64)
    a[:], b[:] = np.arange(10), 0.5
    assert arena.size == 512 and a.base is not None and np.all(b == 0.5) and list(a) == list(range(10))
    first = arena.memory
    assert arena.take(500, np).memory is first          # big enough: kept
    arena.take(1000, np, keep=True)
    assert arena.size == 1024 and arena.retired == [first]
    arena.free_retired()
    with pytest.raises(ValueError, match="past its 1024 bytes"):
        arena.view(1000, 10, np.int32)


@pytest.mark.parametrize("order, streams, split", [("all", 0, 0), ("all", 2, 0), ("ring", 0, 3), ("all", 1, 5)])
def test_copy_schedule_rings_and_splits(order, streams, split):
    opts = options.Options(order=order, streams=streams, split=split)
    copies = [(p, f"dst{p}", 0, f"src{p}", 100 * p, 8) for p in (3, 1, 2, 1)]
    lanes = exchange.schedule(copies, opts, 1, 4)
    flat = [c for lane in lanes for c in lane]
    assert sum(c[4] for c in flat) == 32                 # every byte once
    assert all(c[4] <= (split or 8) for c in flat)
    if order == "ring":
        assert len(lanes) == 1 and [c[0] for c in flat] == sorted((c[0] for c in flat), key=lambda d: (
            int(d[3]) - 2) % 4)                          # peers 2, 3, then rank 1's own copies
    else:
        assert len(lanes) == min(streams or 3, 3)


SETTINGS = ["", "exchange=nccl", "exchange=ipc,direction=push", "exchange=ipc,order=ring,split=64,streams=1",
            "runs=joined", "merge=sort", "exchange=nccl,merge=sort,runs=joined", "keep=1",
            "method=partition", "method=partition,exchange=nccl", "method=partition,segments=1",
            "method=partition,direction=push,keep=1", "method=partition,segments=90",
            "method=partition,segments=40,align=0"]


def collective_sort(a, sizes, owners, op, desc, ranks, values=None, out_bounds=None):
    """collective.sort_on_rank on threads: chunk i of `sizes` held by rank
    owners[i]; every rank's (result, phase times)."""
    at = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    declared = [sum(n for n, o in zip(sizes, owners) if o == r) for r in range(ranks)]
    bounds = tuple(int(b) for b in np.concatenate([[0], np.cumsum(declared)])) if out_bounds is None else out_bounds
    spec = collective.Spec(op, desc, a.dtype, bounds, tuple(declared), tuple(range(ranks)), False,
                           None if values is None else values.dtype, "numpy", True)

    def body(c, rank):
        mine = [i for i, (n, o) in enumerate(zip(sizes, owners)) if o == rank and n]
        local = collective.Local([a[at[i]:at[i + 1]] for i in mine], [int(at[i]) for i in mine], mine,
                                 [sizes[i] for i in mine],
                                 None if values is None else [values[at[i]:at[i + 1]] for i in mine])
        return collective.sort_on_rank(c, spec, local), local.times

    return on_thread_ranks(ranks, body)


@pytest.mark.parametrize("setting", SETTINGS)
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("dist, dtype", [("uniform", "uint32"), ("few_unique", "int64"), ("special", "float32"),
                                         ("all_equal", "float64"), ("reverse", "int16")])
def test_every_setting_sorts_as_numpy(setting, dist, dtype, descending, monkeypatch):
    """Every transport, direction, order, run layout and merge gives
    NumPy's order, ties in global index order (argsort, sort_by_key), with
    interleaved chunks, an empty chunk and a rank holding nothing."""
    monkeypatch.setenv("CUDASORTKIT_DASK_COLLECTIVE", setting)
    rng = np.random.default_rng(len(setting) + len(dtype))
    sizes, owners = [40, 0, 33, 51, 12, 64, 7, 90], [0, 1, 2, 0, 2, 0, 2, 0]    # rank 1 holds nothing
    a = make_keys(dist, dtype, sum(sizes), rng)
    expected = reference_argsort(a, descending)
    values = np.arange(len(a)) * 3 - 7
    for op in ("sort", "argsort", "sort_by_key"):
        out = collective_sort(a, sizes, owners, op, descending, 3, values if op == "sort_by_key" else None)
        keys = [r[0][0] for r in out]
        if op == "argsort":
            assert np.array_equal(np.concatenate([r[0][1] for r in out]), expected), op
        else:
            assert_keys_equal(np.concatenate(keys), a[expected])
        if op == "sort_by_key":
            assert np.array_equal(np.concatenate([r[0][1] for r in out]), values[expected])


def test_results_never_share_the_arena_with_the_next_sort(monkeypatch):
    """A rank's own piece is read in place from its send arena, which the
    next sort overwrites: a result that is that piece alone is a copy."""
    monkeypatch.setenv("CUDASORTKIT_DASK_COLLECTIVE", "keep=1")
    uid = comm.new_id("threads")
    ranks = [comm.ThreadComm(uid, 2, r) for r in range(2)]
    results = []

    def sort(a):
        spec = collective.Spec("sort", False, a.dtype, (0, 4, 8), (4, 4), (0, 1), True)

        def body(c, rank):
            local = collective.Local([a[4 * rank:4 * rank + 4]], [4 * rank], [rank], [4])
            return collective.sort_on_rank(ranks[rank], spec, local)
        return on_thread_ranks(2, body)

    first = sort(np.array([3, 1, 2, 0, 7, 5, 6, 4], np.int64) * 1000)       # each rank keeps its own keys
    kept = [k.copy() for k, _ in first]
    results.append(sort(np.array([9, 8, 7, 6, 5, 4, 3, 2], np.int64)))
    assert [list(k) for k, _ in first] == [list(k) for k in kept]


@pytest.mark.parametrize("setting", ["", "exchange=nccl", "method=partition", "method=partition,exchange=nccl"])
def test_a_rank_takes_part_with_empty_runs_and_skewed_receivers(setting, monkeypatch):
    """Output bounds that give one rank everything and the others nothing;
    all keys on one rank; one key in all."""
    monkeypatch.setenv("CUDASORTKIT_DASK_COLLECTIVE", setting)
    a = np.array([5, 3, 9, 1, 1, 7, 0, 2, 8, 6], np.float32)
    for bounds in [(0, 0, 10, 10), (0, 10, 10, 10), (0, 1, 2, 10)]:
        for owners in [(0, 0, 0), (2, 2, 2), (1, 0, 2)]:
            out = collective_sort(a, [3, 3, 4], owners, "argsort", False, 3, out_bounds=bounds)
            assert np.array_equal(np.concatenate([r[0][1] for r in out]), np.argsort(a, kind="stable"))
    out = collective_sort(np.array([4.0]), [0, 1, 0], (0, 1, 2), "sort", True, 3)
    assert [list(r[0][0]) for r in out] == [[], [4.0], []]


def test_a_boundary_inside_a_bucket_of_equal_keys_splits_by_index(monkeypatch):
    """method=partition: one bucket holds almost every key (all equal but a
    few), so every receiver boundary falls inside it; the split bucket's
    elements are sorted on every rank and cut exactly, ties by global index."""
    monkeypatch.setenv("CUDASORTKIT_DASK_COLLECTIVE", "method=partition,segments=4")
    a = np.full(500, 7, np.int32)
    a[::97] = [1, 9, 3, 9, 0, 9][:len(a[::97])]
    expected = reference_argsort(a, False)
    for op in ("argsort", "sort"):
        out = collective_sort(a, [100, 150, 50, 200], (1, 0, 2, 0), op, False, 3, out_bounds=(0, 120, 340, 500))
        got = np.concatenate([r[0][1] if op == "argsort" else r[0][0] for r in out])
        assert np.array_equal(got, expected if op == "argsort" else a[expected])


def test_splitters_bracket_every_receiver_boundary():
    segments, brackets = partition.splitter_fractions([0, 30, 100], 100, 4, 1 << 16)
    assert np.allclose(segments, [0.075, 0.15, 0.225, 0.475, 0.65, 0.825])
    eps = partition.BRACKET_SIGMAS * 0.5 / 256
    assert np.allclose(brackets, [0.3 - eps, 0.3, 0.3 + eps])
    many, none = partition.splitter_fractions(np.linspace(0, 1000, 101), 1000, 2, 1 << 16)
    assert len(none) == 0 and len(many) <= partition.MOST_SPLITTERS


@pytest.mark.parametrize("values", [None, "positions", "int64", "int8"])
def test_partition_lays_buckets_out_stably(values, rng):
    keys = rng.integers(-50, 50, 1000).astype(np.int32)
    splitters = counting.encode(np.array([-20, 0, 0, 33], np.int32), False)
    out = np.empty_like(keys)
    given = None if values in (None, "positions") else rng.integers(0, 100, 1000).astype(values)
    vout = None if values is None else np.empty(1000, np.int64 if values == "positions" else values)
    sizes = counting.partition(keys, splitters, False, out, values if values == "positions" else given, vout)
    ids = counting.bucket_ids(keys, splitters, False)
    order = np.argsort(ids, kind="stable")
    assert np.array_equal(out, keys[order]) and np.array_equal(sizes, np.bincount(ids, minlength=5))
    if values is not None:
        assert np.array_equal(vout, order if values == "positions" else given[order])


def test_bucket_ids_count_the_splitters_at_or_below():
    keys = np.array([5, -3, 7, 7, 100, -50], np.int64)
    splitters = counting.encode(np.array([-3, 7, 7, 50], np.int64), False)
    assert list(counting.bucket_ids(keys, splitters, False)) == [1, 1, 3, 3, 4, 0]
    down = counting.encode(np.array([50, 7, -3], np.int64), True)       # descending: words ascend downwards
    assert list(counting.bucket_ids(keys, down, True)) == [2, 3, 2, 2, 0, 3]


def test_splitters_align_to_the_top_byte_where_they_stay_apart():
    near = (np.arange(1, 256, dtype=np.uint64) << np.uint64(24)) + np.uint64(12345)
    assert np.array_equal(partition.aligned_splitters(near, 32), np.arange(1, 256, dtype=np.uint64) << np.uint64(24))
    crowded = np.arange(1, 200, dtype=np.uint64) * np.uint64(1000)      # all below the first top byte's end
    assert np.array_equal(partition.aligned_splitters(crowded, 32), crowded)
    assert np.array_equal(partition.aligned_splitters(crowded[:3].astype(np.uint64), 8), crowded[:3])
    assert partition.segments_per_receiver(options.Options(), 4, 2**33) == partition.SEGMENTS
    assert partition.segments_per_receiver(options.Options(), 4, 2**20) == 1
    assert partition.segments_per_receiver(options.Options(segments=8), 3, 10) == 8
    assert partition.segments_per_receiver(options.Options(segments=200), 4, 2**33) == (256 - 9) // 4
