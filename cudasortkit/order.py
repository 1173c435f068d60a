"""NumPy's sort order on the host, as NumPy 2.5 defines it.

Ascending: NaNs last, -0.0 == +0.0. Descending (NumPy 2.5's
``descending=True``): the reverse, except that NaNs stay last, and a stable
descending sort keeps equal keys (-0.0 and +0.0, NaNs) in input order. The
CPU plugin, the CPU merge and the tests' references all order keys here.

bfloat16 (ml_dtypes) keys are ordered through float32, which holds every
bfloat16 exactly: NumPy itself does not sort them.
"""
from __future__ import annotations

import numpy as np

from .dtypes import is_bfloat16


def comparable(keys: np.ndarray) -> np.ndarray:
    """`keys`, or a view or copy that NumPy orders the same way they sort."""
    return keys.astype(np.float32) if is_bfloat16(keys.dtype) else keys


def _nan_count(c: np.ndarray) -> int:
    return int(np.count_nonzero(np.isnan(c))) if c.dtype.kind == "f" else 0


def argsort(keys: np.ndarray, descending: bool = False) -> np.ndarray:
    """Stable int64 order of `keys`: numpy.argsort(kind="stable"), and with
    descending=True numpy.argsort(descending=True, stable=True)."""
    c = comparable(keys)
    if not descending:
        return np.argsort(c, kind="stable").astype(np.int64, copy=False)
    # Sorting the reversed keys stably and reversing the result gives the
    # descending order with equal keys in input order, NaNs first (in input
    # order); rolling moves the NaNs to the end.
    n = len(c)
    order = (n - 1) - np.argsort(c[::-1], kind="stable")[::-1]
    nans = _nan_count(c)
    if nans:
        order = np.roll(order, -nans)
    return order.astype(np.int64, copy=False)


def numpy_kind(dtype: np.dtype, stable: bool):
    """np.sort's `kind` for an ascending sort of a NumPy-sortable dtype.
    NumPy 2.4's default float16 sort was seen returning unsorted output."""
    return "stable" if stable or dtype.char == "e" else None


def sort(keys: np.ndarray, descending: bool = False, stable: bool = False) -> np.ndarray:
    """Sorted copy of `keys` in NumPy's order: the keys' own bits when stable
    (or descending and stable), else numpy.sort's answer (which may give a
    float zero the other sign and a NaN another payload)."""
    if is_bfloat16(keys.dtype) or (descending and stable):
        return keys[argsort(keys, descending)]
    out = np.sort(keys, kind=numpy_kind(keys.dtype, stable))
    if not descending:
        return out
    out = out[::-1]
    nans = _nan_count(out)
    return np.roll(out, -nans) if nans else np.ascontiguousarray(out)


def segment_ids(segments, n: int) -> np.ndarray:
    """The segment of each of n keys (cudasortkit.sdk.segments.Segments)."""
    if segments.uniform:
        return np.repeat(np.arange(segments.count, dtype=np.int64), segments.row_len)
    return np.repeat(np.arange(segments.count, dtype=np.int64), np.diff(segments.offsets))


def segmented_argsort(keys: np.ndarray, segments, descending: bool = False) -> np.ndarray:
    """Stable int64 order of `keys` sorting every segment on its own, as
    positions in the whole array: argsort() of each segment (NaNs last both
    ways, equal keys in input order), offset by the segment's start."""
    c = comparable(keys)
    if descending:
        # Reversing the order of every key but NaN: negation for floats
        # (exact; NaN stays NaN, so last), bitwise not for integers.
        c = -c if c.dtype.kind == "f" else ~c.view(np.uint8 if c.dtype == np.bool_ else c.dtype)
    return np.lexsort((c, segment_ids(segments, len(keys)))).astype(np.int64, copy=False)
