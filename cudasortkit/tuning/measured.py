"""auto from this device's measurements: the measured policy, and the
learner that fills the table without stalling a caller.

`MeasuredPolicy.choose` reads the tuning table (policy.decide: estimates
interpolated across size buckets, so a new size needs no measurement of its
own) and falls back on `select.DefaultPolicy` where nothing is measured, or
where the plugin the declarations prefer has no measurement here yet (a
plugin that declines what it cannot serve, such as counting, is never
passed over for lack of a number). It never measures for the call at hand.

`Learner` is how a new device gets tuned anyway: every auto call of a shape
that lacks measurements (the Selector calls the choice's `observe` on each
call it answers from its cache) adds a tenth of the call's estimated cost
to that shape's credit, and once the credit covers the estimated cost of measuring
one missing plugin (its default config, compiles included), that one is
measured. So first-run measurement costs at most about 10% of what the
caller's own sorts of that shape have cost, amortised; `python -m
cudasortkit.tune` measures a whole machine at once.
"""
from __future__ import annotations

import math
import threading
import time

from ..dtypes import itemsize
from ..errors import PluginError
from ..dispatch.select import Choice, DefaultPolicy, priority_of
from . import cache, runtime
from .policy import (OP_SHAPE, ROWS_TOTAL_BUCKET, bucket_of, decide, estimate, measured_at,
                     measured_shape, op_of, plugin_results, row_bucket)

#: Share of a shape's estimated call time that may go to measuring it.
SHARE = 0.10
#: Estimated cost of measuring a plugin never measured for this (op, dtype)
#: in this process: its kernels compile (their cubins are kept on disk:
#: build/cubins.py).
FIRST_MEASURE_MS = 1500.0
#: Estimated cost of measuring a plugin whose kernels are compiled: warm-up
#: and repeats of the call, plus this much fixed overhead.
MEASURE_RUNS, MEASURE_OVERHEAD_MS = 6, 5.0
#: Host work of every measurement, per key measured: two random input sets
#: made and uploaded, and NumPy's sorted answer the first is checked
#: against (about 100 ns a key at 2^26 keys, the sort most of it).
HOST_NS_PER_KEY = 100.0


def estimated_call_ms(request) -> float:
    """A rough bandwidth model of one call when nothing is measured: about
    six passes over keys and values at 1 TB/s plus 20 us of launches. Used
    only to budget measurement, never to choose."""
    nbytes = request.n * (itemsize(request.dtype) + request.value_bytes)
    return 0.02 + 6 * nbytes / 1e9


class ShapeCredit:
    """One shape's first-run measurement budget, as a countdown: `left` is
    how many more calls of the shape pay (SHARE of their estimated time)
    for measuring its next missing plugin. Calling it is the per-call cost
    of learning: a decrement; the learner settles when it reaches zero (a
    racing decrement only shifts the moment by a call)."""

    __slots__ = ("learner", "ctx", "request", "candidates", "shape", "share", "left")

    def __init__(self, learner, ctx, request, candidates, shape, share):
        self.learner, self.ctx, self.request = learner, ctx, request
        self.candidates, self.shape, self.share = candidates, shape, share
        self.left = 1

    def __call__(self) -> None:
        self.left -= 1
        if self.left <= 0:
            self.learner.settle(self)


class Learner:
    """Measures missing (plugin, op, dtype, bucket) entries one at a time,
    paid from each shape's credit (SHARE of its calls' estimated time)."""

    def __init__(self):
        self._credits: dict = {}  # (op, dtype, bucket, rows) -> ShapeCredit
        self._compiled: set = set()
        self._lock = threading.Lock()

    def observer(self, request, candidates: dict, call_ms: float):
        """None when nothing is missing for this request's shape (or first-run
        measurement is off); else the shape's ShapeCredit, to call once per
        call of the shape: it counts the call and, once the calls' share
        covers the next measurement, measures the next missing plugin.
        Shapes are (op, dtype, bucket, rows): one array's size bucket, or for
        uniform rows the row length's (measured at 2^22 keys in all, as
        `tune --rows` does); ragged segments are not measured."""
        if (not runtime.autotune_enabled() or runtime.in_tuning()
                or measured_shape(request) is None):
            return None
        rows = request.segments is not None
        b = row_bucket(request.segments.row_len) if rows else bucket_of(request.n)
        if b > (ROWS_TOTAL_BUCKET - 1 if rows else runtime.LAZY_MAX_BUCKET):
            return None  # (rows: at least two rows in the measured 2^22 keys)
        ctx = runtime.context()
        shape = (op_of(request), request.dtype, b, rows)
        missing = self._missing(ctx, request, candidates, shape)
        if not missing:
            return None
        with self._lock:
            credit = self._credits.get(shape)
            if credit is None or credit.ctx is not ctx:
                credit = self._credits[shape] = ShapeCredit(self, ctx, request, candidates, shape,
                                                            SHARE * call_ms)
                credit.left = self._calls_to_pay(missing[0][0], shape, credit.share, 0.0)
        return credit

    def _calls_to_pay(self, name, shape, share, banked) -> int:
        """Calls whose shares, with `banked` ms already earned, cover measuring `name`."""
        cost = self._cost(name, shape, share / SHARE)
        return max(1, math.ceil((cost - banked) / share - 1e-9))

    def settle(self, credit) -> None:
        """A shape's calls have paid for one measurement: make it, then set
        the count of calls that pay for the next (none: nothing missing)."""
        with self._lock:
            if credit.left > 0:  # another thread settled it first
                return
            credit.left = 1 << 62  # while measuring, other calls only count
        shape = credit.shape
        missing = self._missing(credit.ctx, credit.request, credit.candidates, shape)
        if not missing:
            return
        name, plugin = missing[0]
        earned = self._cost(name, shape, credit.share / SHARE)
        spent = earned
        try:
            spent = self._measure(credit.ctx, plugin, shape)
        finally:  # also when the plugin failed: the next missing one is paid for anew
            with self._lock:
                self._compiled.add((name, _table_op(shape), shape[1]))
                after = self._missing(credit.ctx, credit.request, credit.candidates, shape)
                if after:
                    credit.left = self._calls_to_pay(after[0][0], shape, credit.share,
                                                     max(0.0, earned - spent))

    @staticmethod
    def _missing(ctx, request, candidates, shape) -> list:
        """(name, plugin) of the GPU candidates not measured at this shape,
        in the order of their declared priority."""
        top, dtype, b = _table_op(shape), shape[1], shape[2]
        return [(n, p) for n, p in sorted(candidates.items(),
                                          key=lambda x: (priority_of(x[1], request), x[0]))
                if p.device == "gpu" and not _measured(ctx.table, n, top, dtype, b)
                and (n, top, dtype, b) not in ctx.attempted]

    def _cost(self, name, shape, call_ms) -> float:
        """Estimated ms of measuring `name` at `shape`; `call_ms` is one call's
        estimate for the requests of the shape (rows are measured at 2^22
        keys in all, whatever the request's size)."""
        op, dtype, b, rows = shape
        host_ms = HOST_NS_PER_KEY * (1 << (ROWS_TOTAL_BUCKET if rows else b)) / 1e6
        if (name, _table_op(shape), dtype) not in self._compiled:
            return FIRST_MEASURE_MS + host_ms
        if rows:
            call_ms = 0.02 + 6 * (1 << ROWS_TOTAL_BUCKET) * (itemsize(dtype) + OP_SHAPE[op][1]) / 1e9
        return MEASURE_RUNS * call_ms + MEASURE_OVERHEAD_MS + host_ms

    @staticmethod
    def _measure(ctx, plugin, shape) -> float:
        """Measure plugin's default config at `shape`; returns the ms spent
        (the table's generation changes: decisions are made again)."""
        from .tuner import Case, Tuner

        op, dtype, b, rows = shape
        top, n, row_len = runtime.case_shape(op, b, rows)
        start = time.perf_counter()
        ctx.attempted.add((plugin.name, top, dtype, b))
        with ctx.lock, runtime.tuning_now():
            try:
                if ctx.state.free_memory() < 8 * n * (8 + 8):
                    return (time.perf_counter() - start) * 1e3
                case = Case(ctx.state, op, dtype, n, inputs=2, row_len=row_len)
                try:
                    entry = Tuner(ctx.state, repeats=3, warmup=1).tune(plugin, case, "default")
                finally:
                    case.free()
                entry["lazy"] = True
                ctx.store.put(plugin.name, top, dtype, b, entry)
                ctx.store.save()
            except PluginError:
                raise
            except Exception as exc:
                cache.warn_once(f"learn:{top}:{dtype}:{b}",
                                f"cudasortkit: first-run measurement of {plugin.name} {top} {dtype} "
                                f"2^{b} failed ({type(exc).__name__}: {str(exc)[:200]}); defaults used")
            finally:
                ctx.changed()
        return (time.perf_counter() - start) * 1e3


def _table_op(shape) -> str:
    """The table's op of a learner's shape (op + policy.ROWS for rows)."""
    op, _, b, rows = shape
    return runtime.case_shape(op, b, rows)[0]


def _measured(table, name, op, dtype, b) -> bool:
    entry = plugin_results(table, name).get(op, {}).get(dtype, {}).get(str(b))
    return isinstance(entry, dict)


class MeasuredPolicy:
    """The select policy of measured decisions (see the module docstring)."""

    def __init__(self, fallback=None):
        self.fallback = fallback if fallback is not None else DefaultPolicy()
        self.learner = Learner()

    @property
    def generation(self) -> int:
        return runtime.generation()

    #: generation as a call without a Python frame (Selector reads it so on
    #: its hottest paths).
    generation_reader = staticmethod(runtime.generation)

    def choose(self, request, candidates: dict) -> Choice:
        # Rows are measured by row length (policy.measured_shape); ragged
        # segments go by the plugins' declarations.
        if measured_shape(request) is None or not any(p.device == "gpu" for p in candidates.values()):
            return self.fallback.choose(request, candidates)
        try:
            choice, ms = self._choose(request, candidates)
        except PluginError:
            raise
        except Exception as exc:  # selection must never fail because of tuning
            cache.warn_once("policy", f"cudasortkit: tuned selection failed ({type(exc).__name__}: "
                                      f"{exc}); using the default rule")
            return self.fallback.choose(request, candidates)
        if choice.plugin.device != "gpu":
            return choice  # small host arrays on the CPU: nothing to learn per call
        try:
            observe = self.learner.observer(request, candidates, ms or estimated_call_ms(request))
        except PluginError:
            raise
        except Exception as exc:
            cache.warn_once("learner", f"cudasortkit: first-run measurement failed "
                                       f"({type(exc).__name__}: {exc}); not measuring")
            return choice
        if observe is None:
            return choice
        observe()  # this call counts too
        return Choice(choice.plugin, choice.config, choice.reason, choice.final, observe)

    def _choose(self, request, candidates):
        """(Choice, estimated ms or None)."""
        ctx = runtime.context()
        ctx.know(candidates)
        default = self.fallback.choose(request, candidates)
        d = decide(ctx.table, request, candidates)
        if d is None:
            return Choice(default.plugin, None, "nothing measured here for this request; "
                          + default.reason), None
        # The declarations' choice stands until it is measured at this size:
        # an estimate extrapolated from other sizes (its own or the others')
        # does not overrule it.
        preferred = default.plugin
        if preferred.device == "gpu" and not measured_at(ctx.table, preferred.name, request):
            est = next((e for e in d.estimates if e.name == preferred.name), None)
            if est is None:
                return Choice(preferred, None, f"{preferred.name} is preferred by declaration and "
                                               "not measured here yet (default config)"), d.ms
            return Choice(preferred, est.config, f"{preferred.name} is preferred by declaration and "
                                                 "not measured at this size here (its measurements "
                                                 "do not reach it)"), est.ms
        return Choice(candidates[d.name], d.config, d.reason), d.ms

    def configure(self, request, plugin) -> dict | None:
        """The tuned config of a plugin asked for by name: the nearest
        measured size's, or None (defaults). Never measures."""
        if plugin.device != "gpu":
            return None
        try:
            ctx = runtime.context()
            ctx.know({plugin.name: plugin})
            est = estimate(ctx.table, plugin.name, plugin, request)
        except PluginError:
            raise
        except Exception as exc:
            cache.warn_once("configure", f"cudasortkit: reading tuned configs failed "
                                         f"({type(exc).__name__}: {exc}); using defaults")
            return None
        return None if est is None else est.config

    def explain(self, request, candidates: dict):
        """policy.Decision for explain(): every estimate and the reason."""
        from ..dispatch.select import Decision

        choice = self.choose(request, candidates)
        if measured_shape(request) is not None and any(p.device == "gpu" for p in candidates.values()):
            ctx = runtime.context()
            d = decide(ctx.table, request, candidates)
            if d is not None:
                return Decision(choice.plugin.name, choice.config, d.ms if d.name == choice.plugin.name
                                else None, choice.reason, d.estimates, d.unmeasured)
        return Decision(choice.plugin.name, choice.config, None, choice.reason)
