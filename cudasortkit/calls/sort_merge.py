"""merge and merge_by_key: stable merge of two sorted arrays on the GPU.

The kernels belong to a plugin that declares `merges` (the built-in
merge_sort: merge path partitioning, kernels/include/merge.cuh); this module turns caller arrays into one of its Jobs the
way api.py does for sorts, ordered in the caller's stream. Inputs must
already be sorted in NumPy's order (NaNs last, -0.0 == +0.0), or with
descending=True in NumPy 2.5's descending order (NaNs still last); on equal
keys the elements of `a` come first. Keys come back bit for bit; keys of
two dtypes are merged as NumPy's result_type of them, where that holds
both exactly (int32 and int64 as int64), else refused (cast them). Without a
GPU, host (NumPy) inputs are merged on the CPU with the same result.

Unsorted inputs are a caller's error, but the output is still a permutation
of the inputs: sorted on the CPU; on the GPU (the merge kernels detect it) the
concatenation [a..., b...].
"""
from __future__ import annotations

import numpy as np

from .. import order
from ..sdk import registry
from ..dispatch.request import caller_ordering
from ..launch.run import deliver_host
from ..sdk.plugin import RUN_ERRORS
from ..errors import PluginError
from ..gpu.arrays import Operand, Result, numpy_to_torch_dtype, overlaps
from ..gpu.device import keeps_current_device
from ..gpu.streams import library_stream
from ..dtypes import exact_common_dtype, key_dtype, key_name


@keeps_current_device
def merge(a, b, *, descending=False, out=None, stream=None):
    """Stable merge of the sorted 1-D arrays a and b: a 1-D array of len(a) +
    len(b) keys (or written into `out`); a's keys first on ties. Keys of
    two dtypes merge as NumPy's result_type of them where it holds both
    exactly (else TypeError: cast them)."""
    keys, _ = _merge(Operand(a, "a"), Operand(b, "b"), None, None, descending, out, None, stream)
    return keys


@keeps_current_device
def merge_by_key(a_keys, a_values, b_keys, b_values, *, descending=False, out=None,
                 values_out=None, stream=None):
    """(merged keys, values in the same order) of two sorted key-value arrays;
    stable, a's pairs first on equal keys. Values are 4- or 8-byte numbers."""
    ak, av = Operand(a_keys, "a_keys"), Operand(a_values, "a_values", "values")
    bk, bv = Operand(b_keys, "b_keys"), Operand(b_values, "b_values", "values")
    for k, v in ((ak, av), (bk, bv)):
        if k.n != v.n:
            raise ValueError(f"{k.what} and {v.what} differ in length: {k.n} != {v.n}")
    if av.dtype != bv.dtype:
        raise TypeError(f"a_values and b_values must have the same dtype, got {av.dtype} and {bv.dtype}")
    return _merge(ak, bk, av, bv, descending, out, values_out, stream)


def host_merge_order(a: np.ndarray, b: np.ndarray, descending=False) -> np.ndarray:
    """Where each key of concatenate([a, b]) goes in their stable merge: a
    stable sort of the concatenation (two sorted runs, which NumPy's stable
    sort merges in linear time), so unsorted inputs still give a permutation."""
    idx = order.argsort(np.concatenate([a, b]), descending)
    pos = np.empty(len(idx), np.int64)
    pos[idx] = np.arange(len(idx))
    return pos


def merging_plugin():
    """The GPU plugin that merges (declares `merges`), lowest priority first."""
    found = [p for p in registry.plugins().values() if p.merges and p.device == "gpu"]
    if not found:
        raise ValueError("no installed GPU plugin merges (none declares merges = True); "
                         "see python -m cudasortkit list")
    return min(found, key=lambda p: (p.priority, p.name))


def _common_keys(a: Operand, b: Operand, stream) -> tuple:
    """a and b with keys of one dtype: NumPy's result_type of theirs where it
    holds both exactly (int32 and int64 merge as int64), the converted
    copies made by their own library (in the caller's stream); TypeError
    saying to cast where no such dtype exists or the library cannot convert."""
    if a.dtype == b.dtype:
        return a, b
    common = exact_common_dtype(a.dtype, b.dtype)
    if common is None:
        try:
            numpy_says = f"NumPy's result_type is {np.result_type(a.dtype, b.dtype)}"
        except TypeError:
            numpy_says = "NumPy has no result_type of them"
        raise TypeError(f"{a.what} ({a.dtype}) and {b.what} ({b.dtype}) have no common dtype that "
                        f"holds both exactly ({numpy_says}); cast them to one dtype first")
    return _converted(a, common, stream), _converted(b, common, stream)


def _converted(op: Operand, dtype: np.dtype, stream) -> Operand:
    """op's keys as `dtype`, an array of op's library."""
    if op.dtype == dtype:
        return op
    if op.library in ("numpy", "torch-cpu", "cupy", "torch"):
        array = op.array if op.library == "numpy" else op.original
        with library_stream(op.library, stream, op.ordinal):
            if op.library in ("numpy", "cupy"):
                converted = array.astype(dtype)
            else:
                converted = array.to(numpy_to_torch_dtype(dtype))
        return Operand(converted, op.what)
    raise TypeError(f"{op.what}: a {type(op.original).__name__} of {op.dtype} cannot be merged with "
                    f"keys of another dtype here; cast both to {dtype} first")


def _check_keys(a: Operand, b: Operand):
    key_dtype(a.dtype)  # TypeError naming the supported dtypes
    if a.on_device and b.on_device and a.ordinal != b.ordinal:
        raise ValueError(f"{a.what} and {b.what} are on different devices ({a.ordinal}, {b.ordinal})")


def _merge(a: Operand, b: Operand, av: Operand | None, bv: Operand | None, descending, out,
           values_out, stream):
    if not isinstance(descending, (bool, np.bool_)):
        raise TypeError(f"descending must be True or False, got {descending!r}")
    a, b = _common_keys(a, b, stream)
    _check_keys(a, b)
    from ..gpu.device import gpu_available

    targets = [Operand(x, what, "out") if x is not None else None
               for x, what in ((out, "out"), (values_out, "values_out"))]
    operands = [x for x in (a, b, av, bv) if x is not None]
    _check_no_overlap(operands, [t for t in targets if t is not None])
    state, ordering = caller_ordering(stream, (*operands, *targets))
    if ordering is not None:
        ordering.begin()
    try:
        if not gpu_available() and not any(x.on_device for x in operands):
            return _merge_host(a, b, av, bv, descending, *targets, state)
        return _merge_device(a, b, av, bv, descending, *targets, state,
                             ordering.caller if ordering else 1)
    finally:
        if ordering is not None:
            ordering.end()


def _check_no_overlap(inputs, targets) -> None:
    """One rule on the host and the GPU: out= and values_out= never share
    memory with an input (a merge cannot run in place) or with each other."""
    if len(targets) == 2 and overlaps(*targets[0].span(), *targets[1].span()):
        raise ValueError("out and values_out overlap: one result would overwrite the other; "
                         "pass separate arrays")
    for t in targets:
        tptr, tn = t.span()
        for x in inputs:
            xptr, xn = x.span()
            if overlaps(tptr, tn, xptr, xn):
                raise ValueError(f"{t.what} overlaps the input {x.what}; merge into a separate array")


def _merge_host(a, b, av, bv, descending, out, values_out, state):
    pos = host_merge_order(a.host(state), b.host(state), descending)
    total = a.n + b.n
    keys = np.empty(total, a.dtype)
    keys[pos] = np.concatenate([a.host(state), b.host(state)])
    k = deliver_host(a.sized(total), keys, out, "out", state)
    if av is None:
        return k, None
    values = np.empty(total, av.dtype)
    values[pos] = np.concatenate([av.host(state), bv.host(state)])
    return k, deliver_host(av.sized(total), values, values_out, "values_out", state)


def _merge_device(a, b, av, bv, descending, out, values_out, state, caller):
    from ..gpu.device import get_device
    from ..sdk.job import Job
    first = a if a.on_device or not b.on_device else b
    state = state or get_device(first.ordinal)
    total = a.n + b.n
    key_result = Result(first.sized(total), a.dtype, state, out, "out", caller)
    value_result = None
    if av is not None:
        vfirst = av if av.on_device or not bv.on_device else bv
        value_result = Result(vfirst.sized(total), av.dtype, state, values_out, "values_out", caller)
    ptr = {x.what: x.device_ptr(state) if x.n else 0 for x in (a, b, av, bv) if x is not None}
    vb = 0 if av is None else av.dtype.itemsize
    while True:  # a plugin that fails is out of service (registry.guarded): take the next
        plugin, job = merging_plugin(), None
        try:
            job = Job(plugin, state, dtype=key_name(a.dtype), n=total, keys_in=ptr[a.what],
                      keys_out=key_result.ptr, values_in=ptr.get(av.what, 0) if av else 0,
                      values_out=value_result.ptr if value_result else 0, value_bytes=vb,
                      descending=descending)
            with registry.guarded(plugin, "merge", expected=RUN_ERRORS):
                plugin.merge(job, ptr[a.what], ptr[av.what] if av else 0, a.n,
                             ptr[b.what], ptr[bv.what] if bv else 0, b.n)
            break
        except PluginError:
            continue
        finally:
            if job is not None:
                job.finish()
    k = key_result.finish()
    return k, value_result.finish() if value_result is not None else None
