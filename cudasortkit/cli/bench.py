"""``python -m cudasortkit.cli.bench``: time algorithms against CuPy (CUB) and NumPy
in the same run, per operation, dtype and size.

Every algorithm's output is checked once against the reference before it is
timed; a wrong result is reported as such, never timed. Throughput is keys per
second (GK/s); `vs_cupy` is CuPy's time over ours (>1: we are faster).
"""
from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from .. import api
from ..sdk import registry
from ..dtypes import KEY_DTYPES, itemsize, numpy_dtype
from ..settings import parse_size  # noqa: F401  (bench.parse_size, as before
from ..gpu.timing import rotated_rounds, time_gpu

OPS = ("sort", "argsort", "pairs", "merge")


def make_input(dtype: str, n: int, dist: str, rng) -> np.ndarray:
    """Benchmark data: 'uniform' over the dtype, or 'range:LO:HI' integers."""
    dt = numpy_dtype(dtype)
    if dist.startswith("range:"):
        lo, hi = (int(x) for x in dist.split(":")[1:3])
        return rng.integers(lo, hi, size=n).astype(dt)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return rng.integers(info.min, info.max, size=n, dtype=dt, endpoint=True)
    return rng.standard_normal(n).astype(dt)


def _cupy():
    try:
        import cupy

        return cupy
    except Exception:
        return None


def _check(op, got, ref) -> bool:
    """Keys equal as values (NaN == NaN, -0 == +0); for argsort, the indices
    must sort the keys the same way (any order of equal keys)."""
    if op == "argsort":
        keys, ref_order = ref
        return bool(np.array_equal(keys[got], keys[ref_order], equal_nan=keys.dtype.kind == "f"))
    if op == "pairs":
        return bool(np.array_equal(got[0], ref[0], equal_nan=True) and np.array_equal(got[1], ref[1]))
    return bool(np.array_equal(got, ref, equal_nan=got.dtype.kind == "f"))


#: Interleaved timing rounds per case (bench_case).
ROUNDS = 3
#: Each round times an algorithm for at least this long (up to MAX_ROUND_REPEATS
#: calls): a call of a few tens of microseconds needs hundreds of samples for
#: a median that holds from run to run.
MIN_ROUND_S, MAX_ROUND_REPEATS = 0.01, 300
#: Before the rounds, each algorithm runs on every input this many times, in
#: turn with the others: so that no round times what only a first or second
#: call of a shape or of a set of buffers does (compiles, allocations, and
#: the CUDA graph a repeated call captures on its second run with the same
#: buffers). With one warm-up call, auto, first in the first round, met the
#: new buffer sets of 2^26 uint32 keys before onesweep by name did and ran
#: 3-6% slower than it on the same kernels; a second pass of the cell, warm,
#: timed them level (H100, session 19).
WARMUP_PASSES = 2


def _error_text(exc) -> str:
    return f"{type(exc).__name__}: {exc}".splitlines()[0][:160]


def bench_case(op, dtype, n, algorithms, *, dist="uniform", inputs=3, repeats=10,
               with_numpy=False, check=True, rng=None, index_dtype="int64", peers=None) -> list:
    """Rows {op, dtype, n, algorithm, median_ms, gkeys_s, ok} for one case.
    index_dtype: of our argsorts ("int32": the algorithm reads NAME/int32;
    CuPy's are int64). peers: bench_calls.device_peers(...) (--peers): its
    runners join sort cells, and rows get vs_cub."""
    cupy = _cupy()
    rng = rng or np.random.default_rng()
    hosts = [make_input(dtype, n, dist, rng) for _ in range(inputs)]
    if cupy is not None:
        devs = [cupy.asarray(h) for h in hosts]
        vals = [cupy.arange(n, dtype=cupy.int64) for _ in hosts] if op == "pairs" else None
    else:
        from pycuda import gpuarray

        devs = [gpuarray.to_gpu(h) for h in hosts]
        vals = [gpuarray.to_gpu(np.arange(n, dtype=np.int64)) for _ in hosts] if op == "pairs" else None
    ref = None
    if check:
        h = hosts[0]
        if cupy is not None and n > (1 << 25):  # NumPy would take minutes; CUB is stable too
            order = cupy.argsort(devs[0]).get()
        else:
            order = np.argsort(h, kind="stable")
        ref = {"sort": h[order], "argsort": (h, order), "pairs": (h[order], order)}[op]

    def ours(name):
        if op == "sort":
            return lambda i: api.sort(devs[i], algorithm=name)
        if op == "argsort":
            return lambda i: api.argsort(devs[i], algorithm=name, index_dtype=index_dtype)
        return lambda i: api.sort_by_key(devs[i], vals[i], algorithm=name)

    label = "" if op != "argsort" or index_dtype == "int64" else f"/{index_dtype}"
    runners = {name + label: ours(name) for name in algorithms}
    if cupy is not None:
        runners["cupy"] = {
            "sort": lambda i: cupy.sort(devs[i]),
            "argsort": lambda i: cupy.argsort(devs[i]),
            "pairs": lambda i: (lambda o: (devs[i][o], vals[i][o]))(cupy.argsort(devs[i])),
        }[op]
        if peers is not None and op == "sort":
            runners.update(peers(devs))
    rows, timed = [], {}
    for name, run in runners.items():
        row = {"op": op, "dtype": dtype, "n": n, "dist": dist, "algorithm": name}
        rows.append(row)
        try:
            if check:
                got = run(0)
                got = tuple(_host(g) for g in got) if isinstance(got, tuple) else _host(got)
                row["ok"] = _check(op, got, ref)
                if not row["ok"]:
                    row["error"] = "wrong result"
                    continue
            if not check:
                run(0)  # compiles and allocates outside the timing
            timed[name] = (row, run)
        except (ValueError, MemoryError, RuntimeError) as exc:
            row["error"] = _error_text(exc)
    for _ in range(WARMUP_PASSES):
        for i in range(inputs):
            for name, (row, run) in list(timed.items()):
                try:
                    run(i)
                except (ValueError, MemoryError, RuntimeError) as exc:
                    row["error"] = _error_text(exc)
                    del timed[name]
    # Interleaved rounds (every algorithm once per round, CuPy included, each
    # round in another order), so that clock or host drift during the run
    # and the place in a round favour none of them.
    samples = {name: [] for name in timed}
    for order in rotated_rounds(list(timed), ROUNDS):
        for name in order:
            if name not in timed:  # failed in an earlier round
                continue
            row, run = timed[name]
            try:
                samples[name] += time_gpu(run, inputs=inputs, repeats=-(-repeats // ROUNDS),
                                          warmup=1, min_time_s=MIN_ROUND_S,
                                          max_repeats=MAX_ROUND_REPEATS)["times"]
            except (ValueError, MemoryError, RuntimeError) as exc:
                row["error"] = _error_text(exc)
                del timed[name]
    for name, (row, _) in timed.items():
        row.update(median_ms=float(np.median(samples[name])), min_ms=min(samples[name]),
                   max_ms=max(samples[name]), repeats=len(samples[name]))
        row["gkeys_s"] = n / row["median_ms"] / 1e6
    if with_numpy and op == "sort":
        import time

        times = []
        for i in range(max(3, min(repeats, 5))):
            t0 = time.perf_counter()
            np.sort(hosts[i % inputs])
            times.append((time.perf_counter() - t0) * 1e3)
        ms = float(np.median(times))
        rows.append({"op": op, "dtype": dtype, "n": n, "dist": dist, "algorithm": "numpy(host)",
                     "median_ms": ms, "gkeys_s": n / ms / 1e6, "ok": True})
    base = next((r for r in rows if r["algorithm"] == "cupy" and "median_ms" in r), None)
    for r in rows:
        if base and "median_ms" in r:
            r["vs_cupy"] = base["median_ms"] / r["median_ms"]
    if peers is not None:
        from .bench_calls import add_vs_cub

        add_vs_cub(rows)
    return rows


def bench_merge(op, dtype, n, algorithms=(), *, dist="uniform", inputs=3, repeats=10,
                with_numpy=False, check=True, rng=None) -> list:
    """Rows for op "merge": cudasortkit.merge of two sorted n-key arrays (into a
    preallocated out), a device-to-device copy of the same bytes and CuPy's sort
    of the concatenation, in one run. n counts the keys of each input; GK/s
    counts output keys; gb_s is bytes read + written over time and copy_frac
    the merge's share of the copy's bandwidth. "merge" is the public call
    (host overhead and its synchronize included), "merge(kernels)" only the
    plugin's launches on a prepared Job, comparable with the single copy call.
    `algorithms` is not used."""
    from ..gpu.device import get_device
    from ..sdk.job import Job
    from ..calls.sort_merge import merge, merging_plugin

    cupy = _cupy()
    state = get_device()
    rng = rng or np.random.default_rng()
    hosts = [tuple(np.sort(make_input(dtype, n, dist, rng)) for _ in "ab") for _ in range(inputs)]
    if cupy is not None:
        to_dev, empty = cupy.asarray, (lambda m: cupy.empty(m, dtype))
    else:
        from pycuda import gpuarray

        to_dev, empty = gpuarray.to_gpu, (lambda m: gpuarray.empty(m, dtype))
    devs = [tuple(to_dev(x) for x in h) for h in hosts]
    out = empty(2 * n)
    nbytes = 2 * n * itemsize(dtype)
    src = [to_dev(np.concatenate(h)) for h in hosts]
    ptr = (lambda x: int(x.data.ptr)) if cupy is not None else (lambda x: int(x.gpudata))
    plugins = registry.plugins()
    kernel_rows = {"merge(kernels)": merging_plugin()}
    kernel_rows.update({f"k:{name}": plugins[name] for name in algorithms
                        if name in plugins and plugins[name].merges})
    jobs = []

    def kernels_only(plugin):
        mine = [Job(plugin, state, dtype=dtype, n=2 * n, keys_in=ptr(d[0]), keys_out=ptr(out))
                for d in devs]
        jobs.extend(mine)
        return lambda i: plugin.merge(mine[i], ptr(devs[i][0]), 0, n, ptr(devs[i][1]), 0, n)

    runners = {"merge": lambda i: merge(*devs[i], out=out)}
    runners.update({label: kernels_only(p) for label, p in kernel_rows.items()})
    runners["copy(d2d)"] = lambda i: state.cuda.memcpy_dtod(ptr(out), ptr(src[i]), nbytes)
    if cupy is not None:
        runners["cupy"] = lambda i: cupy.sort(cupy.concatenate(devs[i]))
    rows = []
    for name, run in runners.items():
        row = {"op": op, "dtype": dtype, "n": n, "dist": dist, "algorithm": name}
        try:
            if check and name == "merge":
                got = _host(merge(*devs[0]))
                row["ok"] = _check("sort", got, np.sort(np.concatenate(hosts[0]), kind="stable"))
                if not row["ok"]:
                    row["error"] = "wrong result"
                    rows.append(row)
                    continue
            stats = time_gpu(run, inputs=inputs, repeats=repeats)
            row.update((k, stats[k]) for k in ("median_ms", "min_ms", "max_ms", "repeats"))
            row["gkeys_s"] = 2 * n / row["median_ms"] / 1e6
            row["gb_s"] = 2 * nbytes / row["median_ms"] / 1e6
        except (ValueError, MemoryError, RuntimeError) as exc:
            row["error"] = _error_text(exc)
        rows.append(row)
    for job in jobs:
        job.finish()  # frees the kernels-only runs' temporaries
    timed = {r["algorithm"]: r for r in rows if "median_ms" in r}
    if "cupy" in timed:
        for r in timed.values():
            r["vs_cupy"] = timed["cupy"]["median_ms"] / r["median_ms"]
    for name in ["merge"] + list(kernel_rows):
        if name in timed and "copy(d2d)" in timed:
            timed[name]["copy_frac"] = timed[name]["gb_s"] / timed["copy(d2d)"]["gb_s"]
    return rows


def merge_summary(rows) -> str:
    """One line per merge case: bandwidth against the copy measured with it."""
    lines = []
    for r in rows:
        if "copy_frac" in r:
            copy = next(c for c in rows if c["algorithm"] == "copy(d2d)")
            lines.append(f"{r['algorithm']} {r['dtype']} 2x{r['n']}: {r['gb_s']:.0f} GB/s = "
                         f"{100 * r['copy_frac']:.1f}% of d2d copy {copy['gb_s']:.0f} GB/s (read + written)")
    return "\n".join(lines)


def _host(x):
    if isinstance(x, np.ndarray):
        return x
    return x.get() if hasattr(x, "get") else x.cpu().numpy()


def format_table(rows) -> str:
    head = f"{'op':8} {'dtype':8} {'n':>11} {'dist':12} {'algorithm':14} {'ms':>10} {'GK/s':>8} {'vs cupy':>8}"
    head += f" {'vs cub':>8}" if any("vs_cub" in r for r in rows) else ""
    lines = [head, "-" * len(head)]
    for r in rows:
        if "median_ms" in r:
            vs = f"{r['vs_cupy']:.2f}x" if "vs_cupy" in r else "-"
            lines.append(f"{r['op']:8} {r['dtype']:8} {r['n']:>11} {r['dist']:12} {r['algorithm']:14} "
                         f"{r['median_ms']:>10.3f} {r['gkeys_s']:>8.3f} {vs:>8}"
                         + (f" {r['vs_cub']:>7.2f}x" if "vs_cub" in r else ""))
        else:
            lines.append(f"{r['op']:8} {r['dtype']:8} {r['n']:>11} {r['dist']:12} {r['algorithm']:14} "
                         f"{r.get('error', 'failed')}")
    return "\n".join(lines)


def build_parser(parser=None):
    parser = parser or argparse.ArgumentParser(prog="python -m cudasortkit bench", description=__doc__)
    parser.add_argument("--algorithms", default=None,
                        help="comma-separated plugin names (default: every GPU plugin)")
    parser.add_argument("--ops", default="sort", help=f"comma-separated, of {', '.join(OPS)}")
    parser.add_argument("--dtypes", default="uint32,float32", help="comma-separated key dtypes")
    parser.add_argument("--sizes", default="2^20,2^24", help="comma-separated, e.g. 2^24,1000000")
    parser.add_argument("--dist", default="uniform", help="'uniform' or 'range:LO:HI'")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--index-dtype", default="int64", choices=("int64", "int32"),
                        help="index dtype of our argsorts (CuPy's are int64)")
    parser.add_argument("--inputs", type=int, default=3, help="input sets to rotate among")
    parser.add_argument("--numpy", action="store_true", help="also time numpy.sort on the host")
    parser.add_argument("--no-check", action="store_true", help="skip the correctness check")
    parser.add_argument("--variant", action="append", default=[], metavar="NAME:KEY=V,...",
                        help="also time a copy of plugin NAME with other tunable defaults, e.g. "
                             "onesweep:early_counts=1 (repeatable)")
    parser.add_argument("--json", default=None, help="write all rows to this file")
    parser.add_argument("--latency", action="store_true",
                        help="per-call wall clock of auto vs CuPy and torch, 2^10..2^22 (bench_calls.py)")
    parser.add_argument("--batched", action="store_true",
                        help="sorts along the last axis of rows x cols arrays and a ragged "
                             "segmented sort vs CuPy and torch (bench_batched.py)")
    parser.add_argument("--family", action="store_true",
                        help="the sort family vs CuPy: lexsort, unique rows, unique and "
                             "searchsorted of 2^24 keys (bench_family.py)")
    parser.add_argument("--select", action="store_true",
                        help="topk vs torch.topk and argpartition vs cupy.argpartition at "
                             "issue 29's bar shapes (bench_select.py)")
    parser.add_argument("--host", action="store_true",
                        help="NumPy arrays in and out: in-core sizes vs the CuPy round trip and "
                             "numpy.sort, out-of-core sizes under a device memory cap, with the "
                             "pinned bandwidth and host memory (bench_host.py; --sizes takes "
                             "dtype:size[:cap],... for the in-core list, --host-ooc for the other)")
    parser.add_argument("--host-ooc", default=None, metavar="[OP:]DTYPE:SIZE[:CAP],...",
                        help="with --host: the out-of-core cases, OP one of sort (default), "
                             "argsort, pairs (sort_by_key), inplace (sort with out=a) (default "
                             "uint32:2^30:1GiB,float64:2^29:1GiB,uint32:2^30,"
                             "argsort:uint32:2^28:1GiB,pairs:uint32:2^28:1GiB,"
                             "inplace:uint32:2^29:1GiB; 'none' for none)")
    parser.add_argument("--host-modes", default="auto", metavar="MODE,...",
                        help="with --host: transfer modes to time ours with (auto: staged in "
                             "core, registered out of core; staged; registered)")
    parser.add_argument("--peers", action="store_true",
                        help="also time NVIDIA's cuda.compute radix sort (cuda-cccl), prepared and "
                             "one-shot, in each sort cell ('vs cub'), then per-call wall clock of "
                             "csk.sort, a csk.plan, both cuda.compute forms, cupy.sort and "
                             "torch.sort at 2^10..2^20 (bench_calls.py)")
    parser.add_argument("--cold", action="store_true",
                        help="the fresh-cache loop: 12 sizes 1e4..6e7, three rounds, vs CuPy")
    return parser


def register_variant(spec: str) -> str:
    """Register a copy of a plugin whose config is changed by `spec`
    ('NAME:key=value,...'; values outside the tunable's listed choices are
    allowed, valid_config still decides); returns its name (e.g. onesweep_ec1)."""
    from ..sdk.plugin import Tunable

    base, _, text = spec.partition(":")
    cls = type(registry.plugins()[base])
    tunables, label, settings = dict(cls.tunables), [base], {}
    for item in filter(None, text.split(",")):
        key, value = item.split("=")
        old = tunables[key]
        settings[key] = type(old.default)(value)
        values = old.values if settings[key] in old.values else (*old.values, settings[key])
        tunables[key] = Tunable(settings[key], values, old.doc)
        label.append("".join(w[0] for w in key.split("_")) + value)
    name = "_".join(label)

    def default_config(self, dtype=None, value_bytes=0):
        # The spec wins over the plugin's own per-dtype defaults too,
        return {**cls.default_config(self, dtype, value_bytes), **settings}

    def size_config(self, config, dtype, value_bytes, n):
        # and over its per-size ones.
        return {**cls.size_config(self, config, dtype, value_bytes, n), **settings}

    registry.register(type(cls.__name__ + "Variant", (cls,),
                           {"name": name, "tunables": tunables, "default_config": default_config,
                            "size_config": size_config, "__module__": cls.__module__}))
    return name


def require_gpu(what: str) -> None:
    """SystemExit with one line saying what is missing (not a traceback)
    unless a GPU can run kernels here."""
    from ..gpu.device import gpu_available, unavailable_reason

    if not gpu_available():
        raise SystemExit(f"{what} needs a GPU: {unavailable_reason()}")


def main(argv=None, args=None) -> int:
    args = args or build_parser().parse_args(argv)
    require_gpu("bench")
    if getattr(args, "select", False):
        from . import bench_select

        return bench_select.main(args.repeats)
    if args.batched:
        from . import bench_batched

        return bench_batched.main(args.repeats)
    if args.family:
        from . import bench_family

        return bench_family.main(args.repeats)
    if args.host:
        from . import bench_host

        ooc = args.host_ooc or bench_host.DEFAULT_OUT_OF_CORE
        return bench_host.main(args.sizes if args.sizes != "2^20,2^24" else bench_host.DEFAULT_IN_CORE,
                               "" if ooc == "none" else ooc,
                               modes=tuple(args.host_modes.split(",")))
    if args.latency or args.cold:
        from . import bench_calls

        if args.cold:  # first: it needs a process whose cache is empty
            bench_calls.print_cold(bench_calls.cold())
        if args.latency:
            bench_calls.print_host_tiny(bench_calls.host_tiny())
            bench_calls.print_latency(bench_calls.latency())
        return 0
    names = (args.algorithms.split(",") if args.algorithms else
             [n for n, p in registry.plugins().items() if p.device == "gpu" and not p.segmented])
    names += [register_variant(spec) for spec in args.variant]
    for d in args.dtypes.split(","):
        if d not in KEY_DTYPES:
            raise SystemExit(f"unknown dtype {d!r}; choose from {', '.join(KEY_DTYPES)}")
    rows, peers = [], None
    if args.peers:
        from . import bench_calls

        cc, why = bench_calls.peer_module()
        if cc is None:
            print(bench_calls.not_installed(why), flush=True)
        elif _cupy() is not None:
            peers = bench_calls.device_peers(cc, _cupy())
    for op in args.ops.split(","):
        for dtype in args.dtypes.split(","):
            for size in args.sizes.split(","):
                n = parse_size(size)
                options = {} if op == "merge" else {"index_dtype": args.index_dtype, "peers": peers}
                case = bench_merge if op == "merge" else bench_case
                new = case(op, dtype, n, names, dist=args.dist, inputs=args.inputs,
                           repeats=args.repeats, with_numpy=args.numpy, check=not args.no_check,
                           **options)
                rows += new
                print(format_table(new).split("\n", 2)[-1], flush=True)
                if op == "merge":
                    print(merge_summary(new), flush=True)
    print()
    print(format_table(rows))
    if args.peers and _cupy() is not None:  # per call; without cuda.compute: ours, CuPy, torch
        calls = bench_calls.peers_latency(args.dtypes.split(","))
        print()
        print(bench_calls.format_peers(calls))
        rows += calls
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
