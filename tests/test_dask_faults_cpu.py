"""A worker lost during a collective sort (exchange="nccl"'s code, ranks as
threads of one process here): the sort raises a RuntimeError naming the
worker within seconds, the other ranks are released (their collective calls
fail instead of waiting), the input is intact (Dask recomputes the chunks
the worker held) and the next sort works on the workers left.

The lost worker's rank is held back by a stand-in for explicit._run_rank
that sleeps on that worker before the collective starts, the moment a
worker is lost in practice: the others wait for it inside the collective.
tests/test_dask_faults_gpu.py does the same with NCCL on GPU workers.
"""
import threading
import time
import warnings

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

from cudasortkit.dask import comm, explicit  # noqa: E402

#: workers whose rank sleeps, and the moment it did
VICTIMS: list = []
ASLEEP = threading.Event()
SLEEP = 3.0
real_run_rank = explicit._run_rank


def sleepy_rank(*args):
    """explicit._run_rank, after SLEEP seconds on the victim's worker."""
    from distributed import get_worker

    if get_worker().address in VICTIMS:
        ASLEEP.set()
        time.sleep(SLEEP)
    return real_run_rank(*args)


def thread_id(dask_worker=None) -> int:
    return threading.get_ident()


@pytest.fixture
def cluster(monkeypatch):
    monkeypatch.setattr(comm.ThreadComm, "timeout", 60.0)   # a hang would show as a minute
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with distributed.LocalCluster(processes=False, n_workers=3, threads_per_worker=1,
                                      dashboard_address=None) as c, distributed.Client(c) as client:
            yield c, client


async def remove(address, dask_scheduler=None):
    await dask_scheduler.remove_worker(address=address, stimulus_id="csk-test-lost", close=True)


@pytest.mark.parametrize("op", ["sort", "argsort"])
def test_a_worker_lost_mid_sort_raises_and_releases_the_others(cluster, monkeypatch, op):
    local, client = cluster
    rng = np.random.default_rng(8)
    a = rng.integers(0, 1000, 3000).astype(np.float64)
    x = client.persist(da.from_array(a, chunks=250))
    distributed.wait(x)
    explicit.prepare(("float64",), (op,), (False,), "threads", "numpy")   # communicator and warm-up done
    workers = sorted(client.run(thread_id))
    victim = workers[1]
    monkeypatch.setattr(explicit, "_run_rank", sleepy_rank)
    monkeypatch.setattr(explicit, "POLL", 0.2)
    VICTIMS[:] = [victim]
    ASLEEP.clear()
    outcome = {}

    def sort():
        t = time.perf_counter()
        try:
            explicit.run(op, x, None, False, x.chunks[0], "threads")
        except Exception as e:            # noqa: BLE001 - checked below
            outcome["error"] = e
        outcome["seconds"] = time.perf_counter() - t

    runner = threading.Thread(target=sort)
    runner.start()
    assert ASLEEP.wait(30), "the victim's rank never started"
    client.run_on_scheduler(remove, victim)
    runner.join(30)
    assert not runner.is_alive(), "the sort still waits 30 s after its worker left"
    error = outcome.get("error")
    assert isinstance(error, RuntimeError) and f"worker {victim} left the cluster" in str(error), error
    assert outcome["seconds"] < SLEEP + 10
    # The other ranks were released: each survivor's one thread runs a new task at once.
    survivors = [w for w in workers if w != victim]
    ran = [client.submit(int, 7, workers=[w], allow_other_workers=False, pure=False) for w in survivors]
    distributed.wait(ran, timeout=10)
    assert client.gather(ran) == [7, 7]
    # The input is intact (the lost chunks recomputed) and the next sort works.
    assert np.array_equal(x.compute(), a)
    VICTIMS[:] = []
    got, = explicit.run(op, x, None, False, x.chunks[0], "threads")
    expected = np.sort(a) if op == "sort" else np.argsort(a, kind="stable")
    assert np.array_equal(got.compute(), expected)


def test_a_rank_failing_before_its_collective_aborts_the_others(cluster, monkeypatch):
    """A rank that fails before it reaches the collective (here: its worker
    lost the communicator) cannot abort the others itself: the client aborts
    them, and the sort raises that rank's error."""
    local, client = cluster
    x = client.persist(da.from_array(np.arange(900.0)[::-1].copy(), chunks=100))
    distributed.wait(x)
    explicit.prepare(("float64",), ("sort",), (False,), "threads", "numpy")
    cid, ranks = explicit.communicator(client, "threads")
    victim = sorted(ranks)[0]
    client.run(explicit._forget, cid, workers=[victim])
    t = time.perf_counter()
    with pytest.raises(RuntimeError, match="lost its communicator"):
        explicit.run("sort", x, None, False, x.chunks[0], "threads")
    assert time.perf_counter() - t < 20, "the other ranks waited for their timeout"
    got, = explicit.run("sort", x, None, False, x.chunks[0], "threads")   # a new communicator
    assert np.array_equal(got.compute(), np.arange(900.0))


def test_the_turn_passes_on_when_ranks_end_or_a_client_gives_it_back(cluster):
    """One collective at a time: a second sort's turn waits for the first's
    ranks; a turn taken and never used is given back (explicit._end_turn)."""
    from cudasortkit.dask import turns

    local, client = cluster
    x = client.persist(da.from_array(np.arange(60.0)[::-1].copy(), chunks=10))
    distributed.wait(x)
    place = explicit._take_turn(client, "csk-test-a", [])
    assert [w for w, _ in place["workers"]] == sorted(local.scheduler.workers)

    def holder(dask_scheduler=None):
        return dask_scheduler.plugins[turns.NAME].client

    assert client.run_on_scheduler(holder) == client.id
    explicit._end_turn(client)
    assert client.run_on_scheduler(holder) is None
    for _ in range(3):        # each sort's turn ends with its ranks
        got, = explicit.run("sort", x, None, False, x.chunks[0], "threads")
        assert np.array_equal(got.compute(), np.arange(60.0))
    deadline = time.time() + 10
    while client.run_on_scheduler(holder) is not None and time.time() < deadline:
        time.sleep(0.05)
    assert client.run_on_scheduler(holder) is None


def slow_rank(*args):
    """explicit._run_rank, 0.3 s late: the ranks of two sorts overlap."""
    time.sleep(0.3)
    return real_run_rank(*args)


def test_sorts_from_two_threads_take_turns(monkeypatch):
    """Two collective sorts at once on workers of two threads (both sorts'
    ranks could run at once on one communicator: their calls would mix)
    both come out exact."""
    monkeypatch.setattr(comm.ThreadComm, "timeout", 20.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with distributed.LocalCluster(processes=False, n_workers=3, threads_per_worker=2,
                                      dashboard_address=None) as local, distributed.Client(local) as client:
            two_sorts_at_once(client, monkeypatch)


def two_sorts_at_once(client, monkeypatch):
    rng = np.random.default_rng(12)
    arrays = [rng.integers(0, 50, 2000).astype(np.int64) for _ in range(2)]
    xs = [client.persist(da.from_array(a, chunks=300)) for a in arrays]
    distributed.wait(xs)
    explicit.prepare(("int64",), ("argsort",), (False,), "threads", "numpy")
    monkeypatch.setattr(explicit, "_run_rank", slow_rank)
    got, errors = [None, None], []

    def sort(i):
        try:
            for _ in range(3):
                got[i] = explicit.run("argsort", xs[i], None, False, xs[i].chunks[0], "threads")[0].compute()
        except Exception as e:      # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=sort, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors and not any(t.is_alive() for t in threads)
    for a, g in zip(arrays, got):
        assert np.array_equal(g, np.argsort(a, kind="stable"))
