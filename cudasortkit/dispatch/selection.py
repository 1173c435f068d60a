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
says why and which can.

`Choices` memoises choose()'s answer per request shape for the calls
(explain() decides afresh)."""
from __future__ import annotations

import threading
from typing import Callable

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


class Choices:
    """choose()'s (plugin, reason) memoised per request: the key holds the
    request's every field, the name asked for, the keys' device and what
    else may change the answer: the registry (registry.generation: a
    plugin registered, refreshed or taken out of service), the measured
    tables (`generation()`, the tuning runtime's, handed in: this layer
    does not import tuning/) and whether a GPU is here. So a call whose
    plugin fails (taken out of service) chooses again, and new
    measurements are never answered from the memo."""

    MAX_CHOICES = 4096

    def __init__(self, measured=None, generation: Callable[[], int] = lambda: 0):
        self.measured, self.generation = measured, generation
        self._memo: dict = {}
        self._lock = threading.Lock()

    def choose(self, request: SelectRequest, algorithm: str = "auto", device=None) -> tuple:
        """choose(request, algorithm, measured), memoised; `device` is the
        keys' device (an ordinal, None for host keys)."""
        key = (request, algorithm, device, registry.generation, self.generation(),
               gpu_available())
        found = self._memo.get(key)
        if found is None:
            found = choose(request, algorithm, self.measured)
            with self._lock:
                if len(self._memo) >= self.MAX_CHOICES:
                    self._memo.clear()
                self._memo[key] = found
        return found


def explain(request: SelectRequest, algorithm: str = "auto", measured=None) -> Decision:
    plugin, why = choose(request, algorithm, measured)
    return Decision(plugin.name, None, None, f"{request}: {why}", algorithm=algorithm)


def _by_name(request: SelectRequest, name: str):
    return named_plugin(name, request, group=GROUP, label="selection algorithm",
                        task=f"serve {request}",
                        serving=lambda: ", ".join(sorted(serving(request))))
