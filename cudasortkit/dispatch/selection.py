"""auto for selection requests (topk, partition): which SelectPlugin serves one.

The rule, from what plugins declare (nothing is measured for selection
yet): host arrays under HOST_CUTOFF keys, and every request on a machine
without a GPU, go to a CPU plugin; otherwise the GPU plugin of lowest
declared priority for the request's (rows, row length, k)
(SelectPlugin.priorities), ties by name. A plugin asked for by name must
serve the request or ValueError says why and which can."""
from __future__ import annotations

from ..errors import PluginError
from ..gpu.device import gpu_available, unavailable_reason
from ..sdk import registry
from ..sdk.selection import SelectPlugin, SelectRequest
from .select import HOST_CUTOFF, Decision

GROUP = SelectPlugin.entry_point_group


def serving(request: SelectRequest) -> dict:
    """name -> working plugin of the selection kind that serves `request`
    (a plugin whose unsupported() fails is out of service and skipped)."""
    out = {}
    for name, plugin in registry.plugins(GROUP).items():
        try:
            if registry.call(plugin, "unsupported", request) is None:
                out[name] = plugin
        except PluginError:
            continue
    return out


def choose(request: SelectRequest, algorithm: str = "auto") -> tuple:
    """(plugin, reason) for `request`."""
    if algorithm != "auto":
        return _by_name(request, algorithm), "asked for by name"
    pool = serving(request)
    cpu = {n: p for n, p in pool.items() if p.device == "cpu"}
    gpu = {n: p for n, p in pool.items() if p.device == "gpu"}
    if cpu and (not gpu or not gpu_available() or
                (not request.on_device and request.n < HOST_CUTOFF)):
        name = min(cpu, key=lambda n: (cpu[n].priority_for(request)[0], n))
        why = ("host array under {:,} keys".format(HOST_CUTOFF) if gpu and gpu_available()
               else "no GPU plugin can serve it here" if gpu_available()
               else f"no GPU here ({unavailable_reason()}): selected on the CPU")
        return cpu[name], why
    if not gpu:
        raise ValueError(f"no selection algorithm can serve {request}; "
                         f"registered: {', '.join(sorted(registry.plugins(GROUP))) or 'none'}")
    name = min(gpu, key=lambda n: (gpu[n].priority_for(request)[0], n))
    priority, rule = gpu[name].priority_for(request)
    others = ", ".join(f"{n} {gpu[n].priority_for(request)[0]}" for n in sorted(gpu) if n != name)
    return gpu[name], (f"lowest declared priority ({priority}, by {rule}) among the GPU plugins "
                       f"that serve it{' (others: ' + others + ')' if others else ''}; "
                       "nothing measured")


def explain(request: SelectRequest, algorithm: str = "auto") -> Decision:
    plugin, why = choose(request, algorithm)
    return Decision(plugin.name, None, None, f"{request}: {why}", algorithm=algorithm)


def _by_name(request: SelectRequest, name: str):
    table = registry.entries(GROUP)
    entry = table.get(name)
    if entry is None:
        raise ValueError(f"unknown selection algorithm {name!r}; known: "
                         f"{', '.join(sorted(table)) or 'none'} (or 'auto')")
    if not entry.ok:
        raise ValueError(f"selection algorithm {name!r} is disabled: {entry.error}")
    try:
        reason = registry.call(entry.plugin, "unsupported", request)
    except PluginError as exc:
        raise ValueError(f"selection algorithm {name!r} is disabled: {exc.reason}") from exc
    if reason is None and entry.plugin.device == "gpu" and not gpu_available():
        reason = f"{name} needs a GPU: {unavailable_reason()}"
    if reason is not None:
        raise ValueError(f"selection algorithm {name!r} cannot serve {request}: {reason}; "
                         f"algorithms that can: {', '.join(sorted(serving(request))) or 'none'}")
    return entry.plugin
