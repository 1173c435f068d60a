"""Which plugin serves a request: by name, or "auto".

"auto" asks the tuner's measurements when there are any (cudasortkit.tuning
registers itself as the `policy`); without them it falls back to a simple
rule: stay on the CPU for small host arrays or without a GPU, else take the
first usable plugin in FALLBACK_ORDER, then any other GPU plugin.

Choices by name and auto's fallback are memoised per request shape (the
tuner memoises its own decisions), unless they depended on the keys.

Plugin code runs under registry.guarded: a plugin whose code fails while
choosing is taken out of service, and auto chooses again without it.
"""
from __future__ import annotations

import warnings

import numpy as np

from . import registry
from .device import gpu_available, unavailable_reason
from .errors import PluginError, warn_caller
from .plugin import Request

#: Built-in preference when nothing is measured: counting first (it declines what
#: it cannot serve: floats, wide key ranges), then the fastest general sorts.
FALLBACK_ORDER = ("counting", "onesweep", "radix", "merge_sort", "bitonic", "numpy")
#: Host arrays shorter than this stay on the CPU when nothing is measured.
HOST_CUTOFF = 1 << 16

#: A callable(request, usable_plugins) -> (plugin, config) or None; set by the tuner.
policy = None
#: A callable(request, plugin) -> config or None (defaults) for a plugin chosen by
#: name; set by the tuner so named plugins run their tuned config too.
configure = None

_tuning_loaded = False

#: (algorithm, request shape) -> (plugin, config) of choices by name and of
#: auto's fallback. Cleared with the tuner's decisions (forget_decisions).
_decisions: dict = {}
_DECISIONS_MAX = 4096

_warned_cpu = False


def usable(request: Request) -> dict:
    """name -> plugin for every working plugin that can serve `request` here;
    one whose unsupported() fails is taken out of service and left out."""
    gpu = gpu_available()
    out = {}
    for name, p in registry.plugins().items():
        try:
            if registry.call(p, "unsupported", request) is None and (p.device == "cpu" or gpu):
                out[name] = p
        except PluginError:
            continue
    return out


def choose(request: Request, algorithm: str = "auto"):
    """(plugin, config) for `request`; ValueError names what could serve it."""
    _load_tuning()
    if algorithm != "auto":
        key = _decision_key(request, algorithm)
        picked = _decisions.get(key) if key is not None else None
        if picked is None:
            plugin = _by_name(request, algorithm)
            try:
                picked = plugin, (configure(request, plugin) if configure is not None else None)
            except PluginError as exc:  # its valid_config() failed on the tuned config
                raise ValueError(f"algorithm {algorithm!r} is disabled: {exc.reason}") from exc
            _remember(key, request, picked)
        plugin, config = picked
        return plugin, (dict(config) if config is not None else None)  # the caller's to change
    fast = getattr(policy, "cached", None)
    picked = fast(request) if fast is not None else None
    if picked is not None:
        return picked
    key = _decision_key(request, algorithm)
    picked = _decisions.get(key) if key is not None else None
    if picked is not None:
        return picked
    candidates, picked = _weigh(request)
    if picked is not None:
        return picked
    picked = _fallback(request, candidates), None
    _remember(key, request, picked)
    return picked


def _weigh(request: Request):
    """(usable plugins, the policy's (plugin, config) or None); ValueError if
    none can serve `request`. A candidate whose code fails while the policy
    weighs it is out of service then, and the policy weighs the rest (one
    fewer each time, so this ends)."""
    while True:
        candidates = usable(request)
        if not candidates:
            raise ValueError(f"no algorithm can {_describe(request)}; available: "
                             f"{_can_list(request) or 'none'}")
        if policy is None:
            return candidates, None
        try:
            return candidates, policy(request, candidates)
        except PluginError as exc:
            if exc.plugin not in candidates or exc.plugin in registry.plugins():
                raise


#: (dtype, stable, bit length of n) of host-array sorts that auto sends to a
#: CPU plugin for good: api.sort hands later ones of the same shape straight
#: to NumPy (tiny host arrays cost what NumPy costs). Forgotten with the
#: memoised decisions.
host_cpu_shapes: set = set()


def note_host_choice(request: Request, plugin) -> None:
    """Remember a settled auto choice of a CPU plugin for a plain ascending
    host sort (what api.sort's fast path may skip straight to NumPy for)."""
    if (plugin.device == "cpu" and request.kind == "sort" and not request.on_device
            and not request.descending and request.key_range is None and settled(request)):
        host_cpu_shapes.add((np.dtype(request.dtype), request.stable, request.n.bit_length()))


def settled(request: Request) -> bool:
    """True when auto's choice for `request` will not change on the next call
    (no tuner, or the tuner has made and kept its decision)."""
    pending = getattr(policy, "pending", None)
    return pending is None or not pending(request)


def forget_decisions() -> None:
    """Drop the memoised choices (the tuner calls this when its results change)."""
    _decisions.clear()
    host_cpu_shapes.clear()


def _decision_key(request: Request, algorithm: str):
    """Memo key of a choice for `request`, or None when it must not be memoised
    (options or a key_range given). The tuner's shape key has what its
    decisions follow from (the registry, the cache directory); the hooks are
    in it, so swapping one in (tests do) is not answered from the memo."""
    if request.options or request.key_range is not None:
        return None
    shape_key = getattr(policy, "shape_key", None)
    if shape_key is not None:
        return algorithm, policy, configure, shape_key(request)
    return (algorithm, policy, configure, registry.generation, request.kind, request.dtype,
            request.n, request.value_bytes, request.on_device, request.stable, request.descending)


def _remember(key, request: Request, picked) -> None:
    """Memoise `picked` unless it may change: it depended on the keys (the
    range probe ran) or lazy tuning for this shape is unfinished."""
    probe = request.range_probe
    if key is None or (probe is not None and getattr(probe, "done", True)) or not settled(request):
        return
    if len(_decisions) >= _DECISIONS_MAX:
        _decisions.clear()
    _decisions[key] = picked


def _load_tuning():
    """Install cudasortkit.tuning's hooks on first selection (keeps import cheap)."""
    global _tuning_loaded
    if _tuning_loaded:
        return
    _tuning_loaded = True
    try:
        from . import tuning

        tuning.install()
    except Exception as exc:  # a broken tuner must not stop sorting
        warnings.warn(f"cudasortkit: tuning is unavailable ({type(exc).__name__}: {exc}); "
                      "using default selection", RuntimeWarning, stacklevel=3)


def _by_name(request: Request, name: str):
    entry = registry.entries().get(name)
    if entry is None:
        raise ValueError(f"unknown algorithm {name!r}; known: "
                         f"{', '.join(sorted(registry.entries())) or 'none'} (or 'auto')")
    if entry.plugin is None:
        raise ValueError(f"algorithm {name!r} failed to load: {entry.error}")
    if entry.error is not None:
        raise ValueError(f"algorithm {name!r} is disabled: {entry.error}")
    try:
        reason = registry.call(entry.plugin, "unsupported", request)
    except PluginError as exc:
        raise ValueError(f"algorithm {name!r} is disabled: {exc.reason}") from exc
    if reason is None and entry.plugin.device == "gpu" and not gpu_available():
        reason = f"{name} needs a GPU: {unavailable_reason()}"
    if reason is not None:
        raise ValueError(f"algorithm {name!r} cannot {_describe(request)}: {reason}; "
                         f"algorithms that can: {_can_list(request) or 'none'}")
    return entry.plugin


def _fallback(request: Request, candidates: dict):
    gpu_names = [n for n, p in candidates.items() if p.device == "gpu"]
    if "numpy" in candidates and (not gpu_names or (not request.on_device and request.n < HOST_CUTOFF)):
        if not gpu_names and not gpu_available():
            _warn_cpu()
        return candidates["numpy"]
    ordered = [n for n in FALLBACK_ORDER if n in gpu_names] + sorted(set(gpu_names) - set(FALLBACK_ORDER))
    if ordered:
        return candidates[ordered[0]]
    return next(iter(candidates.values()))


def _warn_cpu():
    global _warned_cpu
    if not _warned_cpu:
        _warned_cpu = True
        warn_caller(f"cudasortkit is sorting on the CPU with NumPy: {unavailable_reason()}")


def _describe(request: Request) -> str:
    what = {"sort": "sort", "argsort": "argsort", "pairs": "sort key-value pairs of"}[request.kind]
    extra = [w for w, on in (("stable", request.stable), ("descending", request.descending)) if on]
    return f"{what} {request.n} {request.dtype} keys" + (f" ({', '.join(extra)})" if extra else "")


def _can_list(request: Request) -> str:
    return ", ".join(sorted(usable(request)))
