"""Where a small warm call's time goes, on device float32 CuPy keys: the
whole call (synchronised), its host time alone, GPU throughput when calls
are queued back to back, pieces of the path timed alone, and a cProfile.
`python tools/latency_breakdown.py [log2 sizes...]`"""
import cProfile
import pstats
import statistics
import sys
import time

import cupy
import numpy as np

import cudasortkit as csk
from cudasortkit import api
from cudasortkit.gpu.arrays import Operand
from cudasortkit.dispatch.execute import make_request


def median_us(fn, reps=300, sync=None):
    out = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        if sync:
            sync()
        out.append((time.perf_counter() - t) * 1e6)
    return statistics.median(out)


sync = cupy.cuda.Device().synchronize
sizes = [int(s) for s in sys.argv[1:]] or [10, 12, 14, 16, 18, 20, 22]
for b in sizes:
    n = 1 << b
    x = cupy.asarray(np.random.default_rng(b).standard_normal(n).astype(np.float32))
    for _ in range(30):
        csk.sort(x), cupy.sort(x)
    sync()
    choice = csk.explain(x).name
    row = {"auto": choice}
    row["csk sync"] = median_us(lambda: csk.sort(x), sync=sync)
    row["cupy sync"] = median_us(lambda: cupy.sort(x), sync=sync)
    row["csk host"] = median_us(lambda: csk.sort(x))
    sync()
    row["cupy host"] = median_us(lambda: cupy.sort(x))
    sync()
    for name in ("bitonic", "merge_sort", "onesweep", "radix"):
        try:
            csk.sort(x, algorithm=name)
            row[name] = median_us(lambda: csk.sort(x, algorithm=name), sync=sync, reps=100)
        except Exception as exc:  # noqa: BLE001
            row[name] = f"{type(exc).__name__}"
    # GPU throughput: 200 calls queued, one sync
    start, stop = cupy.cuda.Event(), cupy.cuda.Event()
    for fn, label in ((lambda: csk.sort(x), "csk queued"), (lambda: cupy.sort(x), "cupy queued")):
        start.record()
        t = time.perf_counter()
        for _ in range(200):
            fn()
        stop.record()
        stop.synchronize()
        row[label + " wall"] = (time.perf_counter() - t) * 1e6 / 200
        row[label + " gpu"] = cupy.cuda.get_elapsed_time(start, stop) * 1e3 / 200
    row["empty+sync"] = median_us(lambda: cupy.empty(n, np.float32), sync=sync)
    row["Operand"] = median_us(lambda: Operand(x, "a"))
    op = Operand(x, "a")
    row["make_request"] = median_us(lambda: make_request("sort", op, None, False, False))
    req = make_request("sort", op, None, False, False)
    row["choose"] = median_us(lambda: api.selector.choose(req, "auto"))
    print(f"n=2^{b}: " + ", ".join(f"{k}={v:.1f}" if isinstance(v, float) else f"{k}={v}"
                                    for k, v in row.items()), flush=True)

for b in (10, 16):
    n = 1 << b
    x = cupy.asarray(np.random.default_rng(b).standard_normal(n).astype(np.float32))
    for _ in range(50):
        csk.sort(x)
    sync()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(2000):
        csk.sort(x)
    sync()
    prof.disable()
    print(f"---- cProfile 2000 calls n=2^{b} auto={csk.explain(x).name}")
    pstats.Stats(prof).sort_stats("tottime").print_stats(25)
