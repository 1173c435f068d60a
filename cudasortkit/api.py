"""The public functions: sort, argsort, sort_by_key, algorithms.

Each call becomes a Request, a plugin is chosen (cudasortkit.select), and the
plugin runs either on NumPy arrays (CPU plugins) or on device buffers through
a Job. Ordering is NumPy's: NaNs last, -0.0 == +0.0; descending is the exact
reverse, except that a stable sort keeps equal keys in input order.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import launchplan, registry, select
from .arrays import Operand, Result, overlaps
from .device import get_device
from .dtypes import key_name, value_bytes as _value_bytes
from .job import Job
from .plugin import Request

INDEX_DTYPE = np.dtype(np.int64)

#: (dtype, stable, size bucket) of host sorts that auto sent to the CPU plugin:
#: later ones in the same bucket skip straight to NumPy, so tiny host arrays
#: cost what NumPy costs. Cleared when tuning results change.
_HOST_CPU_BUCKETS: set = set()


def forget_fast_paths() -> None:
    _HOST_CPU_BUCKETS.clear()


@dataclass
class HostJob:
    """What a CPU plugin's run() gets; it returns (sorted keys, values or None)."""

    kind: str
    keys: np.ndarray
    values: np.ndarray | None
    descending: bool
    stable: bool
    config: dict


def sort(a, *, descending=False, stable=False, algorithm="auto", out=None, key_range=None):
    """Sorted copy of the 1-D array `a` (or `a` sorted into `out`; `out=a` sorts in place).

    key_range=(lo, hi) promises lo <= every key <= hi, which lets
    range-limited algorithms (counting sort) skip measuring it.
    """
    if (type(a) is np.ndarray and (a.dtype, stable, a.size.bit_length()) in _HOST_CPU_BUCKETS
            and algorithm == "auto" and out is None and not descending and key_range is None
            and a.ndim == 1):  # tiny host arrays: what NumPy costs, plus about 0.3 us
        return np.sort(a, kind="stable" if stable or a.dtype.char == "e" else None)
    keys, _ = _execute("sort", Operand(a, "a"), None, descending, stable, algorithm, out, None,
                       key_range)
    return keys


def numpy_sort(a: np.ndarray, stable: bool) -> np.ndarray:
    # NumPy 2.4's default float16 sort was seen returning unsorted output
    # (sort() above inlines this for its fast path).
    return np.sort(a, kind="stable" if stable or a.dtype.char == "e" else None)


def argsort(a, *, descending=False, stable=False, algorithm="auto", key_range=None):
    """int64 indices that sort `a`; with stable=True exactly numpy.argsort(kind='stable')."""
    _, order = _execute("argsort", Operand(a, "a"), None, descending, stable, algorithm, None, None,
                        key_range)
    return order


def sort_by_key(keys, values, *, descending=False, algorithm="auto", out=None, values_out=None,
                key_range=None):
    """(sorted keys, values in the same order); stable. Values are 4- or 8-byte numbers."""
    k, v = Operand(keys, "keys"), Operand(values, "values")
    if k.n != v.n:
        raise ValueError(f"keys and values differ in length: {k.n} != {v.n}")
    _value_bytes(v.dtype)
    return _execute("pairs", k, v, descending, True, algorithm, out, values_out, key_range)


def algorithms() -> list:
    """One dict per registered plugin: name, dtypes, stable, pairs, tunables, status, error."""
    rows = []
    for name, entry in sorted(registry.entries().items()):
        p = entry.plugin
        rows.append({
            "name": name,
            "status": "ok" if entry.ok else "error",
            "error": entry.error,
            "target": entry.target,
            "distribution": entry.distribution,
            "device": p.device if p else None,
            "dtypes": tuple(p.dtypes) if p else (),
            "stable": p.stable if p else None,
            "pairs": p.pairs if p else None,
            "tunables": {k: {"default": t.default, "values": t.values} for k, t in p.tunables.items()} if p else {},
            "summary": p.summary if p else "",
        })
    return rows


def make_request(kind, keys: Operand, values: Operand | None, descending, stable,
                 key_range=None, **options) -> Request:
    if kind == "sort":
        vbytes = 0
    elif kind == "argsort":
        vbytes = INDEX_DTYPE.itemsize
    else:
        vbytes = _value_bytes(values.dtype)
    return Request.from_fields(kind=kind, dtype=key_name(keys.dtype), n=keys.n, stable=bool(stable),
                               descending=bool(descending), value_bytes=vbytes,
                               on_device=keys.on_device, key_range=_check_range(key_range),
                               options=options, range_probe=_RangeProbe(keys))


class _RangeProbe:
    """Request.range_probe: (min, max) of integer keys, measured once on first
    call (NumPy for host arrays, one GPU reduction for device arrays)."""

    def __init__(self, keys: Operand):
        self.keys = keys
        self.done = False
        self.value = None

    def __call__(self):
        if not self.done:
            self.value = self._measure()
            self.done = True
        return self.value

    def _measure(self):
        keys = self.keys
        if keys.n == 0 or keys.key_dtype.kind not in "iu":
            return None
        if not keys.on_device:
            return int(keys.array.min()), int(keys.array.max())
        from .corekernels import key_minmax

        state = get_device(keys.ordinal)
        return key_minmax(state, keys.device_ptr(state), keys.n, keys.key_dtype)


def _check_range(key_range):
    if key_range is None:
        return None
    lo, hi = key_range
    if lo > hi:
        raise ValueError(f"key_range=(lo, hi) needs lo <= hi, got {key_range}")
    return (lo, hi)


def run_plugin(plugin, config, kind: str, keys, values=None):
    """Run `plugin` with `config` (None: defaults) exactly as a public call
    would (request, result buffers, argsort indices, job, synchronization),
    without selection. The tuner times this, so that what it measures is
    what sort() costs the caller, host-side work included."""
    k = Operand(keys, "keys")
    v = Operand(values, "values") if values is not None else None
    return _execute(kind, k, v, False, kind == "pairs", plugin.name, None, None,
                    chosen=(plugin, config))


def _execute(kind, keys: Operand, values: Operand | None, descending, stable, algorithm, out,
             values_out, key_range=None, chosen=None):
    request = make_request(kind, keys, values, descending, stable, key_range)
    plugin, config = chosen if chosen is not None else select.choose(request, algorithm)
    if (plugin.name == "numpy" and kind == "sort" and algorithm == "auto" and not keys.on_device
            and not descending and key_range is None and out is None and select.settled(request)):
        _HOST_CPU_BUCKETS.add((keys.dtype, bool(stable), keys.n.bit_length()))
    if plugin.device == "cpu":
        return _run_host(plugin, config, request, keys, values, out, values_out)
    return _run_device(plugin, config, request, keys, values, out, values_out)


def _run_host(plugin, config, request, keys, values, out, values_out):
    job = HostJob(request.kind, keys.host(), None if values is None else values.host(),
                  request.descending, request.stable, config or plugin.default_config())
    sorted_keys, sorted_values = plugin.run(job)
    k = _deliver_host(keys, sorted_keys, out) if request.kind != "argsort" else None
    v = None
    if request.kind == "argsort":
        v = keys.wrap_host(np.ascontiguousarray(sorted_values, INDEX_DTYPE))
    elif request.kind == "pairs":
        v = _deliver_host(values, sorted_values, values_out)
    return k, v


def _deliver_host(like: Operand, result: np.ndarray, out):
    result = np.ascontiguousarray(result, like.dtype)
    if out is None:
        return like.wrap_host(result)
    target = Operand(out, "out")
    if target.n != like.n or target.dtype != like.dtype:
        raise ValueError(f"out must be a 1-D array of {like.n} {like.dtype}")
    if target.on_device:
        state = get_device(target.ordinal)
        if like.n:
            state.cuda.memcpy_htod(target.device_ptr(state), result)
    else:
        out[...] = result
    return out


def _run_device(plugin, config, request, keys, values, out, values_out):
    state = get_device(keys.ordinal)
    n = keys.n
    keys_in = keys.device_ptr(state)
    if request.kind == "argsort":
        key_result = None
        keys_out_buf = state.allocate(keys.nbytes, f"{plugin.name}: sorted keys of argsort")
        keys_out = int(keys_out_buf)
    else:
        key_result = Result(keys, keys.dtype, state, out, "out")
        keys_out = key_result.ptr
    values_in = values_out_ptr = 0
    value_result = None
    saved = []  # (pointer, backup buffer, nbytes) for in-place outputs
    if request.kind == "argsort":
        if not plugin.makes_indices:
            from .corekernels import iota64

            iota = state.allocate(n * INDEX_DTYPE.itemsize, f"{plugin.name}: argsort indices")
            saved.append((None, iota, 0))  # keeps the buffer alive
            iota64(state, int(iota), n)
            values_in = int(iota)
        value_result = Result(keys, INDEX_DTYPE, state)
        values_out_ptr = value_result.ptr
    elif request.kind == "pairs":
        values_in = values.device_ptr(state)
        value_result = Result(values, values.dtype, state, values_out, "values_out")
        values_out_ptr = value_result.ptr

    # In place (out overlaps the input): sort from a backup, restore it on failure.
    def detach(src, dst, nbytes, what):
        if not overlaps(src, nbytes, dst, nbytes):
            return src
        backup = state.allocate(nbytes, f"{plugin.name}: copy of {what} for an in-place sort")
        state.cuda.memcpy_dtod_async(int(backup), src, nbytes, state.stream)
        saved.append((dst, backup, nbytes))
        return int(backup)

    keys_in = detach(keys_in, keys_out, keys.nbytes, "keys")
    if values is not None:
        values_in = detach(values_in, values_out_ptr, values.nbytes, "values")
    vbytes = request.value_bytes if request.needs_values else 0
    try:
        if n <= 1:
            state.cuda.memcpy_dtod_async(keys_out, keys_in, keys.nbytes, state.stream)
            if vbytes and n:
                if values_in:
                    state.cuda.memcpy_dtod_async(values_out_ptr, values_in, vbytes, state.stream)
                else:  # argsort for a plugin that makes its indices: [0]
                    state.cuda.memset_d32_async(values_out_ptr, 0, vbytes // 4, state.stream)
            state.stream.synchronize()
        else:
            job = Job(plugin, state, dtype=request.dtype, n=n, keys_in=keys_in, keys_out=keys_out,
                      values_in=values_in, values_out=values_out_ptr, value_bytes=vbytes,
                      descending=request.descending, config=config, request=request)
            try:
                launchplan.run(plugin, job)
            finally:
                job.finish()
    except BaseException:
        for dst, backup, nbytes in saved:
            if dst is not None:
                state.cuda.memcpy_dtod(dst, int(backup), nbytes)
        raise
    k = key_result.finish() if key_result is not None else None
    v = value_result.finish() if value_result is not None else None
    return k, v
