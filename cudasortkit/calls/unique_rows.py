"""Unique rows: numpy.unique(a, axis=0, ...) for host and device arrays.

NumPy's rule, which this keeps exactly: rows are compared as structured
records, field by field, first column most significant, NaNs sorting last
and -0.0 == +0.0; the unique rows come back sorted, each the first of its
run in a stable order (so return_index gives every row's first occurrence).
Equal rows are equal value by value, so a row holding a NaN equals no other
row: NumPy ignores equal_nan for axis=0 (NumPy 2.4 checked), and so does this.
Bools are ordered and compared by truth value (any nonzero byte is True), and
the unique rows keep their own bytes.

Device arrays of 2 or more dimensions and dtypes other than float16 and
bfloat16 (which, like 1-D and empty arrays, NumPy answers on the downloaded
rows): the rows' order is the multi-key order of the columns
(cudasortkit/calls/multikey.py: ``packed`` when a row fits 128 bits, e.g.
10 uint8 columns, else ``passes``); then the runs of equal rows are marked,
numbered by a prefix sum and compacted (compact_device), all on the GPU in
the caller's stream; the results are arrays of a's library. `compact` is
the same on the host (NumPy), for reference.
"""
from __future__ import annotations

import numpy as np

from .. import order as host_order
from ..dispatch.request import caller_ordering
from ..gpu.arrays import Operand, Result, array_stream, library_of
from ..sdk.job import Job
from ..sdk.multikey import device_ptr, launch
from ..sdk.scan import DeviceScan
from .multikey import array_namespace, default_selector, new_array, order_of, through_cupy

_DEVICE = ("cupy", "torch", "gpuarray", "cai")


def unique_rows(a, *, return_index=False, return_inverse=False, return_counts=False,
                equal_nan=True, stream=None, selector=None):
    """numpy.unique(a, axis=0, return_index=, return_inverse=, return_counts=,
    equal_nan=): the unique rows (a bare array) or a tuple in NumPy's order
    (unique, index, inverse, counts: those asked for), in a's array kind;
    indices int64. `selector` chooses the sorts on the GPU (default: one
    reading this device's measurements, as the public calls' does)."""
    flags = (return_index, return_inverse, return_counts)
    if library_of(a) not in _DEVICE:
        host = _host_array(a)
        return np.unique(host, return_index=return_index, return_inverse=return_inverse,
                         return_counts=return_counts, axis=0, equal_nan=equal_nan)
    if library_of(a) in ("gpuarray", "cai"):  # pycuda, the interface: through CuPy views
        return through_cupy([a], stream, lambda views: unique_rows(
            views[0], return_index=return_index, return_inverse=return_inverse,
            return_counts=return_counts, equal_nan=equal_nan, stream=stream, selector=selector))
    shape = tuple(a.shape)
    if not shape:
        raise np.exceptions.AxisError(0, 0)
    n, width = shape[0], int(np.prod(shape[1:], dtype=np.int64))
    rows = a.reshape(n, width) if len(shape) != 2 else a
    flat = Operand(a.reshape(-1), "a")
    if n == 0 or width == 0 or len(shape) == 1 or flat.dtype.kind == "f" and flat.dtype.itemsize == 2 \
            or flat.dtype.kind == "V":
        # NumPy's own answer, on the downloaded rows: empty shapes; 1-D arrays
        # (NumPy treats them as axis=None: NaNs merge under equal_nan);
        # float16 rows (NumPy's structured compare puts their NaNs first) and
        # bfloat16 (whatever NumPy does with ml_dtypes)
        state, ordering = caller_ordering(stream, [flat])
        ordering.begin()
        try:
            host = flat.host(state).reshape(shape)
        finally:
            ordering.end()
        results = np.unique(host, return_index=return_index, return_inverse=return_inverse,
                            return_counts=return_counts, axis=0, equal_nan=equal_nan)
        return _wrap(flat, results, any(flags))
    selector = selector or default_selector()
    compared, truth = rows, None
    if flat.dtype == np.bool_:
        # NumPy orders and compares bool rows by truth value (a byte 2 equals
        # a 1): rows of their truth values (0/1 bytes, made in the caller's
        # stream) are ordered and compared; the unique rows are a's own bytes
        with array_stream(a, stream):
            compared = rows.view(array_namespace(library_of(a)).uint8) != 0
        truth = Operand(compared.reshape(-1), "a")
    columns = [compared[:, j] for j in range(width)]

    def finish(order, state, caller):
        return compact_device(flat, order, shape, flags, state, caller, truth)

    return _wrap_tuple(order_of(columns, (False,) * width, selector, "auto", stream,
                                then=finish), any(flags))


class _Owner:
    """Who the unique rows kernels' errors and temporaries name."""

    name = "unique_rows"
    graphable = False


def compact_device(flat: Operand, order, shape, flags, state, caller,
                   compared: Operand | None = None) -> tuple:
    """numpy.unique's results on the device from a's rows (flat: n x width
    keys, row-major) and their stable multi-key order (a device int64 array):
    csk_row_starts marks where a run of equal rows starts (comparing the
    rows of `compared`, the same shape and dtype: flat's by default), an
    inclusive scan numbers the runs, csk_unique_scatter writes the inverse
    and each run's first position, csk_unique_rows the rows (from flat),
    index and counts. One wait: for the number of unique rows. Arrays of
    flat's library."""
    return_index, return_inverse, return_counts = flags
    n, width = shape[0], flat.n // shape[0]
    compared = flat if compared is None else compared
    job = Job(_Owner(), state, dtype="uint32", n=n, keys_in=0, keys_out=0, config={})
    try:
        rows, order_ptr = flat.device_ptr(state), device_ptr(order)
        ends = int(job.alloc(4 * n))
        launch(_Owner.name, state, compared.dtype, "csk_row_starts", n,
               (compared.device_ptr(state), width, order_ptr, n, ends))
        scan = DeviceScan(job, n, 4)
        scan(ends, ends, inclusive=True)
        k = state.read_back(scan.total_ptr, 4)
        firsts = int(job.alloc(8 * (k + 1)))
        inverse = _result(flat, n, np.int64, state, caller) if return_inverse else None
        launch(_Owner.name, state, flat.dtype, "csk_unique_scatter", n,
               (order_ptr, ends, n, inverse.ptr if inverse else 0, firsts))
        unique = _result(flat, k * width, flat.dtype, state, caller)
        index = _result(flat, k, np.int64, state, caller) if return_index else None
        counts = _result(flat, k, np.int64, state, caller) if return_counts else None
        launch(_Owner.name, state, flat.dtype, "csk_unique_rows", k,
               (rows, width, order_ptr, firsts, k, unique.ptr, index.ptr if index else 0,
                counts.ptr if counts else 0))
    finally:
        job.finish()
    results = [unique.finish().reshape((k, *shape[1:]))]
    results += [r.finish() for r in (index, inverse, counts) if r is not None]
    return tuple(results)


def _result(like: Operand, n: int, dtype, state, caller) -> Result:
    """A new device array of n elements of `dtype`, of like's library."""
    return new_array(like, n, dtype, state, caller)


def _wrap_tuple(results: tuple, as_tuple: bool):
    return results if as_tuple else results[0]


def compact(rows: np.ndarray, order: np.ndarray, shape, return_index, return_inverse,
            return_counts):
    """numpy.unique's results from n rows (n x width) and their stable
    order: runs of rows equal value by value, the first of each kept."""
    ordered = rows[order]
    comparable = host_order.comparable(ordered)
    start = np.empty(len(order), bool)
    start[:1] = True
    start[1:] = np.any(comparable[1:] != comparable[:-1], axis=1)
    firsts = np.flatnonzero(start)
    results = [ordered[firsts].reshape((len(firsts), *shape[1:]))]
    if return_index:
        results.append(order[firsts].astype(np.int64, copy=False))
    if return_inverse:
        inverse = np.empty(len(order), np.int64)
        inverse[order] = np.cumsum(start) - 1
        results.append(inverse)
    if return_counts:
        results.append(np.diff(np.append(firsts, len(order))).astype(np.int64))
    return tuple(results)


def _host_array(a) -> np.ndarray:
    if library_of(a) == "torch-cpu":
        raise TypeError("unique_rows: pass a NumPy array or a device array (CuPy, PyTorch CUDA, "
                        "pycuda), not a CPU tensor; a.numpy() is one")
    return np.asarray(a)


def _wrap(like: Operand, results, as_tuple: bool):
    """NumPy results as arrays of like's library: a bare array or a tuple."""
    if not isinstance(results, tuple):
        results = (results,)
    wrapped = tuple(like.wrap_host(np.ascontiguousarray(r)) for r in results)
    return wrapped if as_tuple else wrapped[0]
