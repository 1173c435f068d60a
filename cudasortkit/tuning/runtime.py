"""The tuner inside the library: the `select` hooks, lazy first-run tuning,
sweeps and `explain`.

`auto_policy` and `configure` are installed into cudasortkit.select on the
first selection (select._load_tuning). Both are cheap on the hot path: a
decision is memoised per request shape until the table changes, and nothing
here touches the GPU unless a GPU plugin is a candidate.
"""
from __future__ import annotations

import os
import threading
import time

from .. import registry
from ..dtypes import itemsize
from ..errors import PluginError
from . import cache
from .policy import (OP_SHAPE, Decision, bucket_of, decide, estimate, fits, op_of,
                     points, plugin_results)

ENV_AUTOTUNE = "CUDASORTKIT_AUTOTUNE"
ENV_BUDGET = "CUDASORTKIT_AUTOTUNE_BUDGET"
#: Lazy tuning measures at most this bucket (2^26 keys); larger sizes extrapolate.
LAZY_MAX_BUCKET = 26
#: Lazy tuning measures host costs (copies, NumPy's own sort) up to 2^20 keys:
#: past that NumPy takes seconds to time and the GPU wins by far; estimates
#: for larger host arrays extrapolate from the measured sizes.
LAZY_HOST_MAX_BUCKET = 20

_lock = threading.RLock()
_contexts: dict = {}
_memo: dict = {}
_MEMO_MAX = 4096
_tuning = threading.local()
_environ = os.environ


def autotune_enabled() -> bool:
    return os.environ.get(ENV_AUTOTUNE, "1").strip().lower() not in ("0", "off", "false", "no")


def lazy_budget_s() -> float:
    try:
        return max(0.0, float(os.environ.get(ENV_BUDGET, "1.0")))
    except ValueError:
        return 1.0


class tuning_now:
    """While active (in this thread), selection never starts lazy tuning."""

    def __enter__(self):
        _tuning.depth = getattr(_tuning, "depth", 0) + 1

    def __exit__(self, *exc):
        _tuning.depth -= 1


def _in_tuning() -> bool:
    return getattr(_tuning, "depth", 0) > 0


class Context:
    """One device's store plus what lazy tuning already attempted."""

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
        forget_decisions()


def context(state=None) -> Context:
    """The tuning context of the current device and cache directory."""
    from .. import registry
    from ..device import get_device

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
    """Forget every in-memory table and decision (tests; after changing env vars)."""
    with _lock:
        _contexts.clear()
        _pending.clear()
    forget_decisions()


def forget_decisions() -> None:
    """Every memoised choice: this module's, select's and api's host fast path."""
    _memo.clear()
    from .. import select

    select.forget_decisions()


# ------------------------------------------------------------------ hooks
def _memo_key(request, names) -> tuple:
    return (os.environ.get(cache.ENV_DIR), os.environ.get("CUDASORTKIT_DEVICE"),
            os.environ.get(ENV_AUTOTUNE), request.kind, request.dtype, request.n,
            request.value_bytes, request.on_device, names)


_NONE = object()
_pending: set = set()


def auto_policy(request, candidates: dict):
    """select.policy: (plugin, config) with the best measured time, or None
    (then select's documented fallback rule decides)."""
    if not any(p.device == "gpu" for p in candidates.values()):
        return None
    key = _memo_key(request, tuple(candidates))
    hit = _memo.get(key)
    if hit is not None:
        return None if hit is _NONE else hit
    try:
        ctx = context()
        ctx.know(candidates)
        settled = True
        if autotune_enabled() and not _in_tuning():
            settled = lazy_fill(ctx, request, candidates)
        decision = decide(ctx.table, request, candidates)
    except PluginError:
        raise  # a candidate's own code failed: select chooses again without it
    except Exception as exc:  # selection must never fail because of tuning
        cache.warn_once("policy", f"cudasortkit: tuned selection failed ({type(exc).__name__}: {exc}); "
                                  "using the default rule")
        return None
    result = _NONE if decision is None else (candidates[decision.name], decision.config)
    fast = _fast_key(request)
    if not settled:  # lazy tuning continues on the next call
        _pending.add(fast)
        return None if result is _NONE else result
    _pending.discard(fast)
    if len(_memo) > _MEMO_MAX:
        _memo.clear()
    _memo[key] = result
    if fast is not None and result is not _NONE:
        _memo[fast] = result
    return None if result is _NONE else result


def _fast_key(request):
    """Key of a whole request (candidates follow from it and the registry), or None.

    Kept small on purpose (it is computed on every auto call): the cache dir
    is in it; the device and CUDASORTKIT_AUTOTUNE are not (reset() after
    changing those in a running process)."""
    if request.options:
        return None
    table = registry._entries
    return (registry.generation, len(table) if table is not None else 0, _environ.get(cache.ENV_DIR),
            request.kind, request.dtype, request.n, request.value_bytes, request.on_device,
            request.stable, request.descending, request.key_range)


def cached(request):
    """select's fast path: the decision already made for this exact request, or None.

    Skips computing the usable plugins again for repeated request shapes
    (what makes auto on tiny host arrays cost about what NumPy does)."""
    key = _fast_key(request)
    return None if key is None else _memo.get(key)


def pending(request) -> bool:
    """True while lazy tuning for this request shape is unfinished (the
    choice may still change on the next call)."""
    return _fast_key(request) in _pending


auto_policy.cached = cached
auto_policy.pending = pending
auto_policy.shape_key = _fast_key  # select memoises its own choices under it


def configure(request, plugin):
    """select.configure: the tuned config of a plugin asked for by name (None: defaults).

    Only reads the cache (the nearest measured size's config): asking for a
    plugin by name never starts tuning, so it stays predictable."""
    if plugin.device != "gpu":
        return None
    key = ("by-name", plugin.name) + _memo_key(request, ())
    hit = _memo.get(key)
    if hit is not None:
        return None if hit is _NONE else dict(hit)
    try:
        ctx = context()
        ctx.know({plugin.name: plugin})
        est = estimate(ctx.table, plugin.name, plugin, request)
    except PluginError:
        raise  # the plugin's own code failed: select refuses it by name
    except Exception as exc:
        cache.warn_once("configure", f"cudasortkit: reading tuned configs failed "
                                     f"({type(exc).__name__}: {exc}); using defaults")
        return None
    config = est.config if est is not None else None
    _memo[key] = _NONE if config is None else config
    return None if config is None else dict(config)


def install() -> None:
    """Put the hooks into cudasortkit.select (unless something else is there)."""
    from .. import select

    if select.policy is None:
        select.policy = auto_policy
    if getattr(select, "configure", None) is None:
        select.configure = configure


# -------------------------------------------------------------- lazy tuning
def _has(table, name, op, dtype, bucket) -> bool:
    entry = plugin_results(table, name).get(op, {}).get(dtype, {}).get(str(bucket))
    return isinstance(entry, dict)


def lazy_fill(ctx: Context, request, candidates: dict, host: bool = True) -> bool:
    """Tune the (plugin, op, dtype, bucket) entries this request needs and the
    cache lacks, within about lazy_budget_s(); then save.

    Plugins go in the fallback order (likely fastest first); each gets at
    least its default config measured, and once the budget is spent the rest
    wait for later calls, so one call pays about one budget (plus compiles)."""
    op, dtype = op_of(request), request.dtype
    b = bucket_of(request.n)
    if b > LAZY_MAX_BUCKET:
        return True
    table = ctx.table
    gpu = {n: p for n, p in candidates.items() if p.device == "gpu"}
    from ..select import FALLBACK_ORDER

    order = sorted(gpu, key=lambda n: (FALLBACK_ORDER.index(n) if n in FALLBACK_ORDER else 99, n))
    missing = [n for n in order if not _has(table, n, op, dtype, b)
               and (n, op, dtype, b) not in ctx.attempted]
    need_host = (host and not request.on_device and "numpy" in candidates
                 and b <= LAZY_HOST_MAX_BUCKET and not points(table.get("host", {}).get(op, {}).get(dtype), "extra_ms").get(b)
                 and ("host", op, dtype, b) not in ctx.attempted)
    if not missing and not need_host:
        return True
    with ctx.lock, tuning_now():
        try:
            _lazy_measure(ctx, op, dtype, b, missing, gpu, need_host)
        except PluginError:
            raise  # a candidate's own code failed: select chooses again without it
        except Exception as exc:
            for name in missing:
                ctx.attempted.add((name, op, dtype, b))
            cache.warn_once(f"lazy:{op}:{dtype}:{b}",
                            f"cudasortkit: first-run tuning of {op} {dtype} 2^{b} failed "
                            f"({type(exc).__name__}: {str(exc)[:200]}); using defaults there")
        finally:
            ctx.changed()
    return all((n, op, dtype, b) in ctx.attempted for n in missing)


def _lazy_measure(ctx, op, dtype, b, missing, gpu, need_host) -> None:
    from .tuner import Case, Tuner

    budget = lazy_budget_s()
    start = time.monotonic()
    n = 1 << b
    state = ctx.state
    if state.free_memory() < 8 * n * (8 + 8):
        for name in missing:
            ctx.attempted.add((name, op, dtype, b))
        return
    case = Case(state, op, dtype, n, inputs=2) if missing else None
    try:
        tuner = Tuner(state, repeats=3, warmup=1)
        for i, name in enumerate(missing):
            if i and time.monotonic() - start > budget:
                break  # the rest is tuned by later calls, about a budget each
            ctx.attempted.add((name, op, dtype, b))
            left = budget - (time.monotonic() - start)
            deadline = time.monotonic() + max(0.0, left) / (len(missing) - i)
            entry = tuner.tune(gpu[name], case, "quick", deadline)
            entry["lazy"] = True
            ctx.store.put(name, op, dtype, b, entry)
    finally:
        if case is not None:
            case.free()
    if need_host and _measure_host_bucket(ctx, op, dtype, b, gpu):
        ctx.attempted.add(("host", op, dtype, b))
    ctx.store.save()


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
    from .. import registry

    numpy_plugin = registry.plugins().get("numpy")
    if numpy_plugin is not None:
        ctx.know({"numpy": numpy_plugin})
        ctx.store.put("numpy", op, dtype, b, {"ms": h["numpy_ms"], "config": None,
                                              "n": h["n"], "wall": True})
    return True


# ------------------------------------------------------------------- sweeps
def sweep(plugins: dict, dtypes, buckets, ops=("sort",), *, strategy="quick",
          budget_s: float | None = None, host_max_bucket: int = 22, repeats: int = 5,
          inputs: int = 3, progress=None, log=print, state=None) -> dict:
    """Tune every (op, dtype, bucket, plugin) and the host costs; save as it goes.

    Past `budget_s` seconds the remaining entries are measured with the
    default config only (so the table stays complete). Returns a summary.
    """
    from ..plugin import Request
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
                    n = 1 << b
                    req = Request(kind=kind, dtype=dtype, n=n, value_bytes=vb)
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
                            summary["skipped"].append(f"{name} {op} {dtype}: {reason}")
                    if not todo:
                        if progress:
                            progress.update(len(gpu))
                        continue
                    need = n * (itemsize(dtype) + vb) * (inputs + 4)
                    if ctx.state.free_memory() < need:
                        summary["skipped"].append(f"{op} {dtype} 2^{b}: not enough GPU memory")
                        if progress:
                            progress.update(len(gpu))
                        continue
                    case = Case(ctx.state, op, dtype, n, inputs=inputs)
                    parts = []
                    try:
                        for name, plugin in sorted(todo.items()):
                            # The budget decides per (plugin, op, dtype) group, at its
                            # first size: compiles happen there, later sizes reuse them.
                            # A plugin's first group is always tuned, so every plugin
                            # gets tuned configs for at least one operation and dtype.
                            group = (name, op, dtype)
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
                            ctx.store.put(name, op, dtype, b, entry)
                            if progress:
                                progress.update(1)
                    finally:
                        case.free()
                    ctx.changed()
                    if "numpy" in plugins and b <= host_max_bucket:
                        try:
                            _measure_host_bucket(ctx, op, dtype, b, todo)
                            h = ctx.table["host"][op][dtype][str(b)]
                            parts.append(f"| host: numpy {plugin_results(ctx.table, 'numpy')[op][dtype][str(b)]['ms']:.4f} ms, "
                                         f"gpu overhead {h['extra_ms']:.4f} ms")
                        except Exception as exc:
                            parts.append(f"| host measurement failed: {type(exc).__name__}: {exc}")
                    if log:
                        log(f"{op:7} {dtype:8} 2^{b:<2}  " + "; ".join(parts))
                    ctx.store.save()  # a crash later loses nothing measured so far
                    ctx.changed()
    summary["seconds"] = time.monotonic() - start
    summary["path"] = ctx.store.path
    summary["saved"] = not ctx.store.read_only
    return summary


def arbitrate(plugins: dict, dtypes, buckets, ops=("sort",), *, rounds: int = 3, repeats: int = 5,
              inputs: int = 3, log=print, state=None) -> int:
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
                    entries = {}
                    for name in sorted(gpu):
                        e = plugin_results(ctx.table, name).get(op, {}).get(dtype, {}).get(str(b))
                        if (isinstance(e, dict) and e.get("ms") and not e.get("failed")
                                and isinstance(e.get("config"), dict) and fits(e["config"], gpu[name])):
                            entries[name] = e
                    if len(entries) < 2:
                        continue
                    case = Case(ctx.state, op, dtype, 1 << b, inputs=inputs)
                    try:
                        runners = {}
                        for name, e in entries.items():
                            try:
                                tuner.verify(gpu[name], case, e["config"])  # compiles, checks once
                            except Rejected as exc:
                                if log:
                                    log(f"  arbitration: {name} {op} {dtype} 2^{b} skipped: {exc}")
                                continue
                            runners[name] = (lambda plg, cfg: lambda i: case.run(plg, cfg, i))(
                                gpu[name], e["config"])
                        times = race(runners, inputs=inputs, rounds=rounds, repeats=repeats)
                    finally:
                        case.free()
                    for name, ms in times.items():
                        e = entries[name]  # sweep_ms: the time the config was chosen by
                        entry = dict(e, ms=ms, sweep_ms=e.get("sweep_ms", e["ms"]), arbitrated=True)
                        ctx.store.put(name, op, dtype, b, entry)
                        updated += 1
                    if log:
                        log(f"{op:7} {dtype:8} 2^{b:<2}  " + ", ".join(
                            f"{k} {v:.4f}" for k, v in sorted(times.items(), key=lambda kv: kv[1])))
                    ctx.changed()
            ctx.store.save()
    ctx.changed()
    return updated


# ------------------------------------------------------------------ explain
def explain(a, *, kind: str = "sort", values=None, descending: bool = False, stable: bool = False,
            algorithm: str = "auto", key_range=None) -> Decision:
    """Which plugin and config `algorithm` would use for `a`, and why.

    kind is "sort", "argsort" or "pairs" (pass `values`). Nothing is tuned or
    sorted; where nothing is measured yet, it says what the first sort will do.
    """
    from .. import select
    from ..execute import make_request
    from ..arrays import Operand
    from ..plugin import REQUEST_KINDS

    if kind not in REQUEST_KINDS:
        raise ValueError(f"kind must be one of {', '.join(map(repr, REQUEST_KINDS))}, got {kind!r}")
    if kind == "pairs" and values is None:
        raise ValueError("kind='pairs' needs values= (the payload sorted along with the keys); "
                         "without values, kind is 'sort' or 'argsort'")
    select._load_tuning()
    req = make_request(kind, Operand(a, "a"), None if values is None else Operand(values, "values"),
                       descending, stable or kind == "pairs", key_range)
    if algorithm != "auto":
        plugin = select._by_name(req, algorithm)
        if plugin.device != "gpu":
            return Decision(plugin.name, None, None, "asked for by name (CPU plugin, no tunables)")
        ctx = context()
        ctx.know({plugin.name: plugin})
        est = estimate(ctx.table, plugin.name, plugin, req)
        if est is None:
            return Decision(plugin.name, None, None, "asked for by name; not measured here yet: "
                            + _first_run_note())
        return Decision(plugin.name, est.config, est.ms,
                        "asked for by name; tuned config of the nearest measured size", [est])
    candidates = select.usable(req)
    if not candidates:
        raise ValueError(f"no algorithm can serve this request ({req.kind} {req.dtype})")
    if not any(p.device == "gpu" for p in candidates.values()):
        name = select._fallback(req, candidates).name
        return Decision(name, None, None, "no GPU plugin can run here"
                        + ("" if "gpu" in {p.device for p in candidates.values()} else
                           f" ({select.unavailable_reason() or 'none serves this request'})"))
    ctx = context()
    ctx.know(candidates)
    d = decide(ctx.table, req, candidates)
    if d is None:
        name = select._fallback(req, candidates).name
        return Decision(name, None, None, "nothing measured for this request on this device yet; "
                        "the default rule picks it. " + _first_run_note())
    missing = [n for n, p in candidates.items() if p.device == "gpu"
               and not _has(ctx.table, n, op_of(req), req.dtype, bucket_of(req.n))]
    if missing and autotune_enabled() and bucket_of(req.n) <= LAZY_MAX_BUCKET:
        d.reason += f"; the first sort will tune {', '.join(sorted(missing))} at 2^{bucket_of(req.n)} (lazy)"
    return d


def _first_run_note() -> str:
    if autotune_enabled():
        return "the first sort tunes it (about a second) and caches the result"
    return f"{ENV_AUTOTUNE}=0, so default configs are used"
