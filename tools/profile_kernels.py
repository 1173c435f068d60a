"""One launch of each hot kernel, for Nsight Compute (ncu -k ...):
merge of two sorted 2^24-key uint32 arrays, onesweep and radix sorts of 2^24
uint32 keys. Each op runs twice (the first compiles)."""
import cupy
import numpy as np

import cudasortkit as csk

n = 1 << 24
rng = np.random.default_rng()
a = cupy.asarray(np.sort(rng.integers(0, 2**32, n, dtype=np.uint32)))
b = cupy.asarray(np.sort(rng.integers(0, 2**32, n, dtype=np.uint32)))
keys = cupy.asarray(rng.integers(0, 2**32, n, dtype=np.uint32))
out = cupy.empty(2 * n, cupy.uint32)
for _ in range(2):
    csk.merge(a, b, out=out)
    csk.sort(keys, algorithm="onesweep")
    csk.sort(keys, algorithm="radix")
cupy.cuda.Device().synchronize()
