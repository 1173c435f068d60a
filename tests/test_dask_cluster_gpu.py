"""The collective sort (exchange="nccl") on a fresh GPU cluster, one worker
per GPU under a nanny (at least 2 GPUs, NCCL through cupy.cuda.nccl):

- a worker lost during a sort: its process exits while its rank sleeps
  (the others wait for it inside NCCL); the sort raises a RuntimeError
  naming it within seconds, the other workers' communicator is aborted so
  their threads are free again, the input is intact, and once the nanny
  has restarted the worker the next sort is exact;
- cudasortkit.dask.prepare on a fresh cluster whose kernels are already in
  the disk cache (a first cluster compiled them): printed as PREPARE lines,
  at most 1 s.

Run with -s to see the PREPARE and FAULT lines.
"""
import os
import threading
import time
import warnings

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

import cudasortkit.dask as cskd  # noqa: E402
from cudasortkit.dask import comm, explicit  # noqa: E402

pytestmark = pytest.mark.gpu

#: seconds the lost worker's rank sleeps before its collective
SLEEP = 30.0


def gpus() -> int:
    cupy = pytest.importorskip("cupy")
    n = cupy.cuda.runtime.getDeviceCount()
    if n < 2:
        pytest.skip("needs at least 2 GPUs")
    if not comm.nccl_available():
        pytest.skip("CuPy has no NCCL (cupy.cuda.nccl)")
    return min(n, 4)


def gpu_cluster(n: int):
    """One single-thread worker per GPU, each under a nanny (which restarts it)."""
    from distributed import Nanny, Scheduler, SpecCluster

    visible = os.environ.get("CUDA_VISIBLE_DEVICES")     # the GPUs this run may use, in order
    ids = visible.split(",") if visible else [str(i) for i in range(n)]
    workers = {i: {"cls": Nanny, "options": {"nthreads": 1, "env": {"CUDA_VISIBLE_DEVICES": ids[i]}}}
               for i in range(n)}
    return SpecCluster(workers=workers, scheduler={"cls": Scheduler, "options": {
        "protocol": "tcp", "dashboard_address": None}})


def to_device(block):
    import cupy

    return cupy.asarray(block)


def device_keys(a, chunks):
    import cupy

    return da.from_array(a, chunks=chunks).map_blocks(to_device, dtype=a.dtype, meta=cupy.empty(0, a.dtype))


def test_a_lost_worker_gives_an_error_not_a_hang_and_the_next_sort_works():
    n = gpus()
    rng = np.random.default_rng(4)
    a = rng.integers(0, 2**32, n * 2 * 2**20, dtype=np.uint64).astype(np.uint32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with gpu_cluster(n) as local, distributed.Client(local) as client:
            client.wait_for_workers(n)
            x = device_keys(a, 2**20).persist()
            distributed.wait(x)
            cskd.prepare(dtypes=("uint32",), ops=("sort",))
            victim = sorted(client.scheduler_info()["workers"])[-1]

            def sleep_first(seconds):     # on the victim: its next rank sleeps before the collective
                import time as clock

                from cudasortkit.dask import explicit as ex

                real = ex._run_rank

                def sleepy(*args):
                    ex._run_rank = real
                    clock.sleep(seconds)
                    return real(*args)

                ex._run_rank = sleepy

            client.run(sleep_first, SLEEP, workers=[victim])
            outcome = {}

            def sort():
                t = time.perf_counter()
                try:
                    cskd.sort(x)
                except Exception as e:    # noqa: BLE001 - checked below
                    outcome["error"] = e
                outcome["seconds"] = time.perf_counter() - t

            runner = threading.Thread(target=sort)
            runner.start()
            time.sleep(5)                 # the others wait inside NCCL for the victim
            killed = time.perf_counter()
            try:
                client.run(os._exit, 1, workers=[victim])
            except Exception:             # noqa: BLE001 - the worker's connection closes as it exits
                pass
            runner.join(60)
            assert not runner.is_alive(), "the sort still waits 60 s after its worker was killed"
            error = outcome.get("error")
            print(f"FAULT: sort raised after {time.perf_counter() - killed:.1f} s from the kill: {error!r}")
            assert isinstance(error, RuntimeError) and f"worker {victim} left the cluster" in str(error)
            survivors = [w for w in sorted(client.scheduler_info()["workers"]) if w != victim]
            ran = [client.submit(int, 7, workers=[w], allow_other_workers=False, pure=False) for w in survivors]
            distributed.wait(ran, timeout=20)   # each survivor's one thread is free: NCCL was aborted
            assert client.gather(ran) == [7] * len(survivors)
            import cupy

            assert np.array_equal(cupy.asnumpy(x.compute()), a), "the input changed"
            client.wait_for_workers(n, timeout=120)   # the nanny restarts the victim
            assert np.array_equal(cupy.asnumpy(cskd.sort(x).compute()), np.sort(a))


def test_prepare_on_a_fresh_cluster_compiles_nothing_when_the_kernels_are_cached():
    """A second, fresh cluster's prepare reads every kernel from the disk
    cache: no worker compiles one. Its time is printed; the target for it
    lives in the Dask bench (cudasortkit/dask/bench.py prints prepare's
    seconds), not in a timed test."""
    n = gpus()

    def compiled() -> int:        # nested: sent to the workers by value
        from cudasortkit.build import cubins

        return cubins.counters()["compiled"]

    def kernel_cache() -> str:    # nested: sent to the workers by value
        """pycuda's disk cache directory in this process (pycuda.compiler's rule)."""
        import os as system

        if "PYCUDA_CACHE_DIR" in system.environ:
            return system.environ["PYCUDA_CACHE_DIR"]
        import platformdirs

        return system.path.join(platformdirs.user_cache_dir("pycuda", "pycuda"), "compiler-cache-v1")

    seconds, compiles = [], []
    for fresh in (0, 1):               # the first cluster fills the kernels' disk cache
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with gpu_cluster(n) as local, distributed.Client(local) as client:
                client.wait_for_workers(n)
                explicit._communicators.clear()
                explicit._warmed.clear()
                t = time.perf_counter()
                cskd.prepare(dtypes=("uint32",), ops=("sort", "argsort"))
                seconds.append(time.perf_counter() - t)
                compiles.append(sorted(client.run(compiled).values()))
                t = time.perf_counter()
                x = device_keys(np.arange(n * 2**20, dtype=np.uint32)[::-1].copy(), 2**19).persist()
                distributed.wait(x)
                s = cskd.sort(x).persist()
                distributed.wait(s)
                print(f"PREPARE cluster {fresh}: {n} GPUs, prepare {seconds[-1]:.3f} s, "
                      f"first sort {time.perf_counter() - t:.3f} s, pycuda's disk cache on the workers: "
                      f"{sorted(set(client.run(kernel_cache).values()))}")
    print(f"PREPARE fresh cluster, kernels cached: {seconds[1]:.3f} s (first cluster: {seconds[0]:.3f} s); "
          f"modules compiled by prepare on each worker: {compiles}")
    assert compiles[1] == [0] * n, compiles


def test_cupy_chunks_through_p2p_and_auto_without_nccl(monkeypatch):
    """exchange="p2p" carries CuPy chunks through host memory; "auto"
    takes it for many pieces when the workers have no NCCL."""
    n = gpus()
    rng = np.random.default_rng(6)
    a = rng.integers(0, 1000, 64 * 4096).astype(np.float32)
    a[::97] = np.nan
    values = rng.integers(-2**40, 2**40, len(a))
    import cupy

    from helpers import reference_argsort

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with gpu_cluster(n) as local, distributed.Client(local) as client:
            client.wait_for_workers(n)
            x = device_keys(a, 4096).persist()
            monkeypatch.setattr(explicit, "nccl_ready", lambda c: False)
            assert cskd.plan(x).exchange == "p2p"              # 64 x 64 pieces
            s, i = cskd.sort(x), cskd.argsort(x, descending=True)
            k, v = cskd.sort_by_key(x, device_keys(values, 4096), exchange="p2p")
            got = client.compute([s, i, k, v], sync=True)
            assert all(type(g).__module__.startswith("cupy") for g in got)
            got_s, got_i, got_k, got_v = (cupy.asnumpy(g) for g in got)
            np.testing.assert_array_equal(got_s, np.sort(a))
            assert np.array_equal(got_i, reference_argsort(a, True))
            order = np.argsort(a, kind="stable")
            np.testing.assert_array_equal(got_k, a[order])
            assert np.array_equal(got_v, values[order])
