"""searchsorted: numpy.searchsorted of host and device arrays, batched.

NumPy's call: 1-D sorted `a`, `v` of any shape (a scalar gives a 0-d
result), side "left" (first k with a[k] >= v) or "right" (first k with
a[k] > v), `sorter` the argsort of a. Batched as torch.searchsorted: `a` of
shape (..., n) sorted along its last axis and `v` of shape (..., m) with
the same leading dims; sorter then has a's shape and sorts every row. The
result is int64 of v's shape. Order is NumPy's sort order: NaNs last and
equal to each other, -0.0 == +0.0.

Host inputs (NumPy, PyTorch CPU, lists) are NumPy's searchsorted (row by
row when batched). With a device array among a and v, a search plugin
(sdk/search.py, entry-point group cudasortkit.search) runs on the device:
auto takes the one of lowest declared estimate that serves the call
(`explain` says which and why). On the device a and v have one dtype (a
host v is cast to a's dtype where that is exact) and sorter is int64 of
a's shape; its range is checked as NumPy does (one reduction, one wait).
"""
from __future__ import annotations

import copy
from contextlib import nullcontext
from dataclasses import dataclass, field

import numpy as np

from .. import settings
from ..build.corekernels import key_minmax
from ..dispatch.request import caller_ordering, check_algorithm
from ..dtypes import is_bfloat16, key_name
from ..errors import PluginError
from ..gpu.arrays import Operand, Result, library_of, shape_of
from ..gpu.device import active_ordinal, gpu_available, unavailable_reason
from ..launch import plans as launchplan
from ..sdk import registry
from ..sdk.plugin import RUN_ERRORS
from ..sdk.search import SearchJob, SearchPlugin, SearchQuery
from ..tuning import runtime
from ..tuning.kinds import SEARCH
from .axes import Rows

GROUP = SearchPlugin.entry_point_group
SIDES = ("left", "right")


@dataclass
class SearchDecision:
    """Which search plugin runs a call and why (print it)."""

    plugin: str
    query: SearchQuery
    estimates: dict = field(default_factory=dict)
    skipped: dict = field(default_factory=dict)
    asked: str = "auto"
    #: Each estimated plugin's words for what its estimate counts.
    notes: dict = field(default_factory=dict)
    reason: str = ("the lowest declared estimate among the plugins that serve it "
                   "(units: one dependent global load of one query)")

    def __str__(self):
        q = self.query
        lines = [f"searchsorted of {q.rows} x {q.m:,} {q.dtype} queries into {q.rows} x {q.n:,} "
                 f"keys (side={'right' if q.right else 'left'}): plugin {self.plugin!r}"]
        if self.asked != "auto":
            lines.append(f"  named by algorithm={self.asked!r}")
        else:
            lines.append(f"  auto: {self.reason}")
        for name, cost in sorted(self.estimates.items(), key=lambda x: x[1]):
            note = self.notes.get(name)
            lines.append(f"  {name}: estimate {cost:,.0f}" + (f" ({note})" if note else ""))
        for name, why in sorted(self.skipped.items()):
            lines.append(f"  {name}: not used, {why}")
        return "\n".join(lines)


# --------------------------------------------------------------- arguments
class _Call:
    """The checked arguments: a as rows of n keys, v as rows of m queries."""

    def __init__(self, a, v, side, sorter, stream):
        if side not in SIDES:
            raise ValueError(f"search side must be 'left' or 'right' (got {side!r})")
        self.right = side == "right"
        self.a_in, self.v_in, self.side = a, v, side  # the caller's arrays (prepared searches)
        a_shape = shape_of(a)
        if not a_shape:
            raise ValueError("searchsorted: a must have at least one dimension "
                             "(1-D, or (..., n) sorted along its last axis), got a 0-d array")
        self.a = Rows(a, -1, "a", stream)
        self.batched = len(a_shape) > 1
        self.scalar = not shape_of(v) and not self.batched
        if self.batched:
            v_shape = shape_of(v)
            if len(v_shape) != len(a_shape) or v_shape[:-1] != a_shape[:-1]:
                raise ValueError(f"searchsorted: with a of shape {a_shape} (batched along the last "
                                 f"axis), v must have shape {a_shape[:-1]} + (m,), got {v_shape}")
            self.v = Rows(v, -1, "v", stream)
        else:
            self.v = Rows(v, None, "v", stream)
        self.v_shape = shape_of(v)
        self.n, self.rows = self.a.row_len, self.a.rows
        self.m = self.v.n // self.rows if self.rows else 0
        self.keys = Operand(self.a.flat, "a")
        self.queries = Operand(self.v.flat, "v")
        self.sorter = None
        if sorter is not None:
            self.sorter = self._sorter(sorter, a_shape, stream)

    def _sorter(self, sorter, a_shape, stream):
        """sorter as int64 of a's shape (flat), or the error NumPy raises."""
        s_shape = shape_of(sorter)
        if s_shape != a_shape:
            size, a_size = int(np.prod(s_shape)), int(np.prod(a_shape))
            if size != a_size:  # NumPy's words, then the sizes
                raise ValueError(f"sorter.size must equal a.size: {size} != {a_size} (sorter is "
                                 f"an argsort of a, of a's shape {a_shape})")
            raise ValueError(f"sorter must have a's shape {a_shape} (an argsort of a), got "
                             f"shape {s_shape}")
        flat = Rows(sorter, None, "sorter", stream, role="values").flat
        if library_of(flat) in ("numpy", "torch-cpu"):
            host = np.asarray(flat)
            if host.dtype.kind not in "iu":
                raise TypeError("sorter must only contain integers")
            return Operand(host.astype(np.int64, copy=False), "sorter", "values")
        op = Operand(flat, "sorter", "values")
        if op.dtype != np.int64:
            raise TypeError(f"sorter must only contain integers, and on the device be int64 "
                            f"(an argsort's result), got {op.dtype}")
        return op

    @property
    def on_device(self) -> bool:
        return any(x is not None and x.on_device for x in (self.keys, self.queries, self.sorter))

    def query(self) -> SearchQuery:
        return SearchQuery(dtype=key_name(self.keys.dtype), n=self.n, m=self.m, rows=self.rows,
                           right=self.right, sorter=int(self.sorter is not None))


# ------------------------------------------------------------------- calls
def searchsorted(prepared, a, v, side="left", sorter=None, algorithm="auto", stream=None,
                 searches=None):
    """numpy.searchsorted(a, v, side, sorter), batched; module docstring.
    `searches`: the PreparedSearches a plain device call is prepared in for
    its repeats (calls/search_prepared.py; None: not prepared)."""
    call = _Call(a, v, side, sorter, stream)
    _check_named(call, algorithm)
    if not call.on_device:
        return _host(call, side)
    return _device(prepared, call, algorithm, stream, searches)


def explain(a, v, side="left", sorter=None, algorithm="auto") -> SearchDecision:
    """Which plugin searchsorted(a, v, ...) would run on the device, and why
    (for host arrays: NumPy runs, and the plugin is what device arrays of
    their shape would run)."""
    call = _Call(a, v, side, sorter, None)
    _check_named(call, algorithm)
    # A copy: _choose's decisions are kept for repeats, and this one is
    # the caller's to read.
    decision = copy.deepcopy(_choose(call.query(), algorithm))
    if not call.on_device:
        decision.reason += (f"; host arrays: NumPy's searchsorted runs, {decision.plugin!r} is "
                            "what device arrays of this shape would run")
        if not gpu_available():
            decision.reason += f" (there is no GPU here: {unavailable_reason()})"
    return decision


def _check_named(call: _Call, algorithm: str) -> None:
    """A search plugin named by `algorithm` must exist, and the call must
    be of device arrays: NumPy searches host ones, so a name for them is a
    ValueError saying why (without a GPU: that the plugin needs one, as
    sort and topk say), never a silent NumPy search."""
    check_algorithm(algorithm)
    if algorithm == "auto":
        return
    if algorithm not in registry.plugins(GROUP):
        _choose(call.query(), algorithm)  # ValueError naming the installed plugins
    if call.on_device:
        return
    why = (f"{algorithm} searches device arrays (CuPy, CUDA torch tensors, pycuda)"
           if gpu_available() else f"{algorithm} needs a GPU: {unavailable_reason()}")
    raise ValueError(f"algorithm {algorithm!r} cannot search host arrays: {why}; NumPy's "
                     "searchsorted searches host arrays (algorithm='auto')")


def _host(call: _Call, side: str):
    a = np.asarray(call.keys.array).reshape(call.rows, call.n)
    v = np.asarray(call.queries.array).reshape(call.rows, call.m)
    s = None if call.sorter is None else np.asarray(call.sorter.array).reshape(call.rows, call.n)
    if is_bfloat16(a.dtype) or is_bfloat16(v.dtype):  # NaNs last, as for floats (and the device)
        a, v = a.astype(np.float32), v.astype(np.float32)
    if call.rows == 1:
        out = np.searchsorted(a[0], v[0], side, None if s is None else s[0])
    else:
        out = np.empty((call.rows, call.m), np.int64)
        for r in range(call.rows):
            out[r] = np.searchsorted(a[r], v[r], side, None if s is None else s[r])
    out = out.astype(np.int64, copy=False)
    if call.scalar:
        out = out.reshape(())[()] if call.keys.library == "numpy" else out.reshape(())
    else:
        out = out.reshape(call.v_shape)
    if call.keys.library == "torch-cpu":
        import torch

        return torch.from_numpy(np.ascontiguousarray(out))
    return out


#: Decisions by query shape and algorithm, under the generations and settings
#: they stand on (_decision_key); cleared past MAX_DECISIONS.
_decisions: dict = {}
MAX_DECISIONS = 4096


def _decision_key(query: SearchQuery, algorithm: str) -> tuple:
    """What a decision depends on: the query's shape (never its pointers),
    the plugin asked for, the installed plugins (registry.generation: a
    plugin taken out of service moves it too) and this device's measured
    tables (as tuning/kinds.py's choose keys them)."""
    return (query.dtype, query.n, query.m, query.rows, query.right, bool(query.sorter),
            bool(query.query_order), algorithm, registry.generation, runtime.generation(),
            active_ordinal(), settings.cache_dir())


def _choose(query: SearchQuery, algorithm: str) -> SearchDecision:
    """The plugin that serves `query` (memoised per shape: a repeated call
    asks no plugin again; the decision is shared, never changed)."""
    key = _decision_key(query, algorithm)
    decision = _decisions.get(key)
    if decision is None:
        decision = _decide(query, algorithm)
        if len(_decisions) >= MAX_DECISIONS:
            _decisions.clear()
        _decisions[key] = decision
    return decision


def _decide(query: SearchQuery, algorithm: str) -> SearchDecision:
    plugins = registry.plugins(GROUP)
    if algorithm != "auto" and algorithm not in plugins:
        raise ValueError(f"no search plugin named {algorithm!r}; installed: "
                         f"{', '.join(sorted(plugins)) or 'none'} (or 'auto')")
    decision = SearchDecision("", copy.copy(query), asked=algorithm)
    for name, plugin in sorted(plugins.items()):
        if algorithm != "auto" and name != algorithm:
            continue
        why = (f"does not search {query.dtype}" if query.dtype not in plugin.dtypes
               else registry.call(plugin, "unsupported", query))
        if why is not None:
            decision.skipped[name] = why
            continue
        decision.estimates[name] = float(registry.call(plugin, "estimate", query))
        decision.notes[name] = str(registry.call(plugin, "note", query))
    if not decision.estimates:
        reasons = "; ".join(f"{k}: {w}" for k, w in sorted(decision.skipped.items()))
        raise ValueError(f"no search plugin serves this call ({reasons or 'none installed'})")
    decision.plugin = min(decision.estimates, key=lambda k: (decision.estimates[k], k))
    if algorithm == "auto":  # measured on this device where measured (tuning/kinds.py)
        pick = SEARCH.choose(query, {n: plugins[n] for n in decision.estimates}, decision.plugin,
                             "the lowest declared estimate among the plugins that serve it")
        decision.plugin, decision.reason = pick.name, pick.reason
    return decision


def _same_dtype(call: _Call) -> None:
    """On the device a and v share one dtype: a host v is cast to a's where
    every value survives the cast; anything else raises TypeError."""
    a, v = call.keys, call.queries
    if v.dtype == a.dtype:
        return
    if not v.on_device:
        cast = v.array.astype(a.dtype)
        back = cast.astype(v.dtype)
        same = (back == v.array) | (np.isnan(back) & np.isnan(v.array)
                                    if v.dtype.kind == "f" else False)
        if np.all(same):
            call.queries = Operand(cast, "v")
            return
    raise TypeError(f"searchsorted on the device needs a and v of one dtype, got a {a.dtype} "
                    f"and v {v.dtype}; cast one of them")


def _device(prepared, call: _Call, algorithm: str, stream, searches=None):
    _same_dtype(call)
    keys, queries, sorter = call.keys, call.queries, call.sorter
    operands = [x for x in (keys, queries, sorter) if x is not None]
    state, ordering = caller_ordering(stream, operands)
    first = next(x for x in operands if x.on_device)
    total = call.rows * call.m
    ordering.begin()
    try:
        out = Result(first.sized(total), np.int64, state, None, "searchsorted", ordering.caller)
        if total:
            prepare = searches is not None and sorter is None and stream is None and call.n > 0
            _run(prepared, call, algorithm, stream, state, out.ptr, searches if prepare else None)
        result = out.finish()
    finally:
        ordering.end()
    return result.reshape(() if call.scalar else call.v_shape)


def _run(prepared, call: _Call, algorithm: str, stream, state, out_ptr: int,
         searches=None) -> None:
    """Choose a plugin and run it (the next one if it fails); with
    `searches`, a replayable plugin's launches are recorded and the call's
    shape prepared for its repeats (calls/search_prepared.py)."""
    query = call.query()
    query.a = call.keys.device_ptr(state) if call.keys.n else 0
    query.v = call.queries.device_ptr(state)
    query.out = out_ptr
    if call.sorter is not None:
        query.sorter = call.sorter.device_ptr(state) if call.sorter.n else 0
        if call.sorter.n:
            lo, hi = key_minmax(state, query.sorter, call.sorter.n, "int64", owner="searchsorted")
            if lo < 0 or hi >= call.n:
                raise ValueError("Sorter index out of range.")
    held = None  # the query order (an Operand), alive until the search is queued
    while True:  # a plugin that fails is out of service (registry.guarded): take the next
        decision = _choose(query, algorithm)
        plugin = registry.plugins(GROUP)[decision.plugin]
        if plugin.needs_query_order and not query.query_order:
            _, order = prepared.run("argsort", call.queries, None, False, False, "auto",
                                    stream=stream)
            held = Operand(order, "query order", "values")  # a host order: its upload
            query.query_order = held.device_ptr(state)
        job = SearchJob(plugin, state, query, plugin.default_config(query.dtype))
        record = (searches is not None and not query.query_order
                  and launchplan.replayable(type(plugin)))
        try:
            with launchplan.recording(job) if record else nullcontext() as recorder, \
                    registry.guarded(plugin, "run", expected=RUN_ERRORS):
                plugin.run(job, query)
        except PluginError:
            continue
        finally:
            job.finish()
        if record:
            searches.note(call.a_in, call.v_in, call.side, algorithm, call.keys, call.queries,
                          state, plugin, job, recorder.outcome())
        break
    del held
