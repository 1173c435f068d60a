"""How the graphs of cudasortkit.dask grow with the chunk count, on the CPU.

Tasks per chunk, as counted here and in docs/dask.md: the distinct tasks
(keys) of the graphs of the results as built, the inputs' own tasks
included (x's from_array tasks; for sort_by_key the values' too), divided
by the number of input chunks P (output chunks Q = P unless said). Dask's
optimizer may fuse some of them before the scheduler sees them (a merge
into its result's getitem), never add any. For the
collective sort (exchange="nccl", run on submission) it is the tasks the
scheduler holds for one sort, the input's P persisted chunks included.

Bars: at most 20 a chunk on Dask's local schedulers at 128 chunks (the
tasks exchange's tree layout: tree.py), at most 10 a chunk with a
distributed Client at 1,024 chunks (p2p for NumPy chunks; the collective
for CuPy chunks, here with ranks as threads). Results are checked against
NumPy on every local scheduler that shares memory (sync, threads) and on
the processes scheduler's pickling of the tree's nodes.
"""
import pickle

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

import dask  # noqa: E402

import cudasortkit.dask as cskd  # noqa: E402
from cudasortkit.dask import cluster, explicit, tree  # noqa: E402
from helpers import assert_keys_equal, reference_argsort, thread_cluster_client  # noqa: E402


def tasks(*results) -> int:
    """Distinct tasks of the graphs of `results` as built (inputs included)."""
    return len(set().union(*(dict(r.__dask_graph__()) for r in results)))


def edges(result) -> int:
    """Inputs named by the graph's tasks, summed (its dependency edges)."""
    graph = dict(result.__dask_graph__())
    return sum(len(dask.core.get_dependencies(graph, k)) for k in graph)


@pytest.fixture
def no_client(monkeypatch):
    """Dask's local schedulers: no distributed Client is the default (one
    another test module made may linger)."""
    monkeypatch.setattr(cluster, "default_client", lambda: None)


def keys_with_ties_and_nans(n, rng):
    a = rng.integers(0, max(n // 8, 2), n).astype(np.float64)
    a[rng.integers(0, n, n // 20)] = np.nan
    a[rng.integers(0, n, n // 20)] = -0.0
    return a


def uneven(p, m, rng):
    """p chunk lengths around m: empty ones, doubled ones."""
    sizes = np.full(p, m)
    sizes[::7] = 0
    sizes[1::7] += m
    sizes[2::11] = 1
    return tuple(int(s) for s in sizes)


# ------------------------------------------------------- local schedulers
@pytest.mark.parametrize("p, q", [(1, 1), (2, 1), (1, 3), (5, 5), (32, 33), (33, 32), (128, 128), (1000, 7),
                                  (7, 1000), (1024, 1024), (40000, 40000)])
def test_tree_levels_cover_every_chunk_with_small_fans(p, q):
    shape = tree.levels(p, q)
    (gi_last, go_last) = shape[-1]
    assert gi_last >= p and go_last == 1 and shape[0][0] <= tree.FAN
    fi, fo = shape[0][0], (shape[-2][1] if len(shape) > 1 else q)
    assert fi <= tree.FAN and fo <= tree.FAN
    assert len(shape) == 1 or max(p, q) > tree.FAN ** (len(shape) - 1)   # no level more than needed


def test_local_schedulers_build_p_log_p_tasks_at_128_and_1024_chunks(no_client):
    """At most 20 tasks a chunk (about 8), dependencies at most 2 * FAN a
    task over the tree's levels: P log P, where the pieces layout made
    P x Q piece tasks (16,384 at 128 chunks)."""
    p = 128
    x = da.zeros(p * 4, chunks=4, dtype=np.float32)
    assert cskd.plan(x).exchange == "tasks" and cskd.plan(x).layout == "tree"
    s, i = cskd.sort(x), cskd.argsort(x, descending=True)
    k, v = cskd.sort_by_key(x, da.ones(p * 4, chunks=4, dtype=np.int64))
    for name, n in (("sort", tasks(s)), ("argsort", tasks(i)), ("sort_by_key", tasks(k, v))):
        assert n <= 20 * p, f"{name}: {n} tasks for {p} chunks"
    for p in (128, 1024):
        s = cskd.sort(da.zeros(p * 4, chunks=4, dtype=np.float32))
        depth = len(tree.levels(p, p))
        assert tasks(s) <= 9 * p, f"{tasks(s)} tasks for {p} chunks"          # 8 a chunk and a few more
        assert edges(s) <= 2 * tree.FAN * depth * p + 8 * p, f"{edges(s)} dependencies for {p} chunks"


@pytest.mark.parametrize("scheduler", ["sync", "threads"])
def test_local_schedulers_sort_128_chunks_exactly(no_client, scheduler, rng):
    """sort, argsort (stable, descending with NaNs) and sort_by_key of 128
    uneven chunks with ties, NaNs, -0.0 and empty chunks, against NumPy."""
    sizes = uneven(128, 6, rng)
    a = keys_with_ties_and_nans(sum(sizes), rng)
    before = a.copy()
    x = da.from_array(a, chunks=(sizes,))
    values = rng.integers(-2**40, 2**40, len(a))
    s, i = cskd.sort(x), cskd.argsort(x, descending=True)
    k, v = cskd.sort_by_key(x, da.from_array(values, chunks=50), descending=True)
    got_s, got_i, got_k, got_v = dask.compute(s, i, k, v, scheduler=scheduler)
    assert_keys_equal(got_s, np.sort(a))
    expected = reference_argsort(a, True)
    assert np.array_equal(got_i, expected), "argsort differs from NumPy's stable descending order"
    assert_keys_equal(got_k, a[expected])
    assert np.array_equal(got_v, values[expected])
    blocks = dask.compute(*s.to_delayed().ravel(), scheduler=scheduler)
    assert [len(b) for b in blocks] == list(sizes)
    assert np.array_equal(a.view(np.uint8), before.view(np.uint8)), "input was modified"


@pytest.mark.parametrize("p, out", [(40, 1), (3, 70), (70, 3), (45, (0, 100, 0, 1, 99, 50) * 5)])
def test_local_schedulers_give_other_output_chunks(no_client, p, out, rng):
    """P != Q on both sides of the fan (one and two levels), empty output chunks."""
    n = sum(out) if isinstance(out, tuple) else 300
    a = rng.integers(-50, 50, n).astype(np.int32)
    x = da.from_array(a, chunks=-(-n // p))
    s = cskd.sort(x, chunks=out)
    i = cskd.argsort(x, chunks=out)
    got_s, got_i = dask.compute(s, i, scheduler="sync")
    assert np.array_equal(got_s, np.sort(a)) and np.array_equal(got_i, np.argsort(a, kind="stable"))
    assert [len(b) for b in dask.compute(*i.to_delayed().ravel(), scheduler="sync")] == list(s.chunks[0])


def test_tree_nodes_pickle_as_the_views_of_their_parts():
    """The processes scheduler pickles a tree node (Runs) with only the
    parts of its chunks it holds, and it merges to the same output."""
    rng = np.random.default_rng(3)
    sorted_chunks = [(np.sort(rng.random(1000)), np.arange(1000) + 1000 * c) for c in range(3)]
    rows = [np.array([0, 10 * c, 500, 510 + c, 1000]) for c in range(3)]
    node = tree.cut(sorted_chunks, rows, 1, 3)          # output chunks 1 and 2
    child = tree.join([node], 1, 2)                     # output chunk 2
    copied = pickle.loads(pickle.dumps(child))
    assert len(pickle.dumps(child)) < 1000 * 8          # not the 3 x 8000 bytes of the chunks' keys
    for runs in (child, copied):
        keys, values = tree.merge(runs, False)
        expected = np.concatenate([c[0][500:510 + i] for i, c in enumerate(sorted_chunks)])
        assert np.array_equal(keys, np.sort(expected, kind="stable"))
        assert np.array_equal(np.sort(values), np.concatenate([np.arange(500, 510 + i) + 1000 * i
                                                               for i in range(3)]))


def test_the_tasks_exchange_refuses_p_times_q_pieces_only_with_a_client(monkeypatch):
    """With a distributed Client the tasks exchange keeps its pieces layout
    and refuses graphs no scheduler could run; local schedulers build the
    tree at any size."""
    x = da.zeros(1024, chunks=1, dtype=np.float32)   # 2^20 pieces
    monkeypatch.setattr(cluster, "default_client", lambda: object())
    with pytest.raises(ValueError, match="too many for the tasks exchange.*p2p"):
        cskd.sort(x, exchange="tasks")
    monkeypatch.setattr(cluster, "default_client", lambda: None)
    assert cskd.plan(x, exchange="tasks").layout == "tree"
    assert tasks(cskd.sort(x, exchange="tasks")) <= 9 * 1024


# ------------------------------------------------- a distributed client
@pytest.fixture(scope="module")
def client():
    with thread_cluster_client(2) as c:
        yield c


def test_a_client_builds_at_most_10_tasks_a_chunk_at_1024_chunks(client):
    """NumPy chunks (the default: p2p) with a distributed Client."""
    p = 1024
    x = da.zeros(p * 4, chunks=4, dtype=np.float32)
    assert cskd.plan(x).exchange == "p2p"
    s, i = cskd.sort(x), cskd.argsort(x, descending=True)
    k, v = cskd.sort_by_key(x, da.ones(p * 4, chunks=4, dtype=np.int64))
    for name, n in (("sort", tasks(s)), ("argsort", tasks(i)), ("sort_by_key", tasks(k, v))):
        assert n <= 10 * p, f"{name}: {n} tasks for {p} chunks"


def test_the_collective_holds_at_most_10_tasks_a_chunk_at_1024_chunks(client):
    """The collective sort (ranks as threads here, NCCL on GPUs): the
    scheduler holds the input's P chunks, one task per worker and one per
    output chunk; the result is exact."""
    p = 1024
    rng = np.random.default_rng(5)
    a = rng.integers(0, 1 << 20, p * 4).astype(np.int64)
    x = client.persist(da.from_array(a, chunks=4))
    distributed.wait(x)

    def count(dask_scheduler):
        return len(dask_scheduler.tasks)

    before = client.run_on_scheduler(count)
    s, = explicit.run("sort", x, None, False, x.chunks[0], "threads")
    held = client.run_on_scheduler(count)
    assert held - before + p <= 10 * p and held - before <= p + 2 + 2, f"{held - before} tasks for {p} chunks"
    assert np.array_equal(s.compute(), np.sort(a))


class DeviceArray(np.ndarray):
    """Stands for cupy.ndarray where only its module and .get() are read."""

    def get(self):
        return np.asarray(self).copy()


DeviceArray.__module__ = "cupy._core.core"


def test_device_chunks_without_nccl_take_p2p_from_many_pieces(client, monkeypatch):
    """CuPy chunks on a distributed Client whose workers lack NCCL: the
    tasks exchange's pieces up to DEVICE_P2P_MIN_PIECES, then p2p (at most
    10 tasks a chunk at 1,024 chunks, as for NumPy chunks)."""
    from types import SimpleNamespace

    monkeypatch.setattr(explicit, "nccl_ready", lambda c: False)
    device = SimpleNamespace(_meta=np.empty(0).view(DeviceArray))
    assert not cskd._on_host(device)
    assert cskd._exchange("auto", False, client, cskd.DEVICE_P2P_MIN_PIECES - 1) == "tasks"
    assert cskd._exchange("auto", False, client, cskd.DEVICE_P2P_MIN_PIECES) == "p2p"
    assert cskd._exchange("auto", False, client, 1024 * 1024) == "p2p"


def test_p2p_moves_device_chunks_through_the_host_and_back(monkeypatch):
    """The p2p exchange hands the engine host copies of device chunks and
    gives each output chunk back to the chunks' array module."""
    import sys
    from types import ModuleType

    from cudasortkit.dask import p2p

    fake = ModuleType("cupy")
    fake.asarray = lambda a: np.asarray(a).view(DeviceArray)
    monkeypatch.setitem(sys.modules, "cupy", fake)
    keys = np.arange(5, dtype=np.float32).view(DeviceArray)
    values = np.arange(5, dtype=np.int64).view(DeviceArray)
    host = p2p.on_host((keys, values))
    assert all(type(a) is np.ndarray for a in host) and np.array_equal(host[1], np.arange(5))
    assert p2p.on_host((keys, None))[1] is None
    back = p2p.on_module(host, "cupy")
    assert all(type(a) is DeviceArray for a in back) and np.array_equal(back[0], np.arange(5))
    assert p2p.on_module(host, "numpy") is host
