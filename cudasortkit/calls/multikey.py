"""Multi-key order: lexsort, sort/argsort of structured arrays with order=,
and sort_by_key with a tuple of keys.

Every call becomes one multi-key order (cudasortkit/sdk/multikey.py): keys
most significant first, each ascending or descending in NumPy 2.5's order.
A plugin of kind ``cudasortkit.multikey`` computes it: host keys go to
``numpy``; device keys to ``packed`` when their fields fit 128 bits, else
``passes`` (auto: the supporting plugin of lowest priority), and device
plugins sort through the library's own stable sorts (chosen as for any
sort), all in the caller's stream.
"""
from __future__ import annotations

import math

import numpy as np
from numpy.lib.array_utils import normalize_axis_index

from ..dispatch.execute import run
from ..dispatch.request import caller_ordering, check_algorithm, make_request
from ..errors import PluginError
from ..gpu.arrays import Operand, Result, array_stream, library_of, shape_of
from ..gpu.streams import handle_of, library_stream
from ..sdk import registry
from ..sdk.multikey import MultikeyJob, MultikeyPlugin, gather, key_bits
from ..sdk.plugin import RUN_ERRORS
from ..tuning.kinds import MULTIKEY

GROUP = MultikeyPlugin.entry_point_group
_selector = None


def default_selector():
    """A selector for callers that have none (unique_rows): measured policy,
    as api.selector; made on first use."""
    global _selector
    if _selector is None:
        from ..dispatch.select import Selector
        from ..tuning.measured import MeasuredPolicy

        _selector = Selector(MeasuredPolicy())
    return _selector


def choose(job: MultikeyJob, algorithm: str = "auto") -> MultikeyPlugin:
    """The plugin for `job`: the named one (ValueError if it is unknown,
    broken or cannot take the job), or auto's (choose_why)."""
    return choose_why(job, algorithm)[0]


def choose_why(job: MultikeyJob, algorithm: str = "auto") -> tuple:
    """(plugin, reason) for `job`. auto: among the working plugins that
    support it, the fastest measured on this device near the job's shape
    (tuning/kinds.py), else the one of lowest declared priority."""
    check_algorithm(algorithm)
    found = registry.plugins(GROUP)
    if algorithm != "auto":
        plugin = found.get(algorithm)
        if plugin is None:
            raise ValueError(f"no working multi-key plugin named {algorithm!r}; "
                             f"available: {', '.join(sorted(found)) or 'none'}")
        if not registry.call(plugin, "supports", job):
            able = sorted(p.name for p in found.values() if registry.call(p, "supports", job))
            raise ValueError(f"multi-key plugin {algorithm!r} ({plugin.summary}) cannot order "
                             f"these {'device' if job.on_device else 'host'} keys: "
                             f"{_widths(job)}, {job.bits} bits together; plugins that can: "
                             f"{', '.join(able) or 'none'} (or 'auto')")
        return plugin, "asked for by name"
    able = {p.name: p for p in found.values() if registry.call(p, "supports", job)}
    if not able:
        raise ValueError("no installed multi-key plugin can order these keys; "
                         "see python -m cudasortkit list")
    declared = min(able.values(), key=lambda p: (p.priority, p.name))
    others = ", ".join(f"{n} {p.priority}" for n, p in sorted(able.items()) if n != declared.name)
    why = (f"lowest declared priority ({declared.priority}) among the plugins that support it"
           + (f" (others: {others})" if others else ""))
    pick = MULTIKEY.choose(job, able, declared.name, why)
    return able[pick.name], pick.reason


def _widths(job: MultikeyJob) -> str:
    """Each key of `job` (most significant first) as its name (device
    keys), dtype and bits in a packed key: "keys[1] int64 (64), keys[0]
    bool (1)"."""
    return ", ".join(" ".join(filter(None, (getattr(k, "what", None), str(k.dtype))))
                     + f" ({key_bits(k.dtype)})" for k in job.keys)


def _run(job: MultikeyJob, algorithm: str):
    """The job's order from the chosen plugin; auto chooses again when a
    plugin fails as a plugin (registry.guarded takes it out of service)."""
    while True:
        plugin = choose(job, algorithm)
        try:
            with registry.guarded(plugin, "run", expected=RUN_ERRORS):
                return plugin.run(job)
        except PluginError:
            if algorithm != "auto":
                raise


def _check_descending(descending, count: int) -> tuple:
    """One bool per key: a bool applies to every key."""
    if isinstance(descending, (bool, np.bool_)):
        return (bool(descending),) * count
    try:
        flags = tuple(descending)
    except TypeError:
        raise TypeError(f"descending must be a bool or one bool per key, got {descending!r}") from None
    if len(flags) != count or not all(isinstance(d, (bool, np.bool_)) for d in flags):
        raise ValueError(f"descending must be a bool or a sequence of {count} bools "
                         f"(one per key), got {descending!r}")
    return tuple(bool(d) for d in flags)


def order_of(keys, descending, selector, algorithm="auto", stream=None, then=None, names=None):
    """The stable int64 order of 1-D keys (most significant first): NumPy
    for host keys, an array of the keys' library for device keys; then(order,
    state, caller), when given, runs in the same stream ordering (device
    keys) and its result is returned instead. `keys`: arrays, or Operands
    of them (a caller's own, so strided keys are copied once). `names`:
    what errors call the keys (default keys[0], keys[1], ...)."""
    names = names or [f"keys[{i}]" for i in range(len(keys))]
    operands = [k if isinstance(k, Operand) else Operand(k, what) for k, what in zip(keys, names)]
    n = operands[0].n
    for op in operands[1:]:
        if op.n != n:
            raise ValueError(f"all keys need to be the same shape: {operands[0].what} has {n} "
                             f"keys, {op.what} {op.n}")
    on_device = {op.on_device for op in operands}
    if len(on_device) > 1:
        raise TypeError("keys must all be on the host or all on the device, not a mix")
    if not on_device.pop():
        result = _run(MultikeyJob([op.array for op in operands], descending, n), algorithm)
        return then(result, None, None) if then else result
    state, ordering = caller_ordering(stream, operands)
    ordering.begin()
    try:
        result = _device_order(operands, descending, n, selector, algorithm, state,
                               ordering.caller)
        return then(result, state, ordering.caller) if then else result
    finally:
        ordering.end()


def _device_order(operands, descending, n, selector, algorithm, state, caller):
    like = operands[0]

    def core(kind, keys, values, desc):
        k = Operand(keys, "keys")
        v = Operand(values, "values", "values") if values is not None else None
        request = make_request(kind, k, v, desc, True)
        while True:  # the library's own stable sorts, chosen as for any sort
            plugin, config = selector.choose(request, "auto")
            try:
                return run(plugin, config, request, k, v, {"out": None, "values_out": None},
                           state, caller)
            except PluginError:
                continue

    temporaries = []  # kept until the work on them is queued in the caller's order

    def empty(count, dtype):
        r = new_array(like, count, dtype, state, caller)
        temporaries.append(r.value)
        return r.value, r.ptr

    if n == 0:
        return empty(0, np.int64)[0]

    job = MultikeyJob(operands, descending, n, state,
                      argsort=lambda a, desc: core("argsort", a, None, desc)[1],
                      sort_pairs=lambda k, v, desc: core("pairs", k, v, desc),
                      empty=empty)
    return _run(job, algorithm)


# ------------------------------------------------------------------ lexsort
_DEVICE = ("cupy", "torch", "gpuarray", "cai")


def lexsort(keys, axis=-1, *, selector, algorithm="auto", stream=None):
    """numpy.lexsort: the stable order of `keys` (a sequence of arrays of one
    shape, or an array whose first axis runs over the keys), the LAST key
    primary, along `axis`; int64. Device keys: 1-D, one device array each
    (or one 2-D device array of keys)."""
    keys = _key_list(keys)
    if not any(library_of(k) in _DEVICE for k in keys):
        host = [_host_key(k) for k in reversed(keys)]
        # NumPy's checks, here: an error inside a plugin would mark it broken
        if len({k.shape for k in host}) > 1:
            raise ValueError("all keys need to be the same shape")
        if host[0].ndim:
            normalize_axis_index(axis, host[0].ndim)
        result = _run(MultikeyJob(host, (False,) * len(host), host[0].size, axis=axis), algorithm)
        if library_of(keys[0]) == "torch-cpu":  # the keys' kind: a CPU tensor
            import torch

            return torch.from_numpy(np.ascontiguousarray(result))
        return result
    shapes = {shape_of(k) for k in keys}
    if len(shapes) > 1:
        raise ValueError("all keys need to be the same shape")
    (shape,) = shapes
    if len(shape) != 1:  # N-D keys, or 0-d ones
        return _lexsort_along(keys, shape, axis, selector, algorithm, stream)
    normalize_axis_index(axis, 1)
    return order_of(list(reversed(keys)), (False,) * len(keys), selector, algorithm, stream,
                    names=[f"keys[{i}]" for i in reversed(range(len(keys)))])


def _key_list(keys) -> list:
    """numpy.lexsort's keys as a list: a sequence of arrays, or an array
    whose first axis runs over the keys (a 1-D array's elements are 0-d
    keys). Anything else, a 0-d array or an empty sequence among them, is
    NumPy's TypeError."""
    if library_of(keys) in _DEVICE:
        shape = shape_of(keys)
        found = [keys[i] for i in range(shape[0])] if shape else []
    else:
        try:
            found = list(keys)
        except TypeError:  # a number, a 0-d array
            found = []
    if not found:
        raise TypeError("need sequence of keys with len > 0 in lexsort: pass a sequence of key "
                        "arrays of one shape (the last key primary), or an array whose rows are "
                        f"the keys; got {type(keys).__name__}")
    return found


def _lexsort_along(keys, shape, axis, selector, algorithm, stream):
    """lexsort of N-D CuPy or CUDA-tensor keys along `axis`: the keys moved
    to rows of the axis's length and ordered at once with the row number as
    the most significant key, so each row's order occupies its own span;
    positions within the row are the global ones minus the row's start.
    The library's own reshapes run in the caller's stream."""
    library = library_of(keys[0])
    if any(library_of(k) != library for k in keys):
        raise ValueError(f"lexsort of N-D device keys takes keys of one array library; got "
                         f"{', '.join(sorted({library_of(k) for k in keys}))}")
    if library in ("gpuarray", "cai"):
        return through_cupy(keys, stream, lambda views: _lexsort_along(
            views, shape, axis, selector, algorithm, stream))
    if not shape:  # 0-d keys, one element each: its order is 0 (axis -1 or 0, as NumPy)
        normalize_axis_index(axis, 1)
        with array_stream(keys[0], stream):
            xp = array_namespace(library)
            on = {"device": keys[0].device} if library == "torch" else {}
            return xp.zeros((), dtype=xp.int64, **on)
    ax = normalize_axis_index(axis, len(shape))
    length, n = shape[ax], math.prod(shape)
    with array_stream(keys[0], stream):
        xp = array_namespace(library)
        on = {"device": keys[0].device} if library == "torch" else {}
        moved = [xp.moveaxis(k, ax, -1) for k in keys]
        rows_shape = tuple(moved[0].shape)
        if n == 0:
            return xp.moveaxis(xp.zeros(rows_shape, dtype=xp.int64, **on), -1, ax)
        flat = [m.reshape(-1) for m in moved]  # a copy where the axis was not last
        row_dtype = xp.int32 if n < (1 << 31) else xp.int64
        row = xp.arange(n, dtype=row_dtype, **on) // length  # position i: a key of row i // length
    names = ["the row number", *(f"keys[{i}]" for i in reversed(range(len(keys))))]
    order = order_of([row, *reversed(flat)], (False,) * (len(keys) + 1), selector, algorithm,
                     stream, names=names)
    with array_stream(keys[0], stream):
        local = order - row.to(xp.int64) * length if library == "torch" else \
            order - row.astype(xp.int64) * length
        return xp.moveaxis(local.reshape(rows_shape), -1, ax)


def through_cupy(arrays, stream, fn):
    """fn(CuPy views of pycuda or __cuda_array_interface__ `arrays`), its
    device results copied into new pycuda GPUArrays (the kind cudasortkit
    returns for those inputs) in the caller's stream: for the calls whose
    device path reshapes with an array library's own operations."""
    try:
        import cupy
        from pycuda import gpuarray
    except ImportError as exc:
        raise TypeError(f"this call orders pycuda and __cuda_array_interface__ arrays through "
                        f"CuPy views, and needs cupy and pycuda installed ({exc})") from exc
    results = fn([cupy.asarray(a) for a in arrays])
    single = not isinstance(results, tuple)
    copies = []
    with library_stream("cupy", stream):
        for r in (results,) if single else results:
            g = gpuarray.empty(tuple(r.shape), r.dtype)
            cupy.asarray(g)[...] = r
            copies.append(g)
    return copies[0] if single else tuple(copies)


def array_namespace(library: str):
    if library == "torch":
        import torch

        return torch
    import cupy

    return cupy


def _host_key(k) -> np.ndarray:
    """A host key as NumPy (a CPU tensor through NumPy; bfloat16 widened to
    float32, which holds it exactly and orders it the same; the other byte
    order made native, which orders the same)."""
    if library_of(k) == "torch-cpu":
        import torch

        k = k.detach()
        return (k.float() if k.dtype == torch.bfloat16 else k).numpy()
    k = np.asarray(k)
    return k if k.dtype.isnative else k.astype(k.dtype.newbyteorder("="))


# ------------------------------------------------------- structured arrays
def field_keys(a: np.ndarray, order) -> list:
    """The fields of structured `a` that sort it, most significant first:
    those named by `order` (a name or a list of names), then the rest in
    the dtype's order (NumPy's rule; padding bytes are no field)."""
    names = a.dtype.names
    if names is None:
        if order is not None:
            raise ValueError("Cannot specify order when the array has no fields.")
        return []
    rule = f"order must be a field name or a sequence of field names ({', '.join(names)})"
    try:
        wanted = [] if order is None else ([order] if isinstance(order, str) else list(order))
    except TypeError:
        raise TypeError(f"{rule}, got {order!r}") from None
    for name in wanted:
        if not isinstance(name, str):
            raise TypeError(f"{rule}, got {order!r}")
        if name not in names:
            raise ValueError(f"unknown field name: {name}")
    if len(set(wanted)) != len(wanted):
        raise ValueError(f"duplicate field name: {next(w for w in wanted if wanted.count(w) > 1)}")
    fields = wanted + [n for n in names if n not in wanted]
    keys = []
    for name in fields:
        field = a[name]
        if field.dtype.names is not None or field.dtype.subdtype is not None or field.shape != a.shape:
            raise TypeError(f"field {name!r} ({field.dtype}) is not a scalar key; order= sorts "
                            "by fields of one value each (numbers, bool, strings, ...), not "
                            "sub-arrays or nested fields")
        keys.append(field)
    return keys


def argsort_fields(a: np.ndarray, order, axis, descending) -> np.ndarray:
    """numpy.argsort(a, order=order, kind='stable') of a structured host
    array along `axis` (None: flattened); descending applies to every field."""
    if axis is None:
        a, axis = a.reshape(-1), -1
    keys = field_keys(a, order)
    if isinstance(descending, (bool, np.bool_)) and not descending:
        job = MultikeyJob(keys, (False,) * len(keys), a.size, axis=axis)
        return _run(job, "numpy_lexsort")
    if a.ndim != 1:
        raise ValueError(f"descending=True sorts 1-D structured arrays (or axis=None), got a "
                         f"{a.ndim}-D one")
    job = MultikeyJob(keys, _check_descending(descending, len(keys)), a.size)
    return _run(job, "numpy_lexsort")


def sort_fields(a: np.ndarray, order, axis, descending) -> np.ndarray:
    """numpy.sort(a, order=order, kind='stable') of a structured host array."""
    idx = argsort_fields(a, order, axis, descending)
    if axis is None:
        return a.reshape(-1)[idx]
    return np.take_along_axis(a, idx, axis=axis)


# --------------------------------------------------------- sort_by_key
def sort_by_keys(keys, values, descending, selector, algorithm="auto", stream=None):
    """(tuple of the keys sorted, values in the same order) by 1-D `keys`,
    the FIRST key primary (SQL's ORDER BY), stable."""
    keys = tuple(keys)
    if not keys:
        raise ValueError("sort_by_key needs at least one key array")
    flags = _check_descending(descending, len(keys))
    v = Operand(values, "values", "values")
    operands = [Operand(k, f"keys[{i}]") for i, k in enumerate(keys)]
    if v.n != operands[0].n:
        raise ValueError(f"keys and values differ in length: {operands[0].n} != {v.n}")
    if v.on_device != operands[0].on_device:
        raise TypeError("keys and values must both be on the host or both on the device")
    if stream is not None:  # strided ones copied again in the given stream's order
        for op in (*operands, v):
            op.copy_in_order(handle_of(stream))

    def take(order, state, caller):
        if state is None:
            return (tuple(op.wrap_own(op.array[order]) for op in operands),
                    v.wrap_host(v.array[order]))
        job = MultikeyJob([v], (False,), v.n, state,
                          empty=lambda count, dtype: _empty(v, dtype, state, caller))
        # the keys as a one-key device sort returns them (canonical zeros and
        # NaNs), the values' own bits
        return (tuple(gather("core", job, op.array, op.dtype, order, as_sorted_keys=True)
                      for op in operands),
                gather("core", job, v.array, v.dtype, order))

    return order_of(operands, flags, selector, algorithm, stream, then=take)


def _empty(like: Operand, dtype, state, caller):
    """A new device array of like.n elements of `dtype`, of like's library."""
    r = new_array(like, like.n, dtype, state, caller)
    return r.value, r.ptr


def new_array(like: Operand, n: int, dtype, state, caller) -> Result:
    """A Result holding a new device array of n elements of `dtype`, of
    like's library, allocated in the caller's stream's order."""
    return Result(like.sized(n), dtype, state, None, "result", caller)
