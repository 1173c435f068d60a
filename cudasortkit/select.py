"""Which plugin serves a request: by name, or "auto".

"auto" asks the tuner's measurements when there are any (cudasortkit.tuning
registers itself as the `policy`); without them it falls back to a simple
rule: stay on the CPU for small host arrays or without a GPU, else take the
first usable plugin in FALLBACK_ORDER, then any other GPU plugin.
"""
from __future__ import annotations

import warnings

from . import registry
from .device import gpu_available, unavailable_reason
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

_warned_cpu = False


def usable(request: Request) -> dict:
    """name -> plugin for every working plugin that can serve `request` here."""
    gpu = gpu_available()
    return {name: p for name, p in registry.plugins().items()
            if p.unsupported(request) is None and (p.device == "cpu" or gpu)}


def choose(request: Request, algorithm: str = "auto"):
    """(plugin, config) for `request`; ValueError names what could serve it."""
    _load_tuning()
    if algorithm != "auto":
        plugin = _by_name(request, algorithm)
        return plugin, (configure(request, plugin) if configure is not None else None)
    fast = getattr(policy, "cached", None)
    picked = fast(request) if fast is not None else None
    if picked is not None:
        return picked
    candidates = usable(request)
    if not candidates:
        raise ValueError(f"no algorithm can {_describe(request)}; available: "
                         f"{_can_list(request) or 'none'}")
    if policy is not None:
        picked = policy(request, candidates)
        if picked is not None:
            return picked
    return _fallback(request, candidates), None


def settled(request: Request) -> bool:
    """True when auto's choice for `request` will not change on the next call
    (no tuner, or the tuner has made and kept its decision)."""
    pending = getattr(policy, "pending", None)
    return pending is None or not pending(request)


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
    if not entry.ok:
        raise ValueError(f"algorithm {name!r} failed to load: {entry.error}")
    reason = entry.plugin.unsupported(request)
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
        warnings.warn(f"cudasortkit is sorting on the CPU with NumPy: {unavailable_reason()}",
                      RuntimeWarning, stacklevel=5)


def _describe(request: Request) -> str:
    what = {"sort": "sort", "argsort": "argsort", "pairs": "sort key-value pairs of"}[request.kind]
    extra = [w for w, on in (("stable", request.stable), ("descending", request.descending)) if on]
    return f"{what} {request.n} {request.dtype} keys" + (f" ({', '.join(extra)})" if extra else "")


def _can_list(request: Request) -> str:
    return ", ".join(sorted(usable(request)))
