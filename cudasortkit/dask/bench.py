"""Benchmark cudasortkit.dask on a Dask cluster of GPUs (or CPUs with --cpu).

    python -m cudasortkit.dask.bench                # LocalCUDACluster, one worker per GPU
    python -m cudasortkit.dask.bench --size-log2 28 --small-log2 26 --phases
    python -m cudasortkit.dask.bench --cpu --size-log2 16 --small-log2 14 --df-size-log2 14
    python -m cudasortkit.dask.bench --exchange nccl --size-log2 30,31,32 --small-log2 30 \
        --inputs few,lognormal,uniform --no-dataframe     # one line per case

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

--suite runs the scale-out bars in one run: the all-to-all microbench (NCCL's
grouped send/recv under three NCCL settings against CUDA IPC copy engines),
then on all visible GPUs sort 2^33 under every collective variant (options
text of CUDASORTKIT_DASK_COLLECTIVE), cskd.sort(x).persist() against the
collective, 2^34, argsort 2^32 and 2^33, one GPU's sort, argsort and merge
of the same keys, then 2^32 on the first two GPUs; every result checked on
the workers; ROW lines as cases finish and a table at the end:

    python -m cudasortkit.dask.bench --suite --repeats 3
    python -m cudasortkit.dask.bench --suite --cpu --cases sort:14,argsort:13   # the same steps on CPU workers

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

from . import chunks

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
    return keys_of(dist, xp.arange(start, start + n, dtype=xp.uint64), xp)


def keys_of(dist: str, i, xp):
    """The uint32 keys of input `dist` at the uint64 global indices i."""
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
    xp = chunks.array_module(keys)
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
    xp = chunks.array_module(keys)
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
    xp = chunks.array_module(values)
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


def set_collective_options(text: str) -> None:
    """CUDASORTKIT_DASK_COLLECTIVE on this worker ("" unsets it: the defaults)."""
    import os

    if text:
        os.environ["CUDASORTKIT_DASK_COLLECTIVE"] = text
    else:
        os.environ.pop("CUDASORTKIT_DASK_COLLECTIVE", None)


def index_summary(index, dist: str, step: int = 1 << 26) -> tuple:
    """(count, ordered?, first key, first index, last key, last index, index
    sum, index hash-sum) of one chunk of an argsort of input `dist`: the
    keys at those indices are made again (a key is a function of its global
    index), so the chunk must order them, equal keys by index."""
    xp = chunks.array_module(index)
    n = len(index)
    if n == 0:
        return 0, True, None, None, None, None, 0, 0
    ok, total, hashed = True, 0, 0
    for s in range(0, n, step):
        part = index[s:s + step + 1]
        k = keys_of(dist, part.astype(xp.uint64), xp)
        ok = ok and bool(((k[1:] > k[:-1]) | ((k[1:] == k[:-1]) & (part[1:] > part[:-1]))).all())
        i64 = part[:step].astype(xp.uint64)
        total += int(i64.sum(dtype=xp.uint64))
        hashed += int(mix64(i64).sum(dtype=xp.uint64))
    ends = keys_of(dist, index[xp.asarray([0, n - 1])].astype(xp.uint64), xp)
    return (n, ok, int(ends[0]), int(index[0]), int(ends[1]), int(index[n - 1]), total % (1 << 64),
            hashed % (1 << 64))


def range_hash(start: int, stop: int, xp_name: str, step: int = 1 << 26) -> int:
    """The index hash-sum of start .. stop - 1 (index_summary's)."""
    xp = array_module(xp_name)
    total = 0
    for s in range(start, stop, step):
        total += int(mix64(xp.arange(s, min(stop, s + step), dtype=xp.uint64)).sum(dtype=xp.uint64))
    return total % (1 << 64)


def merge_rate(n: int, xp_name: str, repeats: int) -> dict:
    """GB/s of one GPU's cudasortkit.merge of two sorted halves of n uint32
    keys, and of merge_by_key with int64 values (bytes read and written)."""
    import cudasortkit as csk

    xp = array_module(xp_name)
    keys = csk.sort(make_keys("uniform", 0, n, xp_name))
    a, b = keys[: n // 2], keys[n // 2:]
    va, vb = xp.arange(n // 2, dtype=xp.int64), xp.arange(n - n // 2, dtype=xp.int64)
    out = {}
    for name, run, nbytes in (("merge", lambda: csk.merge(a, b), 8 * n),
                              ("merge_by_key int64", lambda: csk.merge_by_key(a, va, b, vb), 24 * n)):
        run()
        best = float("inf")
        for _ in range(repeats):
            synchronize()
            t = time.perf_counter()
            run()
            synchronize()
            best = min(best, time.perf_counter() - t)
        out[name] = (best, nbytes / best / 1e9)
    return out


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
        """'ok' or what is wrong, from per-chunk summaries made on the workers
        (the input's summarised once per input)."""
        import dask

        if getattr(self, "_inputs", (None,))[0] != x.name:
            self._inputs = (x.name, dask.compute(*[dask.delayed(summary)(d) for d in x.to_delayed().ravel()]))
        ins = self._inputs[1]
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
        host = x.map_blocks(chunks.to_host, dtype=x.dtype,
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


def start_cluster(cpu: bool, protocol: str, in_process: bool = False, collective: bool = False, devices=None):
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
        cluster = gpu_spec_cluster(protocol, devices)
    else:
        extra = {} if devices is None else {"CUDA_VISIBLE_DEVICES": ",".join(devices)}
        cluster = LocalCUDACluster(protocol=protocol, threads_per_worker=1, dashboard_address=None,
                                   silence_logs=logging.ERROR, **extra)
    return cluster, Client(cluster)


def gpu_spec_cluster(protocol: str, devices=None):
    """What LocalCUDACluster does, minus its extras: one single-thread worker
    per GPU, each seeing its own GPU first and the others after it (as
    LocalCUDACluster arranges them: CUDA IPC between workers needs them)."""
    from distributed import Nanny, Scheduler, SpecCluster

    devices = visible_devices() if devices is None else list(devices)
    workers = {i: {"cls": Nanny, "options": {"nthreads": 1, "env": {
        "CUDA_VISIBLE_DEVICES": ",".join(devices[i:] + devices[:i])}}} for i in range(len(devices))}
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


def slowest(times: list) -> dict:
    """Per phase and part of one (collective.Timer's names), the slowest
    worker's seconds; and "first start", the first rank's start (the ranks
    wait for the last one)."""
    names = dict.fromkeys(k for t in times for k in t)
    phases = {k: max(t.get(k, 0.0) for t in times) for k in names}
    if "start" in phases:
        phases["first start"] = min(t["start"] for t in times)
    return phases


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
    phases = slowest(times)
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
        lines[op] = (best, slowest(times))
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


# --------------------------------------------------- exchange microbench
#: NCCL settings the exchange microbench compares (each in its own
#: processes: NCCL reads them once per process). NVLink multicast (NVLS)
#: stays off in all. P2P channels on NVLink follow MIN/MAX_P2P_NCHANNELS
#: and the NVLink chunk size (NCCL's src/graph/paths.cc, src/init.cc);
#: NCCL_NCHANNELS_PER_NET_PEER only shapes peers across a network.
NCCL_BASE = {"NCCL_NVLS_ENABLE": "0"}
NCCL_ENVS = {
    "default": {},
    "p2p-64ch": {"NCCL_MIN_P2P_NCHANNELS": "64", "NCCL_MAX_P2P_NCHANNELS": "64", "NCCL_MIN_NCHANNELS": "32",
                 "NCCL_P2P_NVL_CHUNKSIZE": str(1 << 20), "NCCL_BUFFSIZE": str(16 << 20)},
    "copy-engines": {"NCCL_P2P_USE_CUDA_MEMCPY": "1"},
}
#: The copy-engine variants (cudasortkit/dask/options.py), timed in the
#: default NCCL settings' processes.
IPC_VARIANTS = ("exchange=ipc", "exchange=ipc,order=ring", "exchange=ipc,direction=push",
                "exchange=ipc,direction=push,order=ring", "exchange=ipc,streams=1",
                "exchange=ipc,split=256MiB", "exchange=ipc,keep=1")


def visible_devices() -> list:
    """This process's GPUs as CUDA_VISIBLE_DEVICES names them (all, unset)."""
    import os

    text = os.environ.get("CUDA_VISIBLE_DEVICES", "").strip()
    if text:
        return [d.strip() for d in text.split(",") if d.strip()]
    import cupy

    return [str(i) for i in range(cupy.cuda.runtime.getDeviceCount())]


def exchange_rank(rank: int, devices: list, uid, env: dict, keys: int, repeats: int, variants: list,
                  queue) -> None:
    """One process of the exchange microbench: rank `rank` on devices[rank]
    (the others visible after it, as LocalCUDACluster arranges them, so that
    CUDA IPC can map them), an equal-split all-to-all of `keys` uint32 keys
    per GPU for every variant ("nccl" or options text), each checked once
    and timed from a barrier to the next after it; puts (rank, {variant:
    (seconds, ok)}, error) on `queue`."""
    import os
    import traceback as tb

    try:
        os.environ.update(env)
        os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(devices[rank:] + devices[:rank])
        import cupy

        from cudasortkit.dask import collective, comm, exchange, layout, options

        size = len(devices)
        c = comm.NcclComm(uid, size, rank)
        ordered = collective.Ordered(c, range(size))
        part = keys // size
        send = (cupy.arange(size * part, dtype=cupy.uint32) + cupy.uint32(rank * 7919))
        recv = cupy.empty(size * part, cupy.uint32)
        plan = [layout.Piece(s, d, d * part, part, s * part, 0) for d in range(size) for s in range(size)]
        out = {"ipc ready": (0.0, c.ipc_ready)}
        for variant in variants:
            if variant != "nccl" and not c.ipc_ready:
                continue
            transport = "nccl" if variant == "nccl" else "ipc"
            opts = options.parse("" if variant == "nccl" else variant)
            recv.fill(0)
            exchange.exchange(ordered, opts, plan, {"keys": send}, {"keys": recv}, transport)
            cupy.cuda.get_current_stream().synchronize()
            mine = cupy.arange(rank * part, (rank + 1) * part, dtype=cupy.uint32)
            ok = all(bool((recv[s * part:(s + 1) * part] == mine + cupy.uint32(s * 7919)).all())
                     for s in range(size) if s != rank)
            times = []
            for _ in range(repeats):
                c.barrier()
                t = time.perf_counter()
                exchange.exchange(ordered, opts, plan, {"keys": send}, {"keys": recv}, transport)
                cupy.cuda.get_current_stream().synchronize()
                c.barrier()
                times.append(time.perf_counter() - t)
            out[variant] = (min(times), bool(c.allgather(np.array([ok], np.int64)).all()))
            if opts.keep:
                c.unshare(False)
        if c.ipc_ready:   # what mapping the peers' buffers costs (open and close, keep=0)
            times = []
            for _ in range(repeats):
                c.barrier()
                t = time.perf_counter()
                c.share([send])
                c.unshare(False)
                times.append(time.perf_counter() - t)
            out["ipc open+close"] = (min(times), True)
        queue.put((rank, out, None))
    except Exception:
        queue.put((rank, None, tb.format_exc()))


def exchange_bench(keys: int, repeats: int, envs: dict, timeout: float = 75.0) -> dict:
    """{(NCCL settings, variant): (seconds, ok)} of the all-to-all of `keys`
    uint32 keys per GPU among all visible GPUs, one set of processes per
    NCCL setting; prints one EXCHANGE line per measurement."""
    import multiprocessing as mp
    import os

    from cupy.cuda import nccl

    devices = visible_devices()
    size = len(devices)
    sent = keys * 4 * (size - 1) // size
    ctx = mp.get_context("spawn")
    results = {}
    for name, extra in envs.items():
        env = {**NCCL_BASE, **extra}
        variants = ["nccl"] + (list(IPC_VARIANTS) if name == "default" else [])
        queue = ctx.Queue()
        uid = nccl.get_unique_id()
        procs = [ctx.Process(target=exchange_rank, args=(r, devices, uid, env, keys, repeats, variants, queue))
                 for r in range(size)]
        for p in procs:
            p.start()
        got, errors, t0 = {}, [], time.perf_counter()
        try:
            while len(got) + len(errors) < size and time.perf_counter() - t0 < timeout:
                try:
                    rank, out, error = queue.get(timeout=5)
                except Exception:
                    continue
                (errors.append(error) if error else got.__setitem__(rank, out))
        finally:
            for p in procs:
                p.join(timeout=10)
                if p.is_alive():
                    p.kill()
        if errors or len(got) < size:
            print(f"EXCHANGE {name}: failed ({len(got)} of {size} ranks answered)"
                  + ("\n" + errors[0] if errors else ""))
            continue
        for variant in got[0]:
            seconds = max(got[r][variant][0] for r in range(size))
            ok = all(got[r][variant][1] for r in range(size))
            results[(name, variant)] = (seconds, ok)
            if variant == "ipc ready":
                print(f"EXCHANGE {name}: CUDA IPC among the {size} GPUs: {'yes' if ok else 'no'}")
            elif variant == "ipc open+close":
                print(f"EXCHANGE {name}: mapping the peers' buffer (open + close, {size - 1} peers): "
                      f"{seconds * 1e3:.2f} ms")
            else:
                label = "NCCL all-to-all (grouped send/recv)" if variant == "nccl" else f"copy engines {variant}"
                print(f"EXCHANGE {name} [{' '.join(f'{k}={v}' for k, v in env.items())}]: {label}: "
                      f"{seconds * 1e3:.2f} ms for {sent / 2**30:.2f} GiB out of each GPU, "
                      f"{sent / seconds / 1e9:.1f} GB/s per GPU each way; check {'ok' if ok else 'WRONG'}")
    os.environ.pop("CUDASORTKIT_DASK_COLLECTIVE", None)
    return results


# ------------------------------------------------------------ the suite
#: The sort variants compared at the first sort case (options text; "" is
#: the defaults, cudasortkit/dask/options.py), the argsort variants at the
#: first argsort case; persist cases run the defaults.
SORT_VARIANTS = ("exchange=nccl,runs=joined", "exchange=nccl", "", "runs=joined", "keep=1,runs=joined",
                 "direction=push,runs=joined", "order=ring,runs=joined", "method=partition",
                 "method=partition,align=0", "method=partition,segments=8", "method=partition,exchange=nccl")
ARGSORT_VARIANTS = ("exchange=nccl", "", "merge=sort", "method=partition")
TWO_GPU_VARIANTS = ("exchange=nccl,runs=joined", "", "runs=joined", "method=partition")
#: The later cases of an op (2^34, argsort 2^33): the defaults and the partition method.
LATER_VARIANTS = ("", "method=partition")


class Row(dict):
    """One line of the suite's table."""


def argsort_check(bench: Bench, x, i, dist: str) -> str:
    """'ok' or what is wrong with argsort's indices i of keys x, from
    per-chunk summaries made on the workers (index_summary)."""
    import dask

    n = x.shape[0]
    outs = dask.compute(*[dask.delayed(index_summary)(d, dist) for d in i.to_delayed().ravel()])
    problems = []
    if [o[0] for o in outs] != list(i.chunks[0]):
        problems.append("chunk lengths differ from the known chunks")
    if not all(o[1] for o in outs):
        problems.append("a chunk is out of (key, index) order")
    ends = [o[2:6] for o in outs if o[0]]
    if any((a[2], a[3]) >= (b[0], b[1]) for a, b in zip(ends, ends[1:])):
        problems.append("chunk boundaries out of (key, index) order")
    if sum(o[6] for o in outs) % (1 << 64) != (n * (n - 1) // 2) % (1 << 64):
        problems.append("indices do not sum to 0 + ... + n-1")
    bounds = np.concatenate([[0], np.cumsum(x.chunks[0])])
    expect = sum(dask.compute(*[dask.delayed(range_hash)(int(a), int(b), bench.xp_name)
                                for a, b in zip(bounds[:-1], bounds[1:])])) % (1 << 64)
    if sum(o[7] for o in outs) % (1 << 64) != expect:
        problems.append("index hash-sum differs: not a permutation")
    return "ok" if not problems else "WRONG: " + "; ".join(problems)


def release(bench: Bench) -> None:
    """Every worker's collective buffers and the pools' unused blocks back
    to the driver (mappings closed everywhere first)."""
    from cudasortkit.dask import explicit

    time.sleep(1.0)   # the workers drop what Dask released
    bench.client.run(explicit.close_links)
    bench.client.run(explicit.free_buffers)
    bench.client.run(free_pool, bench.xp_name)


def suite_case(bench: Bench, op: str, n: int, variants, args, rows: list, gpus: int, persist: bool = False,
               single=None) -> None:
    """The collective `op` of 2^log2 uniform keys under each variant (one
    untimed, checked run; the best of --repeats; one more with the phases
    timed), and for `persist` the default path cskd.sort(x).persist()
    against the collective in the same run; one GPU's sort (or argsort)
    from `single` = (keys, seconds), measured when None. Adds its rows."""
    x = bench.keys("uniform", n)
    label = f"2^{n.bit_length() - 1}"
    for variant in variants:
        bench.client.run(set_collective_options, variant)
        try:
            (out,), _ = collective_sort(bench, x, op=op)
            check = bench.check(x, out) if op == "sort" else argsort_check(bench, x, out, "uniform")
            del out
            runs = []
            for _ in range(args.repeats):
                time.sleep(args.release_wait)
                result, seconds = collective_sort(bench, x, op=op)
                del result
                runs.append(seconds)
            times = []
            result, _ = collective_sort(bench, x, times, op=op)
            del result
            row = Row(case=f"{op} {label}", gpus=gpus, n=n, variant=variant or "(defaults)", seconds=min(runs),
                      runs=runs, phases=slowest(times), check=check)
            if persist:
                import cudasortkit.dask as cskd

                best = float("inf")
                for _ in range(args.repeats):
                    time.sleep(args.release_wait)
                    t = time.perf_counter()
                    s = cskd.sort(x).persist()
                    bench.settle(s)
                    best = min(best, time.perf_counter() - t)
                    del s
                row["persist"] = best
            rows.append(row)
            print(f"ROW {format_row(row)}", flush=True)
        except Exception:
            traceback.print_exc()
            rows.append(Row(case=f"{op} {label}", gpus=gpus, n=n, variant=variant or "(defaults)", seconds=None,
                            check="FAILED (traceback above)"))
    bench.client.run(set_collective_options, "")
    del x
    release(bench)
    if single is None and args.single:
        try:
            single = bench.single("uniform", min(n, 1 << (31 if op != "sort" else 32)), op)
        except Exception:
            traceback.print_exc()
        release(bench)
    for row in rows:
        if row.get("case") == f"{op} {label}" and row.get("gpus") == gpus and single:
            row["single"] = single
    return single


def format_row(row: Row) -> str:
    if row.get("seconds") is None:
        return f"{row['case']} on {row['gpus']} GPUs [{row['variant']}]: {row['check']}"
    n, t = row["n"], row["seconds"]
    text = (f"{row['case']} on {row['gpus']} GPUs [{row['variant']}]: {t:.4f} s, {gkeys(n, t):.1f} GKeys/s "
            f"(runs {'/'.join(f'{r:.4f}' for r in row['runs'])}); check {row['check']}")
    if "persist" in row:
        text += f"; cskd.sort(x).persist() {row['persist']:.4f} s = {row['persist'] / t:.2f}x the collective"
    if row.get("single"):
        m, s1 = row["single"]
        text += f"; one GPU 2^{m.bit_length() - 1} {s1:.4f} s: {gkeys(n, t) / gkeys(m, s1):.2f}x its keys/s"
    phases = row.get("phases") or {}
    text += "\n      phases (slowest worker, ms): " + ", ".join(f"{k} {v * 1e3:.1f}" for k, v in phases.items())
    return text


def print_table(rows: list, exchange: dict) -> None:
    print("\n== SUITE TABLE (best of the repeats; one GPU's sort of the same keys in the same run)")
    print("| case | GPUs | variant | seconds | GKeys/s | one GPU | x one GPU's keys/s | persist() / collective "
          "| local sort, splitters, exchange, merge, start (ms) | check |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        if row.get("seconds") is None:
            print(f"| {row['case']} | {row['gpus']} | {row['variant']} | - | - | - | - | - | - | {row['check']} |")
            continue
        n, t = row["n"], row["seconds"]
        single = row.get("single")
        ratio = f"{gkeys(n, t) / gkeys(single[0], single[1]):.2f}" if single else "-"
        one = f"{single[1]:.4f} s (2^{single[0].bit_length() - 1})" if single else "-"
        persist = f"{row['persist']:.4f} s = {row['persist'] / t:.2f}x" if "persist" in row else "-"
        ph = row.get("phases", {})
        names = ("local sort", "splitters", "exchange", "merge", "start")
        parts = ", ".join(f"{ph.get(k, 0) * 1e3:.1f}" for k in names)
        print(f"| {row['case']} | {row['gpus']} | {row['variant']} | {t:.4f} | {gkeys(n, t):.1f} | {one} | "
              f"{ratio} | {persist} | {parts} | {row['check']} |")
    if exchange:
        print("\n| exchange (all-to-all, equal split) | NCCL settings | ms | GB/s per GPU each way | check |")
        print("|---|---|---|---|---|")
        for (env, variant), (seconds, ok) in exchange.items():
            if variant in ("ipc ready",):
                continue
            if variant == "ipc open+close":
                print(f"| map the peers' buffer (open + close) | {env} | {seconds * 1e3:.2f} | - | - |")
                continue
            print(f"| {'NCCL send/recv' if variant == 'nccl' else variant} | {env} | {seconds * 1e3:.2f} | "
                  f"{exchange_rate(seconds):.1f} | {'ok' if ok else 'WRONG'} |")


_EXCHANGE_BYTES = [0]


def exchange_rate(seconds: float) -> float:
    return _EXCHANGE_BYTES[0] / seconds / 1e9


def best_nccl_env(results: dict) -> str:
    """The NCCL settings whose all-to-all was fastest (and right)."""
    timed = {env: sec for (env, variant), (sec, ok) in results.items() if variant == "nccl" and ok}
    return min(timed, key=timed.get) if timed else "default"


def run_suite(args) -> None:
    """One run for the scale-out bars: the exchange microbench, then on all
    visible GPUs each of --cases, then 2^32 keys on the first two GPUs;
    a table at the end. Stops starting cases after --deadline seconds."""
    import os
    import signal

    t_start = time.perf_counter()
    rows, exchange = [], {}
    xp_name = "numpy" if args.cpu else "cupy"     # --cpu: the same steps on 2 in-process CPU workers

    def out_of_time(signum, frame):
        """A collective that never ends (a worker waiting inside NCCL): the
        table of what finished, then exit (the workers go with us)."""
        print(f"\nsuite: still running after {time.perf_counter() - t_start:.0f} s; stopping", flush=True)
        traceback.print_stack(frame)
        print_table(rows, exchange)
        sys.stdout.flush()
        os._exit(3)

    signal.signal(signal.SIGALRM, out_of_time)
    signal.alarm(int(args.deadline + args.grace))
    devices = ["cpu", "cpu"] if args.cpu else visible_devices()
    if args.exchange_bench and not args.cpu:
        keys = 1 << args.exchange_keys_log2
        _EXCHANGE_BYTES[0] = keys * 4 * (len(devices) - 1) // len(devices)
        envs = NCCL_ENVS if args.nccl_env == "auto" else {args.nccl_env: NCCL_ENVS[args.nccl_env]}
        exchange = exchange_bench(keys, args.repeats + 2, envs)
    chosen = best_nccl_env(exchange) if args.nccl_env == "auto" else args.nccl_env
    os.environ.update({**NCCL_BASE, **NCCL_ENVS[chosen]})
    if not args.cpu:
        print(f"cluster NCCL settings: {chosen} {NCCL_ENVS[chosen] or ''} (NVLS off)", flush=True)
    singles = {}

    def cases_on(gpus: int, cases, variants_first=None) -> None:
        from cudasortkit.dask import explicit

        cluster, client = start_cluster(args.cpu, args.protocol, in_process=args.cpu, collective=True,
                                        devices=None if args.cpu else devices[:gpus])
        with cluster, client:
            bench = Bench(client, xp_name, args.chunks_per_worker)
            print(f"cluster: {len(bench.workers)} workers on {devices[:gpus]}, dask transport "
                  f"{client.scheduler.address.split('://')[0]}"
                  + ("" if args.cpu else f"; devices {sorted(set(client.run(device_name).values()))}"), flush=True)
            t = time.perf_counter()
            explicit.prepare(("uint32",), ("sort", "argsort"), (False,), "threads" if args.cpu else "nccl", xp_name)
            print(f"cudasortkit.dask.prepare: {time.perf_counter() - t:.2f} s", flush=True)
            if gpus == len(devices) and args.merge_bench:
                rates = client.submit(merge_rate, 1 << (14 if args.cpu else 30), xp_name, args.repeats,
                                      workers=[bench.workers[0]], pure=False).result()
                for name, (sec, rate) in rates.items():
                    print(f"MERGE one GPU, {name} of two sorted halves of 2^{14 if args.cpu else 30} uint32 keys: "
                          f"{sec * 1e3:.2f} ms, {rate:.0f} GB/s read + written", flush=True)
                release(bench)
            for kind, log2 in cases:
                if time.perf_counter() - t_start > args.deadline:
                    print(f"deadline: skipping {kind} 2^{log2} on {gpus} GPUs")
                    rows.append(Row(case=f"{kind} 2^{log2}", gpus=gpus, n=1 << log2, variant="-", seconds=None,
                                    check="skipped (deadline)"))
                    continue
                op = "argsort" if kind == "argsort" else "sort"
                first = not any(r["case"].startswith(op) and r["gpus"] == gpus for r in rows)
                if args.variants == "defaults" or kind == "persist":
                    variants = [""]
                elif first:
                    variants = variants_first or (SORT_VARIANTS if op == "sort" else ARGSORT_VARIANTS)
                else:
                    variants = LATER_VARIANTS
                key = (op, min(1 << log2, 1 << (32 if op == "sort" else 31)))
                singles[key] = suite_case(bench, op, 1 << log2, variants, args, rows, gpus,
                                          persist=kind == "persist", single=singles.get(key))

    cases = [(c.split(":")[0], int(c.split(":")[1])) for c in args.cases.split(",") if c]
    try:
        cases_on(len(devices), cases)
    except Exception:
        traceback.print_exc()
    if args.two_gpus and not args.cpu and len(devices) > 2 and time.perf_counter() - t_start < args.deadline:
        try:
            cases_on(2, [("sort", 32)], TWO_GPU_VARIANTS)
        except Exception:
            traceback.print_exc()
    signal.alarm(0)
    print_table(rows, exchange)
    print(f"suite: {time.perf_counter() - t_start:.0f} s")


def main(argv=None) -> None:
    from cudasortkit.settings import add_switch

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_switch(ap, "--cpu", "LocalCluster of 2 CPU processes, NumPy chunks")
    ap.add_argument("--size-log2", default="31",
                    help="uniform input size(s), comma-separated: 30,31,32 (default 31)")
    ap.add_argument("--small-log2", type=int, default=28, help="few/sorted/lognormal size (default 28)")
    ap.add_argument("--df-size-log2", type=int, default=24, help="dask.dataframe comparison size")
    ap.add_argument("--chunks-per-worker", type=int, default=2)
    ap.add_argument("--inputs", default=",".join(DISTS), help=f"comma-separated from {DISTS}")
    add_switch(ap, "--phases", on=True)
    ap.add_argument("--release-wait", type=float, default=0.0,
                    help="seconds each timed collective sort waits, untimed, for the workers to "
                         "release the previous results (default 0: back to back)")
    add_switch(ap, "--single", "compare with one worker's cudasortkit.sort", on=True)
    add_switch(ap, "--dataframe", on=True)
    ap.add_argument("--protocol", default="auto", choices=("auto", "tcp", "ucx"))
    ap.add_argument("--exchange", default="auto", choices=("auto", "nccl"),
                    help="nccl: the collective sort, one CASE line per input (see above)")
    ap.add_argument("--repeats", type=int, default=3, help="timed collective sorts per input (best)")
    add_switch(ap, "--prepare",
               "nccl: cudasortkit.dask.prepare (communicators, kernels) before the first sort", on=True)
    ap.add_argument("--ops", default="sort",
                    help="nccl: comma-separated of sort, argsort, sort_by_key (int64 global indices as values)")
    add_switch(ap, "--suite",
               "the scale-out bars in one run: --exchange-bench, then --cases on all visible GPUs "
               "(sort variants compared at the first sort case, argsort variants at the first "
               "argsort case), then sort 2^32 on the first two GPUs; a table at the end")
    add_switch(ap, "--exchange-bench",
               "--suite: the all-to-all microbench (NCCL under each NCCL_ENVS setting, the copy-engine "
               "variants) before the cluster starts", on=True)
    ap.add_argument("--exchange-keys-log2", type=int, default=31, help="uint32 keys per GPU in the microbench")
    ap.add_argument("--nccl-env", default="auto", choices=("auto", *NCCL_ENVS),
                    help="--suite: the NCCL settings of the cluster (auto: the microbench's fastest)")
    ap.add_argument("--cases", default="sort:33,persist:33,sort:34,argsort:32,argsort:33",
                    help="--suite: kind:log2 items, kind sort, persist (cskd.sort(x).persist() against the "
                         "collective) or argsort")
    ap.add_argument("--variants", default="compare", choices=("compare", "defaults"),
                    help="--suite: compare SORT_VARIANTS / ARGSORT_VARIANTS at the first case of each op")
    add_switch(ap, "--merge-bench", "--suite: one GPU's merge GB/s", on=True)
    add_switch(ap, "--two-gpus", "--suite: also sort 2^32 keys on the first two GPUs", on=True)
    ap.add_argument("--deadline", type=float, default=360.0,
                    help="--suite: seconds after which no further case starts (the table still prints)")
    ap.add_argument("--grace", type=float, default=90.0,
                    help="--suite: seconds past the deadline after which a case still running is abandoned: "
                         "the table of what finished is printed and the run exits")
    args = ap.parse_args(argv)
    if args.suite:
        sys.stdout.reconfigure(line_buffering=True)
        run_suite(args)
        return
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
