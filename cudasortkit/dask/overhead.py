"""What Dask adds around the collective sort (exchange="nccl"), against
Dask's own floor for the same messages.

    python -m cudasortkit.dask.overhead --cpu              # in-process CPU LocalCluster, ranks as threads
    python -m cudasortkit.dask.overhead --workers 2        # one nanny-worker per GPU, NCCL, CuPy chunks

For each of --sorts sorts (after prepare and an untimed one), in ms:

- start: from the client's submission of the rank tasks to the first and
  the last rank starting (the collective can start with the last);
- around: run()'s time less the slowest rank's (start + its phases): the
  turn and placement call before the submission, and from the last rank's
  end to run() returning;
- persist: persist() of the result and waiting for it.

The floor: one trivial task pinned to every worker, submitted as one graph
(what the sort submits) right after the same persist() of the previous
result, timed from submission to each task starting and to the client
seeing all done. Distributed batches its messages: the client's to the
scheduler at most every 10 ms, the scheduler's to a worker every 5 ms (1 ms
on a new stream), a worker's to the scheduler every 2 ms, the scheduler's
to a client every 2 ms (distributed 2026.8: BatchedSend intervals, fixed in
its code, no config keys); a message sent within that interval of the
previous one on the same stream waits for it. Prints one OVERHEAD line of
medians (and the 25th percentiles).
"""
from __future__ import annotations

import argparse
import time
import warnings

import numpy as np


def rank_stamp(_=None):
    return time.time()


def floor(client, workers):
    """(seconds to each trivial task's start, seconds until all are seen done)."""
    from dask._task_spec import Task
    from dask.highlevelgraph import HighLevelGraph, MaterializedLayer
    from distributed import wait

    token = time.time_ns()
    layers = {f"floor-{token}-{i}": MaterializedLayer(
        {f"floor-{token}-{i}": Task(f"floor-{token}-{i}", rank_stamp, i)},
        annotations={"workers": [w], "allow_other_workers": False}) for i, w in enumerate(workers)}
    keys = list(layers)
    t = time.time()
    futures = client.get(HighLevelGraph(layers, {k: set() for k in keys}), keys, sync=False)
    wait(futures)
    done = time.time() - t
    return [s - t for s in client.gather(futures)], done


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cpu", action="store_true", help="in-process CPU LocalCluster, NumPy chunks, threads")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--keys-log2", type=int, default=14, help="keys in all (2 chunks a worker)")
    ap.add_argument("--sorts", type=int, default=20)
    args = ap.parse_args(argv)

    import dask.array as da
    import distributed

    from cudasortkit.dask import explicit

    warnings.simplefilter("ignore")
    if args.cpu:
        cluster = distributed.LocalCluster(processes=False, n_workers=args.workers, threads_per_worker=1,
                                           dashboard_address=None)
        transport, module = "threads", "numpy"
    else:
        from .bench import gpu_spec_cluster, visible_devices

        cluster = gpu_spec_cluster("tcp", visible_devices()[:args.workers])
        transport, module = "nccl", "cupy"
    with cluster, distributed.Client(cluster) as client:
        client.wait_for_workers(args.workers)
        n = 1 << args.keys_log2
        x = da.from_array(np.random.default_rng(0).integers(0, 1 << 30, n).astype(np.uint32),
                          chunks=n // (2 * args.workers))
        if module == "cupy":
            import cupy

            x = x.map_blocks(cupy.asarray, dtype=x.dtype, meta=cupy.empty(0, x.dtype))
        x = client.persist(x)
        distributed.wait(x)
        explicit.prepare(("uint32",), ("sort",), (False,), transport, module)
        workers = sorted(client.scheduler_info()["workers"])
        rows, floors = [], []
        previous = None
        for i in range(args.sorts + 1):
            times = []
            t = time.time()
            s, = explicit.run("sort", x, None, False, x.chunks[0], transport, times)
            ran = time.time() - t
            t = time.time()
            p = s.persist()
            distributed.wait(p)
            persist = time.time() - t
            starts = [r["start"] for r in times]
            ends = [r["start"] + sum(v for k, v in r.items() if k != "start") for r in times]
            starts_floor, done_floor = floor(client, workers)
            if i:   # the first is untimed
                rows.append((min(starts), max(starts), ran - max(ends), persist))
                floors.append((min(starts_floor), max(starts_floor), done_floor - max(starts_floor)))
            previous = p   # held until the next sort, as a benchmark loop would
        del previous
        r, f = np.array(rows) * 1e3, np.array(floors) * 1e3
        med, q1 = np.median(r, 0), np.percentile(r, 25, 0)
        fmed = np.median(f, 0)
        print(f"OVERHEAD {'cpu' if args.cpu else 'gpu'} {args.workers} workers, 2^{args.keys_log2} keys, "
              f"{args.sorts} sorts, ms (median / p25): submission to first rank start {med[0]:.1f} / {q1[0]:.1f}, "
              f"to last {med[1]:.1f} / {q1[1]:.1f}; around the ranks {med[2]:.1f} / {q1[2]:.1f}; "
              f"persist {med[3]:.1f} / {q1[3]:.1f}. Floor (trivial pinned tasks, one graph): to first "
              f"start {fmed[0]:.1f}, to last {fmed[1]:.1f}, last start to all seen done {fmed[2]:.1f}")


if __name__ == "__main__":
    main()
