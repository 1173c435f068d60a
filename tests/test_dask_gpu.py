"""cudasortkit.dask with CuPy chunks (the worker-side code on the GPU), run by
Dask's synchronous scheduler: the cluster path is tests/test_dask_cpu.py's and
cudasortkit/dask/bench.py's (python -m cudasortkit.dask.bench)."""
import numpy as np
import pytest

da = pytest.importorskip("dask.array")

import dask  # noqa: E402

import cudasortkit.dask as cskd  # noqa: E402
from helpers import assert_keys_equal, make_keys, reference_argsort  # noqa: E402

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


def test_cupy_chunks_refuse_the_p2p_exchange_and_sort_through_tasks(rng):
    """Dask's P2P engine would copy device chunks through the host: refused
    by name; "auto" picks the tasks exchange for them."""
    x = cupy_chunks(rng.random(1000), 10)
    with pytest.raises(ValueError, match="exchange='p2p' carries host"):
        cskd.sort(x, exchange="p2p")
    assert cskd.plan(x).exchange == "tasks"
