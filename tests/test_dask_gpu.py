"""cudasortkit.dask with CuPy chunks (the worker-side code on the GPU), run by
Dask's synchronous scheduler: the cluster path is tests/test_dask_cpu.py's and
cudasortkit/dask/bench.py's (python -m cudasortkit.dask.bench)."""
import numpy as np
import pytest

da = pytest.importorskip("dask.array")

import dask  # noqa: E402

import cudasortkit.dask as cskd  # noqa: E402
from helpers import assert_keys_equal, make_keys, on_thread_ranks, reference_argsort  # noqa: E402

pytestmark = pytest.mark.gpu


def cupy_chunks(a, chunks):
    cupy = pytest.importorskip("cupy")
    return da.from_array(cupy.asarray(a), chunks=chunks, asarray=False)


@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("dist, dtype", [("uniform", "uint32"), ("few_unique", "int64"),
                                         ("all_equal", "float32"), ("special", "float64"),
                                         ("sorted", "int16")])
def test_cupy_chunks_sort_argsort_sort_by_key(dist, dtype, descending, rng):
    a = make_keys(dist, dtype, 50_001, rng)
    values = rng.random(len(a))
    chunks = (0, 20_000, 1, 17_000, 13_000)
    x = cupy_chunks(a, chunks)
    s, i = cskd.sort(x, descending), cskd.argsort(x, descending)
    k, v = cskd.sort_by_key(x, cupy_chunks(values, 10_000), descending)
    assert type(s._meta).__module__.startswith("cupy") and s.chunks == x.chunks
    got = dask.compute(s, i, k, v, scheduler="sync")
    assert all(type(g).__module__.startswith("cupy") for g in got)
    got_s, got_i, got_k, got_v = (g.get() for g in got)
    expected = reference_argsort(a, descending)
    assert np.array_equal(got_i, expected)
    assert_keys_equal(got_s, a[expected])
    assert_keys_equal(got_k, a[expected])
    assert np.array_equal(got_v, values[expected])
    blocks = dask.compute(*s.to_delayed().ravel(), scheduler="sync")
    assert [len(b) for b in blocks] == list(chunks)


def test_cupy_chunks_on_local_schedulers_take_the_tasks_tree(rng):
    """Without a distributed Client "auto" picks the tasks exchange, laid
    out as a tree (cudasortkit/dask/tree.py); "p2p" (which copies CuPy
    chunks through the host) builds, and needs a distributed Client to run."""
    x = cupy_chunks(rng.random(1000), 10)
    assert cskd.plan(x).exchange == "tasks" and cskd.plan(x).layout == "tree"
    assert cskd.plan(x, exchange="p2p").module == "cupy"
    with pytest.raises(RuntimeError, match="distributed"):
        cskd.sort(x, exchange="p2p").compute(scheduler="sync")


# -------------------------------------- the collective's parts on one GPU
from cudasortkit.dask import collective, counting, cuts  # noqa: E402

COUNT_DTYPES = ["bool", "uint8", "int16", "float16", "int32", "uint32", "float32", "int64", "uint64", "float64"]


def cupy_module():
    return pytest.importorskip("cupy")


@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("dtype", COUNT_DTYPES)
def test_count_words_on_the_device_matches_numpy(dtype, descending, rng):
    """kernels/dask_counts.cu against counting.count_words on the host:
    windows, both sides, the words of present keys, 0 and the top word,
    accumulation."""
    cupy = cupy_module()
    a = make_keys("special" if dtype.startswith("float") else "few_unique", dtype, 5001, rng)
    a = a[reference_argsort(a, descending)]
    present = counting.encode(a[rng.integers(0, len(a), 30)], descending)
    # uint64 throughout: a Python list here would promote the words to float64 and round them
    words = np.concatenate([present, rng.integers(0, counting.top(dtype), 8, dtype=np.uint64, endpoint=True),
                            np.array([0, counting.top(dtype)], np.uint64)]).reshape(4, 10)
    assert words.dtype == np.uint64
    lo = np.array([0, 0, 17, 2500], np.int64)
    hi = np.array([len(a), 1, 4000, 2500], np.int64)
    for side in (0, 1):
        expect = counting.count_words(a, words, lo, hi, descending, side)
        got = counting.count_words(cupy.asarray(a), cupy.asarray(words), cupy.asarray(lo), cupy.asarray(hi),
                                   descending, side)
        assert np.array_equal(got.get(), expect), side
        doubled = counting.count_words(cupy.asarray(a), cupy.asarray(words), cupy.asarray(lo), cupy.asarray(hi),
                                       descending, side, out=cupy.asarray(expect))
        assert np.array_equal(doubled.get(), 2 * expect)


@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("dtype", COUNT_DTYPES)
def test_partition_on_the_device_matches_numpy(dtype, descending, rng):
    """kernels/dask_partition.cu against the host's stable argsort of the
    bucket ids: 0, 1, 37 and 255 splitters (repeated words, keys equal to
    splitters), keys alone, positions, 4- and 8-byte values and 1-byte ones
    (moved by position); sizes around a round and a grid's ranges; the output
    poisoned first."""
    cupy = cupy_module()
    for n in (1, 2, 4095, 4097, 70_001, 1_000_003):
        a = make_keys("special" if dtype.startswith("float") else "few_unique", dtype, n, rng)
        words = counting.encode(a, descending)
        count = int(rng.choice([0, 1, 37, 255]))
        splitters = np.sort(rng.choice(words, count)) if count else np.zeros(0, np.uint64)
        ids = counting.bucket_ids(a, splitters, descending)
        order = np.argsort(ids, kind="stable")
        for values in (None, "positions", np.int32, np.float64, np.int8):
            given = None if values is None or isinstance(values, str) else rng.integers(0, 100, n).astype(values)
            keys_out = cupy.asarray(a[::-1].copy())     # poisoned: the keys in another order
            vdtype = np.uint32 if isinstance(values, str) else values
            values_out = None if values is None else cupy.full(n, 77, vdtype)
            sizes = counting.partition(cupy.asarray(a), cupy.asarray(splitters), descending, keys_out,
                                       values if given is None else cupy.asarray(given), values_out)
            assert np.array_equal(sizes.get(), np.bincount(ids, minlength=count + 1)), (n, count)
            assert_keys_equal(keys_out.get(), a[order])
            if values is not None:
                expect = order if isinstance(values, str) else given[order]
                assert np.array_equal(values_out.get(), expect.astype(vdtype)), (n, count, values)




@pytest.mark.parametrize("stable", [False, True])
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("dist, dtype", [("uniform", "uint32"), ("few_unique", "int64"), ("special", "float32"),
                                         ("all_equal", "float64"), ("special", "float16"), ("uniform", "bool")])
def test_exact_cuts_on_the_device(dist, dtype, descending, stable, rng):
    """cuts.exact_cuts with CuPy runs (2^16 candidates a round, counts
    summed on the device): the first t of the global order, several runs per
    rank."""
    cupy = cupy_module()
    a = make_keys(dist, dtype, 30_011, rng)
    bounds = np.unique(np.concatenate([[0, len(a)], rng.integers(0, len(a), 8)]))
    owner = rng.integers(0, 3, len(bounds) - 1)
    parts = [[] for _ in range(3)]
    for (b, e), r in zip(zip(bounds[:-1], bounds[1:]), owner):
        order = reference_argsort(a[b:e], descending)
        parts[r].append((a[b:e][order], order.astype(np.uint32), int(b)))
    targets = [0, 1, 2, 1000, 15_000, 30_010, 30_011]
    expected = reference_argsort(a, descending)

    def body(c, rank):
        runs = [cuts.Run(cupy.asarray(k), cupy.asarray(p), s) for k, p, s in parts[rank]]
        return cuts.exact_cuts(c, runs, targets, len(a), stable, descending, a.dtype, cupy)

    counts = on_thread_ranks(3, body)
    for j, t in enumerate(targets):
        assert sum(int(c[j].sum()) for c in counts) == t
        taken = np.concatenate([np.asarray(s + p[:c[j, i]], np.int64)
                                for runs, c in zip(parts, counts) for i, (_, p, s) in enumerate(runs)])
        if stable:
            assert np.array_equal(np.sort(taken), np.sort(expected[:t])), t
        else:
            assert_keys_equal(np.sort(a[taken]), np.sort(a[expected[:t]]))


ON_THREADS = ["", "exchange=nccl", "exchange=ipc,direction=push", "exchange=ipc,order=ring,split=1MiB,streams=1",
              "runs=joined", "merge=sort", "keep=1", "method=partition", "method=partition,exchange=nccl",
              "method=partition,direction=push", "method=partition,segments=85"]


THREAD_INPUTS = [("uniform", "uint32"), ("few_unique", "int64"), ("special", "float32"), ("all_equal", "float64"),
                 ("reverse", "int16")]
#: Quick tier: every setting once, the inputs taken in turn; slow tier: the rest of the product.
THREAD_CASES = [pytest.param(setting, *inputs, marks=() if (i - j) % len(THREAD_INPUTS) == 0 else pytest.mark.slow)
                for i, setting in enumerate(ON_THREADS) for j, inputs in enumerate(THREAD_INPUTS)]


@pytest.mark.parametrize("setting, dist, dtype", THREAD_CASES)
@pytest.mark.parametrize("descending", [False, True])
def test_the_collective_on_threads_sorts_cupy_chunks_as_numpy(setting, dist, dtype, descending, rng, monkeypatch):
    """collective.sort_on_rank with CuPy chunks, ranks as threads on this
    GPU: the local sorts into the send arena, the device counts, the copies
    (by address on copy streams, or send/recv), the merges; interleaved
    chunks, an empty chunk, a rank holding nothing; NumPy's order, ties in
    global index order."""
    cupy = cupy_module()
    monkeypatch.setenv("CUDASORTKIT_DASK_COLLECTIVE", setting)
    sizes, owners = [40_000, 0, 33_001, 51_000, 12, 64_000, 7, 90_000], [0, 1, 2, 0, 2, 0, 2, 0]
    a = make_keys(dist, dtype, sum(sizes), rng)
    at = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    declared = [sum(n for n, o in zip(sizes, owners) if o == r) for r in range(3)]
    expected = reference_argsort(a, descending)
    values = rng.integers(-2**40, 2**40, len(a))
    for op in ("sort", "argsort", "sort_by_key"):
        bounds = tuple(int(b) for b in np.concatenate([[0], np.cumsum(declared)]))
        spec = collective.Spec(op, descending, a.dtype, bounds,
                               tuple(declared), (0, 1, 2), False, values.dtype if op == "sort_by_key" else None,
                               "cupy", True)

        def body(c, rank):
            mine = [i for i, (n, o) in enumerate(zip(sizes, owners)) if o == rank and n]
            local = collective.Local([cupy.asarray(a[at[i]:at[i + 1]]) for i in mine], [int(at[i]) for i in mine],
                                     mine, [sizes[i] for i in mine],
                                     [cupy.asarray(values[at[i]:at[i + 1]]) for i in mine]
                                     if op == "sort_by_key" else None)
            k, v = collective.sort_on_rank(c, spec, local)
            return None if k is None else k.get(), None if v is None else v.get()

        out = on_thread_ranks(3, body)
        if op == "argsort":
            assert np.array_equal(np.concatenate([v for _, v in out]), expected), op
        else:
            assert_keys_equal(np.concatenate([k for k, _ in out]), a[expected])
        if op == "sort_by_key":
            assert np.array_equal(np.concatenate([v for _, v in out]), values[expected])
