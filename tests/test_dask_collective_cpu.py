"""The collective sort behind exchange="nccl" (cudasortkit/dask/collective.py,
explicit.py), on the CPU: its exact cuts against NumPy directly (ranks as
threads), and whole sorts through Dask with the in-process thread
communicator on a LocalCluster(processes=False) with NumPy chunks: the same
code as on GPU workers, NCCL swapped for threads."""
import threading
import warnings

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

import dask  # noqa: E402

import cudasortkit.dask as cskd  # noqa: E402
from cudasortkit.dask import chunks, collective, comm, cuts, explicit, runs  # noqa: E402
from helpers import assert_keys_equal, make_keys, reference_argsort  # noqa: E402


# ------------------------------------------------------- ranks as threads
def on_ranks(size, body):
    """body(comm, rank) on `size` threads joined by one ThreadComm; their results."""
    uid, out, errors = comm.new_id("threads"), [None] * size, []

    def run(rank):
        c = comm.ThreadComm(uid, size, rank)
        try:
            out[rank] = body(c, rank)
        except BaseException as e:     # noqa: BLE001 - reported below
            errors.append(e)
            c.abort()

    threads = [threading.Thread(target=run, args=(r,)) for r in range(size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return out


def test_thread_comm_allgather_and_alltoallv():
    def body(c, rank):
        got = c.allgather(np.array([rank, 10 * rank]))
        buf = np.arange(6) + 100 * rank                      # 3 ranks: pieces of 1, 2, 3 from rank 0...
        starts, counts = [0, 1, 3], [1, 2, 3]
        recv = [[1, 2, 3][rank]] * 3
        return got, c.alltoallv(buf, starts, counts, recv), c.allreduce_sum(np.array([[rank, 1]]))

    results = on_ranks(3, body)
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

    for me, got, joined, uncopied in on_ranks(3, body):
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
        on_ranks(3, body)


# ------------------------------------------------------ the ordered bits
@pytest.mark.parametrize("dtype", ["bool", "int8", "uint16", "int32", "uint64", "int64",
                                   "float16", "float32", "float64"])
def test_decode_is_monotone_over_the_whole_range(dtype):
    """Ordered values decode to keys in NumPy's ascending order (NaN last),
    ends included, so the search's count is monotone and reaches every key."""
    rng = np.random.default_rng(3)
    top = cuts.top(dtype)
    u = sorted({0, top, top // 2, top // 2 + 1} | {int(v) for v in rng.integers(0, top, 4000, dtype=np.uint64,
                                                                                  endpoint=True)})
    keys = cuts.decode(u, dtype)
    assert keys.dtype == np.dtype(dtype)
    as_sorted = np.sort(keys)
    same = (keys == as_sorted) | (np.isnan(keys.astype(np.float64)) & np.isnan(as_sorted.astype(np.float64)))
    assert same.all(), "decoded keys are not in ascending order"
    if np.dtype(dtype).kind == "f":
        assert np.isnan(keys[-1]) and keys[0] == -np.inf
    else:
        assert keys[0] == (np.iinfo(dtype).min if dtype != "bool" else False)


# ------------------------------------------------------- exact cuts
def sorted_parts(a, descending, parts, rng):
    """a split among ranks (each rank's share in index order, as contiguous
    or interleaved chunks), each share sorted stably: (keys, global index)."""
    owner = rng.integers(0, parts, len(a))
    out = []
    for r in range(parts):
        idx = np.flatnonzero(owner == r)
        order = reference_argsort(a[idx], descending)
        out.append((a[idx][order], idx[order].astype(np.int64)))
    return out


@pytest.mark.parametrize("stable", [False, True])
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("dist, dtype", [("uniform", "uint32"), ("few_unique", "int64"), ("special", "float32"),
                                         ("all_equal", "float64"), ("uniform", "int8"), ("uniform", "bool"),
                                         ("special", "float16")])
def test_exact_cuts_take_the_first_t_of_the_global_order(dist, dtype, descending, stable):
    rng = np.random.default_rng(11)
    a = make_keys(dist, dtype, 997, rng)
    parts = sorted_parts(a, descending, 3, rng)
    targets = [0, 1, 2, 100, 333, 500, 996, 997]
    expected = reference_argsort(a, descending)

    def body(c, rank):
        keys, index = parts[rank]
        return cuts.exact_cuts(c, chunks.ascending(keys, descending), index, targets, len(a), stable)

    counts = on_ranks(3, body)
    for j, t in enumerate(targets):
        assert sum(int(c[j]) for c in counts) == t
        taken = np.concatenate([index[:c[j]] for (keys, index), c in zip(parts, counts)])
        if stable:   # exactly the first t of (key, global index)
            assert np.array_equal(np.sort(taken), np.sort(expected[:t])), f"target {t}"
        else:        # the first t keys as values, ties from any rank
            assert_keys_equal(np.sort(a[taken]), np.sort(a[expected[:t]]))


def test_worker_starts_split_output_chunks_by_the_ranks_key_counts():
    starts, first = cuts.worker_starts([10, 0, 30], [0, 4, 8, 12, 20, 30, 30, 40])
    assert list(first) == [0, 2, 2, 7] and list(starts) == [0, 8, 8, 40]
    starts, first = cuts.worker_starts([5, 5], [0, 0, 10, 10])    # a midpoint on a boundary: the later rank
    assert list(first) == [0, 1, 3] and list(starts) == [0, 0, 10]


# ------------------------------------------- whole sorts through Dask, threads
@pytest.fixture(scope="module")
def client():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with distributed.LocalCluster(processes=False, n_workers=3, threads_per_worker=1,
                                      dashboard_address=None) as cluster:
            with distributed.Client(cluster) as c:
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
@pytest.mark.parametrize("dtype", ["int8", "uint16", "int32", "uint32", "bool", "float16", "float32"])
def test_interleaved_chunks_merge_as_packed_key_and_index(client, dtype, descending):
    """Chunks interleaved across workers: runs merge as (key, global index)
    packed in one uint64 (runs.packable), for argsort of any key of
    at most 4 bytes and sort_by_key of integer keys; ties, the dtype's ends,
    NaN, -0.0 and +0.0 (float keys come back bit for bit)."""
    rng = np.random.default_rng(len(dtype))
    sizes = (40, 0, 33, 51, 12, 64, 7)
    a = make_keys("special" if dtype.startswith("float") else "few_unique", dtype, sum(sizes), rng)
    if dtype.startswith("float"):
        a[::5], a[1::7], a[2::11] = -0.0, 0.0, np.nan
    elif dtype != "bool":
        info = np.iinfo(dtype)
        a[::13], a[1::17] = info.min, info.max
    x = place(client, a, sizes, (0, 1, 2, 0, 1, 2, 0))
    spec = collective.Spec("argsort", descending, np.dtype(dtype), (0, len(a)), (), (), False)
    assert runs.packable(spec)
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
    assert len(explicit._workers(client)) == 3
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
    assert all(set(t) == {"start", "local sort", "splitters", "exchange", "merge"} for t in times)
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
    monkeypatch.setattr(cluster, "default_client", lambda: None)
    with pytest.raises(ValueError, match="exchange='nccl' runs on Dask's distributed scheduler"):
        cskd._exchange("nccl", x, 4)
    assert cskd._exchange("auto", x, 4) == "tasks"


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

    expected = on_ranks(3, body(None))
    got = on_ranks(3, body(lambda rank: comm.NcclComm((1, 2, 3), 3, rank)))
    for (e_recv, e_all, e_sum), (g_recv, g_all, g_sum) in zip(expected, got):
        assert g_recv.dtype == np.dtype(dtype) and np.array_equal(g_recv, e_recv)
        assert np.array_equal(g_all, e_all)
        assert np.array_equal(g_sum, e_sum) and np.array_equal(g_sum, [[3, 3 << 40], [-3, 15]])


def test_auto_picks_nccl_for_device_chunks_where_the_workers_have_it(client, monkeypatch):
    from types import SimpleNamespace

    class DeviceArray:   # stands for cupy.ndarray: only its module is read
        pass

    DeviceArray.__module__ = "cupy._core.core"
    device, hosted = SimpleNamespace(_meta=DeviceArray()), SimpleNamespace(_meta=np.empty(0))
    assert explicit.nccl_ready(client) is False          # CPU workers: no cupy.cuda.nccl
    assert cskd._exchange("auto", device, 4) == "tasks"
    monkeypatch.setattr(explicit, "nccl_ready", lambda c: True)
    assert cskd._exchange("auto", device, 4) == "nccl"
    assert cskd._exchange("auto", hosted, 400) == "p2p"


@pytest.mark.parametrize("dtype, narrow", [("uint32", True), ("int16", True), ("float32", False)])
def test_warm_up_also_sorts_a_narrow_key_range_of_integers(monkeypatch, dtype, narrow):
    """Integer keys of a narrow range take other plugins (counting) than
    random bits do, so the warm-up sorts both: the first real sort after
    prepare finds those kernels compiled too."""
    from types import SimpleNamespace

    import cudasortkit as csk

    spans = []
    real = csk.sort

    def recording(keys, **kwargs):
        spans.append(int(keys.max()) - int(keys.min()) if keys.dtype.kind in "iu" else None)
        return real(keys, **kwargs)

    monkeypatch.setattr(csk, "sort", recording)
    worker = SimpleNamespace(plugins={explicit.NAME: explicit.Collectives()})
    explicit.warm_up(np.dtype(dtype), "sort", False, 4096, "numpy", dask_worker=worker)
    assert len(spans) == (2 if narrow else 1)
    if narrow:
        assert spans[0] > 1000 and spans[1] <= 15
    explicit.warm_up(np.dtype(dtype), "sort", False, 4096, "numpy", dask_worker=worker)
    assert len(spans) == (2 if narrow else 1)  # once per worker, dtype and op


@pytest.mark.parametrize("dtype, op, narrow, packed", [
    ("uint32", "sort", True, False), ("int16", "sort", True, False), ("float32", "sort", False, False),
    ("int64", "sort", False, False), ("int32", "argsort", False, True), ("float32", "argsort", False, True),
    ("uint16", "sort_by_key", False, True), ("float32", "sort_by_key", False, False)])
def test_warm_up_runs_the_narrow_fill_and_the_packed_merge(monkeypatch, dtype, op, narrow, packed):
    """The warm-up also runs what a narrow range (collective.from_counts:
    its searchsorted and fills) and an interleaved argsort or sort_by_key
    (runs.merge_interleaved) run, so the first sort after prepare compiles
    nothing (on a GPU: CuPy's kernels of those steps too)."""
    from types import SimpleNamespace

    calls = []
    for name in ("from_counts", "merge_interleaved"):
        real = getattr(explicit, name)
        monkeypatch.setattr(explicit, name, lambda *a, real=real, name=name: calls.append(name) or real(*a))
    worker = SimpleNamespace(plugins={explicit.NAME: explicit.Collectives()})
    explicit.warm_up(np.dtype(dtype), op, False, 4096, "numpy", dask_worker=worker)
    hubs = len(comm._hubs)
    explicit.warm_up(np.dtype(dtype), op, True, 4096, "numpy", dask_worker=worker)
    assert len(comm._hubs) == hubs, "each warm-up left a communicator hub behind"
    calls = calls[:len(calls) // 2]   # the descending warm-up ran the same steps again
    assert calls.count("from_counts") == narrow and calls.count("merge_interleaved") == (2 if packed and
                                                                                  dtype[0] in "iu" else packed)


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


def _interleaved_runs(rng, dtype, descending, low, high, total, count=3, size=200):
    """Runs as one rank receives them from interleaved chunks: each sorted by
    (key in the requested order, global index); indices distinct, below `total`."""
    n = count * size
    keys = rng.integers(low, high, n).astype(dtype)
    index = np.sort(rng.choice(np.int64(total), n, replace=False)) if total < 2**40 else \
        np.unique(rng.integers(0, total, n * 2, dtype=np.int64))[:n]
    rng.shuffle(index)
    parts = []
    for r in range(count):
        k, i = keys[r * size:(r + 1) * size], index[r * size:(r + 1) * size]
        order = np.lexsort((i, chunks.ascending(k, descending)))
        parts.append((k[order], i[order]))
    at = np.arange(count + 1, dtype=np.int64) * size
    return np.concatenate([k for k, _ in parts]), np.concatenate([i for _, i in parts]), at


@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("dtype, low, high, total, packs", [
    ("uint32", 3_000_000_000, 3_000_000_050, 2**33, True),   # a narrow range far from 0, 33-bit indices
    ("int32", -2**31, 2**31 - 1, 2**33, False),              # 32 + 33 bits: lexsort
    ("int32", -2**31, 2**31 - 1, 2**32, True),               # 32 + 32 bits
    ("int64", -10**15, -10**15 + 2**20, 2**40, True),
    ("uint16", 0, 2**16, 2**47, True)])
@pytest.mark.parametrize("op", ["argsort", "sort_by_key"])
def test_interleaved_runs_pack_above_the_ranks_smallest_key(op, dtype, low, high, total, packs, descending):
    """merge_interleaved orders runs by (key, global index): packed words
    (key - the rank's smallest, shifted by the indices' bits) where they fit
    64 bits, whatever the total, else lexsort; both give the same order."""
    rng = np.random.default_rng(abs(low) % 1000 + len(dtype))
    keys, index, at = _interleaved_runs(rng, dtype, descending, low, high, total)
    spec = collective.Spec(op, descending, np.dtype(dtype), (0, total), (), (), False)
    pack = runs.packing(spec, keys, at, total, np)
    assert (pack is not None) == packs
    if packs:
        assert pack[1] == (total - 1).bit_length()
    values = index * 7 if op == "sort_by_key" else index
    received = {"keys": keys, "index": index if op == "sort_by_key" else None, "values": values}
    k, v = runs.merge_interleaved(spec, received, at, total, np)
    assert not received, "the runs were left in the dict"
    order = np.lexsort((index, chunks.ascending(keys, descending)))
    assert np.array_equal(v, values[order])
    if op == "sort_by_key":
        assert k.dtype == keys.dtype and np.array_equal(k, keys[order])
    else:
        assert k is None


def test_sort_by_key_computes_global_indices_a_slice_at_a_time(client, monkeypatch):
    """A worker holding several chunks maps its local positions to global
    indices INDEX_SLICE keys at a time (bounded temporaries): slices that cut
    chunks anywhere give the same sort."""
    monkeypatch.setattr(collective, "INDEX_SLICE", 7)
    rng = np.random.default_rng(21)
    sizes = (40, 0, 33, 51, 12, 64)
    a = rng.integers(0, 5, sum(sizes)).astype(np.int32)
    x = place(client, a, sizes, (0, 1, 2, 0, 1, 2))
    values = np.arange(len(a)) * 3
    for descending in (False, True):
        k, v = run("sort_by_key", x, da.from_array(values, chunks=(sizes,)), descending, (100, 100))
        check(v, values[reference_argsort(a, descending)], (100, 100))
