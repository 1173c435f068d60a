"""Running a chosen plugin on a request: the one path from caller arrays to
launches that the public API and the tuner both take.

`run(plugin, config, request, ...)` checks a key_range promise the plugin
does not check itself, then runs a CPU plugin on NumPy arrays or a GPU
plugin on device buffers through a Job: result buffers (the caller's kind,
or `out=`), argsort's indices, an in-place sort's backup (restored if
anything fails), the plugin's run() isolated by the registry and its
results checked (a wrong one is the plugin's fault). `caller_ordering`
places the call in the caller's stream (cudasortkit/streams.py).
"""
from __future__ import annotations

import numbers

import numpy as np

from ..host import pipeline as hostpipe
from ..sdk import registry
from ..gpu.arrays import Operand, Result, check_out, overlaps
from ..gpu.device import get_device
from ..dtypes import INDEX_DTYPE, key_name, value_bytes as _value_bytes
from ..errors import KernelError
from ..launch.sort_job import run_job
from ..sdk.plugin import Request
from ..gpu.streams import LEGACY, Ordering, handle_of

#: argsort's index dtypes: int64 (the default) and int32 (n < 2^31, half the
#: index traffic). The request carries the choice as its value_bytes.
INDEX_DTYPES = {8: INDEX_DTYPE, 4: np.dtype(np.int32)}
INT32_INDEX_LIMIT = 1 << 31


def check_index_dtype(index_dtype, n: int) -> np.dtype:
    """argsort's index_dtype as a NumPy dtype (int64 or int32); int32 needs
    n < 2^31. Errors name index_dtype."""
    try:
        dt = np.dtype(index_dtype)
    except TypeError:
        raise TypeError(f"index_dtype must be numpy.int64 or numpy.int32, got {index_dtype!r}") from None
    if dt not in INDEX_DTYPES.values():
        raise TypeError(f"index_dtype must be numpy.int64 or numpy.int32, got {dt}")
    if dt.itemsize == 4 and n >= INT32_INDEX_LIMIT:
        raise ValueError(f"index_dtype=int32 holds positions below 2^31; this array has {n} keys "
                         f"(use int64)")
    return dt

#: What a plugin's run() may raise as part of its contract (the caller's
#: input, the GPU's memory, a kernel that fails for this config); anything
#: else takes the plugin out of service (registry.guarded).
RUN_ERRORS = (MemoryError, KernelError, ValueError)


class HostJob:
    """What a CPU plugin's run() gets: the keys (and values) as NumPy arrays
    and the request's settings, under the names a GPU plugin's Job uses for
    the same things (n, dtype, value_bytes, kind, descending, stable,
    config, segments, request). run() returns (sorted keys, sorted values or
    argsort's indices, or None): docs/plugins.md, "A CPU plugin's run(job)"."""

    __slots__ = ("request", "kind", "n", "dtype", "value_bytes", "descending", "stable",
                 "segments", "keys", "values", "config")

    def __init__(self, request: Request, keys: np.ndarray, values: np.ndarray | None,
                 config: dict):
        self.request = request
        self.kind, self.n, self.dtype = request.kind, request.n, request.dtype
        #: 0 for sort, the caller's index width for argsort (8: int64, 4: int32)
        self.value_bytes = request.value_bytes
        self.descending, self.stable = request.descending, request.stable
        #: The request's segments (cudasortkit/segments.py), None for one array.
        self.segments = request.segments
        self.keys, self.values, self.config = keys, values, config

    def __repr__(self):
        return (f"HostJob(kind={self.kind!r}, n={self.n}, dtype={self.dtype!r}, "
                f"value_bytes={self.value_bytes}, descending={self.descending}, "
                f"stable={self.stable}, config={self.config!r})")


def check_key_range(key_range, dtype: np.dtype):
    """(lo, hi) as Python ints, or None; errors name key_range."""
    if key_range is None:
        return None
    if dtype.kind not in "biu":
        raise TypeError(f"key_range applies to integer keys only, not {dtype}")
    try:
        lo, hi = key_range
    except (TypeError, ValueError):
        raise TypeError(f"key_range must be a pair (lo, hi) of integers, got {key_range!r}") from None
    for bound in (lo, hi):
        if isinstance(bound, (bool, np.bool_)) or not isinstance(bound, numbers.Integral):
            raise TypeError(f"key_range must be a pair (lo, hi) of integers, got {key_range!r}")
    lo, hi = int(lo), int(hi)
    if lo > hi:
        raise ValueError(f"key_range=(lo, hi) needs lo <= hi, got {key_range!r}")
    return lo, hi


def make_request(kind, keys: Operand, values: Operand | None, descending, stable,
                 key_range=None, segments=None, index_dtype=INDEX_DTYPE, **options) -> Request:
    if kind == "sort":
        vbytes = 0
    elif kind == "argsort":
        vbytes = index_dtype.itemsize
    else:
        vbytes = _value_bytes(values.dtype)
    return Request.from_fields(kind=kind, dtype=key_name(keys.dtype), n=keys.n, stable=bool(stable),
                               descending=bool(descending), value_bytes=vbytes,
                               on_device=keys.on_device,
                               key_range=check_key_range(key_range, keys.dtype),
                               options=options, range_probe=_RangeProbe(keys), segments=segments)


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
        from ..build.corekernels import key_minmax

        state = get_device(keys.ordinal)
        return key_minmax(state, keys.device_ptr(state), keys.n, keys.key_dtype)


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


def caller_ordering(stream, operands):
    """(device state, Ordering) for a call that touches caller's device
    memory, or (None, None) for a host-only call: host inputs are read and
    host results written synchronously, so no stream needs to wait."""
    caller = handle_of(stream) if stream is not None else None
    on_device = [x for x in operands if x is not None and x.on_device]
    if not on_device:
        return None, None
    first = on_device[0]
    state = get_device(first.ordinal)
    for x in on_device[1:]:
        if x.ordinal is not None and first.ordinal is not None and x.ordinal != first.ordinal:
            raise ValueError(f"{first.what} and {x.what} are on different devices "
                             f"({first.ordinal}, {x.ordinal})")
    if caller is None:
        caller = first.current_stream()
    waits = {x.interface_stream for x in on_device if x.interface_stream is not None}
    return state, Ordering(state, caller, waits)


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
        return _run_host(plugin, config, request, keys, values, targets, state)
    state = state or get_device(keys.ordinal)
    if hostpipe.takes(request, keys, values, targets, state):  # large host arrays: pipelined
        return hostpipe.run(plugin, config, request, keys, values, targets, state, RUN_ERRORS)
    return _run_device(plugin, config, request, keys, values, targets["out"],
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


def _run_host(plugin, config, request, keys, values, targets, state):
    job = HostJob(request, keys.host(state), None if values is None else values.host(state),
                  config or registry.call(plugin, "default_config", request.dtype,
                                              request.value_bytes))
    # out= and values_out= are checked before the plugin runs and its results
    # before either is written: the caller's arrays are written whole or not at all.
    if request.kind != "argsort" and targets["out"] is not None:
        check_out(targets["out"], keys.n, keys.dtype, "out")
    if request.kind == "pairs" and targets["values_out"] is not None:
        check_out(targets["values_out"], values.n, values.dtype, "values_out")
    with registry.guarded(plugin, "run", expected=RUN_ERRORS):
        result = plugin.run(job)
    sorted_keys, sorted_values = _host_results(plugin, job, result)
    k = v = None
    if request.kind != "argsort":
        k = deliver_host(keys, sorted_keys, targets["out"], "out", state)
    if request.kind == "argsort":
        v = keys.wrap_host(np.ascontiguousarray(sorted_values, INDEX_DTYPES[request.value_bytes]))
    elif request.kind == "pairs":
        v = deliver_host(values, sorted_values, targets["values_out"], "values_out", state)
    return k, v


def _host_results(plugin, job: HostJob, result) -> tuple:
    """(keys, values) from what a CPU plugin's run(job) returned, checked
    against the contract (docs/plugins.md): a pair of 1-D NumPy arrays of
    job.n, keys of job.keys' dtype (sort, pairs), values of job.values'
    dtype (pairs), argsort's indices of an integer dtype; the part a kind
    does not use is not looked at. Anything else is the plugin's fault: it
    is taken out of service (registry.fault) and PluginError names it."""
    if not (isinstance(result, (tuple, list)) and len(result) == 2):
        raise registry.fault(plugin, f"run returned {type(result).__name__}, "
                                     "not a (keys, values) pair")
    keys, values = result
    if job.kind != "argsort":
        _check_result(plugin, job, keys, "keys", job.keys.dtype)
    if job.kind == "argsort":
        _check_result(plugin, job, values, "argsort indices", None)
    elif job.kind == "pairs":
        _check_result(plugin, job, values, "values", job.values.dtype)
    return keys, values


def _check_result(plugin, job, array, what: str, dtype) -> None:
    """One result of a CPU plugin: a NumPy array of shape (job.n,), of
    `dtype` (None: any integer dtype)."""
    if not isinstance(array, np.ndarray):
        problem = f"{what} as {type(array).__name__}, not a NumPy array"
    elif array.shape != (job.n,):
        problem = f"{what} of shape {array.shape} for {job.n} keys"
    elif dtype is None and array.dtype.kind not in "iu":
        problem = f"{what} of dtype {array.dtype}, not an integer dtype"
    elif dtype is not None and array.dtype != dtype:
        problem = f"{what} of dtype {array.dtype} for {dtype} {what}"
    else:
        return
    raise registry.fault(plugin, f"run returned {problem}")


def deliver_host(like: Operand, result: np.ndarray, target: Operand | None, what: str, state):
    """A host result as the caller's kind, or written into `target` (out=)."""
    result = np.ascontiguousarray(result, like.dtype)
    if target is None:
        return like.wrap_host(result)
    check_out(target, len(result), like.dtype, what)
    if target.on_device:
        if len(result):
            state.cuda.memcpy_htod_async(target.device_ptr(state), result, state.stream)
            state.stream.synchronize()  # `result` is pageable host memory
    else:
        target.write_host(result)
    return target.original


def _run_device(plugin, config, request, keys, values, out, values_out, state, caller):
    n = keys.n
    keys_in = keys.device_ptr(state)
    if request.kind == "argsort":
        key_result = None
        keys_out_buf = state.allocate(keys.nbytes, f"{plugin.name}: sorted keys of argsort")
        keys_out = int(keys_out_buf)
    else:
        key_result = Result(keys, keys.dtype, state, out, "out", caller)
        keys_out = key_result.ptr
    values_in = values_out_ptr = 0
    value_result = None
    saved = []  # (pointer, backup buffer, nbytes) for in-place outputs
    if request.kind == "argsort":
        index_dtype = INDEX_DTYPES[request.value_bytes]
        if not plugin.makes_indices:
            from ..build.corekernels import iota64

            iota = state.allocate(n * index_dtype.itemsize, f"{plugin.name}: argsort indices")
            saved.append((None, iota, 0))  # keeps the buffer alive
            iota64(state, int(iota), n, index_bytes=index_dtype.itemsize)
            values_in = int(iota)
        value_result = Result(keys, index_dtype, state, stream=caller)
        values_out_ptr = value_result.ptr
    elif request.kind == "pairs":
        values_in = values.device_ptr(state)
        value_result = Result(values, values.dtype, state, values_out, "values_out", caller)
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
    try:
        run_job(plugin, config, request, state, n, keys_in, keys_out, values_in, values_out_ptr,
                RUN_ERRORS)
    except BaseException:
        for dst, backup, nbytes in saved:
            if dst is not None:
                state.cuda.memcpy_dtod_async(dst, int(backup), nbytes, state.stream)
        raise
    k = key_result.finish() if key_result is not None else None
    v = value_result.finish() if value_result is not None else None
    return k, v
