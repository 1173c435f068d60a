"""One call from checked operands to results: choose a plugin (auto chooses
again when the chosen one turns out broken) and run it in the caller's
stream. `run` is the one path from operands to a plugin that the public
calls and the tuner share: it checks a key_range promise the plugin does
not check itself, then hands a CPU plugin's run, a large host array's
pipeline (host/pipeline.py) or a device sort (launch/run.py) the work.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..dtypes import INDEX_DTYPE
from ..errors import PluginError
from ..gpu.arrays import Operand
from ..gpu.device import get_device
from ..gpu.streams import LEGACY
from ..host import pipeline as hostpipe
from ..launch import built
from ..launch.run import run_device, run_host
from ..sdk.plugin import RUN_ERRORS, Request
from .request import caller_ordering, make_request


@dataclass(frozen=True)
class Outcome:
    """What execute() did: the results (keys, values or indices) and the
    choice that made them, for a caller that prepares repeats of it.
    `stand_in`: the plugin and config ran in place of the chosen ones while
    those are built (launch/built.py): nothing to prepare repeats of."""

    result: tuple
    request: Request
    plugin: object
    config: dict | None
    state: object
    stand_in: bool = False


def execute(selector, kind, keys: Operand, values: Operand | None, descending, stable, algorithm,
            out=None, values_out=None, key_range=None, stream=None, segments=None, progress=False,
            index_dtype=INDEX_DTYPE) -> Outcome:
    """Choose a plugin with `selector` for the call and run it, ordered in the
    caller's stream; out= / values_out= (caller arrays or None) receive the
    results. A plugin that fails as a plugin (PluginError) is out of
    service: auto chooses again, a plugin asked for by name raises."""
    targets = {"out": None, "values_out": None}
    for name, value in (("out", out), ("values_out", values_out)):
        if value is not None:
            targets[name] = Operand(value, name, "out")
    state, ordering = caller_ordering(stream, (keys, values, *targets.values()))
    if ordering is not None:
        ordering.begin()
    try:
        request = make_request(kind, keys, values, descending, stable, key_range, segments,
                               index_dtype, **({"progress": True} if progress else {}))
        while True:
            plugin, config = selector.choose(request, algorithm)
            stood_in = False
            if state is not None:
                # A config that has not run here yet is built off this call's
                # path while one that has runs (launch/built.py).
                plugin, config, stood_in = built.choose(
                    plugin, config, request, lambda: keys.device_ptr(state), state,
                    auto=algorithm == "auto")
            try:
                result = run(plugin, config, request, keys, values, targets, state,
                             ordering.caller if ordering else None)
            except PluginError:
                if algorithm != "auto":
                    raise
                continue
            return Outcome(result, request, plugin, config, state, stood_in)
    finally:
        if ordering is not None:
            ordering.end()


def run_plugin(plugin, config, kind: str, keys, values=None, *, descending=False, segments=None):
    """Run `plugin` with `config` (None: defaults) exactly as a public call
    would (request, result buffers, argsort indices, job, stream ordering),
    without selection; `segments` as in a segmented request. The tuner
    times this, so that what it measures is what sort() costs the caller,
    host-side work included."""
    k = Operand(keys, "keys")
    v = Operand(values, "values") if values is not None else None
    targets = {"out": None, "values_out": None}
    state, ordering = caller_ordering(None, (k, v))
    if ordering is not None:
        ordering.begin()
    try:
        request = make_request(kind, k, v, descending, kind == "pairs", segments=segments)
        return run(plugin, config, request, k, v, targets, state, ordering.caller if ordering else None)
    finally:
        if ordering is not None:
            ordering.end()


def run(plugin, config, request: Request, keys: Operand, values: Operand | None, targets: dict,
        state, caller: int | None):
    """`plugin` with `config` (None: its defaults) on the request: the keys
    (and values) in, results out as the caller's kind or into
    targets["out"] / targets["values_out"] (Operands or None). `state` is
    the device of a call that touches device memory (None: host-only), and
    `caller` its stream handle (None: host-only)."""
    if request.key_range is not None and not plugin.checks_key_range:
        _verify_key_range(request, keys, state)
    if plugin.device == "cpu":
        return run_host(plugin, config, request, keys, values, targets, state)
    state = state or get_device(keys.ordinal)
    if hostpipe.takes(request, keys, values, targets, state):  # large host arrays: pipelined
        return hostpipe.run(plugin, config, request, keys, values, targets, state, RUN_ERRORS)
    return run_device(plugin, config, request, keys, values, targets["out"],
                       targets["values_out"], state, LEGACY if caller is None else caller)


def _verify_key_range(request: Request, keys: Operand, state) -> None:
    """The caller's key_range promise, checked for plugins that do not check it."""
    if keys.n == 0:
        return
    if keys.on_device:
        from ..build.corekernels import key_minmax

        lo, hi = key_minmax(state, keys.device_ptr(state), keys.n, keys.key_dtype)
    else:
        lo, hi = int(keys.array.min()), int(keys.array.max())
    want_lo, want_hi = request.key_range
    if lo < want_lo or hi > want_hi:
        raise ValueError(f"some keys lie outside key_range={request.key_range} "
                         f"(they span {lo} .. {hi})")

