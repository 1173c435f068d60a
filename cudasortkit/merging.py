"""merge and merge_by_key: stable merge of two sorted arrays on the GPU.

The kernels belong to the merge_sort plugin (merge path partitioning,
kernels/merge.cuh); this module turns caller arrays into one of its Jobs the
way api.py does for sorts. Inputs must already be sorted in NumPy's order
(NaNs last, -0.0 == +0.0), or in its exact reverse with descending=True; on
equal keys the elements of `a` come first. Keys come back bit for bit.
Without a GPU, host (NumPy) inputs are merged on the CPU with the same result.
"""
from __future__ import annotations

import copy

import numpy as np

from .arrays import Operand, Result, overlaps
from .dtypes import key_dtype
from .dtypes import value_bytes as _value_bytes


def merge(a, b, *, descending=False, out=None):
    """Stable merge of the sorted 1-D arrays a and b (same dtype): a 1-D array
    of len(a) + len(b) keys (or written into `out`); a's keys first on ties."""
    keys, _ = _merge(Operand(a, "a"), Operand(b, "b"), None, None, descending, out, None)
    return keys


def merge_by_key(a_keys, a_values, b_keys, b_values, *, descending=False, out=None,
                 values_out=None):
    """(merged keys, values in the same order) of two sorted key-value arrays;
    stable, a's pairs first on equal keys. Values are 4- or 8-byte numbers."""
    ak, av = Operand(a_keys, "a_keys"), Operand(a_values, "a_values")
    bk, bv = Operand(b_keys, "b_keys"), Operand(b_values, "b_values")
    for k, v in ((ak, av), (bk, bv)):
        if k.n != v.n:
            raise ValueError(f"{k.what} and {v.what} differ in length: {k.n} != {v.n}")
    if av.dtype != bv.dtype:
        raise TypeError(f"a_values and b_values must have the same dtype, got {av.dtype} and {bv.dtype}")
    _value_bytes(av.dtype)
    return _merge(ak, bk, av, bv, descending, out, values_out)


def host_merge_order(a: np.ndarray, b: np.ndarray, descending=False) -> np.ndarray:
    """Output position of every key of concatenate([a, b]) in their stable
    merge (searchsorted counts the keys that go before each one)."""
    na, nb = len(a), len(b)
    if not descending:
        pos_a = np.arange(na) + np.searchsorted(b, a, side="left")
        pos_b = np.arange(nb) + np.searchsorted(a, b, side="right")
    else:  # a's key goes after b's strictly greater ones; b's after a's greater or equal
        pos_a = np.arange(na) + (nb - np.searchsorted(b[::-1], a, side="right"))
        pos_b = np.arange(nb) + (na - np.searchsorted(a[::-1], b, side="left"))
    return np.concatenate([pos_a, pos_b]).astype(np.int64)


def _check_keys(a: Operand, b: Operand):
    if a.dtype != b.dtype:
        raise TypeError(f"{a.what} and {b.what} must have the same dtype, got {a.dtype} and {b.dtype}")
    key_dtype(a.dtype)  # TypeError naming the supported dtypes
    if a.on_device and b.on_device and a.ordinal != b.ordinal:
        raise ValueError(f"{a.what} and {b.what} are on different devices ({a.ordinal}, {b.ordinal})")


def _merge(a: Operand, b: Operand, av: Operand | None, bv: Operand | None, descending, out,
           values_out):
    _check_keys(a, b)
    from .device import gpu_available

    operands = [x for x in (a, b, av, bv) if x is not None]
    if not gpu_available() and not any(x.on_device for x in operands):
        return _merge_host(a, b, av, bv, descending, out, values_out)
    return _merge_device(a, b, av, bv, descending, out, values_out)


def _like(first: Operand, n: int) -> Operand:
    """`first` with length n: the template Result uses for a merged output."""
    like = copy.copy(first)
    like.n = n
    return like


def _merge_host(a, b, av, bv, descending, out, values_out):
    from .api import _deliver_host

    pos = host_merge_order(a.array, b.array, descending)
    total = a.n + b.n
    keys = np.empty(total, a.dtype)
    keys[pos] = np.concatenate([a.array, b.array])
    k = _deliver_host(_like(a, total), keys, out)
    if av is None:
        return k, None
    values = np.empty(total, av.dtype)
    values[pos] = np.concatenate([av.array, bv.array])
    return k, _deliver_host(_like(av, total), values, values_out)


def _merge_device(a, b, av, bv, descending, out, values_out):
    from .device import get_device
    from .job import Job
    from .plugins.merge_sort import MergeSort

    first = a if a.on_device or not b.on_device else b
    state = get_device(first.ordinal)
    total = a.n + b.n
    key_result = Result(_like(first, total), a.dtype, state, out, "out")
    value_result = None
    if av is not None:
        vfirst = av if av.on_device or not bv.on_device else bv
        value_result = Result(_like(vfirst, total), av.dtype, state, values_out, "values_out")
    inputs = [(x, x.device_ptr(state) if x.n else 0) for x in (a, b, av, bv) if x is not None]
    outputs = [(r.ptr, total * r.dtype.itemsize) for r in (key_result, value_result) if r is not None]
    for x, ptr in inputs:
        for optr, onbytes in outputs:
            if overlaps(ptr, x.nbytes, optr, onbytes):
                raise ValueError(f"out / values_out overlaps the input {x.what}; merge into a separate array")
    ptr = {x.what: p for x, p in inputs}
    vb = 0 if av is None else av.dtype.itemsize
    plugin = MergeSort()
    job = Job(plugin, state, dtype=a.key_dtype.name, n=total, keys_in=ptr[a.what],
              keys_out=key_result.ptr, values_in=ptr.get(av.what, 0) if av else 0,
              values_out=value_result.ptr if value_result else 0, value_bytes=vb,
              descending=descending)
    try:
        plugin.merge(job, ptr[a.what], ptr[av.what] if av else 0, a.n,
                     ptr[b.what], ptr[bv.what] if bv else 0, b.n)
    finally:
        job.finish()
    k = key_result.finish()
    return k, value_result.finish() if value_result is not None else None
