"""Whole-call benchmarks (`python -m cudasortkit bench --latency / --cold`):
what a caller waits for, host work included, against CuPy and PyTorch in
the same run.

--latency: wall clock of one synchronised call (median of interleaved
rounds, after warm-up) of auto sort on device float32 keys, 2^10 .. 2^22;
and a 1,000-key NumPy array against np.sort, its first call included.
--cold: with an empty tuning cache, a loop sorting 12 float32 CuPy arrays
from 1e4 to 6e7 keys, three rounds; each round's total and the slowest
single call, cudasortkit against cupy.sort.
"""
from __future__ import annotations

import os
import statistics
import tempfile
import time

import numpy as np

ROUNDS = 5


def _libraries():
    import cupy

    try:
        import torch
    except ImportError:
        torch = None
    return cupy, torch


def _wall_us(fn, sync, reps):
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        sync()
        times.append((time.perf_counter() - t) * 1e6)
    return statistics.median(times)


def latency(sizes=tuple(range(10, 23, 2)), reps=200) -> list:
    """Rows (n, {contender: median us})."""
    from .. import api

    cupy, torch = _libraries()
    rows = []
    rng = np.random.default_rng(0)
    for b in sizes:
        n = 1 << b
        h = rng.standard_normal(n).astype(np.float32)
        x = cupy.asarray(h)
        calls = {"cudasortkit": (lambda: api.sort(x), cupy.cuda.Device().synchronize),
                 "cupy": (lambda: cupy.sort(x), cupy.cuda.Device().synchronize)}
        if torch is not None:
            t = torch.from_numpy(h).cuda()
            calls["torch"] = (lambda: torch.sort(t), torch.cuda.synchronize)
        for fn, sync in calls.values():  # warm-up: compiles, allocations
            for _ in range(5):
                fn()
            sync()
        samples = {name: [] for name in calls}
        for _ in range(ROUNDS):
            for name, (fn, sync) in calls.items():
                samples[name].append(_wall_us(fn, sync, reps // ROUNDS))
        rows.append((n, {name: min(v) for name, v in samples.items()}))
    return rows


def host_tiny(n=1000, calls=20000) -> dict:
    """A 1,000-key NumPy uint32 array: cudasortkit.sort's first call and its
    per-call median against np.sort's (us), interleaved rounds."""
    from .. import api

    rng = np.random.default_rng(2)
    a = rng.integers(0, 2**32, n, dtype=np.uint32)
    t = time.perf_counter()
    api.sort(a)
    first = (time.perf_counter() - t) * 1e6
    per = {"cudasortkit": [], "numpy": []}
    for _ in range(ROUNDS):
        for name, fn in (("cudasortkit", api.sort), ("numpy", np.sort)):
            t = time.perf_counter()
            for _ in range(calls // ROUNDS):
                fn(a)
            per[name].append((time.perf_counter() - t) * 1e6 / (calls // ROUNDS))
    return {"first": first, **{name: min(v) for name, v in per.items()}}


COLD_SIZES = (10_000, 30_000, 100_000, 300_000, 1_000_000, 2_000_000, 4_000_000, 8_000_000,
              16_000_000, 30_000_000, 45_000_000, 60_000_000)


def cold(rounds=3) -> list:
    """Rows (round, {contender: (total s, slowest call s)}), from an empty cache."""
    from .. import api
    from ..tuning import runtime

    cupy, _ = _libraries()
    os.environ["CUDASORTKIT_CACHE_DIR"] = tempfile.mkdtemp(prefix="csk-cold-")
    runtime.reset()
    rng = np.random.default_rng(1)
    arrays = [cupy.asarray(rng.standard_normal(n).astype(np.float32)) for n in COLD_SIZES]
    sync = cupy.cuda.Device().synchronize
    rows = []
    for r in range(rounds):
        result = {}
        for name, fn in (("cudasortkit", api.sort), ("cupy", cupy.sort)):
            times = []
            for x in arrays:
                t = time.perf_counter()
                fn(x)
                sync()
                times.append(time.perf_counter() - t)
            result[name] = (sum(times), max(times))
        rows.append((r + 1, result))
    return rows


def print_latency(rows) -> None:
    names = list(rows[0][1])
    print(f"{'n':>10} " + " ".join(f"{n + ' us':>16}" for n in names) + "   csk vs cupy")
    for n, us in rows:
        print(f"{n:>10,} " + " ".join(f"{us[k]:16.1f}" for k in names)
              + f"   {us['cupy'] / us['cudasortkit']:.2f}x")


def print_host_tiny(row) -> None:
    print(f"host uint32 1,000 keys: cudasortkit {row['cudasortkit']:.2f} us per call "
          f"(first call {row['first']:.0f} us), np.sort {row['numpy']:.2f} us: "
          f"{row['cudasortkit'] / row['numpy']:.2f}x np.sort")


def print_cold(rows) -> None:
    print(f"{'round':>5} {'csk total s':>12} {'csk max s':>10} {'cupy total s':>13} {'cupy max s':>11}")
    for r, res in rows:
        (ct, cm), (pt, pm) = res["cudasortkit"], res["cupy"]
        print(f"{r:>5} {ct:12.3f} {cm:10.3f} {pt:13.3f} {pm:11.3f}")
