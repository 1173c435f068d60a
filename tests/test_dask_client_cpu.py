"""What the collective sort's client (cudasortkit/dask/explicit.py) sends,
on an in-process CPU cluster with ranks as threads: once communicators and
kernels are ready and the input is persisted, one call to the scheduler and
one graph per sort; prepare warms the kernels in a thread on every worker
while the communicator is made, and says which worker's warm-up failed."""
import threading
import warnings

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

from cudasortkit.dask import explicit  # noqa: E402


@pytest.fixture
def client():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with distributed.LocalCluster(processes=False, n_workers=2, threads_per_worker=1,
                                      dashboard_address=None) as c, distributed.Client(c) as client:
            yield client


def counting(monkeypatch, client, names):
    """Count calls of the client's methods `names`."""
    calls = {n: 0 for n in names}
    for n in names:
        real = getattr(client, n)

        def wrapped(*a, real=real, n=n, **k):
            calls[n] += 1
            return real(*a, **k)

        monkeypatch.setattr(client, n, wrapped)
    return calls


def test_a_sort_sends_one_scheduler_call_and_one_graph(client, monkeypatch):
    x = client.persist(da.from_array(np.arange(4000)[::-1].copy(), chunks=500))
    distributed.wait(x)
    explicit.prepare(("int64",), ("sort", "argsort"), (False,), "threads", "numpy")
    calls = counting(monkeypatch, client, ["run", "run_on_scheduler", "get", "submit", "who_has",
                                           "persist", "register_plugin", "gather", "scheduler_info"])
    got = [explicit.run(op, x, None, False, (1000,) * 4, "threads")[0] for op in ("sort", "argsort")]
    sent = dict(calls)
    assert np.array_equal(got[0].compute(), np.arange(4000))
    assert np.array_equal(got[1].compute(), np.arange(4000)[::-1])
    assert sent == {"run": 0, "run_on_scheduler": 2, "get": 2, "submit": 0, "who_has": 0, "persist": 0,
                     "register_plugin": 0, "gather": 0, "scheduler_info": 0}


MADE = threading.Event()
SEEN: list = []
real_create = explicit._create


def creating(cid, transport, uid, ranks, dask_worker=None):
    """explicit._create, then MADE is set."""
    real_create(cid, transport, uid, ranks, dask_worker=dask_worker)
    MADE.set()


def waiting_warm_up(dtype, op, descending, n, module, dask_worker=None):
    """A warm-up that records its thread and waits for the communicator."""
    on_loop = threading.get_ident() == getattr(dask_worker.loop.asyncio_loop, "_thread_id", None)
    SEEN.append((on_loop, np.dtype(dtype).str, op))
    assert MADE.wait(20), "the communicator was not made while the warm-up ran"


def failing_warm_up(dtype, op, descending, n, module, dask_worker=None):
    raise MemoryError("warm-up ran out of memory")


def test_prepare_warms_in_a_thread_while_the_communicator_is_made(client, monkeypatch):
    """Each worker's warm-up runs off its event loop and overlaps the
    communicator's creation (the warm-up here waits for it: one after the
    other would time out); nothing is sent again for what is ready."""
    MADE.clear()
    SEEN.clear()
    monkeypatch.setattr(explicit, "_create", creating)
    monkeypatch.setattr(explicit, "warm_up", waiting_warm_up)
    explicit.prepare(("float32", "uint16"), ("sort",), (False,), "threads", "numpy")
    assert len(SEEN) == 2 * 2                       # two workers, two dtypes
    assert not any(on_loop for on_loop, _, _ in SEEN)
    assert {(d, op) for _, d, op in SEEN} == {("<f4", "sort"), ("<u2", "sort")}
    calls = counting(monkeypatch, client, ["run", "run_on_scheduler", "register_plugin"])
    explicit.prepare(("float32",), ("sort",), (False,), "threads", "numpy")
    assert calls == {"run": 0, "run_on_scheduler": 1, "register_plugin": 0}    # the workers, asked once


def test_a_failing_warm_up_is_raised_by_prepare(client, monkeypatch):
    monkeypatch.setattr(explicit, "warm_up", failing_warm_up)
    with pytest.raises(MemoryError, match="warm-up ran out of memory"):
        explicit.prepare(("int32",), ("argsort",), (True,), "threads", "numpy")
    cids = {cid for k, (cid, _) in explicit._communicators.items() if k[0] == client.scheduler.address}
    assert cids and not any(w[0] in cids for w in explicit._warmed), "a failed warm-up counted as done"


def slow_warm_up(dtype, op, descending, n, module, dask_worker=None):
    import time

    time.sleep(1.0)
    SEEN.append((False, np.dtype(dtype).str, op))


def test_prepare_without_waiting_is_waited_for_by_the_first_sort(client, monkeypatch):
    """prepare(wait=False) returns before the workers are ready; the first
    sort waits for it (and raises its error)."""
    import time

    SEEN.clear()
    monkeypatch.setattr(explicit, "warm_up", slow_warm_up)
    t = time.perf_counter()
    explicit.prepare(("int64",), ("sort",), (False,), "threads", "numpy", wait=False)
    assert time.perf_counter() - t < 0.9 and explicit._preparing
    x = client.persist(da.from_array(np.arange(300)[::-1].copy(), chunks=70))
    got, = explicit.run("sort", x, None, False, x.chunks[0], "threads")
    assert not explicit._preparing and len(SEEN) == 2       # both workers warmed before the sort
    assert np.array_equal(got.compute(), np.arange(300))
    monkeypatch.setattr(explicit, "warm_up", failing_warm_up)
    explicit.prepare(("int32",), ("sort",), (False,), "threads", "numpy", wait=False)
    with pytest.raises(MemoryError, match="warm-up ran out of memory"):
        explicit.run("sort", x, None, False, x.chunks[0], "threads")
    assert not explicit._preparing
