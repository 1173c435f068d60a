"""The cells where auto once trailed the best plugin (uint16 2^26: counting;
uint32 and int32 2^24: onesweep), from an empty tuning cache: what auto
picks (explain), whether each call is served prepared, per-call CUDA-event
medians of auto and the plugins, interleaved, and the cache entries the run
left (first-run measurement). `python tools/auto_cells.py`"""
import glob
import json
import os
import statistics
import tempfile

os.environ["CUDASORTKIT_CACHE_DIR"] = tempfile.mkdtemp(prefix="csk-cells-")

import cupy  # noqa: E402
import numpy as np  # noqa: E402

import cudasortkit as csk  # noqa: E402
from cudasortkit import api  # noqa: E402

ev0, ev1 = cupy.cuda.Event(), cupy.cuda.Event()


def event_us(fn):
    ev0.record()
    fn()
    ev1.record()
    ev1.synchronize()
    return cupy.cuda.get_elapsed_time(ev0, ev1) * 1e3


CELLS = (("uint16", 26, ("auto", "counting", "onesweep")),
         ("uint32", 24, ("auto", "onesweep", "radix")),
         ("int32", 24, ("auto", "onesweep", "radix")))
rng = np.random.default_rng(31)
for dtype, b, names in CELLS:
    info = np.iinfo(dtype)
    xs = [cupy.asarray(rng.integers(info.min, info.max, 1 << b, dtype=dtype, endpoint=True))
          for _ in range(3)]
    print(f"{dtype} 2^{b}:\n  {csk.explain(xs[0])}".replace("\n", "\n  "), flush=True)
    for name in names:
        for x in xs:
            csk.sort(x, algorithm=name)
    samples = {name: [] for name in names}
    for r in range(200):
        for name in names:
            x = xs[r % 3]
            samples[name].append(event_us(lambda: csk.sort(x, algorithm=name)))
    served = {name: api.prepared.find("sort", xs[0], False, False, name) is not None
              for name in names}
    best = min(statistics.median(samples[n]) for n in names[1:])
    print("  " + ", ".join(f"{k} {statistics.median(v):.1f} us" for k, v in samples.items())
          + f"; auto / best {statistics.median(samples['auto']) / best:.3f}; prepared {served}",
          flush=True)
for path in glob.glob(os.path.join(os.environ["CUDASORTKIT_CACHE_DIR"], "*.json")):
    table = json.load(open(path))
    entries = [(name, op, dt, bucket) for name, block in table.get("plugins", {}).items()
               for op, by_dtype in block.get("results", {}).items()
               for dt, by_bucket in by_dtype.items() for bucket in by_bucket]
    print(f"cache entries the run left (first-run measurement): {entries or 'none'}")
