"""Per-call cost of ordering on the caller's stream: wall clock of
cudasortkit.sort on 2^10 CuPy keys (synchronised, warm, median of
interleaved rounds) on the legacy default stream (no events) and on a
non-blocking stream (an event join on each side), with CuPy's own sort in
the same run.

    python tools/stream_cost.py
"""
import statistics
import time

import cupy
import numpy as np

import cudasortkit as csk

ROUNDS, REPS = 5, 400


def wall_us(fn, stream, reps=REPS):
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        stream.synchronize()
        times.append((time.perf_counter() - t) * 1e6)
    return statistics.median(times)


def main():
    x = cupy.asarray(np.random.default_rng(1).integers(0, 1 << 30, 1 << 10).astype(np.uint32))
    side = cupy.cuda.Stream(non_blocking=True)
    cases = {}
    for label, stream in (("legacy default", cupy.cuda.Stream.null), ("non-blocking", side)):
        for alg in ("bitonic", "onesweep"):
            cases[(label, f"csk {alg}")] = (stream, lambda alg=alg: csk.sort(x, algorithm=alg))
            cases[(label, f"csk {alg} stream=")] = (
                stream, lambda alg=alg, s=stream: csk.sort(x, algorithm=alg, stream=s))
        cases[(label, "cupy.sort")] = (stream, lambda: cupy.sort(x))
    samples = {key: [] for key in cases}
    for _ in range(ROUNDS):
        for key, (stream, fn) in cases.items():
            with stream:
                wall_us(fn, stream, 20)  # warm
                samples[key].append(wall_us(fn, stream))
    print(f"{'stream':16} {'call':26} {'us/call':>8}")
    for (label, call), values in samples.items():
        print(f"{label:16} {call:26} {statistics.median(values):8.1f}")


if __name__ == "__main__":
    main()
