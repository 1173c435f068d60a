"""The tuning tables of this process: one Context (cache store) per device
and cache directory, the generation that changes with them, and the sweeps
that fill them (`python -m cudasortkit.tune`). The measured policy
(measured.py) reads them.
"""
from __future__ import annotations

import functools
import operator
import re
import threading
import time
from dataclasses import dataclass, field

from .. import settings
from ..sdk import registry
from ..dtypes import itemsize
from ..errors import PluginError
from . import cache
from .phases import NoPhases, Phases
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
    """The tuning context of `state`'s device (None: the call's device,
    gpu.device.active_device) and the cache directory."""
    from ..sdk import registry
    from ..gpu.device import active_device

    state = state or active_device()
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


_generation = [0]
#: generation(): changes whenever measurements may have changed (a table was
#: written, or reset() ran): the measured policy's decisions are keyed on it.
#: It reads no environment variable (every call asks): after changing
#: CUDASORTKIT_CACHE_DIR or CUDASORTKIT_DEVICE in a running process, call
#: reset(). A C call (_generation[0]), no Python frame: every call's memo
#: key reads it, and a 1,000-key host sort takes some 4 us in all.
generation = functools.partial(operator.getitem, _generation, 0)


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


@dataclass
class Cell:
    """One (op, dtype, size) of a sweep and what is measured there: `work`
    maps a plugin's name to (plugin, strategy, configs)."""

    op: str
    dtype: str
    b: int
    rows: bool
    work: dict

    @property
    def shape(self):
        return case_shape(self.op, self.b, self.rows)

    def units(self, name=None) -> int:
        """Progress units of its configs (one plugin's, or all)."""
        return sum(len(configs) for n, (_, _, configs) in self.work.items() if name in (None, n))


@dataclass
class Plan:
    """A sweep worked out before anything runs: the cells, and what was
    skipped there, (plugin, op, dtype, bucket, reason) (skip_lines says
    it once per plugin and reason)."""

    cells: list = field(default_factory=list)
    skipped: list = field(default_factory=list)
    broken: dict = field(default_factory=dict)  # name -> reason (PluginError)

    def __add__(self, other: "Plan") -> "Plan":
        order = {}
        for c in self.cells + other.cells:  # dtype by dtype (Inputs are per dtype)
            order.setdefault(c.dtype, len(order))
        cells = sorted(self.cells + other.cells, key=lambda c: (order[c.dtype], c.op, c.rows, c.b))
        return Plan(cells, self.skipped + other.skipped, {**self.broken, **other.broken})

    def plugins(self) -> dict:
        return {n: p for c in self.cells for n, (p, _, _) in c.work.items()}

    def units(self, name=None, finish: bool = True) -> int:
        """Progress units: one per config to measure (of one plugin, or all),
        and with `finish` one per cell (comparison, host costs, saving)."""
        return sum(c.units(name) for c in self.cells) + (len(self.cells) if finish else 0)

    def only(self, names) -> "Plan":
        """The plan restricted to some plugins (a child process's share)."""
        cells = [Cell(c.op, c.dtype, c.b, c.rows, {n: w for n, w in c.work.items() if n in names})
                 for c in self.cells]
        return Plan([c for c in cells if c.work], [s for s in self.skipped if s[0] in names],
                    {n: r for n, r in self.broken.items() if n in names})


def plan(plugins: dict, dtypes, buckets, ops=("sort",), *, strategy: str = "quick", limits=None,
         rows: bool = False) -> Plan:
    """Which GPU plugins are measured at which (op, dtype, bucket), with
    which configs (tuner.configs_for), and which decline and why (their
    unsupported()). A plugin whose own code fails here is left out
    (Plan.broken). With `rows`, buckets are row lengths (case_shape)."""
    from ..sdk.plugin import Request
    from ..sdk.segments import Segments
    from .tuner import configs_for

    if limits is None:
        from ..gpu.device import current_limits

        limits = current_limits()
    out = Plan()
    gpu = {n: p for n, p in sorted(plugins.items()) if p.device == "gpu"}
    for dtype in dtypes:
        for op in ops:
            kind, vb = OP_SHAPE[op]
            for b in sorted(buckets):
                top, n, row_len = case_shape(op, b, rows)
                req = Request(kind=kind, dtype=dtype, n=n, value_bytes=vb,
                              segments=None if row_len is None else Segments.rows(n // row_len, row_len))
                work = {}
                for name, p in list(gpu.items()):
                    try:
                        reason = registry.call(p, "unsupported", req)
                        if reason is None:
                            work[name] = (p, strategy, configs_for(p, dtype, vb, limits, strategy, n))
                    except PluginError as exc:
                        out.broken[name] = exc.reason
                        del gpu[name]
                        continue
                    if reason is not None:
                        out.skipped.append((name, top, dtype, b, reason))
                if work:
                    out.cells.append(Cell(op, dtype, b, rows, work))
    for cell in out.cells:  # found broken in a later cell: out of the earlier ones too
        for name in out.broken:
            cell.work.pop(name, None)
    out.cells = [c for c in out.cells if c.work]
    return out


def skip_lines(skipped) -> list:
    """One line per plugin and reason for (plugin, op, dtype, bucket,
    reason) skips: where it applied, and the reason with what differs
    between those places (numbers, the dtype's name) listed, or "..."
    where more than three values differ."""
    groups = {}
    for name, top, dtype, b, reason in skipped:
        variable = r"(\d[\d,]*" + (f"|{re.escape(dtype)}" if dtype != "*" else "") + ")"
        parts = re.split(variable, reason)  # fixed words at even indices, variable at odd
        g = groups.setdefault((name, tuple(parts[0::2])),
                              {"parts": [[p] for p in parts], "where": {}, "count": 0})
        for seen, p in zip(g["parts"], parts):
            if p not in seen:
                seen.append(p)
        dtypes, bs = g["where"].setdefault(top, ({}, set()))
        dtypes.setdefault(dtype, None)
        if b is not None:
            bs.add(b)
        g["count"] += 1
    lines = []
    for (name, _), g in groups.items():
        where = []
        for top, (dtypes, bs) in g["where"].items():
            bs = sorted(bs)
            span = "" if not bs else f" 2^{bs[0]}" if len(bs) == 1 else \
                " " + ", ".join(f"2^{b}" for b in bs) if len(bs) <= 3 else f" 2^{bs[0]}..2^{bs[-1]}"
            if top != "*":  # (a plugin out of service: everywhere from then on)
                where.append(f"{top} {','.join(dtypes)}{span}")
        entries = "1 entry" if g["count"] == 1 else f"{g['count']} entries"
        reason = "".join(v[0] if len(v) == 1 else "/".join(v) if len(v) <= 3 else "..."
                         for v in g["parts"])
        lines.append(f"skipped {name} on {'; '.join(where)} ({entries}): {reason}" if where
                     else f"skipped {name}: {reason}")
    return lines


def sweep(plugins: dict, dtypes, buckets, ops=("sort",), *, strategy="quick",
          budget_s: float | None = None, host_max_bucket: int | None = 22, repeats: int = 5,
          inputs: int = 3, progress=None, log=print, state=None, rows: bool = False,
          compare: bool = False) -> dict:
    """Tune every (op, dtype, bucket, plugin) and the host costs; save as it
    goes (plan, then run_plan). With `rows`, the buckets are row lengths of
    uniform rows (case_shape): the segmented plugins are measured, and no
    host costs. Returns run_plan's summary."""
    ctx = context(state)
    work = plan(plugins, dtypes, buckets, ops, strategy=strategy, limits=ctx.state.limits, rows=rows)
    return run_plan(work, budget_s=budget_s, host_max_bucket=None if rows else host_max_bucket,
                    repeats=repeats, inputs=inputs, progress=progress, log=log, state=state,
                    compare=compare)


def run_plan(work: Plan, *, budget_s: float | None = None, host_max_bucket: int | None = 22,
             repeats: int = 5, inputs: int = 3, progress=None, log=print, state=None,
             compare: bool = True, prebuild: bool = True) -> dict:
    """Measure a Plan cell by cell, in this process; save after each cell.

    Per cell: one Case on the dtype's shared Inputs; every plugin's configs
    (Tuner.tune_cell); with `compare`, the plugins' best configs timed
    again against each other in alternating rounds (their entries' `ms`;
    `sweep_ms` keeps the sweep's time); host costs up to `host_max_bucket`
    (None: none) via the fastest plugin. `progress` (update(n), grow(n))
    gets Plan.units(finish=compare or host costs) in all.

    Past `budget_s` seconds (None: no budget) a (plugin, op, dtype) group
    not yet started measures its default config only, so the table stays
    complete; each plugin's first group is tuned regardless. Returns a
    summary: seconds, entries, rejected, failed, defaults_only, skipped
    (skip_lines), path, saved, phases (tuning/phases.py).

    With `prebuild`, child processes compile the plan's kernels cell by
    cell while this process checks and times the cells already built
    (tuning/prebuild.py), and the host costs (wall clock) are measured
    after the last cell, when the children are done. Where they cannot
    start, every cell of up to 2^CHECK_AHEAD_MAX_BUCKET keys is checked
    (and compiled) ahead in threads (_check_ahead).
    """
    from . import prebuild as prebuilds
    from .tuner import Case, Tuner

    ctx = context(state)
    ctx.know(work.plugins())
    phases = Phases()
    tuner = Tuner(ctx.state, repeats=repeats, warmup=2, phases=phases)
    finish = int(compare or host_max_bucket is not None)
    start = time.monotonic()
    summary = {"entries": 0, "rejected": 0, "failed": 0, "defaults_only": 0}
    skipped = list(work.skipped)
    broken = dict(work.broken)
    groups = {}
    shared = _SharedInputs(ctx.state, work, inputs, phases)
    ahead = {}  # id(cell) -> its Case, made and checked ahead (_check_ahead)
    checked = set()  # dtypes whose cells were checked ahead
    numpy_plugin = registry.plugins().get("numpy")
    builder = prebuilds.start(ctx.state, work) if prebuild else None
    host_later = []  # (cell, todo): host costs measured once the children are done

    def tick(n):
        if progress is not None and n:
            progress.update(n)

    with ctx.lock, tuning_now():
        try:
            for cell in work.cells:
                top, n, row_len = cell.shape
                todo = {}
                for name, (plugin, strategy, configs) in sorted(cell.work.items()):
                    if name in broken:
                        tick(len(configs))
                        continue
                    group = (name, top, cell.dtype)
                    if group not in groups:  # decided at a group's first size (compiles happen there)
                        first = not any(g[0] == name for g in groups)
                        over = budget_s is not None and not first and time.monotonic() - start > budget_s
                        groups[group] = over and strategy != "default"
                    if groups[group]:
                        summary["defaults_only"] += 1
                        tick(len(configs) - 1)
                        strategy, configs = "default", configs[:1]
                    todo[name] = (plugin, strategy, configs)
                if builder is None and cell.dtype not in checked:
                    for case in ahead.values():  # (cells of a dtype done: left over, unused)
                        case.free()
                    dtypes = shared.at_once(cell.dtype)
                    checked.update(dtypes)
                    ahead = _check_ahead(ctx.state, tuner, work, dtypes, shared, inputs)
                pool = shared.get(cell.dtype)
                own = 0 if pool is not None and pool.serves(cell.dtype, n, inputs) else inputs
                need = n * (itemsize(cell.dtype) + OP_SHAPE[cell.op][1]) * (own + 4)
                case = ahead.pop(id(cell), None)
                if not todo or (case is None and ctx.state.free_memory() < need):
                    for name, (_, _, configs) in todo.items():
                        skipped.append((name, top, cell.dtype, cell.b, "not enough GPU memory"))
                        tick(len(configs))
                    tick(finish)
                    if case is not None:
                        case.free()
                    continue
                if case is None:
                    with phases.timed("inputs"):
                        case = Case(ctx.state, cell.op, cell.dtype, n, inputs=inputs,
                                    row_len=row_len, shared=pool)
                parts, failed = [], []
                if builder is not None:
                    with phases.timed("inputs"):
                        case.answer()  # (NumPy's, while the children compile)
                    with phases.timed("wait", 1):
                        builder.wait(cell)
                try:
                    entries = tuner.tune_cell(case, todo, progress)
                    best = {}
                    for name, entry in sorted(entries.items()):
                        if isinstance(entry, PluginError):
                            broken[name] = entry.reason
                            continue
                        summary["entries"] += 1
                        summary["rejected"] += entry.get("rejected_count", 0)
                        if "failed" in entry:
                            summary["failed"] += 1
                            failed.append(f"{name} FAILED ({entry['failed'][:80]})")
                        else:
                            parts.append(f"{name} {entry['ms']:.4f} ms {entry['config']}")
                            best[name] = entry
                        ctx.store.put(name, top, cell.dtype, cell.b, entry)
                    if compare and len(best) > 1:
                        parts = [_compare_cell(ctx, tuner, case, cell, best, todo)[0]]
                    parts += failed
                    if not case.intact():  # (the next cells read the same inputs)
                        case.restore()
                        parts.append(f"WARNING: one of {', '.join(sorted(todo))} wrote its input "
                                     "(restored); this size's times may be off")
                finally:
                    case.free()
                ctx.changed()
                if host_max_bucket is not None and numpy_plugin is not None and not cell.rows \
                        and cell.b <= host_max_bucket:
                    if builder is None:
                        with phases.timed("host", 1):
                            parts.append(_host_part(ctx, cell, todo, numpy_plugin))
                    else:
                        host_later.append((cell, todo))
                tick(finish)
                if log:
                    log(f"{top:7} {cell.dtype:8} 2^{cell.b:<2}  " + "; ".join(parts))
                ctx.store.save()  # a crash later loses nothing measured so far
                ctx.changed()
            if builder is not None:
                builder.close()  # (done: every cell waited for its builds)
            for cell, todo in host_later:
                with phases.timed("host", 1):
                    part = _host_part(ctx, cell, todo, numpy_plugin)
                if log:
                    log(f"{cell.shape[0]:7} {cell.dtype:8} 2^{cell.b:<2}  {part}")
            if host_later:
                ctx.store.save()
                ctx.changed()
        finally:
            if builder is not None:
                builder.close()
                phases.note_prebuild(builder)
            for case in ahead.values():
                case.free()
            shared.free()
    skipped += [(name, "*", "*", None, f"failed and is out of service: {reason}")
                for name, reason in broken.items()]
    summary["skipped"] = skip_lines(skipped)
    summary["seconds"] = time.monotonic() - start
    summary["path"] = ctx.store.path
    summary["saved"] = not ctx.store.read_only
    summary["phases"] = phases.summary()
    return summary


#: Cells of at most this many keys are checked ahead (_check_ahead).
CHECK_AHEAD_MAX_BUCKET = 24


def _check_ahead(state, tuner, work: Plan, dtypes, shared, inputs: int) -> dict:
    """Cases of the cells of `dtypes` of up to 2^CHECK_AHEAD_MAX_BUCKET
    keys, on their dtype's shared inputs, with every planned config checked
    on them in one parallel batch (Tuner.check_many): the kernels of every
    config and every variant (row lengths and size rules make their own)
    compile at once, across all the CPUs, instead of a few at a time cell
    by cell, and a batch's last compiles run beside other compiles rather
    than alone. Returns id(cell) -> Case (run_plan times them, then frees
    them)."""
    from .tuner import Case

    cases = {}
    for cell in work.cells:
        _, n, row_len = cell.shape
        if cell.dtype not in dtypes or n > 1 << CHECK_AHEAD_MAX_BUCKET:
            continue
        pool = shared.get(cell.dtype)
        if pool is not None and pool.serves(cell.dtype, n, inputs):
            with shared.phases.timed("inputs"):
                cases[id(cell)] = (cell, Case(state, cell.op, cell.dtype, n, inputs=inputs,
                                              row_len=row_len, shared=pool))
    tuner.check_many((case, plugin, config) for cell, case in cases.values()
                     for plugin, _, configs in cell.work.values() for config in configs)
    return {key: case for key, (_, case) in cases.items()}


#: The shared inputs of every dtype of a plan are held at once (and all its
#: cells checked in one batch) when they take at most this share of the
#: GPU's free memory; else one dtype's at a time.
SHARED_ALL_SHARE = 0.25


class _SharedInputs:
    """The tuner.Inputs of each dtype of a plan: as large as that dtype's
    largest cell that fits the GPU's free memory with its results and
    temporaries. Those of every dtype are held at once where they take at
    most SHARED_ALL_SHARE of the free memory (at_once), else one dtype's at
    a time (a plan measures one dtype after another). None where none fits
    or they cannot be allocated: Cases then make their own."""

    def __init__(self, state, work: Plan, count: int, phases=None):
        self.state, self.work, self.count = state, work, count
        self.phases = phases if phases is not None else NoPhases()
        self.inputs: dict = {}  # dtype -> Inputs or None
        self.free_bytes = state.free_memory()
        self.dtypes = list(dict.fromkeys(c.dtype for c in work.cells))
        self.all_at_once = sum(self._size(d) * itemsize(d) * count for d in self.dtypes) \
            <= SHARED_ALL_SHARE * self.free_bytes

    def _size(self, dtype: str) -> int:
        sizes = [c.shape[1] for c in self.work.cells if c.dtype == dtype
                 and c.shape[1] * (itemsize(dtype) + OP_SHAPE[c.op][1]) * (self.count + 4)
                 <= self.free_bytes]
        return max(sizes, default=0)

    def at_once(self, dtype: str) -> list:
        """The dtypes whose cells are checked together from `dtype` on:
        every one not begun yet where they fit at once, else `dtype` alone."""
        if not self.all_at_once:
            return [dtype]
        return self.dtypes[self.dtypes.index(dtype):]

    def get(self, dtype: str):
        from .tuner import Inputs

        if dtype not in self.inputs:
            if not self.all_at_once:
                self.free()
            made = None
            size = self._size(dtype)
            if size:
                try:
                    with self.phases.timed("inputs", 1):
                        made = Inputs(self.state, dtype, size, self.count)
                except MemoryError:
                    made = None
            self.inputs[dtype] = made
        return self.inputs[dtype]

    def free(self):
        for made in self.inputs.values():
            if made is not None:
                made.free()
        self.inputs.clear()


def _compare_cell(ctx, tuner, case, cell, best: dict, todo: dict) -> str:
    """Time the plugins' best configs of a cell against each other
    (Tuner.compare) and store those times as their entries' `ms`. Returns
    (its log line's part, entries updated)."""
    top = cell.shape[0]
    times, left_out = tuner.compare(case, {n: (todo[n][0], e["config"]) for n, e in best.items()})
    for name, ms in times.items():
        e = best[name]  # sweep_ms: the time the config was chosen by
        ctx.store.put(name, top, cell.dtype, cell.b,
                      dict(e, ms=ms, sweep_ms=e.get("sweep_ms", e["ms"]), arbitrated=True))
    text = ", ".join(f"{k} {v:.4f}" for k, v in sorted(times.items(), key=lambda kv: kv[1]))
    for name, reason in left_out.items():
        text += f"; {name} left out of the comparison: {reason[:80]}"
    if not times:  # fewer than two survived: the sweep's times stand
        text = "; ".join(f"{n} {e['ms']:.4f}" for n, e in sorted(best.items())) + text
    return text, len(times)


def _host_part(ctx, cell, todo, numpy_plugin) -> str:
    """Host costs of a cell (_measure_host_bucket), as its log line's part."""
    try:
        if not _measure_host_bucket(ctx, cell.op, cell.dtype, cell.b, todo):
            return "| host: no GPU time measured here"
        h = ctx.table["host"][cell.op][cell.dtype][str(cell.b)]
        numpy_ms = plugin_results(ctx.table, "numpy")[cell.op][cell.dtype][str(cell.b)]["ms"]
        return f"| host: numpy {numpy_ms:.4f} ms, gpu overhead {h['extra_ms']:.4f} ms"
    except Exception as exc:
        return f"| host measurement failed: {type(exc).__name__}: {exc}"


def compare(work: Plan, *, host_max_bucket: int | None = 22, repeats: int = 5, inputs: int = 3,
            progress=None, log=print, state=None) -> int:
    """What run_plan(compare=True) does after measuring a cell, for a plan
    measured elsewhere (one child process per plugin): per cell, every
    plugin's cached best config timed again against the others, in one
    process, in alternating rounds, stored as the entries' `ms`; then the
    host costs. Drift between processes (clocks, host load) was as large as
    the 10-30% by which plugins differ at 2^16-2^22 keys. One progress
    unit per cell; returns the number of entries updated."""
    from .tuner import Case, Tuner

    ctx = context(state)
    ctx.know(work.plugins())
    tuner = Tuner(ctx.state, repeats=repeats, warmup=2)
    numpy_plugin = registry.plugins().get("numpy")
    updated = 0
    shared = _SharedInputs(ctx.state, work, inputs)
    with ctx.lock, tuning_now():
        try:
            for cell in work.cells:
                top, n, row_len = cell.shape
                best = {}
                for name, (plugin, _, _) in cell.work.items():
                    e = plugin_results(ctx.table, name).get(top, {}).get(cell.dtype, {}).get(str(cell.b))
                    if (isinstance(e, dict) and e.get("ms") and not e.get("failed")
                            and isinstance(e.get("config"), dict) and fits(e["config"], plugin)):
                        best[name] = e
                parts = []
                if len(best) > 1:
                    case = Case(ctx.state, cell.op, cell.dtype, n, inputs=inputs, row_len=row_len,
                                shared=shared.get(cell.dtype))
                    try:
                        text, count = _compare_cell(ctx, tuner, case, cell, best, cell.work)
                        parts.append(text)
                        updated += count
                    finally:
                        case.free()
                    ctx.changed()
                if host_max_bucket is not None and numpy_plugin is not None and not cell.rows \
                        and cell.b <= host_max_bucket:
                    parts.append(_host_part(ctx, cell, cell.work, numpy_plugin))
                if progress is not None:
                    progress.update(1)
                if log and parts:
                    log(f"{top:7} {cell.dtype:8} 2^{cell.b:<2}  " + "; ".join(parts))
            ctx.store.save()
        finally:
            shared.free()
    ctx.changed()
    return updated
