"""Why auto differs from the plugin it picks at small sizes: per-call
CUDA-event medians of auto and each small-size plugin, interleaved, many
calls; whether a prepared call serves each; cProfile of auto's calls.
`python tools/auto_gap.py`"""
import cProfile
import pstats
import statistics

import cupy
import numpy as np

import cudasortkit as csk
from cudasortkit import api

ev0, ev1 = cupy.cuda.Event(), cupy.cuda.Event()


def event_us(fn, x):
    ev0.record()
    fn(x)
    ev1.record()
    ev1.synchronize()
    return cupy.cuda.get_elapsed_time(ev0, ev1) * 1e3


for dtype in ("float32", "uint32"):
    for b in (10, 12, 14):
        n = 1 << b
        rng = np.random.default_rng(b)
        xs = [cupy.asarray((rng.standard_normal(n) * 1e6).astype(dtype)) for _ in range(3)]
        names = ("auto", "merge_sort", "bitonic")
        for name in names:
            for x in xs:
                csk.sort(x, algorithm=name)
        samples = {name: [] for name in names}
        for r in range(300):
            for name in names:
                samples[name].append(event_us(lambda y: csk.sort(y, algorithm=name), xs[r % 3]))
        served = {name: api.prepared.find("sort", xs[0], False, False, name) is not None for name in names}
        print(f"{dtype} 2^{b}: auto picks {csk.explain(xs[0]).name}; "
              + ", ".join(f"{k} {statistics.median(v):.1f} us" for k, v in samples.items())
              + f"; prepared {served}", flush=True)
x = cupy.asarray(np.random.default_rng(0).standard_normal(1024).astype(np.float32))
prof = cProfile.Profile()
prof.enable()
for _ in range(3000):
    csk.sort(x)
prof.disable()
pstats.Stats(prof).sort_stats("tottime").print_stats(14)
