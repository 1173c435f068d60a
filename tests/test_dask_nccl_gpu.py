"""exchange="nccl" on a LocalCUDACluster (one worker per GPU, at least 2
GPUs, NCCL through cupy.cuda.nccl): CuPy chunks made on the workers, sorted
by one collective among them, against NumPy's stable order. Skipped with
fewer than 2 GPUs or without dask-cuda / NCCL."""
import warnings

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

import dask  # noqa: E402

import cudasortkit.dask as cskd  # noqa: E402
from cudasortkit.dask import comm, explicit  # noqa: E402
from helpers import assert_keys_equal, make_keys, reference_argsort  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def client():
    cupy = pytest.importorskip("cupy")
    dask_cuda = pytest.importorskip("dask_cuda")
    if cupy.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("needs at least 2 GPUs")
    if not comm.nccl_available():
        pytest.skip("CuPy has no NCCL (cupy.cuda.nccl)")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with dask_cuda.LocalCUDACluster(n_workers=2, threads_per_worker=1, protocol="tcp",
                                        dashboard_address=None) as cluster:
            with distributed.Client(cluster) as c:
                yield c


def to_device(block):
    import cupy

    return cupy.asarray(block)


def on_workers(a, chunks):
    """CuPy chunks of `a`, made on the workers."""
    import cupy

    x = da.from_array(a, chunks=chunks).map_blocks(to_device, dtype=a.dtype, meta=cupy.empty(0, a.dtype))
    return x.persist()


def host(result):
    blocks = dask.compute(*result.to_delayed().ravel())
    assert all(type(b).__module__.startswith("cupy") for b in blocks)
    assert [len(b) for b in blocks] == list(result.chunks[0])
    return np.concatenate([b.get() for b in blocks])


def test_auto_picks_nccl_for_cupy_chunks(client):
    x = on_workers(np.arange(100, dtype=np.uint32), 25)
    assert cskd.plan(x).exchange == "nccl"


@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("dist, dtype, chunks", [
    ("uniform", "uint32", (100_000, 0, 77_777, 1, 22_222)),
    ("few_unique", "int64", 50_000),
    ("special", "float32", (0, 60_001, 39_999)),
    ("all_equal", "float64", (1, 99_999)),
    ("sorted", "int16", 25_000),
])
def test_sort_argsort_sort_by_key_match_numpy(client, dist, dtype, chunks, descending):
    rng = np.random.default_rng(1)
    n = sum(chunks) if isinstance(chunks, tuple) else 200_000
    a = make_keys(dist, dtype, n, rng)
    values = rng.random(n)
    x = on_workers(a, chunks)
    expected = reference_argsort(a, descending)
    s = cskd.sort(x, descending, exchange="nccl")
    assert s.chunks == x.chunks
    assert_keys_equal(host(s), a[expected])
    assert np.array_equal(host(cskd.argsort(x, descending, exchange="nccl")), expected)
    k, v = cskd.sort_by_key(x, on_workers(values, x.chunks), descending, exchange="nccl")
    assert_keys_equal(host(k), a[expected])
    assert np.array_equal(host(v), values[expected])


def test_output_chunks_and_one_communicator_for_many_sorts(client):
    rng = np.random.default_rng(2)
    a = rng.integers(0, 2**32, 1 << 22, dtype=np.uint64).astype(np.uint32)
    x = on_workers(a, 1 << 19)
    made = len(explicit._communicators)
    for out in [(1 << 22,), (1 << 20,) * 4, (0, (1 << 22) - 1, 1)]:
        s = cskd.sort(x, chunks=out, exchange="nccl")
        assert s.chunks == (out,)
        assert np.array_equal(host(s), np.sort(a))
    assert len(explicit._communicators) <= made + 1


def test_phase_timings(client):
    x = on_workers(np.arange(1 << 20, dtype=np.uint32)[::-1].copy(), 1 << 18)
    times = []
    (s,) = explicit.run("sort", x, None, False, x.chunks[0], "nccl", times)
    assert len(times) == 2 and all(t["exchange"] >= 0 for t in times)
    assert np.array_equal(host(s), np.arange(1 << 20, dtype=np.uint32))


def test_bad_chunks_raise_and_the_next_sort_works(client):
    import cupy

    def wrong_dtype(b):
        return cupy.asarray(b).astype(cupy.float32)

    x = da.zeros(300, chunks=100).map_blocks(wrong_dtype, dtype=np.float64, meta=cupy.empty(0, np.float64))
    with pytest.raises(TypeError, match=r"input chunk \d has dtype float32, not the float64"):
        cskd.sort(x, exchange="nccl")
    y = on_workers(np.arange(300.0)[::-1].copy(), 100)
    assert np.array_equal(host(cskd.sort(y, exchange="nccl")), np.arange(300.0))


def _set_options(text):
    import os

    if text:
        os.environ["CUDASORTKIT_DASK_COLLECTIVE"] = text
    else:
        os.environ.pop("CUDASORTKIT_DASK_COLLECTIVE", None)


def _ipc_ready(dask_worker=None):
    plugin = dask_worker.plugins[explicit.NAME]
    return [c.ipc_ready for c in plugin.comms.values()]


def test_the_workers_map_each_others_memory(client):
    """LocalCUDACluster shows every worker all GPUs (its own first): the
    communicator's probe finds CUDA IPC working, so exchange=auto takes it."""
    x = on_workers(np.arange(1000, dtype=np.uint32)[::-1].copy(), 250)
    assert np.array_equal(host(cskd.sort(x, exchange="nccl")), np.arange(1000))
    ready = client.run(_ipc_ready)
    assert all(r and all(r) for r in ready.values()), ready


@pytest.mark.parametrize("setting", ["exchange=nccl", "exchange=ipc", "exchange=ipc,direction=push",
                                     "exchange=ipc,order=ring,split=1MiB", "exchange=ipc,keep=1",
                                     "runs=joined", "merge=sort", "exchange=nccl,runs=joined",
                                     "method=partition", "method=partition,exchange=nccl",
                                     "method=partition,direction=push,keep=1"])
@pytest.mark.parametrize("descending", [False, True])
def test_every_setting_across_gpus(client, setting, descending):
    """Every transport, direction, order, run layout and merge across the
    workers' GPUs: NumPy's order, ties in global index order, chunks
    wherever Dask placed them (an empty one, a one-key one)."""
    rng = np.random.default_rng(len(setting))
    a = make_keys("few_unique", "int32", 300_001, rng)
    a[::97] = np.iinfo(np.int32).max
    values = rng.random(len(a))
    chunks = (50_000, 0, 77_777, 1, 22_222, 100_000, 50_001)
    x = on_workers(a, chunks)
    expected = reference_argsort(a, descending)
    client.run(_set_options, setting)
    try:
        for _ in range(2):   # twice: the arenas (and with keep=1 the peers' mappings) are reused
            s = cskd.sort(x, descending, exchange="nccl")
            assert np.array_equal(host(s), a[expected])
            assert np.array_equal(host(cskd.argsort(x, descending, exchange="nccl")), expected)
            k, v = cskd.sort_by_key(x, on_workers(values, x.chunks), descending, exchange="nccl")
            assert np.array_equal(host(k), a[expected]) and np.array_equal(host(v), values[expected])
            assert np.array_equal(host(s), a[expected]), "a result changed when the next sort ran"
    finally:
        client.run(_set_options, "")
        client.run(explicit.close_links)
        client.run(explicit.free_buffers)
