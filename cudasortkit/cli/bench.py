"""``python -m cudasortkit bench``: time algorithms against CuPy (CUB) and NumPy
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
from ..settings import add_switch, parse_size  # noqa: F401  (bench.parse_size, as before
from ..gpu.timing import MAX_ROUND_REPEATS, MIN_ROUND_S, ROUNDS, rotated_rounds, time_gpu
from ..launch import built

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


#: Before the rounds, each algorithm runs on every input this many times, in
#: turn with the others: so that no round times what only a first or second
#: call of a shape or of a set of buffers does (compiles, allocations, and
#: the CUDA graph a repeated call captures on its second run with the same
#: buffers). With one warm-up call, auto, first in the first round, met the
#: new buffer sets of 2^26 uint32 keys before onesweep by name did and ran
#: 3-6% slower than it on the same kernels; a second pass of the cell, warm,
#: timed them level (H100).
WARMUP_PASSES = 2


def _picked(op, keys, values, index_dtype) -> str:
    """The plugin auto runs for a cell's call now (after its timing, so
    after any first-run measurement the cell's calls paid for)."""
    try:
        if op == "sort":
            decision = api.explain(keys)
        elif op == "argsort":
            decision = api.explain(keys, kind="argsort", index_dtype=np.dtype(index_dtype))
        else:
            decision = api.explain(keys, kind="pairs", values=values)
        return str(decision.name)
    except Exception as exc:  # noqa: BLE001 - reported in the row, never fails the bench
        return f"? ({_error_text(exc)})"


def _error_text(exc) -> str:
    return f"{type(exc).__name__}: {exc}".splitlines()[0][:160]


def make_values(value_dtype: str, n: int, rng) -> np.ndarray:
    """A pair sort's values: random over the dtype's range (not positions,
    so a sort that moved positions where it should move values fails its
    check)."""
    dt = np.dtype(value_dtype)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return rng.integers(info.min, info.max, size=n, dtype=dt, endpoint=True)
    return rng.standard_normal(n).astype(dt)


def bench_case(op, dtype, n, algorithms, *, dist="uniform", inputs=3, repeats=10,
               with_numpy=False, check=True, rng=None, index_dtype="int64", peers=None,
               value_dtype="int64") -> list:
    """Rows {op, dtype, n, algorithm, median_ms, gkeys_s, ok} for one case.
    index_dtype: of our argsorts ("int32": the algorithm reads NAME/int32;
    CuPy's are int64). value_dtype: the values of op "pairs" (rows carry it
    as "values"). peers: bench_calls.device_peers(...) (--peers): its
    runners join sort, argsort and pairs cells (argsort against CUB's pair
    sort of positions of index_dtype), and rows get vs_cub. A row of "auto"
    gets "picked": the plugin auto runs for the cell after its timing."""
    cupy = _cupy()
    rng = rng or np.random.default_rng()
    hosts = [make_input(dtype, n, dist, rng) for _ in range(inputs)]
    host_vals = [make_values(value_dtype, n, rng) for _ in hosts] if op == "pairs" else None
    if cupy is not None:
        devs = [cupy.asarray(h) for h in hosts]
        vals = [cupy.asarray(v) for v in host_vals] if op == "pairs" else None
    else:
        from pycuda import gpuarray

        devs = [gpuarray.to_gpu(h) for h in hosts]
        vals = [gpuarray.to_gpu(v) for v in host_vals] if op == "pairs" else None
    ref = None
    if check:
        h = hosts[0]
        if cupy is not None and n > (1 << 25):  # NumPy would take minutes; CUB is stable too
            order = cupy.argsort(devs[0]).get()
        else:
            order = np.argsort(h, kind="stable")
        ref = {"sort": lambda: h[order], "argsort": lambda: (h, order),
               "pairs": lambda: (h[order], host_vals[0][order])}[op]()

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
        if peers is not None:
            runners.update(peers(devs, op, vals, index_dtype))
    rows, timed = [], {}
    for name, run in runners.items():
        row = {"op": op, "dtype": dtype, "n": n, "dist": dist, "algorithm": name}
        if op == "pairs":
            row["values"] = str(np.dtype(value_dtype))
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
    built.wait()  # configs the checks' first calls build aside: time them, not stand-ins
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
    auto = next((r for r in rows if r["algorithm"] == "auto" + label), None)
    if auto is not None:
        auto["picked"] = _picked(op, devs[0], vals[0] if vals else None, index_dtype)
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


def op_label(row) -> str:
    """A row's op as the tables show it: pairs with its values' width
    ("pairs/i8": int64 values)."""
    values = row.get("values")
    if row["op"] != "pairs" or values is None:
        return row["op"]
    dt = np.dtype(values)
    return f"pairs/{dt.kind}{dt.itemsize}"


def format_table(rows) -> str:
    head = f"{'op':9} {'dtype':8} {'n':>11} {'dist':12} {'algorithm':14} {'ms':>10} {'GK/s':>8} {'vs cupy':>8}"
    head += f" {'vs cub':>8}" if any("vs_cub" in r for r in rows) else ""
    lines = [head, "-" * len(head)]
    for r in rows:
        picked = f" -> {r['picked']}" if "picked" in r else ""
        if "median_ms" in r:
            vs = f"{r['vs_cupy']:.2f}x" if "vs_cupy" in r else "-"
            lines.append(f"{op_label(r):9} {r['dtype']:8} {r['n']:>11} {r['dist']:12} {r['algorithm']:14} "
                         f"{r['median_ms']:>10.3f} {r['gkeys_s']:>8.3f} {vs:>8}"
                         + (f" {r['vs_cub']:>7.2f}x" if "vs_cub" in r else "") + picked)
        else:
            lines.append(f"{op_label(r):9} {r['dtype']:8} {r['n']:>11} {r['dist']:12} {r['algorithm']:14} "
                         f"{r.get('error', 'failed')}{picked}")
    return "\n".join(lines)


def format_cells(rows) -> str:
    """One line per cell: auto's time, the fastest of our plugins by name
    and auto's time over it (auto's bar: at most 1.05x), and CUB prepared's
    time over auto's ("vs cub": > 1, auto faster). Cells without an auto
    row are left out."""
    lines = []
    cells = dict.fromkeys((r["op"], r.get("values"), r["dtype"], r["n"], r["dist"]) for r in rows)
    for cell in cells:
        got = [r for r in rows if (r["op"], r.get("values"), r["dtype"], r["n"], r["dist"]) == cell
               and "median_ms" in r]
        auto = next((r for r in got if r["algorithm"].split("/")[0] == "auto"), None)
        if auto is None:
            continue
        ours = [r for r in got if r is not auto and r["algorithm"] not in ("cupy", "numpy(host)")
                and not r["algorithm"].startswith("cub(")]
        best = min(ours, key=lambda r: r["median_ms"], default=None)
        text = f"{op_label(auto):9} {cell[2]:8} {cell[3]:>11} auto {auto['median_ms']:.3f} ms"
        text += f" -> {auto['picked']}" if "picked" in auto else ""
        if best is not None:
            text += (f"; best {best['algorithm']} {best['median_ms']:.3f} ms, auto/best "
                     f"{auto['median_ms'] / best['median_ms']:.3f}")
        if "vs_cub" in auto:
            text += f"; auto vs cub {auto['vs_cub']:.2f}x"
        lines.append(text)
    return "\n".join(lines)


#: What `bench --help` says first, in the user's words.
DESCRIPTION = """\
Time cudasortkit's GPU algorithms against CuPy (CUB), and NumPy with --numpy,
per operation, key dtype and size, on GPU arrays. Every result is checked
against NumPy before it is timed (a wrong one is reported, never timed). The
table gives each algorithm's median time, keys per second and vs_cupy: CuPy's
time over cudasortkit's (above 1: cudasortkit is faster). --latency,
--batched, --family, --select, --host and --cold run other comparisons
instead; --peers adds NVIDIA's cuda.compute. Needs a GPU."""


def build_parser(parser=None):
    """bench's options, on `parser` (python -m cudasortkit's bench command)
    or a parser of its own."""
    parser = parser or argparse.ArgumentParser(prog="python -m cudasortkit bench")
    parser.description = DESCRIPTION
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("--algorithms", default=None,
                        help="comma-separated plugin names to time (default: every GPU plugin "
                             "that sorts whole arrays)")
    parser.add_argument("--ops", default="sort",
                        help="comma-separated operations: sort, argsort, pairs (sort_by_key with "
                             "int64 values), merge (default: sort)")
    parser.add_argument("--dtypes", default="uint32,float32",
                        help="comma-separated key dtypes (default: uint32,float32)")
    parser.add_argument("--sizes", default="2^20,2^24",
                        help="comma-separated numbers of keys, e.g. 2^24,1000000 "
                             "(default: 2^20,2^24)")
    parser.add_argument("--dist", default="uniform",
                        help="the keys: 'uniform' over the dtype, or 'range:LO:HI' for integers "
                             "from LO up to HI (default: uniform)")
    parser.add_argument("--repeats", type=int, default=10,
                        help="timed calls of each algorithm per case, in interleaved rounds "
                             "(short calls are repeated more); the table gives their median "
                             "(default: 10)")
    parser.add_argument("--index-dtype", default="int64", choices=("int64", "int32"),
                        help="index dtype of cudasortkit's argsorts (CuPy's are int64; with "
                             "--peers CUB's pair sort sorts positions of this dtype)")
    parser.add_argument("--value-dtypes", default="int64",
                        help="comma-separated value dtypes of the pairs operation (sort_by_key), "
                             "e.g. int32,int64 (default: int64)")
    parser.add_argument("--inputs", type=int, default=3,
                        help="how many different random arrays each case makes; the timed calls "
                             "take them in turn, so no call finds the previous call's keys in "
                             "the GPU's cache (default: 3)")
    add_switch(parser, "--numpy", "also time numpy.sort of the same keys on the host")
    add_switch(parser, "--no-check", "time without first checking each result against NumPy")
    parser.add_argument("--variant", action="append", default=[], metavar="NAME:KEY=V,...",
                        help="also time a copy of plugin NAME with other tunable defaults, e.g. "
                             "onesweep:early_counts=1 (repeatable)")
    parser.add_argument("--json", default=None, metavar="FILE",
                        help="also write every row to this JSON file")
    add_switch(parser, "--latency",
               "instead: the wall-clock time of one call, auto against CuPy and "
               "torch, at 2^10..2^22 keys")
    add_switch(parser, "--batched",
               "instead: sorts along the last axis of rows x cols arrays and a "
               "ragged segmented sort, against CuPy and torch")
    add_switch(parser, "--family",
               "instead: the sort family against CuPy and PyTorch, bars "
               "marked: lexsort, unique rows, unique of 2^20..2^26 keys, "
               "searchsorted on the 2^10..2^24 grid, a 1,000-key host sort")
    parser.add_argument("--family-cases", default=None, metavar="GROUP,...",
                        help="with --family: the groups to run, of lexsort, unique_rows, unique, "
                             "searchsorted, host (default: all)")
    add_switch(parser, "--select",
               "instead: topk against torch.topk and argpartition against "
               "cupy.argpartition at five shapes, each with the speedup it should "
               "reach")
    add_switch(parser, "--host",
               "instead: NumPy arrays in and out: in-core sizes against the CuPy "
               "round trip and numpy.sort, out-of-core sizes under a device memory "
               "cap, with the pinned bandwidth and host memory (--sizes then takes "
               "dtype:size[:cap],... for the in-core cases, --host-ooc the others)")
    parser.add_argument("--host-ooc", default=None, metavar="[OP:]DTYPE:SIZE[:CAP],...",
                        help="with --host: the out-of-core cases, OP one of sort (default), "
                             "argsort, pairs (sort_by_key), inplace (sort with out=a) (default "
                             "uint32:2^30:1GiB,float64:2^29:1GiB,uint32:2^30,"
                             "argsort:uint32:2^28:1GiB,pairs:uint32:2^28:1GiB,"
                             "inplace:uint32:2^29:1GiB; 'none' for none)")
    parser.add_argument("--host-modes", default="auto", metavar="MODE,...",
                        help="with --host: the transfer modes cudasortkit is timed with (auto: "
                             "staged in core, registered out of core; staged; registered)")
    add_switch(parser, "--peers",
               "also time NVIDIA's cuda.compute radix sort (cuda-cccl), prepared and "
               "one-shot, in each sort cell ('vs cub'), then the wall-clock time of "
               "one call of csk.sort, a csk.plan, both cuda.compute forms, "
               "cupy.sort and torch.sort at 2^10..2^20 keys")
    add_switch(parser, "--no-calls", "with --peers: skip the table of one call's wall-clock time")
    add_switch(parser, "--cold",
               "instead: sorts of 12 sizes from 1e4 to 6e7 float32 keys from an "
               "empty tuning cache, three rounds, each round's total and slowest "
               "call against CuPy")
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

        groups = args.family_cases.split(",") if args.family_cases else None
        return bench_family.main(args.repeats, groups)
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
                for value_dtype in (args.value_dtypes.split(",") if op == "pairs" else (None,)):
                    n = parse_size(size)
                    options = {} if op == "merge" else {"index_dtype": args.index_dtype,
                                                        "peers": peers}
                    if value_dtype is not None:
                        options["value_dtype"] = value_dtype
                    case = bench_merge if op == "merge" else bench_case
                    new = case(op, dtype, n, names, dist=args.dist, inputs=args.inputs,
                               repeats=args.repeats, with_numpy=args.numpy,
                               check=not args.no_check, **options)
                    rows += new
                    print(format_table(new).split("\n", 2)[-1], flush=True)
                    if op == "merge":
                        print(merge_summary(new), flush=True)
    print()
    print(format_table(rows))
    cells = format_cells(rows)
    if cells:
        print()
        print("cells (auto against our best by name, and against CUB prepared):")
        print(cells)
    # per call; without cuda.compute: ours, CuPy, torch
    if args.peers and not args.no_calls and _cupy() is not None:
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
