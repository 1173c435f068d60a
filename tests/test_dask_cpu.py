"""cudasortkit.dask on a LocalCluster of two worker processes, NumPy chunks:
sort, argsort and sort_by_key against NumPy's stable order, with exact,
known output chunks."""
import warnings

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

import dask  # noqa: E402

import cudasortkit.dask as cskd  # noqa: E402
from helpers import assert_keys_equal, make_keys, reference_argsort  # noqa: E402


@pytest.fixture(scope="module")
def client():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # port and memory-limit notices of a test cluster
        with distributed.LocalCluster(processes=True, n_workers=2, threads_per_worker=1,
                                      dashboard_address=None, memory_limit="1GiB") as cluster:
            with distributed.Client(cluster) as c:
                yield c


def lognormal(dtype, n, rng):
    x = rng.lognormal(0.0, 4.0, n)
    dt = np.dtype(dtype)
    return np.minimum(x, np.iinfo(dt).max).astype(dt) if dt.kind in "iu" else x.astype(dt)


def keys_of(dist, dtype, n, rng):
    return lognormal(dtype, n, rng) if dist == "lognormal" else make_keys(dist, dtype, n, rng)


def check_chunks(result, expected_chunks):
    """Chunk sizes known up front, and every computed block exactly that long."""
    assert result.chunks == (tuple(expected_chunks),)
    blocks = dask.compute(*result.to_delayed().ravel())
    assert [len(b) for b in blocks] == list(expected_chunks)


#: 3000 keys in uneven chunks, empty ones among them. Few chunks keep the
#: P x P graphs (and the test time: ~10 ms a task on two CPU cores) small.
UNEVEN = (0, 1200, 1, 0, 1799)

CASES = [
    ("uniform", "int32", 3000, 800),
    ("uniform", "uint64", 3000, UNEVEN),
    ("few_unique", "int16", 3000, 1000),
    ("all_equal", "float32", 3000, UNEVEN),
    ("sorted", "int64", 3000, 1000),
    ("reverse", "float64", 3001, 1000),
    ("lognormal", "float64", 4000, 1000),
    ("lognormal", "uint32", 4000, (3000, 10, 990)),
    ("special", "float32", 3000, UNEVEN),        # NaNs, -0.0, infinities
    ("special", "float64", 2500, 1000),
    ("uniform", "uint8", 2000, 700),
    ("uniform", "bool", 1000, 300),
]


@pytest.mark.parametrize("exchange", ["tasks", "p2p"])
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("dist, dtype, n, chunks", CASES)
def test_sort_and_argsort_match_numpy(client, dist, dtype, n, chunks, descending, exchange, rng):
    a = keys_of(dist, dtype, n, rng)
    before = a.copy()
    x = da.from_array(a, chunks=chunks)
    s, i = cskd.sort(x, descending, exchange=exchange), cskd.argsort(x, descending, exchange=exchange)
    assert s.chunks == x.chunks and i.chunks == x.chunks and i.dtype == np.int64
    got_s, got_i = dask.compute(s, i)
    expected = reference_argsort(a, descending)
    assert np.array_equal(got_i, expected), "argsort differs from numpy.argsort(kind='stable')"
    assert_keys_equal(got_s, a[expected])
    assert np.array_equal(a.view(np.uint8), before.view(np.uint8)), "input was modified"


@pytest.mark.parametrize("exchange", ["tasks", "p2p"])
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("dist", ["few_unique", "all_equal", "special"])
def test_sort_by_key_is_stable(client, dist, descending, exchange, rng):
    keys = make_keys(dist, "float64", 3001, rng)
    values = rng.integers(-2**40, 2**40, 3001)
    k, v = cskd.sort_by_key(da.from_array(keys, chunks=UNEVEN + (1,)),
                            da.from_array(values, chunks=1000), descending,
                            exchange=exchange)  # values rechunked to keys'
    got_k, got_v = dask.compute(k, v)
    expected = reference_argsort(keys, descending)
    assert_keys_equal(got_k, keys[expected])
    assert np.array_equal(got_v, values[expected])


@pytest.mark.parametrize("chunks", [700, UNEVEN, (3000,)])
def test_all_equal_keys_give_exact_chunks(client, chunks):
    x = da.from_array(np.full(3000, 5, np.int32), chunks=chunks)
    check_chunks(cskd.sort(x), x.chunks[0])
    check_chunks(cskd.argsort(x), x.chunks[0])


@pytest.mark.parametrize("exchange", ["tasks", "p2p"])
def test_chunks_argument_rebalances(client, exchange, rng):
    a = lognormal("float32", 3000, rng)
    x = da.from_array(a, chunks=UNEVEN)
    s = cskd.sort(x, chunks=1000, exchange=exchange)
    check_chunks(s, (1000, 1000, 1000))
    assert_keys_equal(s.compute(), np.sort(a))
    i = cskd.argsort(x, chunks=(1, 2998, 1), exchange=exchange)
    check_chunks(i, (1, 2998, 1))
    assert np.array_equal(i.compute(), np.argsort(a, kind="stable"))


@pytest.mark.parametrize("exchange", ["tasks", "p2p"])
@pytest.mark.parametrize("n, chunks", [(0, 10), (1, 10), (2, 1), (5, (0, 5, 0))])
def test_tiny_arrays(client, n, chunks, exchange, rng):
    a = rng.integers(0, 3, n).astype(np.int64)
    x = da.from_array(a, chunks=chunks)
    got_s, got_i = dask.compute(cskd.sort(x, exchange=exchange), cskd.argsort(x, exchange=exchange))
    assert np.array_equal(got_s, np.sort(a)) and np.array_equal(got_i, np.argsort(a, kind="stable"))
    k, v = cskd.sort_by_key(x, x.astype(np.float32), exchange=exchange)
    assert k.chunks == x.chunks and v.dtype == np.float32
    assert np.array_equal(v.compute(), np.sort(a).astype(np.float32))


def test_graph_is_lazy(client):
    def fail(block):
        raise RuntimeError("computed too early")

    x = da.ones(100, chunks=10).map_blocks(fail, dtype=np.float64)
    s = cskd.sort(x)          # building the graph computes nothing
    with pytest.raises(RuntimeError, match="too early"):
        s.compute()


def test_bad_input_is_refused():
    with pytest.raises(TypeError, match="dask arrays"):
        cskd.sort(np.zeros(3))
    with pytest.raises(ValueError, match="1-D"):
        cskd.sort(da.zeros((3, 3)))
    with pytest.raises(TypeError, match="not supported"):
        cskd.sort(da.zeros(3, dtype=np.complex64))
    x = da.arange(10)
    with pytest.raises(ValueError, match="unknown"):
        cskd.sort(x[x > 3])
    with pytest.raises(TypeError, match="True or False"):
        cskd.argsort(x, descending="yes")
    with pytest.raises(TypeError, match="numeric dtype of 4 or 8 bytes"):
        cskd.sort_by_key(x, x.astype(np.int16))
    with pytest.raises(ValueError, match="differ in length"):
        cskd.sort_by_key(x, da.arange(11))


@pytest.mark.parametrize("chunks, error, message", [
    (0, ValueError, "chunks=0: a chunk length must be at least 1"),
    (-3, ValueError, "chunks=-3: a chunk length must be at least 1"),
    ((0,), ValueError, "a chunk length must be at least 1"),
    ((4, -1, 7), ValueError, r"chunk lengths must be >= 0 and add up to the 10 keys"),
    ((3, 3), ValueError, r"add up to the 10 keys"),
    (2.5, TypeError, "is not a chunk spec"),
    (4.0, TypeError, "is not a chunk spec"),
    (True, TypeError, "is not a chunk spec"),
    ((5.0, 5.0), TypeError, "chunk lengths must be ints"),
])
def test_bad_chunks_are_refused_naming_what_is_accepted(chunks, error, message):
    x = da.arange(10)
    for call in (cskd.sort, cskd.argsort, lambda k, chunks: cskd.sort_by_key(k, k, chunks=chunks)):
        with pytest.raises(error, match=message) as exc:
            call(x, chunks=chunks)
        assert "a chunk length (an int >= 1), -1 (one chunk)" in str(exc.value)


@pytest.mark.parametrize("chunks, expected", [
    (3, (3, 3, 3, 1)), (np.int64(5), (5, 5)), (-1, (10,)), ((4,), (4, 4, 2)), ("auto", (10,)),
    ((0, 10), (0, 10)), ([4, 6], (4, 6)), (((2, 8),), (2, 8)), (None, (4, 4, 2)),
])
def test_chunk_specs_dask_reads_give_those_chunks(chunks, expected):
    x = da.arange(10, chunks=4)
    assert cskd.sort(x, chunks=chunks).chunks == (expected,)  # known up front: nothing computed


def test_values_follow_sort_by_keys_rule_complex64_too():
    """The dask sort_by_key takes the value dtypes cudasortkit.sort_by_key
    takes (complex64 included) and refuses the others with the same rule."""
    rng = np.random.default_rng()
    keys = rng.integers(0, 50, 97, dtype=np.int32)
    values = (rng.random(97) + 1j * rng.random(97)).astype(np.complex64)
    k, v = cskd.sort_by_key(da.from_array(keys, chunks=20), da.from_array(values, chunks=20))
    order = np.argsort(keys, kind="stable")
    np.testing.assert_array_equal(k.compute(), keys[order])
    np.testing.assert_array_equal(v.compute(), values[order])
    with pytest.raises(TypeError, match="values: dtype int16 is not supported; values must be"):
        cskd.sort_by_key(da.from_array(keys, chunks=20), da.from_array(keys.astype(np.int16), chunks=20))


# ------------------------------------------------- graph size and the exchange
def graph_tasks(result) -> int:
    """Distinct tasks of a result's graph (len(HighLevelGraph) double-counts
    keys that several layers repeat, as dask.delayed graphs did)."""
    return len(result.__dask_graph__().to_dict())


@pytest.mark.parametrize("p", [128, 8192])
def test_p2p_graph_grows_linearly_with_the_chunk_count(p):
    """At most 20 tasks per chunk at 128 chunks, built quickly at thousands
    of chunks (tests/test_dask_scale_cpu.py counts every default path)."""
    import time

    x = da.zeros(p * 4, chunks=4, dtype=np.float32)
    t = time.perf_counter()
    s = cskd.sort(x, exchange="p2p")
    n = graph_tasks(s)
    k, v = cskd.sort_by_key(x, x, exchange="p2p")
    build = time.perf_counter() - t
    assert n <= 20 * p, f"{n} tasks for {p} chunks"
    assert graph_tasks(cskd.argsort(x, exchange="p2p")) <= 20 * p
    assert len(dask.base.collections_to_expr([k, v]).__dask_graph__()) <= 20 * p
    assert build < 10, f"building the graphs took {build:.1f} s"   # ~1 s for 8192 chunks
    assert s.chunks == x.chunks


def test_tasks_exchange_refuses_a_graph_no_scheduler_could_run(client):
    """With a distributed Client (the pieces layout); local schedulers build
    the tree layout at any size (tests/test_dask_scale_cpu.py)."""
    x = da.zeros(1024, chunks=1, dtype=np.float32)   # 2^20 pieces
    with pytest.raises(ValueError, match="too many for the tasks exchange.*p2p"):
        cskd.sort(x, exchange="tasks")
    with pytest.raises(ValueError, match="exchange is one of 'auto', 'nccl', 'p2p', 'tasks'"):
        cskd.sort(x, exchange="ucx")


def test_auto_exchange_is_p2p_on_a_client_for_many_pieces(client):
    assert cskd.plan(da.zeros(100, chunks=10)).exchange == "p2p"         # 100 pieces
    assert cskd.plan(da.zeros(100, chunks=50)).exchange == "tasks"       # 4 pieces


def test_auto_exchange_without_a_client_is_tasks(monkeypatch):
    from cudasortkit.dask import cluster

    monkeypatch.setattr(cluster, "default_client", lambda: None)   # the module's client may be up
    x = da.zeros(100, chunks=10)
    assert cskd.plan(x).exchange == "tasks" and cskd.plan(x).layout == "tree"
    got = cskd.argsort(x[::-1] + da.arange(100, chunks=10)).compute(scheduler="sync")
    assert np.array_equal(got, np.arange(100))


def test_p2p_needs_the_distributed_scheduler():
    x = da.from_array(np.arange(100.0)[::-1], chunks=10)
    with pytest.raises(RuntimeError, match="distributed"):
        cskd.sort(x, exchange="p2p").compute(scheduler="sync")


def p2p_many_chunks(client, p, m, rng):
    """sort, argsort (descending, NaNs) and sort_by_key of p chunks of m keys
    with many ties and empty chunks, through the p2p exchange."""
    a = rng.integers(0, 4 * m, p * m).astype(np.float64)
    a[rng.integers(0, len(a), len(a) // 50)] = np.nan
    sizes = np.full(p, m)
    sizes[::7] = 0                                   # empty chunks ...
    sizes[1::7] += m                                 # ... and twice as long ones
    x = da.from_array(a, chunks=(tuple(int(s) for s in sizes),))
    values = rng.integers(-2**40, 2**40, len(a))
    s, i = cskd.sort(x), cskd.argsort(x, descending=True)
    k, v = cskd.sort_by_key(x, da.from_array(values, chunks=m), descending=True)
    assert cskd.plan(x).exchange == "p2p"
    assert graph_tasks(s) <= 20 * p
    got_s, got_i, got_k, got_v = dask.compute(s, i, k, v)
    assert_keys_equal(got_s, np.sort(a))
    expected = reference_argsort(a, True)
    assert np.array_equal(got_i, expected)
    assert_keys_equal(got_k, a[expected])
    assert np.array_equal(got_v, values[expected])
    blocks = dask.compute(*s.to_delayed().ravel())
    assert [len(b) for b in blocks] == [int(n) for n in sizes]


def test_p2p_sorts_hundreds_of_chunks_exactly(client, rng):
    p2p_many_chunks(client, 160, 16, rng)


@pytest.mark.slow
def test_p2p_sorts_8192_chunks(rng):
    """8,192 chunks sort on a LocalCluster (sort and argsort:
    251 s on a loaded 2-core machine, the scheduler's ~1-3 ms a task at 7
    tasks a chunk; hence slow)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with distributed.LocalCluster(processes=False, n_workers=2, threads_per_worker=1,
                                      dashboard_address=None) as cluster, distributed.Client(cluster) as c:
            a = rng.integers(0, 1 << 20, 8192 * 8).astype(np.int64)
            x = da.from_array(a, chunks=8)
            s, i = cskd.sort(x), cskd.argsort(x)
            assert graph_tasks(s) <= 20 * 8192
            got_s, got_i = c.compute([s, i], sync=True)
            assert np.array_equal(got_s, np.sort(a))
            assert np.array_equal(got_i, np.argsort(a, kind="stable"))


# ------------------------------------------------------------------ bad input
def lying_chunks(dtype_of_block, declared_chunks, declared_dtype):
    """A dask array whose blocks differ from what it declares."""
    def block(b):
        return np.arange(len(b) + dtype_of_block[1], dtype=dtype_of_block[0])[::-1]

    return da.zeros(sum(declared_chunks), chunks=(declared_chunks,)).map_blocks(
        block, dtype=declared_dtype, chunks=(declared_chunks,))


@pytest.mark.parametrize("exchange", ["tasks", "p2p"])
def test_chunks_unlike_their_declaration_raise(client, exchange):
    longer = lying_chunks((np.float64, 1), (10, 10), np.float64)
    with pytest.raises(ValueError, match=r"input chunk \d has shape \(11,\), not the \(10,\)"):
        cskd.sort(longer, exchange=exchange).compute()
    mixed = lying_chunks((np.float32, 0), (10, 10), np.float64)
    with pytest.raises(TypeError, match=r"input chunk \d has dtype float32, not the float64"):
        cskd.argsort(mixed, exchange=exchange).compute()


# --------------------------------------------------------- GPU cluster transport
def test_protocol_is_ucx_where_distributed_ucxx_is_installed(monkeypatch):
    from cudasortkit.dask import cluster

    monkeypatch.setattr(cluster, "ucx_installed", lambda: True)
    assert cluster.protocol() == "ucx" and cluster.protocol("tcp") == "tcp"
    monkeypatch.setattr(cluster, "ucx_installed", lambda: False)
    assert cluster.protocol() == "tcp" and cluster.protocol("ucx") == "ucx"
    with pytest.raises(ValueError, match="'auto', 'ucx' or 'tcp'"):
        cluster.protocol("nccl")


def test_device_chunks_on_tcp_warn_once_naming_the_fix(monkeypatch):
    from types import SimpleNamespace

    from cudasortkit.dask import cluster

    class DeviceArray:      # stands for cupy.ndarray: only its module is read
        pass

    DeviceArray.__module__ = "cupy._core.core"
    x = SimpleNamespace(_meta=DeviceArray())
    address = SimpleNamespace(address="tcp://10.0.0.1:8786")
    monkeypatch.setattr(cluster, "default_client", lambda: SimpleNamespace(scheduler=address))
    monkeypatch.setattr(cluster, "_warned", False)
    with pytest.warns(RuntimeWarning, match="talks TCP.*distributed-ucxx-cu13.*protocol='ucx'"):
        cluster.check_transport(x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cluster.check_transport(x)                                   # once
        monkeypatch.setattr(cluster, "_warned", False)
        address.address = "ucx://10.0.0.1:8786"
        cluster.check_transport(x)                                   # UCX: no warning
        address.address = "tcp://10.0.0.1:8786"
        cluster.check_transport(SimpleNamespace(_meta=np.empty(0)))  # host chunks: none


def slow_block(b):
    import time

    time.sleep(0.02)
    return b


def test_a_worker_lost_mid_sort_gives_the_exact_result():
    """Dask's retry (a P2P exchange restarts on the workers left) and never a
    partial result: one of two worker processes exits while the sort runs;
    the persisted input is intact afterwards (Dask recomputes its lost chunks)."""
    import os
    import time

    rng = np.random.default_rng(7)
    a = rng.integers(0, 100, 160 * 16).astype(np.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with distributed.LocalCluster(processes=True, n_workers=2, threads_per_worker=1,
                                      dashboard_address=None) as cluster, distributed.Client(cluster) as c:
            held = c.persist(da.from_array(a, chunks=16))     # the input, persisted on both workers
            distributed.wait(held)
            x = held.map_blocks(slow_block, dtype=a.dtype)
            future = c.compute(cskd.argsort(x, exchange="p2p"))
            time.sleep(1.0)
            assert future.status == "pending"
            # the scheduler's own list: the client's cached one may be empty for a moment
            workers = c.run_on_scheduler(lambda dask_scheduler: sorted(dask_scheduler.workers))
            with pytest.raises(Exception):   # the worker's connection closes as it exits
                c.run(os._exit, 1, workers=[workers[1]])
            assert np.array_equal(future.result(timeout=120), np.argsort(a, kind="stable"))
            assert np.array_equal(held.compute(), a), "the persisted input lost chunks"


def test_without_dask_the_import_names_the_extra(monkeypatch):
    import importlib
    import sys

    for name in [m for m in sys.modules if m == "cudasortkit.dask" or m.startswith("cudasortkit.dask.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "dask.array", None)  # what a missing package looks like
    with pytest.raises(ImportError, match=r'pip install "cudasortkit\[dask\]"'):
        importlib.import_module("cudasortkit.dask")
