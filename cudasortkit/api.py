"""The public functions: sort, argsort, sort_by_key, algorithms.

Each call checks its arguments, becomes a Request, a plugin is chosen
(cudasortkit.dispatch.select), and the plugin runs either on NumPy arrays (CPU
plugins) or on device buffers through a Job, ordered in the caller's stream
(cudasortkit/gpu/streams.py). Ordering is NumPy 2.5's: NaNs last in both
directions, -0.0 == +0.0, and a stable sort keeps equal keys in input order
ascending and descending.
"""
from __future__ import annotations

import math

import numpy as np

from .calls import axes, multikey, search, unique_prepared as uniques
from .calls.sort_plan import Plan
from .calls.sort_prepared import PreparedCalls
from .calls.search_prepared import PreparedSearches
from .calls.select import SelectCalls
from .dispatch.execute import execute
from .dispatch.request import (INDEX_DTYPE, check_flags, check_index_dtype, check_progress,
                               make_request)
from .dispatch.select import Selector
from .dtypes import VALUE_KINDS
from .gpu.arrays import Operand, check_outputs_apart
from .gpu.device import keeps_current_device
from .sdk import registry
from .sdk.plugin import REQUEST_KINDS
from .sdk.selection import SelectPlugin
from .tuning.measured import MeasuredPolicy

#: How every call chooses its plugin: this device's measurements, else what
#: plugins declare (cudasortkit/dispatch/select.py, cudasortkit/tuning/measured.py).
selector = Selector(MeasuredPolicy())
#: Repeated plain device calls of one exact shape, made without the general
#: path while the selector's decision stands (cudasortkit/calls/sort_prepared.py).
prepared = PreparedCalls(selector, execute)
#: topk / partition / argpartition (cudasortkit/calls/select.py); plugins that
#: sort the rows use `selector`'s sort plugins.
selections = SelectCalls(selector)
#: Repeated plain device searchsorted calls of one exact shape, replayed
#: without the general path (cudasortkit/calls/search_prepared.py).
searches = PreparedSearches()
SELECTION_GROUP = SelectPlugin.entry_point_group
#: np.ndarray, one global lookup away (api.sort's tiny host arrays).
_NDARRAY = np.ndarray

def sort(a, *, axis=-1, descending=False, stable=None, algorithm="auto", out=None, key_range=None,
         stream=None, progress=False, order=None):
    """Sorted copy of `a` along `axis` (NumPy's meaning; None: flattened),
    or `a` sorted into `out` (`out=a` sorts in place).

    key_range=(lo, hi) promises lo <= every key <= hi (integer keys), which
    lets range-limited algorithms (counting sort) skip measuring it; keys
    outside it raise ValueError. `stream`: see docs/api.md (default: the
    current stream of the array's library). progress=True shows a tqdm bar
    while a large host array is sorted (docs/host.md). stable=None is the
    default (False), as in NumPy and PyTorch. order= (a field name or a
    list of them) sorts a NumPy structured array by its fields, as NumPy
    does (docs/multikey.md).
    """
    if (type(a) is _NDARRAY and out is None and key_range is None and stream is None
            and order is None and descending is False and axis == -1 and progress is False
            and algorithm == "auto" and a.ndim == 1
            and (stable is False or stable is True or stable is None)):
        # Tiny host arrays that auto gives to NumPy: NumPy's cost (np.sort is
        # a copy, then the sort; its own wrapper is skipped, and the kind
        # passed only where it is not NumPy's default). A structured dtype
        # is never such a shape. Each bytecode here is some 1% of the call.
        kind = selector.plain_host_sort(a, stable is True)
        if kind is not None:
            result = a.copy()
            if kind:
                result.sort(kind=kind)
            else:
                result.sort()
            return result
    return _sort(a, axis, descending, stable, algorithm, out, key_range, stream, progress, order)


@keeps_current_device
def _sort(a, axis, descending, stable, algorithm, out, key_range, stream, progress, order):
    """sort() past its tiny-host-array path (which touches no GPU, so
    keeps no device at no cost)."""
    if stable is None:
        stable = False
    if (axis == -1 and out is None and key_range is None and stream is None and order is None
            and progress is False):
        # A repeat of a prepared device call (never of a structured array).
        call = prepared.find("sort", a, descending, stable, algorithm)
        if call is not None:
            return call(a)[0]
    if order is not None or getattr(getattr(a, "dtype", None), "names", None):
        return multikey.sort_fields(_structured(a, order, descending, out, key_range), order,
                                    axis, descending)
    if progress is not False:
        check_progress(progress)
    check_flags(descending, stable, algorithm)
    if axis != -1 or getattr(a, "ndim", None) != 1:
        return _along("sort", a, None, axis, descending, stable, algorithm, out, None, key_range,
                      stream, progress)
    keys, _ = prepared.run("sort", Operand(a, "a"), None, descending, stable, algorithm, out,
                           None, key_range, stream, progress=progress, caller=a)
    return keys


@keeps_current_device
def argsort(a, *, axis=-1, descending=False, stable=None, algorithm="auto", key_range=None,
            stream=None, progress=False, index_dtype=np.int64, order=None):
    """int64 indices that sort `a` along `axis` (per row, as numpy.argsort);
    with stable=True exactly numpy.argsort(kind='stable') (and NumPy 2.5's
    descending=True, stable=True). index_dtype=np.int32 returns int32
    indices, which moves less memory, where the argsort is one 1-D sort of
    fewer than 2^31 keys (a 1-D array along its axis, axis=None, one row).
    stable=None is the default (False). order=: as for sort (structured arrays)."""
    if (type(a) is np.ndarray and descending is False and algorithm == "auto" and axis == -1
            and key_range is None and stream is None and order is None and progress is False
            and index_dtype is np.int64 and a.ndim == 1 and (stable is None or type(stable) is bool)):
        # Tiny host arrays that auto gives to NumPy: NumPy's argsort (int64
        # indices on every platform cudasortkit runs on). A structured dtype
        # is never such a shape.
        kind = selector.host_sort_kind(a.dtype, stable is True, a.size, "argsort", 8)
        if kind is not None:
            return np.argsort(a, kind=kind).astype(np.int64, copy=False)
    if order is not None or getattr(getattr(a, "dtype", None), "names", None):
        return multikey.argsort_fields(_structured(a, order, descending, None, key_range), order,
                                       axis, descending)
    if stable is None:
        stable = False
    if progress is not False:
        check_progress(progress)
    if index_dtype is np.int64:
        index_dtype = INDEX_DTYPE
    else:
        # keys counted from the shape: torch's `size` is a method
        index_dtype = check_index_dtype(index_dtype, math.prod(getattr(a, "shape", ())))
    if axis == -1 and key_range is None and stream is None:
        call = prepared.find("argsort", a, descending, stable, algorithm, index_dtype)
        if call is not None:
            return call(a)[1]
    check_flags(descending, stable, algorithm)
    if axis != -1 or getattr(a, "ndim", None) != 1:
        return _along("argsort", a, None, axis, descending, stable, algorithm, None, None,
                      key_range, stream, progress, index_dtype)
    _, order = prepared.run("argsort", Operand(a, "a"), None, descending, stable, algorithm,
                            None, None, key_range, stream, progress=progress, caller=a,
                            index_dtype=index_dtype)
    return order


@keeps_current_device
def sort_by_key(keys, values, *, axis=-1, descending=False, algorithm="auto", out=None,
                values_out=None, key_range=None, stream=None, progress=False):
    """(sorted keys, values in the same order) along `axis`; stable. Values
    are 4- or 8-byte numbers (complex64 too) of the keys' shape; out= may be
    the keys and values_out the values (in place), no output another's
    memory.

    keys may be a tuple of key arrays (1-D, one length): the FIRST is the
    primary key (SQL's ORDER BY), descending a bool or one per key, and the
    result is (tuple of sorted keys, values); docs/multikey.md."""
    if type(keys) is list and keys and all(hasattr(k, "shape") for k in keys):
        raise TypeError(f"sort_by_key: keys is a list of {len(keys)} key arrays: pass them as a "
                        "tuple, (k1, k2), to sort by several keys (the first primary), or one "
                        "array")
    if isinstance(keys, tuple):
        if axis not in (-1, 0) or out is not None or values_out is not None or key_range is not None:
            raise ValueError("sort_by_key with a tuple of keys takes 1-D keys (axis -1) and no "
                             "out=, values_out= or key_range=")
        return multikey.sort_by_keys(keys, values, descending, selector, algorithm, stream)
    if (type(keys) is np.ndarray and type(values) is np.ndarray and descending is False
            and algorithm == "auto" and axis == -1 and out is None and values_out is None
            and key_range is None and stream is None and progress is False and keys.ndim == 1
            and values.ndim == 1 and keys.size == values.size and values.dtype.kind in VALUE_KINDS):
        # Tiny host arrays that auto gives to NumPy: NumPy's stable argsort
        # and two gathers.
        kind = selector.host_sort_kind(keys.dtype, True, keys.size, "pairs", values.dtype.itemsize)
        if kind is not None:
            order = np.argsort(keys, kind=kind)
            return keys[order], values[order]
    if (axis == -1 and out is None and values_out is None and key_range is None
            and stream is None and progress is False):
        # A repeat of a prepared device call.
        call = prepared.find_pairs(keys, values, descending, algorithm)
        if call is not None:
            return call(keys, values=values)
    check_flags(descending, True, algorithm)
    if progress is not False:
        check_progress(progress)
    if out is not None or values_out is not None:
        check_outputs_apart(keys, values, out, values_out)
    if axis != -1 or getattr(keys, "ndim", None) != 1 or getattr(values, "ndim", None) != 1:
        return _along("pairs", keys, values, axis, descending, True, algorithm, out, values_out,
                      key_range, stream, progress)
    k, v = Operand(keys, "keys"), Operand(values, "values", "values")
    if k.n != v.n:
        raise ValueError(f"keys and values differ in length: {k.n} != {v.n}")
    return prepared.run("pairs", k, v, descending, True, algorithm, out, values_out, key_range,
                        stream, progress=progress, caller=keys)


@keeps_current_device
def segmented_sort(keys, offsets, values=None, *, descending=False, stable=None,
                   algorithm="auto", stream=None):
    """Every segment keys[offsets[s]:offsets[s+1]] sorted on its own (CUB-style
    offsets: segments + 1 int32/int64 values from 0 to len(keys), never
    decreasing, on the host or the device). With `values`: (keys, values),
    a stable key-value sort per segment. stable=None is the default (False)."""
    if stable is None:
        stable = False
    check_flags(descending, stable, algorithm)
    kind = "sort" if values is None else "pairs"
    k, v, segments = axes.ragged(keys, offsets, values, algorithm, stream)
    ks, vs = prepared.run(kind, k, v, descending, stable or values is not None, algorithm, None,
                          None, None, stream, segments)
    return ks if kind == "sort" else (ks, vs)


@keeps_current_device
def segmented_argsort(keys, offsets, *, descending=False, stable=None, algorithm="auto",
                      stream=None):
    """int64 positions (in the whole of `keys`) that sort every segment of
    `keys` on its own (offsets as for segmented_sort). stable=None is the
    default (False)."""
    if stable is None:
        stable = False
    check_flags(descending, stable, algorithm)
    k, _, segments = axes.ragged(keys, offsets, None, algorithm, stream)
    return prepared.run("argsort", k, None, descending, stable, algorithm, None, None, None,
                        stream, segments)[1]


@keeps_current_device
def lexsort(keys, axis=-1, *, algorithm="auto", stream=None):
    """numpy.lexsort: int64 indices that sort by several keys, the LAST key
    primary, stable (NaNs last, -0.0 == +0.0). keys: a sequence of arrays of
    one shape (or an array whose rows are the keys), ordered along `axis`
    (N-D device keys: CuPy arrays or CUDA tensors).
    algorithm: a multi-key plugin (numpy_lexsort, packed, passes) or "auto"
    (docs/multikey.md)."""
    return multikey.lexsort(keys, axis, selector=selector, algorithm=algorithm, stream=stream)


def _structured(a, order, descending, out, key_range):
    """`a` as a host structured array for order= (NumPy's rule: order= on an
    array without fields raises ValueError); out= and key_range= are not
    taken with fields."""
    if not isinstance(a, np.ndarray):
        raise TypeError(f"order= sorts NumPy structured arrays, not {type(a).__name__}")
    if a.dtype.names is None:
        raise ValueError("Cannot specify order when the array has no fields.")
    if out is not None or key_range is not None:
        raise ValueError("a structured array (fields, order=) is sorted without out= or key_range=")
    check_flags(descending, False, "auto")
    return a


@keeps_current_device
def unique(a, return_index=False, return_inverse=False, return_counts=False, axis=None, *,
           equal_nan=True, sorted=True, stream=None):
    """numpy.unique (NumPy 2.x): the sorted unique values of `a` (flattened
    for axis=None), with first indices, the inverse (the input's shape for
    axis=None) and counts as asked (int64; a tuple when any is). axis=0 of a
    2-D array: unique rows. Device arrays stay on the device (one wait, for
    the number of unique values); see docs/unique_search.md. Results are
    always sorted (NumPy allows that for sorted=False too)."""
    return uniques.unique(prepared, a, return_index, return_inverse, return_counts, axis,
                          equal_nan, stream)


@keeps_current_device
def searchsorted(a, v, side="left", sorter=None, *, algorithm="auto", stream=None):
    """numpy.searchsorted(a, v, side, sorter): int64 insertion points of v
    in sorted a; batched as torch.searchsorted when a is (..., n) and v
    (..., m). algorithm: "auto" or a search plugin's name (explain_searchsorted
    says which auto takes); the plugins search device arrays, NumPy host ones
    (a plugin named for host arrays raises ValueError); see
    docs/unique_search.md."""
    if sorter is None and stream is None:
        # A repeat of a prepared device search.
        call = searches.find(a, v, side, algorithm)
        if call is not None:
            return call(a, v)
    return search.searchsorted(prepared, a, v, side, sorter, algorithm, stream, searches)


@keeps_current_device
def explain_searchsorted(a, v, side="left", sorter=None, *, algorithm="auto"):
    """Which search plugin searchsorted(a, v, ...) runs on the device, and
    why (print it). Nothing is searched."""
    return search.explain(a, v, side, sorter, algorithm)


@keeps_current_device
def topk(a, k, *, axis=-1, largest=True, sorted=True, out=None, stream=None, algorithm="auto"):
    """(values, int64 indices) of the k largest (largest=False: smallest)
    keys along `axis`, as torch.topk(a, k, dim=axis) returns them: k along
    the axis, best first. NaN counts as the largest key, -0.0 equals +0.0,
    and equal keys come lower index first (docs/select.md); sorted=False
    returns the same. out=(values, indices) receives the results."""
    return selections.topk(a, k, axis, largest, sorted, out, stream, algorithm)


@keeps_current_device
def partition(a, kth, *, axis=-1, stream=None, algorithm="auto"):
    """numpy.partition(a, kth, axis): a copy of `a` with the key at each
    kth position where a sort would put it, smaller-or-equal keys before
    it and greater-or-equal after (NaNs last); kth an int or a sequence."""
    return selections.partition(a, kth, axis, algorithm, stream, False)


@keeps_current_device
def argpartition(a, kth, *, axis=-1, stream=None, algorithm="auto"):
    """numpy.argpartition(a, kth, axis): int64 positions along `axis` that
    partition `a` (see partition)."""
    return selections.partition(a, kth, axis, algorithm, stream, True)


def algorithms() -> list:
    """One dict per registered plugin of every kind: name, kind ("sort",
    "selection", "search" or "multikey"), dtypes, stable, pairs, tunables,
    status, error; sorts first."""
    rows = []
    for group in registry.KINDS:
        kind = "sort" if group == registry.GROUP else group.rsplit(".", 1)[1]
        for name, entry in sorted(registry.entries(group).items()):
            p = entry.plugin
            rows.append({
                "name": name,
                "kind": kind,
                "status": "ok" if entry.ok else "error",
                "error": entry.error,
                "target": entry.target,
                "distribution": entry.distribution,
                "device": p.device if p else None,
                "dtypes": tuple(getattr(p, "dtypes", ())) if p else (),
                "stable": getattr(p, "stable", None) if p else None,
                "pairs": getattr(p, "pairs", None) if p else None,
                "segmented": getattr(p, "segmented", None) if p else None,
                "tunables": {k: {"default": t.default, "values": t.values}
                             for k, t in getattr(p, "tunables", {}).items()} if p else {},
                "summary": getattr(p, "summary", "") if p else "",
            })
    return rows


@keeps_current_device
def plan(*, like, op="sort", axis=-1, descending=False, stable=None, algorithm="auto",
         index_dtype=np.int64, values_like=None):
    """A reusable sort of device arrays like `like` (cudasortkit.calls.sort_plan.Plan).

    op is "sort", "argsort" or "sort_by_key" (with `values_like`). The plan
    binds the array type, shape, dtype, device and C-contiguity, checks the
    flags and chooses the plugin once; call it as p(a), p(a, out=b), or
    p(keys, values) for sort_by_key. A call with other arrays raises
    TypeError or ValueError naming the difference. p.explain() says what
    was chosen and whether calls replay one launch plan (a CUDA graph)."""
    return Plan(like, op, axis=axis, descending=descending, stable=stable, algorithm=algorithm,
                index_dtype=index_dtype, values_like=values_like, prepared=prepared)


# ------------------------------------------------------------ argument checks




# ------------------------------------------------------------------ execution
def _along(kind, a, values, axis, descending, stable, algorithm, out, values_out, key_range,
           stream, progress, index_dtype=INDEX_DTYPE):
    """A sort along an axis (or of an N-D array) as one segmented request."""
    along = axes.Along(kind, a, values, axis, stream, out, values_out, algorithm, index_dtype)
    return along.sort(prepared, descending, stable, algorithm, out, values_out, key_range, stream,
                      progress, index_dtype)


@keeps_current_device
def explain(a, *, kind: str = "sort", values=None, descending: bool = False, stable=None,
            algorithm: str = "auto", key_range=None, axis=-1, offsets=None, k=None, kth=None,
            largest=True, index_dtype=np.int64):
    """Which plugin and config `algorithm` would use for `a`, and why (a
    cudasortkit.dispatch.select.Decision; print it). Nothing is sorted.

    kind is "sort", "argsort" (index_dtype as for argsort) or "pairs" (pass
    `values`); `axis` as for sort, or `offsets` for a ragged segmented sort
    of 1-D `a`. kind "topk" (with k=, largest=) or "partition" (with kth=)
    explains a selection.
    """
    if kind in ("topk", "partition"):
        if kind == "topk" and k is None:
            raise ValueError("kind='topk' needs k= (how many keys to select)")
        return selections.explain(a, kind, k, kth, axis, largest, algorithm)
    if stable is None:
        stable = False
    if kind not in REQUEST_KINDS:
        raise ValueError(f"kind must be one of {', '.join(map(repr, REQUEST_KINDS))}, got {kind!r}")
    if kind == "pairs" and values is None:
        raise ValueError("kind='pairs' needs values= (the payload sorted along with the keys); "
                         "without values, kind is 'sort' or 'argsort'")
    check_flags(descending, stable, algorithm)
    keys, vals, segments = axes.request_parts(a, axis, values, offsets, algorithm, kind)
    if kind == "argsort" and index_dtype is not np.int64:
        index_dtype = check_index_dtype(index_dtype, keys.n)
    else:
        index_dtype = INDEX_DTYPE
    request = make_request(kind, keys, vals, descending, stable or kind == "pairs", key_range,
                           segments, index_dtype)
    return selector.explain(request, algorithm)
