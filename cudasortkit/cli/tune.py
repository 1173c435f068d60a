"""``python -m cudasortkit.tune``: measure every plugin on this GPU and cache
the best configs, so algorithm="auto" (and plugins asked for by name) use them.

    python -m cudasortkit.tune --quick          # under a minute: 2 dtypes, sizes 2^10-2^24, rows
    python -m cudasortkit.tune                  # full sweep (long)
    python -m cudasortkit.tune --show           # print the cached table
    python -m cudasortkit.tune --plot tune.png  # throughput vs size (matplotlib)
    python -m cudasortkit.tune --check          # the selection bars, measured now
    python -m cudasortkit.tune --kinds --quick  # selection, multikey and search plugins

See docs/tuning.md.
"""
from __future__ import annotations

import argparse
import json
import sys
import time

from ..dtypes import KEY_DTYPES
from ..tuning.policy import MIN_BUCKET, OPS, ROW_BUCKETS, bucket_of, row_bucket

_ROWS = ",".join(f"2^{b}" for b in ROW_BUCKETS)
QUICK = {"dtypes": "uint32,float32", "sizes": "2^10:2^24", "ops": "sort", "budget": None, "repeats": 5,
         "rows": _ROWS}
FULL = {"dtypes": ",".join(KEY_DTYPES), "sizes": "2^10:2^28", "ops": ",".join(OPS), "budget": None,
        "repeats": 10, "rows": _ROWS}


def parse_sizes(text: str) -> list:
    """'2^10:2^24' (every factor of 4) or '2^12,65536' -> sorted buckets (log2)."""
    from ..settings import parse_size

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
    from ..settings import parse_size

    if text.strip() == "none":
        return []
    return sorted({row_bucket(parse_size(p.strip())) for p in text.split(",") if p.strip()})


def build_parser(parser=None):
    parser = parser or argparse.ArgumentParser(prog="python -m cudasortkit.tune", description=__doc__,
                                               formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help=f"dtypes {QUICK['dtypes']}, sizes {QUICK['sizes']} (every factor of 4) and "
                             f"rows of {_ROWS} keys (2^22 in all), sort only: every plugin's default "
                             "config, each tunable varied alone, then the winners combined, every "
                             "entry; in this process; under a minute on an H100 (see docs/tuning.md)")
    parser.add_argument("--kinds", nargs="?", const="all", default=None, metavar="KINDS",
                        help="measure the plugins of the other kinds instead of the sorts: "
                             "selection, multikey, search (comma-separated; default all), on a "
                             "grid of shapes (--quick: a small one); auto then chooses among them "
                             "from these measurements (see docs/tuning.md)")
    parser.add_argument("--plugins", default=None, help="comma-separated plugin names (default: all)")
    parser.add_argument("--exclude", default="", help="comma-separated plugin names to leave out")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--in-process", action="store_true",
                       help="tune every plugin in this process (the default with --quick)")
    where.add_argument("--isolate", action="store_true",
                       help="one child process per GPU plugin, so a plugin that crashes its CUDA "
                            "context spoils nothing else (the default without --quick)")
    where.add_argument("--child", action="store_true", help=argparse.SUPPRESS)  # one plugin's share
    parser.add_argument("--plugin-timeout", type=float, default=None,
                        help="seconds per plugin's child process (default: none)")
    parser.add_argument("--dtypes", default=None, help="comma-separated key dtypes")
    parser.add_argument("--sizes", default=None,
                        help="sizes, e.g. 2^10:2^24 (every factor of 4) or 2^12,2^20")
    parser.add_argument("--ops", default=None, help=f"comma-separated, of {', '.join(OPS)}")
    parser.add_argument("--rows", default=None,
                        help="row lengths at which the segmented plugins are measured on uniform "
                             f"rows (2^22 keys in all), e.g. 2^1,2^7,4096, or 'none' (default {_ROWS})")
    parser.add_argument("--budget", type=float, default=None,
                        help="seconds; past it, (plugin, op, dtype) groups not yet started measure "
                             "their default config only (default: no budget)")
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
    from ..tuning import cache
    from ..gpu.device import gpu_available

    if not args.cache_file:
        problem = cache.folder_problem(cache.cache_dir())
        if problem:
            raise SystemExit(problem)
    if not args.cache_file and gpu_available():
        from ..tuning.runtime import context

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
        from ..tuning.report import plot, show

        for table, path in _table(args):
            if args.show or not args.plot:
                print(show(table, path, args.verbose))
                print()
            if args.plot:
                print(f"plot written to {plot(table, args.plot)}")
        return 0
    from ..gpu.device import gpu_available, unavailable_reason

    if not gpu_available():
        raise SystemExit(f"tuning needs a GPU: {unavailable_reason()}")
    if args.check:
        from .tune_check import check
        from ..tuning.runtime import context

        out = check(context().table, repeats=args.repeats or 10)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(out, f, indent=1, default=str)
        return 0
    if args.kinds:
        from .tune_kinds import main as kinds_main

        return kinds_main(args)
    return _sweep(args)


def _sweep(args) -> int:
    from ..sdk import registry
    from ..gpu.device import current_limits
    from ..tuning import runtime

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
    gpu = sorted(n for n, p in chosen.items() if p.device == "gpu")
    if not gpu:
        raise SystemExit("no working GPU plugin to tune")
    from ..settings import parse_size

    host_max = None if args.child or "numpy" not in chosen else bucket_of(parse_size(args.host_max))
    budget = args.budget if args.budget is not None else preset["budget"]
    strategy = "quick" if args.quick else "full"
    limits = current_limits()  # (read without a CUDA context: children make their own)
    # Sizes of one array for every GPU plugin (those that sort only rows
    # decline them: skipped, said once), row lengths for the segmented ones.
    flat = {n: chosen[n] for n in gpu}
    segmented = {n: p for n, p in flat.items() if p.segmented} if row_buckets else {}
    work = runtime.plan(flat, dtypes, buckets, ops, strategy=strategy, limits=limits)
    if segmented:
        work = work + runtime.plan(segmented, dtypes, row_buckets, ops, strategy=strategy,
                                   limits=limits, rows=True)
    measured = sorted(work.plugins())
    isolate = not args.child and len(measured) > 1 and (args.isolate or not (args.quick or args.in_process))
    repeats = args.repeats or preset["repeats"]
    if args.child:
        return _child(args, work, budget, repeats)
    print(f"tuning {', '.join(measured) or 'nothing'} | ops {','.join(ops)} | dtypes {','.join(dtypes)} | "
          f"sizes 2^{buckets[0]}..2^{buckets[-1]}" + (f", rows {args.rows or preset['rows']}" if segmented else "")
          + f" | {strategy} | {'one process per plugin' if isolate else 'in this process'}"
          + (f" | budget {budget:.0f} s" if budget else ""), flush=True)
    progress = _progress(work.units())
    try:
        if isolate:
            same = ["--dtypes", ",".join(dtypes), "--sizes", ",".join(f"2^{b}" for b in buckets),
                    "--ops", ",".join(ops), "--rows", ",".join(f"2^{b}" for b in row_buckets) or "none"]
            summary = _sweep_isolated(args, work, same, budget, host_max, progress)
        else:
            summary = runtime.run_plan(work, budget_s=budget, host_max_bucket=host_max, repeats=repeats,
                                       progress=progress, log=progress.write, compare=len(measured) > 1)
    finally:
        progress.close()
    print(f"done in {summary['seconds']:.1f} s: {summary['entries']} entries, "
          f"{summary['rejected']} configs rejected, {summary['failed']} entries failed"
          + (f", {summary['defaults_only']} measured at their default config only (budget)"
             if summary["defaults_only"] else ""))
    for line in summary["skipped"]:
        print(f"  {line}")
    if summary.get("phases"):
        from ..tuning.phases import lines

        for line in lines(summary["phases"]):
            print(line)
    print(f"cache: {summary['path']}" + ("" if summary["saved"] else " (NOT saved: in memory only)"))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=1, default=str)
    if args.plot:
        from ..tuning.report import plot

        print(f"plot written to {plot(runtime.context().table, args.plot)}")
    return 0 if summary.get("ok", True) else 1


#: Lines a child process (--child) writes for its parent, besides log lines.
MARK = "@cudasortkit-tune:"


class _Relay:
    """A child's progress: told to the parent on stdout (MARK lines)."""

    def update(self, n=1):
        print(f"{MARK}progress {int(n)}", flush=True)

    def grow(self, n):
        print(f"{MARK}grow {int(n)}", flush=True)

    def write(self, msg):
        print(msg, flush=True)

    def close(self):
        pass


def _child(args, work, budget, repeats) -> int:
    """One plugin's share of an isolated sweep: measured, cached, reported
    to the parent (which compares plugins and measures host costs)."""
    from ..tuning import runtime

    relay = _Relay()
    summary = runtime.run_plan(work, budget_s=budget, host_max_bucket=None, repeats=repeats,
                               progress=relay, log=relay.write, compare=False)
    print(MARK + "summary " + json.dumps(summary, default=str), flush=True)
    return 0


def _sweep_isolated(args, work, same: list, budget, host_max, progress) -> dict:
    """One child process per GPU plugin (tune --child), one after another;
    they merge into the same cache file under its lock, and report their
    progress to this process's one bar. A child that crashes or hangs loses
    only its own plugin. Then this process compares the plugins' best
    configs (runtime.compare) and measures the host costs."""
    import signal
    import subprocess
    import threading

    from ..tuning import runtime

    def _terminate(signum, frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, _terminate)
    timeout = args.plugin_timeout
    start = time.monotonic()
    total = {"seconds": 0.0, "entries": 0, "rejected": 0, "failed": 0, "defaults_only": 0,
             "skipped": [], "path": None, "saved": True}
    failed, skipped, children_skipped = [], list(work.skipped), []
    names = sorted(work.plugins())
    for i, name in enumerate(names):
        share = None if budget is None else max(0.0, budget - (time.monotonic() - start)) / (len(names) - i)
        argv = [sys.executable, "-m", "cudasortkit.tune", "--child", "--plugins", name] + same
        argv += ["--quick"] if args.quick else []
        argv += ["--budget", str(share)] if share is not None else []
        argv += ["--repeats", str(args.repeats)] if args.repeats else []
        count = {"expected": work.units(name, finish=False), "got": 0}
        progress.write(f"--- {name} (child process)")
        child = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, bufsize=1)
        summary = {}

        def relay():
            for line in child.stdout:
                line = line.rstrip("\n")
                if not line.startswith(MARK):
                    progress.write(line)
                    continue
                what, _, value = line[len(MARK):].partition(" ")
                if what == "progress":
                    count["got"] += int(value)
                    progress.update(int(value))
                elif what == "grow":
                    count["expected"] += int(value)
                    progress.grow(int(value))
                elif what == "summary":
                    summary.update(json.loads(value))

        reader = threading.Thread(target=relay, daemon=True)
        reader.start()
        try:
            rc = child.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            rc = "timeout"
        finally:
            if child.poll() is None:  # timed out, interrupted or terminated: no orphan on the GPU
                child.kill()
                child.wait()
            reader.join(timeout=10)
        progress.update(max(0, count["expected"] - count["got"]))  # what a failed child left undone
        if rc != 0:
            failed.append(f"{name} ({'timed out after %.0f s' % timeout if rc == 'timeout' else 'exit %s' % rc})")
        for key in ("entries", "rejected", "failed", "defaults_only"):
            total[key] += summary.get(key, 0)
        total["path"] = summary.get("path", total["path"])
        children_skipped += summary.get("skipped", [])
        total["saved"] = total["saved"] and summary.get("saved", True)
    runtime.reset()  # the children wrote the cache file: read it again
    from ..sdk import registry

    plugins = registry.plugins()
    live = {n for n in names if n in plugins}
    progress.write("--- final comparison of the plugins' best configs (interleaved rounds) "
                   "and host costs")
    try:
        runtime.compare(work.only(live), host_max_bucket=host_max, repeats=args.repeats or 5,
                        progress=progress, log=progress.write)
    except Exception as exc:  # the children's results stay as measured
        progress.write(f"final comparison failed ({type(exc).__name__}: {exc}); keeping the sweep's times")
    progress.update(max(0, len(work.cells) - len(work.only(live).cells)))
    if failed:
        progress.write(f"tuning failed for: {', '.join(failed)}; their entries may be missing or "
                       "incomplete (the other plugins' results are cached)")
    skipped += [(n, "*", "*", None, f"failed and is out of service: {r}") for n, r in work.broken.items()]
    total["skipped"] = runtime.skip_lines(skipped)
    total["skipped"] += [line for line in children_skipped if line not in total["skipped"]]
    total["seconds"] = time.monotonic() - start
    total["path"] = total["path"] or runtime.context().store.path
    total["ok"] = len(failed) < len(names)
    return total


class _Bar:
    """The sweep's one progress bar (tqdm, with its ETA), or plain lines
    where tqdm is not installed (pip install cudasortkit[tune])."""

    def __init__(self, total: int):
        try:
            from tqdm import tqdm
        except ImportError:
            self.bar = None
        else:
            self.bar = tqdm(total=total, unit="config", dynamic_ncols=True, file=sys.stderr,
                            desc="tuning")

    def update(self, n=1):
        if self.bar is not None and n:
            self.bar.update(n)

    def grow(self, n):
        """n more units than planned (the quick strategy's combinations)."""
        if self.bar is not None and n:
            self.bar.total += n
            self.bar.refresh()

    def write(self, msg):
        if self.bar is None:
            print(msg, flush=True)
        else:
            self.bar.write(msg)

    def close(self):
        if self.bar is not None:
            self.bar.close()


def _progress(total: int) -> _Bar:
    return _Bar(total)


if __name__ == "__main__":
    sys.exit(main())
