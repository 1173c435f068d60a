"""``python -m cudasortkit.tune``: measure every plugin on this GPU and cache
the best configs, so algorithm="auto" (and plugins asked for by name) use them.

    python -m cudasortkit.tune --quick          # about a minute
    python -m cudasortkit.tune                  # full sweep (long)
    python -m cudasortkit.tune --show           # print the cached table
    python -m cudasortkit.tune --plot tune.png  # throughput vs size (matplotlib)
    python -m cudasortkit.tune --check          # the selection bars, measured now

See docs/tuning.md.
"""
from __future__ import annotations

import argparse
import json
import sys
import time

from .dtypes import KEY_DTYPES
from .tuning.policy import MIN_BUCKET, OPS, ROW_BUCKETS, bucket_of, row_bucket

_ROWS = ",".join(f"2^{b}" for b in ROW_BUCKETS)
QUICK = {"dtypes": "uint32,float32", "sizes": "2^10:2^24", "ops": "sort", "budget": 60.0, "repeats": 5,
         "rows": _ROWS}
FULL = {"dtypes": ",".join(KEY_DTYPES), "sizes": "2^10:2^28", "ops": ",".join(OPS), "budget": None,
        "repeats": 10, "rows": _ROWS}


def parse_sizes(text: str) -> list:
    """'2^10:2^24' (every factor of 4) or '2^12,65536' -> sorted buckets (log2)."""
    from .sizes import parse_size

    out = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if ":" in part:
            lo, hi = (bucket_of(parse_size(p)) for p in part.split(":"))
            out.update(range(lo, hi + 1, 2))
        else:
            out.add(bucket_of(parse_size(part)))
    return sorted(b for b in out if b >= MIN_BUCKET)


def parse_rows(text: str) -> list:
    """Row lengths '2^1,2^4,100' -> sorted row buckets (log2); 'none' -> []."""
    from .sizes import parse_size

    if text.strip() == "none":
        return []
    return sorted({row_bucket(parse_size(p.strip())) for p in text.split(",") if p.strip()})


def build_parser(parser=None):
    parser = parser or argparse.ArgumentParser(prog="python -m cudasortkit.tune", description=__doc__,
                                               formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help=f"about a minute: dtypes {QUICK['dtypes']}, sizes {QUICK['sizes']}, "
                             "sort only, each tunable varied alone")
    parser.add_argument("--plugins", default=None, help="comma-separated plugin names (default: all)")
    parser.add_argument("--exclude", default="", help="comma-separated plugin names to leave out")
    parser.add_argument("--in-process", action="store_true",
                        help="tune every plugin in this process (default: one child process per "
                             "GPU plugin, so a plugin that crashes its CUDA context spoils nothing else)")
    parser.add_argument("--plugin-timeout", type=float, default=None,
                        help="seconds per plugin's child process (default: 300 with --quick, none otherwise)")
    parser.add_argument("--dtypes", default=None, help="comma-separated key dtypes")
    parser.add_argument("--sizes", default=None,
                        help="sizes, e.g. 2^10:2^24 (every factor of 4) or 2^12,2^20")
    parser.add_argument("--ops", default=None, help=f"comma-separated, of {', '.join(OPS)}")
    parser.add_argument("--rows", default=None,
                        help="row lengths at which the segmented plugins are measured on uniform "
                             f"rows (2^22 keys in all), e.g. 2^1,2^7,4096, or 'none' (default {_ROWS})")
    parser.add_argument("--budget", type=float, default=None,
                        help="seconds; past it, remaining entries get the default config only")
    parser.add_argument("--repeats", type=int, default=None, help="timed repeats per config")
    parser.add_argument("--host-max", default="2^22",
                        help="largest host-array size whose CPU/GPU costs are measured")
    parser.add_argument("--show", action="store_true", help="print the cached table and exit")
    parser.add_argument("--verbose", "-v", action="store_true", help="with --show: every entry")
    parser.add_argument("--plot", metavar="FILE.png", default=None,
                        help="draw throughput vs size per plugin and dtype (needs matplotlib)")
    parser.add_argument("--check", action="store_true",
                        help="measure the selection bars against the cached table and exit")
    parser.add_argument("--cache-file", default=None,
                        help="read this cache file for --show/--plot (no GPU needed)")
    parser.add_argument("--json", default=None, help="write the sweep summary / check rows here")
    return parser


def _table(args):
    """[(table, path)] for --show/--plot: --cache-file, else this device's
    cache, else (no GPU) every cache file. A file that is not a cache is
    named "corrupt" on stderr, one that is not a regular file (a FIFO, a
    folder) is skipped saying so (SystemExit when no table is left)."""
    from .tuning import cache
    from .device import gpu_available

    if not args.cache_file:
        problem = cache.folder_problem(cache.cache_dir())
        if problem:
            raise SystemExit(problem)
    if not args.cache_file and gpu_available():
        from .tuning.runtime import context

        ctx = context()  # a corrupt file was set aside with a warning: shown empty
        return [(ctx.table, ctx.store.path)]
    paths = [args.cache_file] if args.cache_file else cache.cache_files()
    tables, problems = [], []
    for path in paths:
        try:
            table = cache.load_any(path)
        except cache.CorruptCache as exc:
            problems.append(f"{path}: corrupt tuning cache ({exc})")
            continue
        except cache.NotRegularFile as exc:
            problems.append(f"{path}: {exc}; skipped")
            continue
        except OSError as exc:
            problems.append(f"{path}: cannot read it ({exc})")
            continue
        if table is None:
            problems.append(f"{path}: no such file")
        else:
            tables.append((table, path))
    if not tables:
        raise SystemExit("\n".join(problems) or f"no GPU here and no tuning cache in {cache.cache_dir()}")
    for problem in problems:
        print(problem, file=sys.stderr)
    return tables


def main(argv=None, args=None) -> int:
    args = args or build_parser().parse_args(argv)
    if args.show or (args.plot and not args.quick and not args.plugins and not args.check) or args.cache_file:
        from .tuning.report import plot, show

        for table, path in _table(args):
            if args.show or not args.plot:
                print(show(table, path, args.verbose))
                print()
            if args.plot:
                print(f"plot written to {plot(table, args.plot)}")
        return 0
    from .device import gpu_available, unavailable_reason

    if not gpu_available():
        raise SystemExit(f"tuning needs a GPU: {unavailable_reason()}")
    if args.check:
        from .tune_check import check
        from .tuning.runtime import context

        out = check(context().table, repeats=args.repeats or 10)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(out, f, indent=1, default=str)
        return 0
    return _sweep(args)


def _sweep(args) -> int:
    from . import registry
    from .tuning import runtime

    preset = QUICK if args.quick else FULL
    plugins = registry.plugins()
    if args.plugins:
        names = [n.strip() for n in args.plugins.split(",") if n.strip()]
        unknown = [n for n in names if n not in plugins]
        if unknown:
            raise SystemExit(f"unknown or broken plugins {unknown}; working: {', '.join(sorted(plugins))}")
        chosen = {n: plugins[n] for n in names}
        if "numpy" in plugins:
            chosen.setdefault("numpy", plugins["numpy"])  # host crossover needs it
    else:
        chosen = dict(plugins)
    for name in filter(None, (x.strip() for x in args.exclude.split(","))):
        chosen.pop(name, None)
    dtypes = (args.dtypes or preset["dtypes"]).split(",")
    for d in dtypes:
        if d not in KEY_DTYPES:
            raise SystemExit(f"unknown dtype {d!r}; choose from {', '.join(KEY_DTYPES)}")
    if not args.dtypes and not args.quick:
        dtypes = [d for d in dtypes if any(d in p.dtypes for p in chosen.values() if p.device == "gpu")]
    buckets = parse_sizes(args.sizes or preset["sizes"])
    row_buckets = parse_rows(args.rows or preset["rows"])
    ops = (args.ops or preset["ops"]).split(",")
    for op in ops:
        if op not in OPS:
            raise SystemExit(f"unknown op {op!r}; choose from {', '.join(OPS)}")
    gpu = [n for n, p in chosen.items() if p.device == "gpu"]
    if not gpu:
        raise SystemExit("no working GPU plugin to tune")
    from .sizes import parse_size

    host_max = bucket_of(parse_size(args.host_max))
    budget = args.budget if args.budget is not None else preset["budget"]
    if not args.in_process and len(gpu) > 1:
        return _sweep_isolated(args, sorted(gpu), dtypes, buckets, row_buckets, ops, budget)
    # Sizes of one array for every plugin (those that sort only rows are
    # skipped there, saying so), row lengths for the segmented GPU plugins.
    flat = chosen
    segmented = {n: p for n, p in chosen.items() if p.segmented and p.device == "gpu"}
    if not row_buckets:
        segmented = {}
    sweeps = [(flat, buckets, False), (segmented, row_buckets, True)]
    sweeps = [(p, b, rows) for p, b, rows in sweeps if any(x.device == "gpu" for x in p.values())]
    total = sum(len(ops) * len(dtypes) * len(b) * sum(x.device == "gpu" for x in p.values())
                for p, b, _ in sweeps)
    print(f"tuning {', '.join(sorted(gpu))} | ops {','.join(ops)} | dtypes {','.join(dtypes)} | "
          f"sizes 2^{buckets[0]}..2^{buckets[-1]} | {'quick' if args.quick else 'full'}"
          + (f" | budget {budget:.0f} s" if budget else ""), flush=True)
    progress, log = _progress(total)
    summary = {"seconds": 0.0, "entries": 0, "rejected": 0, "failed": 0, "defaults_only": 0,
               "skipped": []}
    try:
        for plugins_here, buckets_here, rows in sweeps:
            part = runtime.sweep(plugins_here, dtypes, buckets_here, ops,
                                 strategy="quick" if args.quick else "full", budget_s=budget,
                                 host_max_bucket=host_max, repeats=args.repeats or preset["repeats"],
                                 progress=progress, log=log, rows=rows)
            for key in ("seconds", "entries", "rejected", "failed", "defaults_only", "skipped"):
                summary[key] += part[key]
            summary.update(path=part["path"], saved=part["saved"])
    finally:
        if progress is not None:
            progress.close()
    print(f"done in {summary['seconds']:.1f} s: {summary['entries']} entries, "
          f"{summary['rejected']} configs rejected, {summary['failed']} entries failed, "
          f"{summary['defaults_only']} measured at defaults only (budget)")
    for s in summary["skipped"][:20]:
        print(f"  skipped: {s}")
    print(f"cache: {summary['path']}" + ("" if summary["saved"] else " (NOT saved: in memory only)"))
    if len(gpu) > 1:  # children tune one plugin each; the parent compares them
        _arbitrate(chosen, dtypes, buckets, row_buckets, ops)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=1, default=str)
    if args.plot:
        from .tuning.report import plot

        print(f"plot written to {plot(runtime.context().table, args.plot)}")
    return 0


def _arbitrate(plugins, dtypes, buckets, row_buckets, ops) -> None:
    """Re-time the plugins' best configs against each other, interleaved."""
    from .tuning import runtime

    print("--- final comparison of the plugins' best configs (interleaved rounds)", flush=True)
    t0 = time.monotonic()
    try:
        n = runtime.arbitrate(plugins, dtypes, buckets, ops)
        if row_buckets:
            n += runtime.arbitrate({k: p for k, p in plugins.items() if p.segmented}, dtypes,
                                   row_buckets, ops, rows=True)
    except Exception as exc:  # the per-plugin results stay as measured
        print(f"final comparison failed ({type(exc).__name__}: {exc}); keeping the sweep's times")
        return
    print(f"final comparison: {n} entries in {time.monotonic() - t0:.1f} s", flush=True)


def _sweep_isolated(args, names, dtypes, buckets, row_buckets, ops, budget) -> int:
    """One child process per GPU plugin; they merge into the same cache file
    under its lock. A child that crashes or hangs loses only its own plugin."""
    import subprocess

    import signal

    def _terminate(signum, frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, _terminate)
    timeout = args.plugin_timeout or (300.0 if args.quick else None)
    start = time.monotonic()
    failed = []
    for i, name in enumerate(names):
        share = None if budget is None else max(0.0, budget - (time.monotonic() - start)) / (len(names) - i)
        argv = [sys.executable, "-m", "cudasortkit.tune", "--in-process", "--plugins", name,
                "--dtypes", ",".join(dtypes), "--sizes", ",".join(f"2^{b}" for b in buckets),
                "--ops", ",".join(ops), "--host-max", args.host_max,
                "--rows", ",".join(f"2^{b}" for b in row_buckets) or "none"]
        argv += ["--quick"] if args.quick else []
        argv += ["--budget", str(share)] if share is not None else []
        argv += ["--repeats", str(args.repeats)] if args.repeats else []
        print(f"--- {name}", flush=True)
        child = subprocess.Popen(argv)
        try:
            rc = child.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            rc = "timeout"
        finally:
            if child.poll() is None:  # timed out, interrupted or terminated: no orphan on the GPU
                child.kill()
                child.wait()
        if rc != 0:
            failed.append(f"{name} ({'timed out after %.0f s' % timeout if rc == 'timeout' else 'exit %s' % rc})")
    if failed:
        print(f"tuning failed for: {', '.join(failed)}; their entries may be missing or incomplete "
              "(the other plugins' results are cached)")
    from .tuning import runtime

    runtime.reset()
    from . import registry

    plugins = registry.plugins()
    _arbitrate({n: plugins[n] for n in names if n in plugins}, dtypes, buckets, row_buckets, ops)
    if args.plot:
        from .tuning.report import plot

        print(f"plot written to {plot(runtime.context().table, args.plot)}")
    return 0 if len(failed) < len(names) else 1


def _progress(total):
    """A tqdm bar if tqdm is installed (cudasortkit[tune]), else plain lines."""
    try:
        from tqdm import tqdm
    except ImportError:
        return None, lambda msg: print(msg, flush=True)
    bar = tqdm(total=total, unit="entry", dynamic_ncols=True, file=sys.stderr)
    return bar, bar.write


if __name__ == "__main__":
    sys.exit(main())
