"""Measured choice for the plugin kinds other than sorts (selection,
multikey, search): one mechanism for the three.

Each kind defines a *shape* (`Kind.fields`): exact fields (an op, a dtype,
host or device) and log2 buckets of its sizes. `python -m cudasortkit.tune
--kinds` measures every plugin of every kind on a grid of shapes and stores
the median ms per (plugin, shape) in the tuning cache's "kinds" section
(cache.py), one block per entry-point group, under the device's file.

`decide` is the rule auto keeps (pure, over a table): among the plugins
that serve the request, measured at the *nearest measured shape* whose exact
fields match, whose every log2 field is within NEAR of the request's, and
only where the request lies inside the measured range of every log2 field
(never extrapolating), the fastest one wins. Otherwise the kind's declared
choice stands, as it does when the declared plugin is not measured at that
shape (as tuning/policy.py keeps the declarations' choice until it is
measured at the size). Results of a plugin whose code changed (its
cache.kind_hash differs) are not used.
"""
from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field

from ..sdk.multikey import MultikeyPlugin
from ..sdk.search import SearchPlugin
from ..sdk.selection import SelectPlugin
from . import cache

#: A measured shape serves a request only if each log2 field is within
#: this many log2 units of the request's (a factor of 16).
NEAR = 4


def lg(x: int) -> int:
    """The log2 bucket of a size: the nearest power of two's exponent."""
    return max(0, round(math.log2(max(int(x), 1))))


@dataclass(frozen=True)
class Pick:
    """The chooser's answer: the plugin's name, why, the times measured at
    the shape used (name -> ms; empty when the declared rule decided) and
    that shape (None: none used)."""

    name: str
    reason: str
    measured: dict = field(default_factory=dict)
    at: tuple | None = None


@dataclass(frozen=True)
class Kind:
    """One plugin kind's measured shape: its entry-point group, a word for
    it, its fields ((name, is_log2), in key order) and `shape_of(request)`."""

    group: str
    what: str
    fields: tuple
    shape_of: object

    def key(self, shape: tuple) -> str:
        """The cache key of a shape: its fields joined by commas."""
        return ",".join(str(v) for v in shape)

    def parse(self, key: str) -> tuple | None:
        """The shape of a cache key (None if it is not one of this kind)."""
        parts = key.split(",")
        if len(parts) != len(self.fields):
            return None
        out = []
        for part, (_, log2) in zip(parts, self.fields):
            if log2:
                if not part.isdecimal():
                    return None
                out.append(int(part))
            else:
                out.append(part)
        return tuple(out)

    def describe(self, shape: tuple) -> str:
        """E.g. "topk float32 rows 2^0 row_len 2^20 k 2^4"."""
        return " ".join(f"{name} 2^{v}" if log2 else str(v) if name in ("op", "dtype", "on")
                        else f"{name} {v}" for (name, log2), v in zip(self.fields, shape))

    def choose(self, request, candidates: dict, declared: str, why: str) -> Pick:
        """auto's choice among `candidates` (name -> plugin that serves the
        request): measured on this device where measured (decide), else
        `declared` (the kind's rule, explained by `why`)."""
        return choose(self, self.shape_of(request), candidates, declared, why)


def _selection_shape(request) -> tuple:
    return (request.op, request.dtype, lg(request.rows), lg(request.row_len), lg(request.k))


def _multikey_shape(job) -> tuple:
    return (str(len(job.keys)), str(job.bits), lg(job.n), "device" if job.on_device else "host")


def _search_shape(query) -> tuple:
    return (query.dtype, lg(query.n), lg(query.m), lg(query.rows), str(int(bool(query.sorter))))


SELECTION = Kind(SelectPlugin.entry_point_group, "selection",
                 (("op", False), ("dtype", False), ("rows", True), ("row_len", True), ("k", True)),
                 _selection_shape)
MULTIKEY = Kind(MultikeyPlugin.entry_point_group, "multikey",
                (("keys", False), ("bits", False), ("n", True), ("on", False)), _multikey_shape)
SEARCH = Kind(SearchPlugin.entry_point_group, "search",
              (("dtype", False), ("n", True), ("m", True), ("rows", True), ("sorter", False)),
              _search_shape)
KINDS = {k.group: k for k in (SELECTION, MULTIKEY, SEARCH)}


def nearest(kind: Kind, results: dict, shape: tuple):
    """(measured shape, {name: ms} there) nearest to `shape` among `results`
    (name -> {key: ms}), or (None, why not)."""
    points: dict = {}
    for name, by_key in results.items():
        for key, ms in by_key.items():
            at = kind.parse(key)
            if at is None or any(not log2 and a != s for (_, log2), a, s in zip(kind.fields, at, shape)):
                continue
            points.setdefault(at, {})[name] = ms
    if not points:
        return None, "nothing measured for " + kind.describe(shape)
    logs = [i for i, (_, log2) in enumerate(kind.fields) if log2]
    for i in logs:  # never extrapolate past what is measured
        lo, hi = min(p[i] for p in points), max(p[i] for p in points)
        if not lo <= shape[i] <= hi:
            return None, (f"{kind.fields[i][0]} 2^{shape[i]} is outside the measured "
                          f"2^{lo}..2^{hi}")
    near = [p for p in points if all(abs(p[i] - shape[i]) <= NEAR for i in logs)]
    if not near:
        return None, f"no measured shape within a factor of {1 << NEAR} in every size"
    best = min(near, key=lambda p: (sum(abs(p[i] - shape[i]) for i in logs), p))
    return best, points[best]


def decide(section: dict, kind: Kind, shape: tuple, candidates: dict, declared: str, why: str,
           hashes: dict | None = None) -> Pick:
    """The rule (module docstring) over `section` (the cache's
    kinds[group]: name -> {"hash", "results": {key: ms}}); `hashes`
    (name -> current kind_hash) leaves out results of changed plugins."""
    results, stale = {}, []
    for name in sorted(candidates):
        block = section.get(name)
        if not isinstance(block, dict) or not block.get("results"):
            continue
        if hashes is not None and block.get("hash") != hashes.get(name):
            stale.append(name)
            continue
        results[name] = block["results"]
    note = f" ({', '.join(stale)} changed since measured)" if stale else ""
    at, times = nearest(kind, results, shape)
    if at is None:
        return Pick(declared, f"nothing measured here to use ({times}){note}; declared: {why}")
    ranked = sorted(times.items(), key=lambda t: (t[1], t[0]))
    listed = ", ".join(f"{n} {ms:.3g} ms" for n, ms in ranked)
    where = kind.describe(at) + ("" if at == shape else f" (nearest measured to {kind.describe(shape)})")
    if declared not in times:
        return Pick(declared, f"{declared} is preferred by declaration and not measured at "
                              f"{where} (measured there: {listed}){note}; declared: {why}",
                    dict(times), at)
    return Pick(ranked[0][0], f"measured here: {listed} at {where}{note}", dict(times), at)


_memo: dict = {}
_memo_lock = threading.Lock()


def choose(kind: Kind, shape: tuple, candidates: dict, declared: str, why: str) -> Pick:
    """decide() over this device's table; the declared choice where there
    is one candidate, no GPU, or the table cannot be read (warned once).
    Memoised per (shape, candidates, declared choice) under the measured
    tables' generation (runtime.generation: a table written, or reset()),
    the registry's generation and the device and cache directory asked for
    (settings: as runtime.context() picks its table), so a call that is
    answered from the memo reads no table."""
    if len(candidates) <= 1:
        return Pick(declared, why)
    from .. import settings
    from ..gpu.device import active_ordinal, gpu_available
    from ..sdk import registry
    from . import runtime

    if not gpu_available():
        return Pick(declared, f"nothing measured (no GPU here); declared: {why}")
    try:
        key = (kind.group, shape, tuple(sorted(candidates)), declared, why, runtime.generation(),
               registry.generation, active_ordinal(), settings.cache_dir())
        pick = _memo.get(key)
        if pick is None:
            ctx = runtime.context()
            hashes = {n: cache.kind_hash(p) for n, p in candidates.items()}
            pick = decide(ctx.table.get("kinds", {}).get(kind.group, {}), kind, shape, candidates,
                          declared, why, hashes)
            with _memo_lock:
                if len(_memo) > 4096:
                    _memo.clear()
                _memo[key] = pick
        return pick
    except Exception as exc:  # reading measurements must never break a call
        cache.warn_once("kinds:" + kind.group, f"cudasortkit: reading the {kind.what} measurements "
                                               f"failed ({type(exc).__name__}: {exc}); declared "
                                               "choices used")
        return Pick(declared, why)
