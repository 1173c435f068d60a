"""``python -m cudasortkit {info,list,demo,bench,tune}``."""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time


def cmd_info(args) -> int:
    import numpy as np

    from ..version import __version__
    from ..gpu.device import driver_version, get_device, unavailable_reason
    from ..tuning.cache import cache_dir

    print(f"cudasortkit {__version__}, numpy {np.__version__}, python {sys.version.split()[0]}")
    try:
        import pycuda

        print(f"pycuda {pycuda.VERSION_TEXT}")
    except ImportError:
        print("pycuda: not installed")
    nvcc = shutil.which("nvcc")
    if nvcc:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout
        print(f"nvcc: {nvcc} ({out.strip().splitlines()[-1] if out.strip() else '?'})")
    else:
        print("nvcc: not found")
    reason = unavailable_reason()
    if reason:
        print(f"GPU: unavailable ({reason})")
    else:
        s = get_device()
        print(f"GPU {s.ordinal}: {s.name}, compute capability {s.compute_capability[0]}.{s.compute_capability[1]}, "
              f"{s.sm_count} SMs, {s.total_memory / 2**30:.1f} GiB, driver CUDA {driver_version()}")
    print(f"cache dir: {cache_dir()}")  # where the tuner reads and writes ($CUDASORTKIT_CACHE_DIR)
    return 0


def cmd_list(args) -> int:
    from ..api import algorithms

    for row in algorithms():
        if row["status"] == "ok":
            flags = ", ".join(f for f, on in (("stable", row["stable"]), ("pairs", row["pairs"])) if on)
            tun = " ".join(f"{k}={v['default']}{list(v['values'])}" for k, v in row["tunables"].items())
            print(f"{row['name']:12} ok     {row['device']:3}  [{flags}]  {row['summary']}")
            print(f"{'':12}        dtypes: {' '.join(row['dtypes'])}")
            if tun:
                print(f"{'':12}        tunables: {tun}")
        else:
            print(f"{row['name']:12} ERROR  {row['target']}: {row['error']}")
    return 0


def cmd_demo(args) -> int:
    """Sort n random float32 keys with auto, check against NumPy, and time a
    second call: the first one also compiles kernels and may tune (once per
    device, cached), which is not what a sort costs afterwards."""
    import numpy as np

    from ..api import explain, sort

    n = args.n
    rng = np.random.default_rng()
    first, second = (rng.random(n, dtype=np.float32) for _ in range(2))
    t0 = time.perf_counter()
    sort(first)
    t1 = time.perf_counter()
    got = sort(second)
    t2 = time.perf_counter()
    ok = np.array_equal(got, np.sort(second))
    name = explain(second).name
    print(f"sorted {n:,} random float32 keys (NumPy in, NumPy out) with algorithm={name!r} (auto): "
          f"{(t2 - t1) * 1e3:.1f} ms including host<->device copies; matches NumPy: {ok}")
    print(f"(first call, with kernel compilation and tuning for this size: {(t1 - t0) * 1e3:.0f} ms)")
    return 0 if ok else 1


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cudasortkit", description="cudasortkit tools")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("info", help="device, compute capability, versions, cache dir").set_defaults(func=cmd_info)
    sub.add_parser("list", help="plugins with status and errors").set_defaults(func=cmd_list)
    demo = sub.add_parser("demo", help="sort ten million random keys with algorithm='auto'")
    demo.add_argument("-n", type=int, default=10_000_000)
    demo.set_defaults(func=cmd_demo)
    from . import bench

    b = sub.add_parser("bench", help="time algorithms against CuPy and NumPy")
    bench.build_parser(b)
    b.set_defaults(func=lambda args: bench.main(args=args))
    try:
        from . import tune
    except ImportError:
        tune = None
    if tune is not None:
        t = sub.add_parser("tune", help="tune every plugin for this device")
        tune.build_parser(t)
        t.set_defaults(func=lambda args: tune.main(args=args))
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
