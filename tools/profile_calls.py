"""Where the host time of a small call goes: cProfile of many warm
cudasortkit.sort calls on 2^12 CuPy float32 keys (auto), top functions by
own time. `python tools/profile_calls.py [n] [calls]`"""
import cProfile
import pstats
import sys

import cupy
import numpy as np

import cudasortkit as csk

n = int(sys.argv[1]) if len(sys.argv) > 1 else 1 << 12
calls = int(sys.argv[2]) if len(sys.argv) > 2 else 3000
x = cupy.asarray(np.random.default_rng(0).standard_normal(n).astype(np.float32))
for _ in range(50):
    csk.sort(x)
cupy.cuda.Device().synchronize()
profile = cProfile.Profile()
profile.enable()
for _ in range(calls):
    csk.sort(x)
cupy.cuda.Device().synchronize()
profile.disable()
print(f"auto picks: {csk.explain(x).name}")
pstats.Stats(profile).sort_stats("tottime").print_stats(22)
