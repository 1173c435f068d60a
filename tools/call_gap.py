"""Where a large sort's time goes besides its kernels: per call, the median
of single synchronised calls (what `bench` reports) against the time per
call of many calls queued back to back (host work hidden behind the GPU's),
for cudasortkit (one plugin, or auto) and CuPy, in one process.

    python tools/call_gap.py [--algorithm onesweep] [--dtype uint32] [--size 2^24]
"""
import argparse

import cupy
import numpy as np

import cudasortkit as csk
from cudasortkit.settings import parse_size


def single_ms(run, repeats=50):
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    times = []
    for _ in range(repeats):
        start.record()
        run()
        end.record()
        end.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, end))
    return float(np.median(times))


def queued_ms(run, calls=50):
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    start.record()
    for _ in range(calls):
        run()
    end.record()
    end.synchronize()
    return cupy.cuda.get_elapsed_time(start, end) / calls


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algorithm", default="onesweep")
    parser.add_argument("--dtype", default="uint32")
    parser.add_argument("--size", default="2^24")
    args = parser.parse_args()
    n = parse_size(args.size)
    rng = np.random.default_rng(1)
    dtype = np.dtype(args.dtype)
    host = (rng.integers(0, np.iinfo(dtype).max, n, dtype=dtype, endpoint=True) if dtype.kind in "ui"
            else rng.random(n).astype(dtype))
    keys = cupy.asarray(host)
    runs = {f"csk {args.algorithm}": lambda: csk.sort(keys, algorithm=args.algorithm),
            "cupy": lambda: cupy.sort(keys)}
    for run in runs.values():  # compile, fill pools, prepare
        for _ in range(3):
            run()
    cupy.cuda.Device().synchronize()
    print(f"{args.dtype} n={n:,}: ms per call, single synchronised call vs queued back to back")
    for name, run in runs.items():
        s, q = single_ms(run), queued_ms(run)
        print(f"  {name:16} single {s:.3f}  queued {q:.3f}  gap {1e3 * (s - q):.1f} us")


if __name__ == "__main__":
    main()
