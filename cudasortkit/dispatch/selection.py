"""auto for selection requests (topk, partition): which SelectPlugin serves one.

The declared rule: host arrays under HOST_CUTOFF keys, and every request
on a machine without a GPU, go to a CPU plugin; otherwise the GPU plugin of
lowest declared priority for the request's (rows, row length, k)
(SelectPlugin.priorities), ties by name. Where the caller passes `measured`
(calls/select.py passes tuning/kinds.py's SELECTION.choose: this layer does
not import tuning/), that GPU choice is made from this device's
measurements instead where they reach the request; the plugins measured
then are the GPU ones and, for device arrays (what is measured), the CPU
ones too. A plugin asked for by name must serve the request or ValueError
says why and which can."""
from __future__ import annotations

from ..errors import PluginError
from ..gpu.device import gpu_available, unavailable_reason
from ..sdk import registry
from ..sdk.selection import SelectPlugin, SelectRequest
from .select import HOST_CUTOFF, Decision, named_plugin

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


def choose(request: SelectRequest, algorithm: str = "auto", measured=None) -> tuple:
    """(plugin, reason) for `request`; `measured(request, candidates,
    declared name, why)` -> an object with .name and .reason, when given,
    makes the GPU choice from measurements (module docstring)."""
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
    why = (f"lowest declared priority ({priority}, by {rule}) among the GPU plugins "
           f"that serve it{' (others: ' + others + ')' if others else ''}")
    if measured is None:
        return gpu[name], why + "; nothing measured"
    pool = {**cpu, **gpu} if request.on_device else gpu
    pick = measured(request, pool, name, why)
    return pool[pick.name], pick.reason


def explain(request: SelectRequest, algorithm: str = "auto", measured=None) -> Decision:
    plugin, why = choose(request, algorithm, measured)
    return Decision(plugin.name, None, None, f"{request}: {why}", algorithm=algorithm)


def _by_name(request: SelectRequest, name: str):
    return named_plugin(name, request, group=GROUP, label="selection algorithm",
                        task=f"serve {request}",
                        serving=lambda: ", ".join(sorted(serving(request))))
