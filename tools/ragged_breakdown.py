"""Where the issue's ragged case's time goes (bench --batched's ragged case,
cudasortkit/cli/bench_batched.py): the whole call with int64/int32 device and
host offsets, argsort, the short (<= 40 keys) and long segments alone, the
offsets' device check alone, the call's host time, against one CuPy sort of
the packed 64-bit keys in the same run; then a cProfile of 30 calls.
`python tools/ragged_breakdown.py`"""
import cProfile
import io
import pstats
import time

import cupy
import numpy as np

import cudasortkit as csk
from cudasortkit.cli.bench_batched import packed_keys, ragged_data
from cudasortkit.gpu.device import get_device
from cudasortkit.sdk.segments import Segments
from cudasortkit.gpu.timing import time_gpu


def ms(fn, repeats=20):
    return time_gpu(lambda i: fn(), repeats=repeats, warmup=3)["median_ms"]


def main():
    lengths, offsets, host = ragged_data()
    n = len(host)
    keys, dev = cupy.asarray(host), cupy.asarray(offsets)
    dev32 = cupy.asarray(offsets.astype(np.int32))
    expected = np.concatenate([np.sort(host[lo:hi]) for lo, hi in zip(offsets[:-1], offsets[1:])])
    print("ok", np.array_equal(csk.segmented_sort(keys, dev32).get(), expected))
    packed = packed_keys(keys, lengths)
    res = {"csk, int64 device offsets": ms(lambda: csk.segmented_sort(keys, dev)),
           "csk, int32 device offsets": ms(lambda: csk.segmented_sort(keys, dev32)),
           "csk, host offsets": ms(lambda: csk.segmented_sort(keys, offsets)),
           "csk argsort, int64 device offsets": ms(lambda: csk.segmented_argsort(keys, dev)),
           "cupy sort of packed keys": ms(lambda: cupy.sort(packed))}
    rng = np.random.default_rng(1)
    for name, keep in (("short segments alone", lengths <= 40), ("long segments alone", lengths > 40)):
        part = lengths[keep]
        o = cupy.asarray(np.concatenate([[0], np.cumsum(part)]).astype(np.int64))
        k = cupy.asarray(rng.standard_normal(int(part.sum()), dtype=np.float32))
        res[f"csk, {name} ({int(part.sum()):,} keys)"] = ms(lambda: csk.segmented_sort(k, o))
    state = get_device()
    res["offsets device check alone"] = ms(lambda: Segments.checked_on_device(dev, n, state))
    times = []
    for _ in range(20):
        cupy.cuda.Device().synchronize()
        t = time.perf_counter()
        csk.segmented_sort(keys, dev)
        times.append(time.perf_counter() - t)
    res["host time of a call (not waiting for the GPU)"] = float(np.median(times)) * 1e3
    for name, value in res.items():
        print(f"{name:55s} {value:8.3f} ms")
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(30):
        csk.segmented_sort(keys, dev)
    cupy.cuda.Device().synchronize()
    profile.disable()
    out = io.StringIO()
    pstats.Stats(profile, stream=out).sort_stats("tottime").print_stats(25)
    print(out.getvalue())


if __name__ == "__main__":
    main()
