"""Sorting along any axis of an N-D array, and ragged segments.

An N-D sort along `axis` becomes one segmented request: the axis is moved
last (a transposed contiguous copy made by the array's own library, on the
caller's stream; no copy when it is already last and the array contiguous),
the array is seen as rows x row length keys (cudasortkit/sdk/segments.py), a
segmented plugin sorts every row, and the result is reshaped and the axis
moved back. `axis=None` sorts the flattened array (one row). A single row
is an ordinary 1-D request, so every 1-D plugin can serve it.

Ragged segments come as CUB-style offsets, checked before anything is
sorted: on the keys' device when they are there (one pass; only its
statistics come back to the host), else on the host.

This module only shapes the caller's arrays and the request around the
sort, which the public API runs (dispatch/execute.py).
"""
from __future__ import annotations

import math
import operator

import numpy as np

from ..sdk import registry
from ..gpu.arrays import (Operand, array_stream, c_strides, library_of, not_an_array,
                          torch_to_numpy_dtype)
from ..dtypes import INDEX_DTYPE
from ..gpu.device import get_device, gpu_available
from ..dispatch.request import caller_ordering
from ..sdk.segments import Segments, check_offsets

try:
    _AxisError = np.exceptions.AxisError
except AttributeError:  # NumPy < 1.25
    _AxisError = np.AxisError

#: Libraries whose arrays this module can transpose (the others: only a
#: C-contiguous array along its last axis, or axis=None).
_MOVABLE = ("numpy", "cupy", "torch", "torch-cpu")


def normalize_axis(axis, ndim: int):
    """NumPy's axis rule: an int in [-ndim, ndim) (or None), as 0..ndim-1."""
    if axis is None:
        return None
    if isinstance(axis, (bool, np.bool_)):
        raise TypeError(f"axis must be an integer or None, got {axis!r}")
    try:
        axis = operator.index(axis)
    except TypeError:
        raise TypeError(f"axis must be an integer or None, got {axis!r}") from None
    if not -ndim <= axis < ndim:
        raise _AxisError(f"axis {axis} is out of bounds for array of dimension {ndim}")
    return axis % ndim


class _FlatInterface:
    """A contiguous device array behind __cuda_array_interface__, seen as 1-D."""

    def __init__(self, cai: dict, n: int):
        cai = dict(cai)
        cai.update(shape=(n,), strides=None)
        self.__cuda_array_interface__ = cai


class Rows:
    """A caller's array seen as rows along `axis`: `flat` is a 1-D array of
    the caller's library (the axis moved last, C order), `rows` x `row_len`.
    `zero_d_as_1d`: a 0-d array is one key along one axis, as NumPy's argsort
    sees it (its axis check makes 0-d arrays 1-D); sorts refuse any axis of
    a 0-d array (only axis=None flattens it)."""

    def __init__(self, a, axis, what: str, stream, zero_d_as_1d: bool = False,
                 role: str = "keys"):
        self.what = what
        library = library_of(a)
        if library == "masked":
            Operand(a, what, role)  # raises the 1-D path's error for masked arrays
        if library == "other":
            try:
                converted = np.asarray(a)
            except Exception:
                converted = None
            if converted is None or converted.dtype == object:
                Operand(a, what, role)  # raises naming the supported kinds or dtypes
            a = converted
            library = "numpy"
        self.library = library
        self.original = a
        self.stream = stream
        own_shape = self._shape(a, library)
        #: A 0-d array (seen as one key along one axis where zero_d_as_1d).
        self.zero_d = not own_shape
        (self.shape, self.axis, self.n, self.rows, self.row_len, self.moved_shape,
         self.moves) = _layout(own_shape, axis, zero_d_as_1d)
        #: Sorted along its last axis: the result is `flat`'s in the input's shape.
        self.in_place_rows = self.axis is not None and not self.moves
        self.flat = self._flatten(a)

    # ----------------------------------------------------------- in and out
    @staticmethod
    def _shape(a, library) -> tuple:
        """The shape as a tuple of ints (NumPy's and CuPy's already is)."""
        if library in ("numpy", "cupy"):
            shape = a.shape
            if type(shape) is tuple:
                return shape
        elif library not in _MOVABLE:
            shape = a.__cuda_array_interface__["shape"]
        else:
            shape = a.shape
        return tuple(map(int, shape))

    def write_result(self, target, result):
        """`result` (of the input's kind) copied into the caller's out=
        array `target`, in the caller's stream order; `result` itself when
        there is no target."""
        if target is None:
            return result
        if self.library == "numpy":
            np.copyto(target, result)
        elif self.library == "cupy":
            with self.stream_context():
                target[...] = result
        else:
            with self.stream_context():
                target.copy_(result)
        return target

    def stream_context(self):
        """The caller's stream= as the current stream of the array's library
        while its copies are issued (no stream given: the current one)."""
        return array_stream(self.original, self.stream)

    def _flatten(self, a):
        lib = self.library
        if lib in ("numpy",):
            m = np.moveaxis(a, self.axis, -1) if self.moves else a
            return np.ascontiguousarray(m).reshape(-1)
        if lib == "cupy" or lib in ("torch", "torch-cpu"):
            if self.stream is None:  # the current stream: no stream switch
                return self._flat_copy(a)
            with self.stream_context():
                return self._flat_copy(a)
        cai = a.__cuda_array_interface__
        own_shape = tuple(cai["shape"])  # () for a 0-d array seen as 1-D
        if len(own_shape) == 1:
            return a
        strides = cai.get("strides")
        dtype = getattr(a, "dtype", None)
        itemsize = np.dtype(cai["typestr"] if dtype is None else dtype).itemsize
        contiguous = strides is None or tuple(strides) == c_strides(own_shape, itemsize)
        if self.moves or not contiguous:
            raise ValueError(f"{self.what}: sorting {type(a).__name__} along axis {self.axis} needs "
                             "a C-contiguous array sorted along its last axis (or axis=None); "
                             "for any axis pass a NumPy, CuPy or PyTorch array")
        return _FlatInterface(cai, self.n)

    def _flat_copy(self, a):
        """A CuPy or torch array's keys, the axis moved last, as a flat
        contiguous array (a copy only where they are not so already)."""
        if self.library == "cupy":
            import cupy

            m = cupy.moveaxis(a, self.axis, -1) if self.moves else a
            return cupy.ascontiguousarray(m).reshape(-1)
        m = a.movedim(self.axis, -1) if self.moves else a
        return m.contiguous().reshape(-1)

    def restore(self, flat_result):
        """A flat result (the caller's kind) in the input's shape, the axis back in place."""
        if self.axis is None:
            return flat_result
        lib = library_of(flat_result)
        shaped = flat_result.reshape(self.moved_shape)
        if not self.moves:
            return shaped
        if lib == "numpy":
            return np.ascontiguousarray(np.moveaxis(shaped, -1, self.axis))
        if lib == "cupy":
            import cupy

            with self.stream_context():
                return cupy.ascontiguousarray(cupy.moveaxis(shaped, -1, self.axis))
        with self.stream_context():
            return shaped.movedim(-1, self.axis).contiguous()

    def result_shape(self) -> tuple:
        return (self.n,) if self.axis is None else self.shape

    def segments(self, algorithm: str = "auto") -> Segments | None:
        """The request's segments: None for one row (an ordinary 1-D sort),
        unless a segmented plugin is asked for by name."""
        if self.rows != 1 or _named_segmented(algorithm):
            return Segments.rows(self.rows, self.row_len)
        return None


#: _layout's answers per (shape, axis, zero_d_as_1d) for an axis given as
#: None or an int (an axis of another type is checked afresh each time);
#: dropped all together past MAX_LAYOUTS. They depend on nothing else.
_LAYOUTS: dict = {}
MAX_LAYOUTS = 4096


def _layout(shape: tuple, axis, zero_d_as_1d: bool) -> tuple:
    """(shape, axis, n, rows, row_len, moved_shape, moves) of an array of
    `shape` seen as rows along `axis` (Rows' fields)."""
    key = (shape, axis, zero_d_as_1d)
    remember = axis is None or type(axis) is int
    if remember:
        found = _LAYOUTS.get(key)
        if found is not None:
            return found
    if not shape and zero_d_as_1d:
        shape = (1,)
    axis = normalize_axis(axis, len(shape)) if (axis is not None or shape) else None
    n = math.prod(shape)  # ints (_shape): math's, several times faster than NumPy's
    if axis is None:
        row_len, rows, moved_shape = n, 1, (n,)
    else:
        row_len = shape[axis]
        rows = math.prod(shape[:axis] + shape[axis + 1:])
        moved_shape = shape[:axis] + shape[axis + 1:] + (row_len,)
    moves = axis is not None and axis != len(shape) - 1
    found = (shape, axis, n, rows, row_len, moved_shape, moves)
    if remember:
        if len(_LAYOUTS) >= MAX_LAYOUTS:
            _LAYOUTS.clear()
        _LAYOUTS[key] = found
    return found


def _named_segmented(algorithm: str) -> bool:
    """True if `algorithm` names a plugin that declares `segmented`."""
    if algorithm == "auto":
        return False
    entry = registry.entries().get(algorithm)
    return bool(entry is not None and entry.plugin is not None and entry.plugin.segmented)


# ------------------------------------------------------------------- out=
def _check_target(target, like: Rows, dtype, what: str):
    """out= of an N-D sort: the same kind of array as the input, its shape
    (the flattened length for axis=None) and the result's dtype."""
    if target is None:
        return
    lib = library_of(target)
    if lib == "other":
        raise not_an_array(what, target)
    if lib != like.library or lib not in _MOVABLE:
        raise ValueError(f"{what} of a sort along an axis must be the same kind of array as the "
                         f"input (a NumPy, CuPy or PyTorch array), got {type(target).__name__}")
    shape = tuple(int(x) for x in target.shape)
    tdtype = torch_to_numpy_dtype(target.dtype, what, "out") if lib.startswith("torch") else \
        np.dtype(target.dtype)
    # (a NumPy out= of the other byte order takes the values: NumPy converts)
    if shape != like.result_shape() or tdtype != np.dtype(dtype) and (
            lib != "numpy" or tdtype.newbyteorder("=") != np.dtype(dtype)):
        raise ValueError(f"{what} must be an array of shape {like.result_shape()} and dtype "
                         f"{np.dtype(dtype)}, got shape {shape} and dtype {tdtype}")
    if lib == "numpy" and not target.flags.writeable:
        raise ValueError(f"{what} must be writeable")




# ------------------------------------------------------------- entry points
class Along:
    """sort / argsort / sort_by_key of an array along an axis as one request:
    the rows are the segments of one 1-D sort of the flattened array (no
    copy where the rows lie in place). Made before the sort (every argument
    check), results() after it. argsort's int32 indices (index_dtype) come
    from one 1-D sort only: a 1-D array along its axis, axis=None, or a
    single row."""

    def __init__(self, kind: str, a, values, axis, stream, out, values_out, algorithm: str,
                 index_dtype=INDEX_DTYPE):
        rows = Rows(a, axis, "a" if kind != "pairs" else "keys", stream, kind == "argsort")
        if index_dtype != INDEX_DTYPE and rows.rows != 1:
            raise ValueError(f"index_dtype=int32 is supported where argsort sorts one 1-D array (a "
                             f"1-D array, axis=None, or a single row); this sorts {rows.rows} rows "
                             f"along axis {rows.axis}: use int64 indices")
        vrows = None
        if values is not None:
            vrows = Rows(values, axis, "values", stream, role="values")
            if vrows.shape != rows.shape:
                raise ValueError(f"keys and values differ in shape: {rows.shape} != {vrows.shape}")
        self.kind, self.rows, self.vrows = kind, rows, vrows
        self.keys = Operand(rows.flat, rows.what)
        self.values = Operand(vrows.flat, "values", "values") if vrows is not None else None
        if kind != "argsort":
            _check_target(out, rows, self.keys.dtype, "out")
        if self.values is not None:
            _check_target(values_out, vrows, self.values.dtype, "values_out")
        self.segments = rows.segments(algorithm)
        #: The caller's array where the result takes its shape (a plain call
        #: of it can be prepared for repeats), else None.
        self.caller = rows.original if rows.in_place_rows else None

    def sort(self, prepared, descending, stable, algorithm, out, values_out, key_range=None,
             stream=None, progress=False, index_dtype=INDEX_DTYPE):
        """Run the flat sort through `prepared` (calls.sort_prepared.PreparedCalls:
        the general path, preparing repeats) and return results()."""
        keys, values = prepared.run(self.kind, self.keys, self.values, descending, stable,
                                    algorithm, None, None, key_range, stream, self.segments,
                                    progress, caller=self.caller, index_dtype=index_dtype)
        return self.results(keys, values, out, values_out)

    def results(self, keys, values, out, values_out):
        """What the public function returns, from the flat sort's results."""
        if self.kind == "sort":
            return self.rows.write_result(out, self.rows.restore(keys))
        if self.kind == "argsort":
            return self.rows.restore(values)
        return (self.rows.write_result(out, self.rows.restore(keys)),
                self.vrows.write_result(values_out, self.vrows.restore(values)))


def ragged(keys, offsets, values, algorithm: str, stream):
    """segmented_sort / segmented_argsort's (keys Operand, values Operand or
    None, Segments or None): `keys` 1-D, ragged CUB-style `offsets`,
    checked before anything is sorted."""
    k = Operand(keys, "keys")
    v = None
    if values is not None:
        v = Operand(values, "values", "values")
        if v.n != k.n:
            raise ValueError(f"keys and values differ in length: {k.n} != {v.n}")
    return k, v, _ragged(k, v, offsets, algorithm, stream)


def _ragged(keys: Operand, values, offsets, algorithm: str, stream) -> Segments | None:
    """The request's segments from the caller's offsets: checked on the
    keys' device (in the caller's stream) when the keys are there, else on
    the host; None for one segment (an ordinary 1-D sort) unless a
    segmented plugin is asked for by name."""
    state, ordering = caller_ordering(stream, (keys, values))
    if state is None:
        host, lengths = check_offsets(offsets, keys.n)
        segments = Segments.ragged(host, offsets, lengths)
    else:
        ordering.begin()
        try:
            segments = Segments.checked_on_device(offsets, keys.n, state)
        finally:
            ordering.end()
    return segments if segments.count != 1 or _named_segmented(algorithm) else None


def request_parts(a, axis, values=None, offsets=None, algorithm="auto", kind="sort"):
    """(keys Operand, values Operand or None, Segments or None) of `a` along
    `axis`, or in ragged segments when `offsets` are given, for explain()."""
    rows = Rows(a, axis, "a", None, kind == "argsort")
    vals = None if values is None else \
        Operand(Rows(values, axis, "values", None, role="values").flat, "values", "values")
    keys = Operand(rows.flat, "a")
    if keys.on_device and gpu_available():
        get_device(keys.ordinal)   # choices read the keys' device, as a call does
    if offsets is None:
        return keys, vals, rows.segments(algorithm)
    host, lengths = check_offsets(offsets, keys.n)
    segments = Segments.ragged(host, offsets, lengths) \
        if len(host) != 2 or _named_segmented(algorithm) else None
    return keys, vals, segments
