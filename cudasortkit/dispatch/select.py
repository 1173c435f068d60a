"""Which plugin serves a request: by name, or "auto".

A `Selector` holds a policy and the one cache of its decisions. The policy
decides for "auto" among the plugins that can serve the request (and gives
a plugin asked for by name its config); the Selector memoises each decision
under one request-shape key, which carries the registry's and the policy's
generations, so a new plugin or new measurements are never answered from
the cache. `DefaultPolicy` decides from what plugins declare; the measured
policy (cudasortkit/tuning/measured.py) decides from this device's
measurements and falls back on it.

Plugin code runs under registry.guarded: a plugin whose code fails while
choosing is taken out of service, and auto chooses again without it.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..sdk import registry
from ..gpu.device import gpu_available, unavailable_reason
from ..errors import PluginError, warn_caller
from ..order import numpy_kind
from ..sdk.plugin import Request

#: Host arrays shorter than this stay on a CPU plugin when nothing is measured.
HOST_CUTOFF = 1 << 16
#: Host arrays shorter than this always stay on a CPU plugin (one that can
#: serve them): two PCIe copies and a launch cost more than NumPy's sort of
#: 4,096 keys, so their first call need not start the GPU to decide. (A power
#: of two: decisions are memoised per bit length of n.)
HOST_TINY = 1 << 12


@dataclass(frozen=True)
class Choice:
    """A policy's answer: the plugin, its config (None: defaults), why,
    whether it may be memoised (False while it may change on the next call),
    and `observe`: None, or a cheap callable the Selector calls on every
    later call the memoised choice answers (the measured policy's learner
    counts calls with it)."""

    plugin: object
    config: dict | None
    reason: str
    final: bool = True
    observe: Callable[[], None] | None = None


def usable(request: Request) -> dict:
    """name -> plugin for every working plugin that can serve `request` here;
    one whose unsupported() fails is taken out of service and left out.
    Host arrays of fewer than HOST_TINY keys get only the CPU plugins that
    can serve them, if any can: the GPU is not even asked about."""
    plugins = registry.plugins()
    if not _gpu_considered(request):
        cpu = _serving(request, {n: p for n, p in plugins.items() if p.device == "cpu"})
        if cpu:
            return cpu
    gpu = gpu_available()
    return _serving(request, {n: p for n, p in plugins.items() if p.device == "cpu" or gpu})


def _gpu_considered(request: Request) -> bool:
    """False for the host arrays that usable() keeps on the CPU unasked."""
    return request.on_device or request.n >= HOST_TINY


def _serving(request: Request, plugins: dict) -> dict:
    out = {}
    for name, p in plugins.items():
        try:
            if registry.call(p, "unsupported", request) is None:
                out[name] = p
        except PluginError:
            continue
    return out


def priority_of(plugin, request: Request) -> int:
    """A plugin's declared priority for `request`: by its size (and what
    else SortPlugin.priority_for_request weighs), or for a segmented
    request by its longest segment (SortPlugin.segment_priorities)."""
    if request.segments is None:
        return plugin.priority_for_request(request)
    return plugin.priority_for_segments(request.segments)


class DefaultPolicy:
    """auto without measurements, from the plugins' declarations: a CPU
    plugin for host arrays under HOST_CUTOFF keys or when no GPU plugin can
    serve the request, else the GPU plugin of lowest `priority_for(n)`
    (ties by name), each with its default config."""

    #: Decisions follow from the registry alone.
    generation = 0

    def choose(self, request: Request, candidates: dict) -> Choice:
        gpu = {n: p for n, p in candidates.items() if p.device == "gpu"}
        cpu = {n: p for n, p in candidates.items() if p.device == "cpu"}
        if cpu and (not gpu or (not request.on_device and request.n < HOST_CUTOFF)):
            name = min(cpu, key=lambda n: (priority_of(cpu[n], request), n))
            if gpu:
                why = f"host array under {HOST_CUTOFF:,} keys (the default rule)"
            elif not _gpu_considered(request):  # (asking would start the driver)
                why = f"host array under {HOST_TINY:,} keys: sorted on the CPU, the GPU is not asked"
            elif not gpu_available():
                _warn_cpu()
                why = "no GPU here: sorted on the CPU"
            else:
                why = "no GPU plugin can serve it here"
            return Choice(cpu[name], None, why)
        pool = gpu or candidates
        name = min(pool, key=lambda n: (priority_of(pool[n], request), n))
        return Choice(pool[name], None, f"lowest declared priority ({priority_of(pool[name], request)}) "
                                        "among the plugins that can serve it (nothing measured)")

    def configure(self, request: Request, plugin) -> dict | None:
        return None


@dataclass
class _Memo:
    """A memoised decision: the plugin and config, its key (None: not
    stored), the policy's observer, and for a decision that read the keys:
    how many more calls it serves (uses) or that its plugin must accept each
    call's keys (recheck). `granted`: the calls `uses` started at.
    Expired (uses below 0), it stays stored until the decision made again
    replaces it, which reads its plugin and grant (Selector.PROBE_REUSE)."""

    plugin: object
    config: dict | None
    key: tuple | None = None
    observe: Callable[[], None] | None = None
    uses: int | None = None
    recheck: bool = False
    granted: int | None = None


@dataclass
class Decision:
    """What auto picks and why (cudasortkit.explain shows it)."""

    name: str | None
    config: dict | None
    ms: float | None
    reason: str
    estimates: list = field(default_factory=list)  # Estimate, fastest first
    unmeasured: list = field(default_factory=list)
    #: What was asked for: "auto" or a plugin's name. `name` is None where
    #: that plugin cannot run here (a GPU plugin on a machine without one).
    algorithm: str = "auto"

    def __str__(self) -> str:
        chosen = "(cannot run here)" if self.name is None else \
            f"{self.name} {self.config or '(default config)'}"
        lines = [f"{self.algorithm} -> {chosen}: {self.reason}"]
        for e in self.estimates:
            cfg = "" if e.config is None else f" {e.config}"
            lines.append(f"  {e.name:14} ~{e.ms:10.4f} ms{cfg}{('  ' + e.note) if e.note else ''}")
        if self.unmeasured:
            lines.append(f"  not measured here: {', '.join(self.unmeasured)}")
        return "\n".join(lines)


class Selector:
    """(plugin, config) for requests, by name or "auto", through `policy`,
    each decision memoised under one request-shape key."""

    MAX_DECISIONS = 4096
    #: A choice that read the keys' range but went to a plugin that does not
    #: depend on it (the keys were too spread for counting, say) answers this
    #: many calls of the shape before the range is read again: the read is a
    #: pass over the keys and a wait for the GPU. The plugin chosen sorts any
    #: keys, so a stale answer only costs speed. Each read that lands on the
    #: same plugin again doubles the calls until the next, up to
    #: PROBE_REUSE_MAX: a shape whose keys stay spread pays for fewer and
    #: fewer reads. (With a read every 65 calls, auto's slowest uint32 calls
    #: of 2^16-2^24 keys took 0.95-3.1 ms, onesweep's by name 0.06-0.95:
    #: H100, docs/benchmarks.md.)
    PROBE_REUSE = 64
    PROBE_REUSE_MAX = 4096

    def __init__(self, policy=None):
        self.policy = policy if policy is not None else DefaultPolicy()
        #: policy.generation, read by a call without a Python frame where the
        #: policy offers one (`generation_reader`, as MeasuredPolicy does).
        self._policy_generation = getattr(self.policy, "generation_reader", None) or \
            (lambda: self.policy.generation)
        self._decisions: dict = {}
        #: (dtype.num, stable, bit length of n) -> np.sort kind, for plain
        #: ascending host sorts that auto gives a plugin declaring
        #: `host_sort_is_numpy`: api.sort sorts later ones with NumPy directly.
        self._host_shapes: dict = {}
        #: The same for api.sort's plain calls alone, by (dtype.num, stable,
        #: bit length of n): plain_host_sort's one lookup.
        self._host_sorts: dict = {}
        self._host_generations = (None, None)
        #: Moves whenever memoised decisions are dropped wholesale: what was
        #: built on one of them (cudasortkit/calls/sort_prepared.py) checks it.
        self.epoch = 0
        self._lock = threading.Lock()

    # ----------------------------------------------------------- the key
    def key(self, request: Request, algorithm: str):
        """The one memo key of a decision, or None when it must not be
        memoised (options or a key_range given: they may change it)."""
        if request.options or request.key_range is not None:
            return None
        return (algorithm, registry.generation, self._policy_generation(), request.kind,
                request.dtype, request.n.bit_length(), request.value_bytes, request.on_device,
                request.stable, request.descending,
                None if request.segments is None else request.segments.key)

    def forget(self) -> None:
        """Drop every memoised decision (the key already changes with the
        registry and the policy; this is for changes it cannot see)."""
        with self._lock:
            self._decisions.clear()
            self._host_shapes.clear()
            self._host_sorts.clear()
            self.epoch += 1

    # -------------------------------------------------------------- choose
    def choose(self, request: Request, algorithm: str = "auto"):
        """(plugin, config); ValueError naming what could serve the request."""
        key = self.key(request, algorithm)
        memo = last = self._decisions.get(key) if key is not None else None
        if memo is not None and not self._still_holds(memo, request):
            memo = None
        if memo is None:
            choice = self.decide(request, algorithm)
            memo = _Memo(choice.plugin, choice.config, key, choice.observe)
            probe = request.range_probe
            if probe is not None and getattr(probe, "done", True):  # the choice read the keys
                if choice.plugin.decides_on_key_range:
                    memo.recheck = True  # the next keys may not fit: ask it again each call
                else:
                    memo.uses = memo.granted = self._calls_before_probe(last, choice.plugin)
            if key is not None and choice.final:
                with self._lock:
                    if len(self._decisions) >= self.MAX_DECISIONS:
                        self._decisions.clear()
                        self.epoch += 1
                    self._decisions[key] = memo
            self._note_host_shape(request, algorithm, choice)
        elif memo.observe is not None:
            memo.observe()
        config = memo.config
        return memo.plugin, (dict(config) if config is not None else None)  # the caller's to change

    def _calls_before_probe(self, last, plugin) -> int:
        """How many calls a choice the keys' range made for `plugin` (not
        one deciding on the range) answers before the range is read again:
        PROBE_REUSE, or twice the grant of `last`, the memo it replaces, when
        that one went to the same plugin (at most PROBE_REUSE_MAX)."""
        if last is None or last.granted is None or last.plugin is not plugin:
            return self.PROBE_REUSE
        return min(2 * last.granted, self.PROBE_REUSE_MAX)

    def settled(self, request: Request, algorithm: str = "auto"):
        """The memoised decision for the request unless its plugin must see
        each call's keys (recheck) or it has expired, else None: what a call
        of the shape gets without a Request, while `reuse(memo)` says yes and
        the key's generations and this selector's epoch stay."""
        key = self.key(request, algorithm)
        memo = self._decisions.get(key) if key is not None else None
        if memo is None or memo.recheck or (memo.uses is not None and memo.uses < 0):
            return None
        return memo

    def reuse(self, memo) -> bool:
        """Whether a memoised choice answers one more call without reading its
        keys: always, unless the keys' range made it; that one serves its
        calls (PROBE_REUSE, doubling), then expires and the next call decides
        again (choose, which replaces it)."""
        if memo.uses is None:
            return True
        memo.uses -= 1
        return memo.uses >= 0

    def _still_holds(self, memo, request: Request) -> bool:
        """A memoised decision that read the keys is used again only while it
        holds: a plugin that decides on the key range is asked about these
        keys (it reads their range, which its run needs anyway); a choice the
        range turned elsewhere is reused (reuse)."""
        if memo.recheck:
            try:
                if registry.call(memo.plugin, "unsupported", request) is None:
                    return True
            except PluginError:
                pass
            self._decisions.pop(memo.key, None)
            return False
        return self.reuse(memo)

    def decide(self, request: Request, algorithm: str = "auto") -> Choice:
        """The policy's Choice, uncached (explain shows its reason)."""
        if algorithm != "auto":
            plugin = self._by_name(request, algorithm)
            try:
                config = self.policy.configure(request, plugin)
            except PluginError as exc:  # its valid_config() failed on the tuned config
                raise ValueError(f"algorithm {algorithm!r} is disabled: {exc.reason}") from exc
            return Choice(plugin, config, "asked for by name")
        while True:
            candidates = usable(request)
            if not candidates:
                raise ValueError(f"no algorithm can {describe(request)}; available: "
                                 f"{_can_list(request) or 'none'}")
            try:
                return self.policy.choose(request, candidates)
            except PluginError as exc:  # a candidate failed while weighed: weigh the rest
                if exc.plugin not in candidates or exc.plugin in registry.plugins():
                    raise

    # ------------------------------------------------------------- explain
    def explain(self, request: Request, algorithm: str = "auto"):
        """What `algorithm` would run for the request and why, as a
        a Decision (cudasortkit.explain); nothing is sorted or
        measured. On a machine without a GPU it reports rather than
        refuses: auto names its CPU plugin and the GPU plugins that would
        serve the request with a GPU; a GPU plugin asked for by name that
        could serve it gets a Decision without a plugin (name None) saying
        that sort() refuses it here, why, and what auto runs instead. A
        request the plugin cannot serve on any machine raises ValueError,
        as sort() does."""
        if algorithm != "auto":
            if self._waits_for_gpu(request, algorithm):
                auto = self.decide(request).plugin.name
                return Decision(None, None, None,
                                f"{algorithm} needs a GPU and there is none here ({unavailable_reason()}): "
                                f"sort(algorithm={algorithm!r}) raises ValueError here; auto sorts it "
                                f"with {auto}", algorithm=algorithm)
            choice = self.decide(request, algorithm)
            return Decision(choice.plugin.name, choice.config, None,
                            "asked for by name; " + ("tuned config of the nearest measured size"
                                                     if choice.config else "default config"),
                            algorithm=algorithm)
        candidates = usable(request)
        if not candidates:
            self.decide(request)  # raises ValueError naming what could serve it
        explain = getattr(self.policy, "explain", None)
        if explain is not None:
            decision = explain(request, candidates)
        else:
            choice = self.policy.choose(request, candidates)
            decision = Decision(choice.plugin.name, choice.config, None, choice.reason)
        waiting = sorted(n for n in registry.plugins() if self._waits_for_gpu(request, n))
        if waiting and _gpu_considered(request):
            decision.reason += (f"; {', '.join(waiting)} would serve it on a GPU, and there is none "
                                f"here ({unavailable_reason()})")
        return decision

    @staticmethod
    def _waits_for_gpu(request: Request, name: str) -> bool:
        """Whether working GPU plugin `name` would serve the request but
        for the missing GPU."""
        entry = registry.entries().get(name)
        if entry is None or not entry.ok or entry.plugin.device != "gpu" or gpu_available():
            return False
        try:
            return registry.call(entry.plugin, "unsupported", request) is None
        except PluginError:
            return False

    # ------------------------------------------------------ host fast path
    def host_sort_kind(self, dtype, stable: bool, n: int, op: str = "sort", value_bytes: int = 0):
        """NumPy's sort kind for a plain ascending 1-D host call of this shape
        (`op` "sort"; "argsort" with int64 indices, value_bytes 8; "pairs"
        with values of value_bytes) when auto gives such calls to a plugin
        that sorts exactly like cudasortkit.order and NumPy sorts the dtype
        itself (not bfloat16): api.sort, argsort and sort_by_key then call
        NumPy directly. None otherwise."""
        kind = self._host_shapes.get((op, value_bytes, dtype.num, stable, n.bit_length()))
        if kind is None or self._host_generations != (registry.generation, self._policy_generation()):
            return None
        return kind

    def plain_host_sort(self, a, stable: bool):
        """host_sort_kind(a.dtype, stable, a.size) for api.sort of a 1-D
        NumPy array `a`, plain and ascending, except that NumPy's default
        kind ("quicksort") comes back as "": api.sort's tiny-array path,
        which sorts 1,000 keys in the time of NumPy's call, so every
        bytecode counts (one lookup keyed by three ints; no keyword passed
        to NumPy where its default serves)."""
        kind = self._host_sorts.get((a.dtype.num, stable, a.size.bit_length()))
        if kind is None or self._host_generations != (registry.generation,
                                                      self._policy_generation()):
            return None
        return kind

    def host_sort_shape_known(self, dtype, stable: bool, n: int, op: str = "sort",
                              value_bytes: int = 0) -> bool:
        return self.host_sort_kind(dtype, stable, n, op, value_bytes) is not None

    def _note_host_shape(self, request: Request, algorithm: str, choice: Choice) -> None:
        if (algorithm == "auto" and choice.final and choice.observe is None
                and choice.plugin.host_sort_is_numpy and request.dtype != "bfloat16"
                and (request.kind != "argsort" or request.value_bytes == 8)
                and not request.on_device and not request.descending
                and request.key_range is None and not request.options and request.segments is None):
            generations = (registry.generation, self._policy_generation())
            dtype = np.dtype(request.dtype)
            with self._lock:
                if self._host_generations != generations:
                    self._host_shapes.clear()
                    self._host_sorts.clear()
                    self._host_generations = generations
                # keyed by dtype.num: hashing a dtype costs more than NumPy's
                # sort of a few keys; kinds of one num sort alike
                kind = numpy_kind(dtype, request.stable) or "quicksort"  # NumPy's default
                self._host_shapes[(request.kind, request.value_bytes, dtype.num, request.stable,
                                   request.n.bit_length())] = kind
                if request.kind == "sort":
                    self._host_sorts[(dtype.num, request.stable, request.n.bit_length())] = \
                        "" if kind == "quicksort" else kind

    # -------------------------------------------------------------- by name
    @staticmethod
    def _by_name(request: Request, name: str):
        return named_plugin(name, request, group=registry.GROUP, label="algorithm",
                            task=describe(request), serving=lambda: _can_list(request))


def named_plugin(name: str, request, *, group: str, label: str, task: str, serving: Callable):
    """The plugin `name` of entry-point group `group` for `request`, asked
    for by name: ValueError (naming it as `label`, the work as `task` and
    the plugins that can serve it, `serving()`) when it is unknown,
    disabled, cannot serve the request or needs a GPU this machine lacks."""
    table = registry.entries(group)
    entry = table.get(name)
    if entry is None:
        raise ValueError(f"unknown {label} {name!r}; known: "
                         f"{', '.join(sorted(table)) or 'none'} (or 'auto')")
    if not entry.ok:
        if entry.plugin is not None:  # loaded, then taken out of service
            raise ValueError(f"{label} {name!r} is disabled: {entry.error}")
        raise ValueError(f"{label} {name!r} failed to load: {entry.error}")
    try:
        reason = registry.call(entry.plugin, "unsupported", request)
    except PluginError as exc:
        raise ValueError(f"{label} {name!r} is disabled: {exc.reason}") from exc
    if reason is None and entry.plugin.device == "gpu" and not gpu_available():
        reason = f"{name} needs a GPU: {unavailable_reason()}"
    if reason is not None:
        raise ValueError(f"{label} {name!r} cannot {task}: {reason}; "
                         f"algorithms that can: {serving() or 'none'}")
    return entry.plugin


_warned_cpu = False


def _warn_cpu():
    global _warned_cpu
    if not _warned_cpu:
        _warned_cpu = True
        warn_caller(f"cudasortkit is sorting on the CPU with NumPy: {unavailable_reason()}")


def describe(request: Request) -> str:
    what = {"sort": "sort", "argsort": "argsort", "pairs": "sort key-value pairs of"}[request.kind]
    extra = [w for w, on in (("stable", request.stable), ("descending", request.descending)) if on]
    rows = "" if request.segments is None else f" in {request.segments!r}"
    return f"{what} {request.n} {request.dtype} keys{rows}" + (f" ({', '.join(extra)})" if extra else "")


def _can_list(request: Request) -> str:
    return ", ".join(sorted(usable(request)))
