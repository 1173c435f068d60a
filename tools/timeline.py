"""One warm sort's timeline, on the host and on the GPU, against CuPy's.

Host: when each operation of a prepared call is queued, in microseconds after
the call was entered (median of many calls; a call replayed as a CUDA graph
issues no operation one by one, so it shows only when it returned). GPU: each kernel, memset and
copy of one call from torch.profiler's CUDA trace (start after the call's
first GPU operation, and duration), for cudasortkit and for cupy.sort, and
the call's time by CUDA events (median).

    python tools/timeline.py [--dtype uint32] [--size 2^24] [--algorithm auto]
"""
import argparse
import cProfile
import pstats
import statistics
import time

import cupy
import numpy as np
import torch

import cudasortkit as csk
from cudasortkit.sdk.job import Job
from cudasortkit.settings import parse_size

from call_gap import single_ms  # tools/call_gap.py: CUDA events around single synchronised calls


def host_marks(run, calls=200):
    """Median microseconds from the call's entry to each operation queued."""
    marks, t0 = [], [0]
    memset, issue = Job.memset32, Job.issue_packed

    def memset32(self, *args):
        marks[-1].append(("memset", time.perf_counter() - t0[0]))
        return memset(self, *args)

    def issue_packed(self, kernel, *args):
        marks[-1].append((kernel.name, time.perf_counter() - t0[0]))
        return issue(self, kernel, *args)

    Job.memset32, Job.issue_packed = memset32, issue_packed
    try:
        for _ in range(calls):
            marks.append([])
            t0[0] = time.perf_counter()
            run()
            marks[-1].append(("returned", time.perf_counter() - t0[0]))
            cupy.cuda.Device().synchronize()
    finally:
        Job.memset32, Job.issue_packed = memset, issue
    names = [name for name, _ in marks[-1]]
    return [(name, 1e6 * statistics.median(m[i][1] for m in marks if len(m) == len(names)))
            for i, name in enumerate(names)]


def gpu_ops(run):
    """(name, start us after the first op, duration us) of one call's GPU work."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        run()
        torch.cuda.synchronize()
    events = sorted((e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA),
                    key=lambda e: e.time_range.start)
    if not events:
        return []
    first = events[0].time_range.start
    return [(e.name[:48], e.time_range.start - first, e.time_range.end - e.time_range.start)
            for e in events]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algorithm", default="auto")
    parser.add_argument("--dtype", default="uint32")
    parser.add_argument("--size", default="2^24")
    parser.add_argument("--profile", action="store_true", help="also cProfile 300 calls")
    args = parser.parse_args()
    n, dtype = parse_size(args.size), np.dtype(args.dtype)
    rng = np.random.default_rng(1)
    host = (rng.integers(0, np.iinfo(dtype).max, n, dtype=dtype, endpoint=True) if dtype.kind in "ui"
            else rng.standard_normal(n).astype(dtype))
    keys = cupy.asarray(host)
    runs = {"cudasortkit": lambda: csk.sort(keys, algorithm=args.algorithm),
            "cupy": lambda: cupy.sort(keys)}
    for run in runs.values():
        for _ in range(5):
            run()
    cupy.cuda.Device().synchronize()
    print(f"{dtype} n={n:,}, algorithm {args.algorithm}")
    print("host, us after entry:", ", ".join(f"{name} {us:.1f}" for name, us in host_marks(runs["cudasortkit"])))
    if args.profile:
        profile = cProfile.Profile()
        for _ in range(300):
            profile.enable()
            runs["cudasortkit"]()
            profile.disable()
            cupy.cuda.Device().synchronize()
        pstats.Stats(profile).sort_stats("tottime").print_stats(30)
    for name, run in runs.items():
        print(f"{name}: {single_ms(run, repeats=100):.3f} ms by CUDA events")
        ops = gpu_ops(run)
        end = 0.0
        for op, start, duration in ops:
            print(f"  {start:8.1f} +{duration:7.1f} us  (idle before {max(0.0, start - end):5.1f})  {op}")
            end = max(end, start + duration)


if __name__ == "__main__":
    main()
