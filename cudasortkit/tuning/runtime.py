"""The tuning tables of this process: one Context (cache store) per device
and cache directory, the generation that changes with them, and the sweeps
that fill them (`python -m cudasortkit.cli.tune`). The measured policy
(measured.py) reads them.
"""
from __future__ import annotations

import threading
import time

from .. import settings
from ..sdk import registry
from ..dtypes import itemsize
from ..errors import PluginError
from . import cache
from .policy import OP_SHAPE, ROWS, ROWS_TOTAL_BUCKET, fits, plugin_results

ENV_AUTOTUNE = settings.AUTOTUNE
#: First-run measurement (measured.py's learner) measures at most this bucket
#: (2^26 keys); larger sizes extrapolate.
LAZY_MAX_BUCKET = 26

_lock = threading.RLock()
_contexts: dict = {}
_tuning = threading.local()


def autotune_enabled() -> bool:
    return settings.autotune()


class tuning_now:
    """While active (in this thread), selection never starts a measurement."""

    def __enter__(self):
        _tuning.depth = getattr(_tuning, "depth", 0) + 1

    def __exit__(self, *exc):
        _tuning.depth -= 1


def in_tuning() -> bool:
    return getattr(_tuning, "depth", 0) > 0


class Context:
    """One device's store plus what first-run measurement already attempted."""

    def __init__(self, state, store: cache.Store):
        self.state = state
        self.store = store
        self.attempted: set = set()
        self.lock = threading.RLock()

    @property
    def table(self) -> dict:
        return self.store.data

    def know(self, plugins) -> None:
        """Register current plugin hashes; stale results of a changed plugin are dropped."""
        for name, plugin in plugins.items():
            if name not in self.store.plugin_hashes:
                h = cache.plugin_hash(plugin)
                self.store.plugin_hashes[name] = h
                block = self.store.data["plugins"].get(name)
                if block is not None and block.get("hash") != h:
                    self.store.data["plugins"][name] = {"hash": h, "results": {}}

    def changed(self) -> None:
        _changed()


def context(state=None) -> Context:
    """The tuning context of the current device and cache directory."""
    from ..sdk import registry
    from ..gpu.device import get_device

    state = state or get_device()
    directory = cache.cache_dir()
    key = (directory, state.ordinal)
    with _lock:
        ctx = _contexts.get(key)
        if ctx is None:
            store = cache.Store(directory, cache.device_info(state))
            ctx = _contexts[key] = Context(state, store)
            ctx.know(registry.plugins())
    return ctx


def reset() -> None:
    """Forget every in-memory table (tests; after changing env vars): the
    measured policy's decisions change with generation()."""
    with _lock:
        _contexts.clear()
    _changed()


def generation() -> int:
    """Changes whenever measurements may have changed (a table was written,
    or reset() ran): the measured policy's decisions are keyed on it. It
    reads no environment variable (every call asks): after changing
    CUDASORTKIT_CACHE_DIR or CUDASORTKIT_DEVICE in a running process, call
    reset()."""
    return _generation[0]


_generation = [0]


def _changed() -> None:
    with _lock:
        _generation[0] += 1


# ------------------------------------------------------------ host costs
def _measure_host_bucket(ctx, op, dtype, b, gpu) -> bool:
    """Host costs at bucket b via the GPU plugin measured fastest there."""
    from .tuner import measure_host

    best = None
    for name in gpu:
        e = plugin_results(ctx.table, name).get(op, {}).get(dtype, {}).get(str(b))
        if isinstance(e, dict) and e.get("ms") and (best is None or e["ms"] < best[1]):
            best = (name, e["ms"])
    if best is None:
        return False
    ctx.changed()
    h = measure_host(op, dtype, 1 << b, best[0], best[1])
    ctx.store.put_host(op, dtype, b, {"extra_ms": h["extra_ms"], "via": h["via"],
                                      "gpu_host_ms": h["gpu_host_ms"], "n": h["n"]})
    from ..sdk import registry

    numpy_plugin = registry.plugins().get("numpy")
    if numpy_plugin is not None:
        ctx.know({"numpy": numpy_plugin})
        ctx.store.put("numpy", op, dtype, b, {"ms": h["numpy_ms"], "config": None,
                                              "n": h["n"], "wall": True})
    return True


# ------------------------------------------------------------------- sweeps
def case_shape(op: str, b: int, rows: bool):
    """(table op, n, row length or None) of a sweep's bucket b: n = 2^b keys,
    or with `rows` 2^ROWS_TOTAL_BUCKET keys in rows of 2^b (policy.ROWS)."""
    if rows:
        return op + ROWS, 1 << ROWS_TOTAL_BUCKET, 1 << b
    return op, 1 << b, None


def sweep(plugins: dict, dtypes, buckets, ops=("sort",), *, strategy="quick",
          budget_s: float | None = None, host_max_bucket: int = 22, repeats: int = 5,
          inputs: int = 3, progress=None, log=print, state=None, rows: bool = False) -> dict:
    """Tune every (op, dtype, bucket, plugin) and the host costs; save as it goes.
    With `rows`, the buckets are row lengths of uniform rows (case_shape):
    the segmented plugins are measured, and no host costs.

    Past `budget_s` seconds the remaining entries are measured with the
    default config only (so the table stays complete). Returns a summary.
    """
    from ..sdk.plugin import Request
    from ..sdk.segments import Segments
    from .tuner import Case, Tuner

    ctx = context(state)
    ctx.know(plugins)
    tuner = Tuner(ctx.state, repeats=repeats, warmup=2)
    start = time.monotonic()
    summary = {"entries": 0, "rejected": 0, "failed": 0, "defaults_only": 0, "skipped": []}
    gpu = {n: p for n, p in plugins.items() if p.device == "gpu"}
    plan = {}

    def broken(name, exc: PluginError) -> None:
        """A plugin whose own code failed is tuned no further."""
        del gpu[name]
        summary["skipped"].append(f"{name}: {exc.reason}")

    with ctx.lock, tuning_now():
        for op in ops:
            kind, vb = OP_SHAPE[op]
            for dtype in dtypes:
                for b in sorted(buckets):
                    top, n, row_len = case_shape(op, b, rows)
                    req = Request(kind=kind, dtype=dtype, n=n, value_bytes=vb,
                                  segments=None if row_len is None else
                                  Segments.rows(n // row_len, row_len))
                    todo = {}
                    for name, p in list(gpu.items()):
                        try:
                            reason = registry.call(p, "unsupported", req)
                        except PluginError as exc:
                            broken(name, exc)
                            continue
                        if reason is None:
                            todo[name] = p
                        else:
                            summary["skipped"].append(f"{name} {top} {dtype}: {reason}")
                    if not todo:
                        if progress:
                            progress.update(len(gpu))
                        continue
                    need = n * (itemsize(dtype) + vb) * (inputs + 4)
                    if ctx.state.free_memory() < need:
                        summary["skipped"].append(f"{top} {dtype} 2^{b}: not enough GPU memory")
                        if progress:
                            progress.update(len(gpu))
                        continue
                    case = Case(ctx.state, op, dtype, n, inputs=inputs, row_len=row_len)
                    parts = []
                    try:
                        for name, plugin in sorted(todo.items()):
                            # The budget decides per (plugin, op, dtype) group, at its
                            # first size: compiles happen there, later sizes reuse them.
                            # A plugin's first group is always tuned, so every plugin
                            # gets tuned configs for at least one operation and dtype.
                            group = (name, top, dtype)
                            if group not in plan:
                                first = not any(g[0] == name for g in plan)
                                over = (budget_s is not None and not first
                                        and time.monotonic() - start > budget_s)
                                plan[group] = "default" if over else strategy
                            over = plan[group] == "default" and strategy != "default"
                            try:
                                entry = tuner.tune(plugin, case, plan[group])
                            except PluginError as exc:
                                broken(name, exc)
                                continue
                            summary["defaults_only"] += over
                            summary["entries"] += 1
                            summary["rejected"] += entry.get("rejected_count", 0)
                            if "failed" in entry:
                                summary["failed"] += 1
                                parts.append(f"{name} FAILED ({entry['failed'][:80]})")
                            else:
                                parts.append(f"{name} {entry['ms']:.4f} ms {entry['config']}")
                            ctx.store.put(name, top, dtype, b, entry)
                            if progress:
                                progress.update(1)
                    finally:
                        case.free()
                    ctx.changed()
                    if "numpy" in plugins and b <= host_max_bucket and not rows:
                        try:
                            _measure_host_bucket(ctx, op, dtype, b, todo)
                            h = ctx.table["host"][op][dtype][str(b)]
                            parts.append(f"| host: numpy {plugin_results(ctx.table, 'numpy')[op][dtype][str(b)]['ms']:.4f} ms, "
                                         f"gpu overhead {h['extra_ms']:.4f} ms")
                        except Exception as exc:
                            parts.append(f"| host measurement failed: {type(exc).__name__}: {exc}")
                    if log:
                        log(f"{top:7} {dtype:8} 2^{b:<2}  " + "; ".join(parts))
                    ctx.store.save()  # a crash later loses nothing measured so far
                    ctx.changed()
    summary["seconds"] = time.monotonic() - start
    summary["path"] = ctx.store.path
    summary["saved"] = not ctx.store.read_only
    return summary


def arbitrate(plugins: dict, dtypes, buckets, ops=("sort",), *, rounds: int = 3, repeats: int = 5,
              inputs: int = 3, log=print, state=None, rows: bool = False) -> int:
    """Final word between plugins: per (op, dtype, bucket), time every GPU
    plugin's cached best config again, in one process, in alternating rounds
    (tuner.race), and store those times as the entries' `ms`. Sweeps tune
    plugins one after another (in child processes by default), and drift
    between them (clocks, host load) was as large as the 10-30% by which
    plugins differ at 2^16-2^22 keys. Returns the number of entries updated."""
    from .tuner import Case, Rejected, Tuner, race

    ctx = context(state)
    ctx.know(plugins)
    gpu = {n: p for n, p in plugins.items() if p.device == "gpu"}
    tuner = Tuner(ctx.state, repeats=repeats, warmup=2)
    updated = 0
    with ctx.lock, tuning_now():
        for op in ops:
            for dtype in dtypes:
                for b in sorted(buckets):
                    top, n, row_len = case_shape(op, b, rows)
                    entries = {}
                    for name in sorted(gpu):
                        e = plugin_results(ctx.table, name).get(top, {}).get(dtype, {}).get(str(b))
                        if (isinstance(e, dict) and e.get("ms") and not e.get("failed")
                                and isinstance(e.get("config"), dict) and fits(e["config"], gpu[name])):
                            entries[name] = e
                    if len(entries) < 2:
                        continue
                    case = Case(ctx.state, op, dtype, n, inputs=inputs, row_len=row_len)
                    try:
                        runners = {}
                        for name, e in entries.items():
                            try:
                                tuner.verify(gpu[name], case, e["config"])  # compiles, checks once
                            except Rejected as exc:
                                if log:
                                    log(f"  arbitration: {name} {top} {dtype} 2^{b} skipped: {exc}")
                                continue
                            runners[name] = (lambda plg, cfg: lambda i: case.run(plg, cfg, i))(
                                gpu[name], e["config"])
                        times = race(runners, inputs=inputs, rounds=rounds, repeats=repeats)
                    finally:
                        case.free()
                    for name, ms in times.items():
                        e = entries[name]  # sweep_ms: the time the config was chosen by
                        entry = dict(e, ms=ms, sweep_ms=e.get("sweep_ms", e["ms"]), arbitrated=True)
                        ctx.store.put(name, top, dtype, b, entry)
                        updated += 1
                    if log:
                        log(f"{top:7} {dtype:8} 2^{b:<2}  " + ", ".join(
                            f"{k} {v:.4f}" for k, v in sorted(times.items(), key=lambda kv: kv[1])))
                    ctx.changed()
            ctx.store.save()
    ctx.changed()
    return updated
