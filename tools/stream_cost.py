"""Per-call cost of ordering on the caller's stream: wall clock of
cudasortkit.sort on 2^10 CuPy keys (synchronised, warm, median) on the
legacy default stream (no events) and on a non-default stream (two event
joins), with CuPy's own sort in the same run.

    python tools/stream_cost.py
"""
import statistics
import time

import cupy
import numpy as np

import cudasortkit as csk


def wall_us(fn, stream, reps=2000):
    for _ in range(50):
        fn()
    stream.synchronize()
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
    rows = []
    for label, stream in (("default stream", cupy.cuda.Stream.null), ("non-blocking stream", side)):
        with stream:
            rows.append((label, "cudasortkit", wall_us(lambda: csk.sort(x, algorithm="onesweep"), stream)))
            rows.append((label, "cudasortkit stream=", wall_us(
                lambda: csk.sort(x, algorithm="onesweep", stream=stream), stream)))
            rows.append((label, "cupy.sort", wall_us(lambda: cupy.sort(x), stream)))
    print(f"{'stream':22} {'call':22} {'us/call':>8}")
    for label, call, us in rows:
        print(f"{label:22} {call:22} {us:8.1f}")


if __name__ == "__main__":
    main()
