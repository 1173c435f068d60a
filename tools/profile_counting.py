"""Where counting sort's time goes for int32 keys in a small range (GPU run):
the min/max probe alone, the sort with the probe, and with key_range given."""
import cupy
import numpy as np

import cudasortkit as csk
from cudasortkit.build.corekernels import key_minmax
from cudasortkit.gpu.device import get_device
from cudasortkit.gpu.timing import time_gpu

n = 1 << 26
rng = np.random.default_rng()
data = [cupy.asarray(rng.integers(0, 1000, n).astype(np.int32)) for _ in range(3)]
state = get_device()
rows = {
    "minmax probe": lambda i: key_minmax(state, int(data[i].data.ptr), n, "int32"),
    "counting (probe)": lambda i: csk.sort(data[i], algorithm="counting"),
    "counting key_range": lambda i: csk.sort(data[i], algorithm="counting", key_range=(0, 999)),
    "cupy.sort": lambda i: cupy.sort(data[i]),
}
for name, run in rows.items():
    t = time_gpu(run, inputs=3, repeats=10)
    print(f"{name:22} {t['median_ms']:.3f} ms")
