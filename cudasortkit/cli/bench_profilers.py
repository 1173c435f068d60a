"""``python -m cudasortkit bench TOOL``: where a call's time goes, for
contributors changing the host path or a kernel. Each tool prints what it
measured and writes nothing; the timed table of ``bench`` without a TOOL is
bench.py's.

- profile: cProfile of many warm ``csk.sort`` calls of CuPy keys, functions
  by their own time (the host work of a call that has everything prepared).
- first-call: cProfile of this process's first ``csk.sort`` of 1,000 NumPy
  keys, by cumulative time (device start, kernel compiles, tuning). Runs
  without a GPU too (on the CPU plugin).
- timeline: one warm sort against ``cupy.sort`` in the same process: the time
  per call of single synchronised calls against calls queued back to back
  (the difference is host latency the GPU waits for), and the GPU's
  kernels, memsets and copies of one call from torch.profiler's CUDA trace,
  with the idle time before each (needs PyTorch).
- kernels: the hot kernels launched twice each (a merge of two sorted
  arrays, onesweep and radix sorts), for Nsight Compute:
  ``ncu -k regex:onesweep python -m cudasortkit bench kernels``.
- compare: two versions' ``bench --json`` tables, cell by cell, each run's
  times over CuPy's in the same run (bench_compare.py; no GPU).
- versions: this version against another one's package in one process,
  interleaved call batch by call batch (bench_versions.py).

The Dask scale-out has its own bench, which starts a cluster:
``python -m cudasortkit.dask.bench --help``.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from ..settings import parse_size
from . import bench_compare, bench_versions
from .bench import make_input, require_gpu

#: Calls queued back to back per timed batch (timeline).
QUEUED_CALLS = 50


def add_tools(parser: argparse.ArgumentParser) -> None:
    """The tools as subcommands of `parser` (the bench command's); each sets
    `func`, so that `python -m cudasortkit bench TOOL` runs it."""
    parser.epilog = ("Each TOOL has its own --help. The Dask scale-out's bench, which starts a "
                     "cluster: python -m cudasortkit.dask.bench --help")
    tools = parser.add_subparsers(dest="tool", metavar="TOOL", title="profilers (instead of the table)")
    p = tools.add_parser("profile", help="cProfile of many warm calls of CuPy keys (GPU)",
                         description="cProfile of many warm csk.sort calls of CuPy keys "
                                     "(algorithm auto), functions by their own time.")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--size", default="2^12", help="keys per call (default 2^12)")
    p.add_argument("--calls", type=int, default=3000)
    p.add_argument("--top", type=int, default=22, help="functions listed")
    p.set_defaults(func=profile_calls)
    f = tools.add_parser("first-call", help="cProfile of this process's first call (GPU or CPU)",
                         description="cProfile of this process's first csk.sort of NumPy keys, "
                                     "by cumulative time.")
    f.add_argument("--size", default="1000")
    f.add_argument("--top", type=int, default=25, help="functions listed")
    f.set_defaults(func=first_call)
    t = tools.add_parser("timeline", help="single against queued calls and one call's GPU "
                                          "trace, against cupy.sort (GPU, PyTorch)",
                         description="One warm sort against cupy.sort: ms per call of single "
                                     "synchronised calls and of calls queued back to back, and "
                                     "the GPU operations of one call (torch.profiler).")
    t.add_argument("--algorithm", default="auto")
    t.add_argument("--dtype", default="uint32")
    t.add_argument("--size", default="2^24")
    t.add_argument("--profile", action="store_true", help="also a cProfile of 300 calls")
    t.set_defaults(func=timeline)
    k = tools.add_parser("kernels", help="launch each hot kernel twice, for Nsight Compute (GPU)",
                         description="A merge of two sorted uint32 arrays and onesweep and radix "
                                     "sorts of uint32 keys, twice each (the first compiles).")
    k.add_argument("--size", default="2^24")
    k.set_defaults(func=kernels)
    bench_compare.add_tool(tools)
    bench_versions.add_tool(tools)


def _gpu_with_cupy(what: str):
    """CuPy, after checking that a GPU runs kernels here (SystemExit with
    one line saying what is missing otherwise)."""
    require_gpu(what)
    try:
        import cupy
    except ImportError as exc:
        raise SystemExit(f"{what} times CuPy arrays: {exc}") from None
    return cupy


def _cupy_keys(dtype: str, size: str, seed: int = 1):
    import cupy

    return cupy.asarray(make_input(dtype, parse_size(size), "uniform", np.random.default_rng(seed)))


def _print_profile(profile, order: str, top: int) -> None:
    import pstats

    pstats.Stats(profile).sort_stats(order).print_stats(top)


def profile_calls(args) -> int:
    import cProfile

    from .. import api

    cupy = _gpu_with_cupy("bench profile")
    keys = _cupy_keys(args.dtype, args.size)
    for _ in range(50):
        api.sort(keys)
    cupy.cuda.Device().synchronize()
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(args.calls):
        api.sort(keys)
    cupy.cuda.Device().synchronize()
    profile.disable()
    print(f"{args.calls} calls of {keys.dtype} n={keys.size:,}; auto picks {api.explain(keys).name}")
    _print_profile(profile, "tottime", args.top)
    return 0


def first_call(args) -> int:
    import cProfile

    from .. import api

    keys = make_input("uint32", parse_size(args.size), "uniform", np.random.default_rng(0))
    profile = cProfile.Profile()
    start = time.perf_counter()
    profile.enable()
    api.sort(keys)
    profile.disable()
    print(f"first call on {keys.size:,} NumPy uint32 keys: "
          f"{1e3 * (time.perf_counter() - start):.1f} ms")
    _print_profile(profile, "cumulative", args.top)
    return 0


def _gpu_ops(torch, run) -> list:
    """(name, start us after the first operation, duration us) of each GPU
    operation of one run(), from torch.profiler's CUDA trace."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        run()
        torch.cuda.synchronize()
    events = sorted((e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA),
                    key=lambda e: e.time_range.start)
    first = events[0].time_range.start if events else 0
    return [(e.name[:48], e.time_range.start - first, e.time_range.end - e.time_range.start)
            for e in events]


def timeline(args) -> int:
    import cProfile

    from .. import api
    from ..gpu.timing import time_gpu

    cupy = _gpu_with_cupy("bench timeline")
    try:
        import torch
    except ImportError:
        torch = None
    keys = _cupy_keys(args.dtype, args.size)
    runs = {f"cudasortkit {args.algorithm}": lambda: api.sort(keys, algorithm=args.algorithm),
            "cupy.sort": lambda: cupy.sort(keys)}
    for run in runs.values():  # compiles, pools, prepared calls and their graphs
        for _ in range(5):
            run()
    cupy.cuda.Device().synchronize()
    print(f"{keys.dtype} n={keys.size:,}: ms per call, single synchronised calls and "
          f"{QUEUED_CALLS} queued back to back")
    for name, run in runs.items():
        single = time_gpu(lambda i: run(), repeats=100)["median_ms"]
        queued = time_gpu(lambda i: [run() for _ in range(QUEUED_CALLS)],
                          repeats=3)["median_ms"] / QUEUED_CALLS
        print(f"  {name:24} single {single:.3f}  queued {queued:.3f}  "
              f"host latency {1e3 * (single - queued):.1f} us")
    if args.profile:
        profile = cProfile.Profile()
        run = runs[f"cudasortkit {args.algorithm}"]
        for _ in range(300):
            profile.enable()
            run()
            profile.disable()
            cupy.cuda.Device().synchronize()
        _print_profile(profile, "tottime", 30)
    if torch is None:
        print("no GPU trace: PyTorch is not installed (its profiler reads CUDA's activity records)")
        return 0
    for name, run in runs.items():
        print(f"{name}: GPU operations of one call (start, duration, idle before)")
        end = 0.0
        for op, start, duration in _gpu_ops(torch, run):
            print(f"  {start:8.1f} +{duration:7.1f} us  (idle {max(0.0, start - end):5.1f})  {op}")
            end = max(end, start + duration)
    return 0


def kernels(args) -> int:
    from .. import api
    from ..calls.sort_merge import merge

    cupy = _gpu_with_cupy("bench kernels")
    n = parse_size(args.size)
    a, b = (cupy.sort(_cupy_keys("uint32", args.size, seed)) for seed in (1, 2))
    keys = _cupy_keys("uint32", args.size, 3)
    out = cupy.empty(2 * n, cupy.uint32)
    for _ in range(2):
        merge(a, b, out=out)
        api.sort(keys, algorithm="onesweep")
        api.sort(keys, algorithm="radix")
    cupy.cuda.Device().synchronize()
    print(f"merged 2 x {n:,} and sorted {n:,} uint32 keys by onesweep and radix, twice each")
    return 0
