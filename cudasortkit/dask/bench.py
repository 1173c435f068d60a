"""Benchmark cudasortkit.dask on a Dask cluster of GPUs (or CPUs with --cpu).

    python -m cudasortkit.dask.bench                # LocalCUDACluster, one worker per GPU
    python -m cudasortkit.dask.bench --size-log2 28 --small-log2 26 --phases
    python -m cudasortkit.dask.bench --cpu --size-log2 16 --small-log2 14 --df-size-log2 14
    python -m cudasortkit.dask.bench --exchange nccl --size-log2 30,31,32 --small-log2 30 \
        --inputs few,lognormal,uniform --no-dataframe     # issue 27's bar, one line per case

Inputs (uint32 keys, made on the workers from their global index, so any
chunking and the one-GPU baseline see the same data): uniform at 2^size-log2,
and few-distinct (16 values), already sorted and lognormal-skewed at
2^small-log2. For each: the sort's time and GKeys/s, a correctness check run
on the workers (every output chunk sorted and as long as its known size, chunk
boundaries in order, key count, sum and a hash-sum equal to the input's), the
time by phase (--phases: each stage persisted before the next), the ratio to
one GPU's cudasortkit.sort of the same keys (as many as fit on one GPU), and,
for uniform keys, the ratio to dask.dataframe's sort_values on the same
cluster (pandas partitions of the same keys, cudf where importable; at
2^df-size-log2 keys, since a CPU sort of 2^31 keys would take too long).

--exchange nccl runs the collective sort (cudasortkit/dask/explicit.py) and
prints one CASE line per input: Dask's transport and NCCL's, the sort's
time (best of --repeats after one untimed sort), GKeys/s, its phases
(slowest worker per phase, the device synchronised at each), one GPU's
cudasortkit.sort of the same keys in the same run and the ratio, and for
the first input the first sort in the fresh cluster (communicator setup and
kernel compilation included) against the warm one. With --cpu it runs the
same collective on an in-process CPU cluster, ranks joined by threads.
"""
from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import logging
import sys
import time
import traceback

import numpy as np

#: The big uniform input last: the rest is reported even if it runs out of time.
DISTS = ("few", "sorted", "lognormal", "uniform")
SEED = 0x5EED


# ------------------------------------------------------------ on the workers
def array_module(name: str):
    if name == "cupy":
        import cupy

        return cupy
    return np


def mix64(z):
    """splitmix64's finaliser: uint64 in, well-mixed uint64 out."""
    z = (z ^ (z >> 30)) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> 27)) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> 31)


def make_keys(dist: str, start: int, n: int, xp_name: str, step: int = 1 << 26):
    """The uint32 keys at global indices start..start+n-1 of input `dist`,
    made `step` keys at a time so the 8-byte temporaries stay small."""
    if n > step:
        out = array_module(xp_name).empty(n, np.uint32)
        for s in range(0, n, step):
            out[s:s + step] = _make_keys(dist, start + s, min(step, n - s), xp_name)
        return out
    return _make_keys(dist, start, n, xp_name)


def _make_keys(dist: str, start: int, n: int, xp_name: str):
    xp = array_module(xp_name)
    i = xp.arange(start, start + n, dtype=xp.uint64)
    if dist == "sorted":
        return i.astype(xp.uint32)
    h = mix64(i + np.uint64(SEED))
    if dist == "uniform":
        return (h >> np.uint64(32)).astype(xp.uint32)
    if dist == "few":
        return (h % np.uint64(16)).astype(xp.uint32)
    if dist == "lognormal":  # exp(3 z) * 1024, z normal (Box-Muller): most keys small, a long tail
        u1 = ((h >> np.uint64(11)).astype(xp.float64) + 0.5) * 2.0 ** -53
        u2 = ((mix64(h) >> np.uint64(11)).astype(xp.float64) + 0.5) * 2.0 ** -53
        z = xp.sqrt(-2.0 * xp.log(u1)) * xp.cos(2 * np.pi * u2)
        return xp.minimum(xp.exp(3.0 * z) * 1024.0, 2.0 ** 32 - 1).astype(xp.uint32)
    raise ValueError(dist)


def keys_block(dist, xp_name, block_info=None):
    start, stop = block_info[None]["array-location"][0]
    return make_keys(dist, start, stop - start, xp_name)


def summary(keys, step: int = 1 << 26) -> tuple:
    """(count, sorted?, first, last, sum, hash-sum) of one chunk, sums mod 2^64,
    made `step` keys at a time so the temporaries stay small."""
    xp = array_module(type(keys).__module__.split(".")[0])
    n = len(keys)
    if n == 0:
        return 0, True, None, None, 0, 0
    ok, total, hashed = True, 0, 0
    for s in range(0, n, step):
        part = keys[s:s + step + 1]                  # one key of overlap: order across slices
        k64 = part[: step].astype(xp.uint64)
        ok = ok and bool((part[1:] >= part[:-1]).all())
        total += int(k64.sum(dtype=xp.uint64))
        hashed += int(mix64(k64).sum(dtype=xp.uint64))
    return n, ok, int(keys[0]), int(keys[-1]), total % (1 << 64), hashed % (1 << 64)


def index_block(xp_name, block_info=None):
    """The int64 global indices of one chunk: sort_by_key's values, so the
    values a sort returns tell where each key came from."""
    start, stop = block_info[None]["array-location"][0]
    return array_module(xp_name).arange(start, stop, dtype=np.int64)


def pair_summary(keys, values, step: int = 1 << 26) -> tuple:
    """summary(keys) + (value sum, value hash-sum, pair hash-sum, ties in
    value order?, first value, last value) of one chunk of (keys, global
    indices): the pair hash mixes each key with its index, so the values
    must have moved with their keys; equal keys must keep index order."""
    xp = array_module(type(keys).__module__.split(".")[0])
    n = len(keys)
    if n == 0:
        return summary(keys) + (0, 0, 0, True, None, None)
    total, hashed, pairs, stable = 0, 0, 0, True
    for s in range(0, n, step):
        k, v = keys[s:s + step + 1], values[s:s + step + 1]
        v64 = v[:step].astype(xp.uint64)
        total += int(v64.sum(dtype=xp.uint64))
        hashed += int(mix64(v64).sum(dtype=xp.uint64))
        pairs += int(mix64(k[:step].astype(xp.uint64) ^ mix64(v64)).sum(dtype=xp.uint64))
        stable = stable and bool(((k[1:] != k[:-1]) | (v[1:] > v[:-1])).all())
    return summary(keys) + (total % (1 << 64), hashed % (1 << 64), pairs % (1 << 64), stable,
                            int(values[0]), int(values[-1]))


def chunk_hash(values) -> int:
    xp = array_module(type(values).__module__.split(".")[0])
    return int(mix64(values.astype(xp.uint64)).sum(dtype=xp.uint64)) % (1 << 64) if len(values) else 0


def warm_sort(n: int, xp_name: str) -> None:
    """One cudasortkit.sort of n uint32 keys on this worker: kernels compiled
    and memory pooled before anything is timed."""
    import cudasortkit as csk

    csk.sort(make_keys("uniform", 0, n, xp_name))
    synchronize()


def synchronize():
    try:
        import cupy

        cupy.cuda.runtime.deviceSynchronize()
    except ImportError:
        pass


def device_name() -> str:
    import cupy

    props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
    return props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])


def single_sort(dist: str, n: int, xp_name: str, repeats: int, op: str = "sort"):
    """(n, best seconds) of cudasortkit.sort (or argsort) of the first n keys
    of `dist` on this worker's device, halving n while they do not fit."""
    while True:
        try:
            return n, time_sort(dist, n, xp_name, repeats, op)
        except MemoryError:
            if n <= 1 << 20:
                raise
            n //= 2
        finally:
            free_pool(xp_name)


def time_sort(dist: str, n: int, xp_name: str, repeats: int, op: str = "sort") -> float:
    import cudasortkit as csk

    keys = make_keys(dist, 0, n, xp_name)
    run = {"sort": csk.sort, "argsort": csk.argsort}[op]
    run(keys[: 1 << 20])
    best = float("inf")
    for _ in range(repeats):
        synchronize()
        t = time.perf_counter()
        run(keys)
        synchronize()
        best = min(best, time.perf_counter() - t)
    return best


def free_pool(xp_name: str) -> None:
    """Give CuPy's cached blocks back, so the next phase has the memory."""
    if xp_name == "cupy":
        import cupy

        cupy.get_default_memory_pool().free_all_blocks()


# -------------------------------------------------------------- on the client
class Bench:
    def __init__(self, client, xp_name: str, chunks_per_worker: int):
        self.client = client
        self.xp_name = xp_name
        self.workers = sorted(client.scheduler_info()["workers"])
        self.chunks_per_worker = chunks_per_worker

    def meta(self):
        return array_module(self.xp_name).empty(0, np.uint32)

    def keys(self, dist: str, n: int):
        """Persisted dask array of input `dist`, made on the workers."""
        import dask.array as da
        from distributed import wait

        p = max(1, min(n, len(self.workers) * self.chunks_per_worker))
        chunks = tuple(np.diff(np.linspace(0, n, p + 1).astype(np.int64)).tolist())
        x = da.map_blocks(keys_block, dist, self.xp_name, chunks=(chunks,), dtype=np.uint32,
                          meta=self.meta()).persist()
        wait(x)
        return x

    def values(self, x):
        """Persisted int64 global indices chunked like x (sort_by_key's values)."""
        import dask.array as da
        from distributed import wait

        v = da.map_blocks(index_block, self.xp_name, chunks=x.chunks, dtype=np.int64,
                          meta=array_module(self.xp_name).empty(0, np.int64)).persist()
        wait(v)
        return v

    def check_pairs(self, x, k, v) -> str:
        """'ok' or what is wrong with sort_by_key's (k, v) of keys x and values
        = global indices: keys as check() asks, values a permutation of the
        indices that moved with their keys, equal keys in index order."""
        import dask

        n = x.shape[0]
        problems = [] if self.check(x, k) == "ok" else [self.check(x, k)]
        ins = dask.compute(*[dask.delayed(pair_summary)(a, b) for a, b in
                             zip(x.to_delayed().ravel(), self.values(x).to_delayed().ravel())])
        outs = dask.compute(*[dask.delayed(pair_summary)(a, b) for a, b in
                              zip(k.to_delayed().ravel(), v.to_delayed().ravel())])
        if sum(o[6] for o in outs) % (1 << 64) != (n * (n - 1) // 2) % (1 << 64):
            problems.append("values do not sum to the indices'")
        for field, name in ((7, "value hash-sum"), (8, "pair hash-sum")):
            if sum(r[field] for r in ins) % (1 << 64) != sum(r[field] for r in outs) % (1 << 64):
                problems.append(f"{name} differs")
        if not all(o[9] for o in outs):
            problems.append("equal keys out of index order within a chunk")
        ends = [(o[2], o[3], o[10], o[11]) for o in outs if o[0]]
        if any(a[1] == b[0] and a[3] > b[2] for a, b in zip(ends, ends[1:])):
            problems.append("equal keys out of index order across chunks")
        return "ok" if not problems else "WRONG: " + "; ".join(problems)

    def same_chunks(self, a, b) -> bool:
        """Whether dask arrays a and b hold equal chunks (hash per chunk)."""
        import dask

        return (a.chunks == b.chunks and dask.compute(*[dask.delayed(chunk_hash)(c) for c in a.to_delayed().ravel()])
                == dask.compute(*[dask.delayed(chunk_hash)(c) for c in b.to_delayed().ravel()]))

    def settle(self, collection):
        from distributed import wait

        wait(collection)
        self.client.run(synchronize)

    def warm_up(self, x, dist: str) -> None:
        """One cudasortkit.sort per chunk size of x on every worker (kernels
        compiled, memory pooled), then a whole dask sort of another input
        (other keys: a result Dask still holds would make the timed sort free)."""
        for size in set(x.chunks[0]):
            self.client.run(warm_sort, size, self.xp_name)
        self.timed_sort(self.keys(dist, max(1, min(x.shape[0] // 2, 1 << 20))))

    def timed_sort(self, x):
        import cudasortkit.dask as cskd

        t = time.perf_counter()
        s = cskd.sort(x).persist()
        self.settle(s)
        return s, time.perf_counter() - t

    def persist(self, out):
        """A Delayed, or lists of them, persisted (same nesting)."""
        if isinstance(out, list):
            return [self.persist(o) for o in out]
        return self.client.persist(out)

    def phases(self, x) -> dict:
        """Seconds per stage (SortPlan.stages: one layer each), each computed
        (and finished on the GPUs) before the next; the p2p exchange's
        transfer, barrier and merge are one stage."""
        import cudasortkit.dask as cskd

        plan = dataclasses.replace(cskd.plan(x), token=f"phases-{time.time_ns()}")  # nothing reused
        graph, held, times = dict(x.__dask_graph__()), [], {}
        for name, layer in plan.stages(x, None, False).items():
            graph.update(layer)
            keys = [k for k in layer if not (isinstance(k, str) and k.startswith("shuffle-barrier-"))]
            t = time.perf_counter()
            held.append(self.client.get(graph, keys, sync=False))   # held: the next stage reuses them
            self.settle(held[-1])
            times[name.removeprefix("csk-").removesuffix(f"-{plan.token}")] = time.perf_counter() - t
        return times

    def check(self, x, s) -> str:
        """'ok' or what is wrong, from per-chunk summaries made on the workers."""
        import dask

        ins = dask.compute(*[dask.delayed(summary)(d) for d in x.to_delayed().ravel()])
        outs = dask.compute(*[dask.delayed(summary)(d) for d in s.to_delayed().ravel()])
        problems = []
        if [o[0] for o in outs] != list(s.chunks[0]):
            problems.append("chunk lengths differ from the known chunks")
        if not all(o[1] for o in outs):
            problems.append("a chunk is not sorted")
        edges = [(o[2], o[3]) for o in outs if o[0]]
        if any(a[1] > b[0] for a, b in zip(edges, edges[1:])):
            problems.append("chunk boundaries out of order")
        for field, name in ((0, "count"), (4, "sum"), (5, "hash-sum")):
            if sum(r[field] for r in ins) % (1 << 64) != sum(r[field] for r in outs) % (1 << 64):
                problems.append(f"{name} differs")
        return "ok" if not problems else "WRONG: " + "; ".join(problems)

    def single(self, dist: str, n: int, op: str = "sort"):
        future = self.client.submit(single_sort, dist, n, self.xp_name, 3, op, workers=[self.workers[0]],
                                    pure=False, allow_other_workers=False)
        return future.result()

    def dataframe_sort(self, dist: str, n: int):
        """(backend, seconds) of dask.dataframe's sort_values of the same keys."""
        import dask.dataframe as dd

        x = self.keys(dist, n)
        host = x.map_blocks(lambda b: b.get() if hasattr(b, "get") else b, dtype=x.dtype,
                            meta=np.empty(0, x.dtype))
        df = dd.from_dask_array(host, columns="k")
        if not isinstance(df, dd.DataFrame):
            df = df.to_frame()
        backend = "pandas"
        if importlib.util.find_spec("cudf") is not None:
            df, backend = df.to_backend("cudf"), "cudf"
        df = df.persist()
        self.settle(df)
        t = time.perf_counter()
        out = df.sort_values("k").persist()
        self.settle(out)
        return backend, time.perf_counter() - t


def start_cluster(cpu: bool, protocol: str, in_process: bool = False, collective: bool = False):
    from distributed import Client, LocalCluster

    if cpu:   # in_process: the collective's thread communicator joins workers of one process
        cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=not in_process,
                               dashboard_address=None, silence_logs=logging.ERROR)
        return cluster, Client(cluster)
    from cudasortkit.dask.cluster import UCX_FIX
    from cudasortkit.dask.cluster import protocol as pick_protocol

    protocol = pick_protocol(protocol)   # auto: UCX where distributed-ucxx is installed
    if protocol == "tcp" and not collective:   # NCCL carries the collective's data, not Dask
        print("transport: TCP (every piece through host memory); for UCX " + UCX_FIX)
    try:
        from dask_cuda import LocalCUDACluster
    except ImportError as e:
        print(f"dask_cuda unavailable ({e}): one worker per GPU by CUDA_VISIBLE_DEVICES instead")
        cluster = gpu_spec_cluster(protocol)
    else:
        cluster = LocalCUDACluster(protocol=protocol, threads_per_worker=1, dashboard_address=None,
                                   silence_logs=logging.ERROR)
    return cluster, Client(cluster)


def gpu_spec_cluster(protocol: str):
    """What LocalCUDACluster does, minus its extras: one single-thread worker per GPU."""
    import cupy
    from distributed import Nanny, Scheduler, SpecCluster

    workers = {i: {"cls": Nanny, "options": {"nthreads": 1, "env": {"CUDA_VISIBLE_DEVICES": str(i)}}}
               for i in range(cupy.cuda.runtime.getDeviceCount())}
    return SpecCluster(workers=workers, silence_logs=logging.ERROR, scheduler={
        "cls": Scheduler, "options": {"protocol": protocol, "dashboard_address": None}})


def gkeys(n, seconds):
    return n / seconds / 1e9


def collective_sort(bench: Bench, x, times=None, op: str = "sort", values=None):
    """(results, seconds) of one collective `op` of x (exchange="nccl"; on
    --cpu the same collective with threads for NCCL), persisted and settled:
    [keys], [indices] or [keys, values] (sort_by_key of `values`)."""
    import dask

    from cudasortkit.dask import explicit

    transport = "threads" if bench.xp_name == "numpy" else "nccl"
    t = time.perf_counter()
    out = explicit.run(op, x, values, False, x.chunks[0], transport, times)
    out = dask.persist(*out)
    bench.settle(out)
    return out, time.perf_counter() - t


def run_collective(bench: Bench, dist: str, n: int, args, fresh: bool) -> None:
    """One CASE line: the collective sort of input `dist` at n keys against
    one GPU's sort of the same keys (and, when `fresh`, the first sort in
    this cluster against a warm one)."""
    x = bench.keys(dist, n)
    first, setup = None, None
    if fresh:            # nothing compiled, no communicator yet
        if args.prepare:
            from cudasortkit.dask import explicit

            t = time.perf_counter()
            explicit.prepare(("uint32",), ("sort",), (False,), "threads" if bench.xp_name == "numpy" else "nccl",
                             bench.xp_name, keys_per_worker=n // len(bench.workers))
            setup = time.perf_counter() - t
        (s,), first = collective_sort(bench, x)
        check = bench.check(x, s)
        del s
    else:
        (s,), _ = collective_sort(bench, x)   # untimed: the next ones reuse memory and kernels
        check = bench.check(x, s)
        del s
    runs = []
    for _ in range(args.repeats):
        # --release-wait: the workers get that long to drop the results
        # before (Dask releases them asynchronously after `del`). On 4 H200s
        # at 2^33 keys it changed nothing measurable (0.5 s: runs 0.120-0.126
        # s and two of 0.23-0.27; 0: 0.126-0.129 and one of 0.32).
        time.sleep(args.release_wait)
        s, seconds = collective_sort(bench, x)
        del s
        runs.append(seconds)
    best = min(runs)
    time.sleep(args.release_wait)
    times = []        # one more, with the phases timed (a device sync at each)
    s, _ = collective_sort(bench, x, times)
    del s
    phases = {k: max(t.get(k, 0.0) for t in times) for k in times[0]} if times else {}
    if "start" in phases:   # the first rank's start too: the ranks wait for the last one
        phases["first start"] = min(t["start"] for t in times)
    chunks = len(x.chunks[0])
    del x
    time.sleep(1.0)   # the workers drop x and the results, then their pools give the memory back
    bench.client.run(free_pool, bench.xp_name)   # the one-GPU sort gets the memory
    single_line, ratio = "", ""
    if args.single:
        m, single = bench.single(dist, n)
        note = "" if m == n else f" (first 2^{m.bit_length() - 1} keys only: that is what fits)"
        ratio = f"; {best / (single * n / m):.2f}x one GPU" if m else ""  # its time per key, times n
        single_line = f"; one GPU {single:.4f} s{note}, {gkeys(m, single):.4g} GKeys/s"
    transport = bench.client.scheduler.address.split("://")[0]
    data = "threads" if bench.xp_name == "numpy" else "NCCL"
    print(f"CASE {dist} 2^{n.bit_length() - 1}: dask {transport} + data {data}, exchange nccl, "
          f"{len(bench.workers)} workers, {chunks} chunks: sort {best:.4f} s, {gkeys(n, best):.4g} GKeys/s"
          f" (runs {'/'.join(f'{r:.4f}' for r in runs)})"
          f"{single_line}{ratio}; phases (slowest worker) "
          + ", ".join(f"{k} {v:.4f}" for k, v in phases.items())
          + ("" if not fresh else f"; first sort in fresh cluster {first:.3f} s = {first / best:.1f}x warm, "
             + (f"after cudasortkit.dask.prepare {setup:.3f} s" if setup is not None else "without prepare"))
          + f"; check {check}")


def run_collective_pairs(bench: Bench, dist: str, n: int, args, ops) -> None:
    """One CASE line per op of argsort and sort_by_key (int64 global indices
    as values): checked (sort_by_key: keys, values moved with them, ties in
    index order; argsort: equal to sort_by_key's values), then timed (best
    of --repeats), with one GPU's cudasortkit.argsort of the same keys."""
    x = bench.keys(dist, n)
    v = bench.values(x)
    (k, kv), _ = collective_sort(bench, x, op="sort_by_key", values=v)
    checks = {"sort_by_key": bench.check_pairs(x, k, kv)}
    (i,), _ = collective_sort(bench, x, op="argsort")
    checks["argsort"] = "ok" if bench.same_chunks(i, kv) else "WRONG: differs from sort_by_key's values"
    del k, kv, i
    lines = {}
    for op in ops:
        best = float("inf")
        for _ in range(args.repeats):
            time.sleep(args.release_wait)
            out, seconds = collective_sort(bench, x, op=op, values=v if op == "sort_by_key" else None)
            del out
            best = min(best, seconds)
        times = []
        out, _ = collective_sort(bench, x, times, op=op, values=v if op == "sort_by_key" else None)
        del out
        phases = {key: max(t.get(key, 0.0) for t in times) for key in times[0]} if times else {}
        lines[op] = (best, phases)
    chunks = len(x.chunks[0])
    del x, v
    time.sleep(1.0)
    bench.client.run(free_pool, bench.xp_name)
    single = ""
    if args.single:
        m, seconds = bench.single(dist, n, "argsort")
        note = "" if m == n else f" of the first 2^{m.bit_length() - 1} keys (what fits)"
        single = f"; one GPU's argsort{note} {seconds:.4f} s, {gkeys(m, seconds):.4g} GKeys/s"
    for op, (best, phases) in lines.items():
        print(f"CASE {op} {dist} 2^{n.bit_length() - 1}: {len(bench.workers)} workers, {chunks} chunks, int64 "
              f"{'indices' if op == 'argsort' else 'values'}: {best:.4f} s, {gkeys(n, best):.4g} GKeys/s{single}; "
              "phases (slowest worker) " + ", ".join(f"{key} {t:.4f}" for key, t in phases.items())
              + f"; check {checks[op]}")


def run_input(bench: Bench, dist: str, n: int, args) -> None:
    print(f"\n== {dist}: 2^{n.bit_length() - 1} = {n} uint32 keys")
    x = bench.keys(dist, n)
    import cudasortkit.dask as cskd

    print(f"   chunks: {len(x.chunks[0])} of ~{x.chunks[0][0]} keys over {len(bench.workers)} workers; "
          f"exchange: {cskd.plan(x).exchange}")
    bench.warm_up(x, dist)
    s, seconds = bench.timed_sort(x)
    print(f"   sort: {seconds:.3f} s, {gkeys(n, seconds):.4g} GKeys/s; known chunks: "
          f"{all(c == c for c in s.chunks[0])}; check: {bench.check(x, s)}")
    del s
    if args.phases:
        times = bench.phases(x)
        print("   phases (each persisted): " + ", ".join(f"{k} {v:.3f} s" for k, v in times.items())
              + f"; sum {sum(times.values()):.3f} s")
    del x
    if args.single:
        m, single = bench.single(dist, n)
        note = "all keys" if m == n else f"first 2^{m.bit_length() - 1} keys only: that is what fits"
        print(f"   one worker's cudasortkit.sort ({note}): {single:.4f} s, {gkeys(m, single):.4g} GKeys/s;"
              f" dask sort is {gkeys(m, single) / gkeys(n, seconds):.1f}x slower per key")


def run_dataframe(bench: Bench, n: int) -> None:
    print(f"\n== dask.dataframe sort_values vs cudasortkit.dask.sort, uniform, 2^{n.bit_length() - 1} "
          "keys (smaller than the inputs below: the dataframe sort is slow)")
    try:
        backend, df_seconds = bench.dataframe_sort("uniform", n)
    except Exception as e:  # an image without pandas/pyarrow: say so, go on
        print(f"   dask.dataframe unavailable: {type(e).__name__}: {e}")
        return
    x = bench.keys("uniform", n)
    bench.warm_up(x, "uniform")
    _, seconds = bench.timed_sort(x)
    print(f"   dask.dataframe ({backend} partitions, {len(bench.workers)} workers x 1 thread): "
          f"{df_seconds:.3f} s; cudasortkit.dask: "
          f"{seconds:.3f} s; cudasortkit.dask is {df_seconds / seconds:.1f}x faster")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cpu", action="store_true", help="LocalCluster of 2 CPU processes, NumPy chunks")
    ap.add_argument("--size-log2", default="31",
                    help="uniform input size(s), comma-separated: 30,31,32 (default 31)")
    ap.add_argument("--small-log2", type=int, default=28, help="few/sorted/lognormal size (default 28)")
    ap.add_argument("--df-size-log2", type=int, default=24, help="dask.dataframe comparison size")
    ap.add_argument("--chunks-per-worker", type=int, default=2)
    ap.add_argument("--inputs", default=",".join(DISTS), help=f"comma-separated from {DISTS}")
    ap.add_argument("--phases", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--release-wait", type=float, default=0.0,
                    help="seconds each timed collective sort waits, untimed, for the workers to "
                         "release the previous results (default 0: back to back)")
    ap.add_argument("--single", action=argparse.BooleanOptionalAction, default=True,
                    help="compare with one worker's cudasortkit.sort")
    ap.add_argument("--dataframe", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--protocol", default="auto", choices=("auto", "tcp", "ucx"))
    ap.add_argument("--exchange", default="auto", choices=("auto", "nccl"),
                    help="nccl: the collective sort, one CASE line per input (see above)")
    ap.add_argument("--repeats", type=int, default=3, help="timed collective sorts per input (best)")
    ap.add_argument("--prepare", action=argparse.BooleanOptionalAction, default=True,
                    help="nccl: cudasortkit.dask.prepare (communicators, kernels) before the first sort")
    ap.add_argument("--ops", default="sort",
                    help="nccl: comma-separated of sort, argsort, sort_by_key (int64 global indices as values)")
    args = ap.parse_args(argv)
    ops = args.ops.split(",")
    if set(ops) - {"sort", "argsort", "sort_by_key"}:
        ap.error(f"--ops: sort, argsort or sort_by_key, got {args.ops}")
    sys.stdout.reconfigure(line_buffering=True)  # piped into tee: every line out before a timeout

    sizes = [int(v) for v in str(args.size_log2).split(",")]
    collective = args.exchange == "nccl"
    cluster, client = start_cluster(args.cpu, args.protocol, in_process=args.cpu and collective,
                                    collective=collective)
    with cluster, client:
        bench = Bench(client, "numpy" if args.cpu else "cupy", args.chunks_per_worker)
        print(f"cluster: {len(bench.workers)} workers ({'CPU, NumPy' if args.cpu else 'GPU, CuPy'} chunks), "
              f"transport: {client.scheduler.address.split('://')[0]}")
        if not args.cpu:
            print("devices:", sorted(set(client.run(device_name).values())))
        if args.dataframe:
            run_dataframe(bench, 1 << min(args.df_size_log2, max(sizes)))
        fresh = collective
        for dist in args.inputs.split(","):
            for log2 in (sizes if dist == "uniform" else [args.small_log2]):
                try:
                    if collective:
                        if "sort" in ops:
                            run_collective(bench, dist, 1 << log2, args, fresh)
                            fresh = False
                        pairs = [op for op in ops if op != "sort"]
                        if pairs:
                            run_collective_pairs(bench, dist, 1 << log2, args, pairs)
                    else:
                        run_input(bench, dist, 1 << log2, args)
                except Exception:
                    traceback.print_exc()


if __name__ == "__main__":
    main()
