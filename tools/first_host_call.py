"""What the first cudasortkit.sort of a 1,000-key NumPy array costs in a fresh
process, and where it goes (cProfile, cumulative)."""
import cProfile
import pstats
import time

import numpy as np

import cudasortkit as csk

a = np.random.default_rng(0).integers(0, 2**32, 1000, dtype=np.uint32)
prof = cProfile.Profile()
t = time.perf_counter()
prof.enable()
csk.sort(a)
prof.disable()
print(f"first call {1e3 * (time.perf_counter() - t):.1f} ms")
pstats.Stats(prof).sort_stats("cumulative").print_stats(25)
