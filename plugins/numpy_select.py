"""`numpy_select`: selection on the CPU with NumPy (host arrays, no GPU).

Keys become selection words as on the GPU (keys.cuh's ordered word: NaN
the largest, -0.0 == +0.0; inverted for largest=True), so ascending words
are the selection order of sdk/selection.py. topk finds every row's k-th
word with np.partition (linear time), keeps the words below it and the
first ties by index, and sorts only those k stably; partition (and k equal
to the row length) is a stable argsort of the rows.
"""
from __future__ import annotations

import numpy as np

from cudasortkit.dtypes import is_bfloat16
from cudasortkit.sdk.selection import GeneralSelectPlugin


def selection_words(keys: np.ndarray, largest: bool) -> np.ndarray:
    """Unsigned words of `keys` whose ascending order is the selection
    order (a stable sort of them keeps equal keys in index order)."""
    keys = np.ascontiguousarray(keys)
    bits = keys.view(f"u{keys.dtype.itemsize}") if keys.dtype != np.bool_ else keys.view(np.uint8)
    sign = 1 << (8 * keys.dtype.itemsize - 1)
    if keys.dtype.kind == "f" or is_bfloat16(keys.dtype):
        nan = np.isnan(keys.astype(np.float32) if is_bfloat16(keys.dtype) else keys)
        words = np.where(bits & sign, ~bits, bits | sign)
        words[(bits & ~np.array(sign, bits.dtype)) == 0] = sign  # -0.0 == +0.0
        words[nan] = ~np.array(0, bits.dtype)                      # NaN: the largest word
    elif keys.dtype.kind == "i":
        words = bits ^ np.array(sign, bits.dtype)
    else:
        words = bits.copy()
    return ~words if largest else words


def selection_order(keys: np.ndarray, largest: bool, k: int | None = None) -> np.ndarray:
    """int64 positions of the first k (default: all) keys of every row of
    2-D `keys` in the selection order."""
    words = selection_words(keys, largest)
    rows, length = words.shape
    k = length if k is None else k
    if k == length or k == 0:
        return np.argsort(words, axis=-1, kind="stable")[:, :k].astype(np.int64, copy=False)
    kth = np.partition(words, k - 1, axis=-1)[:, k - 1:k]
    less = words < kth
    equal = words == kth
    # the words below the k-th, then its ties by index: k per row
    take = less | (equal & (np.cumsum(equal, axis=-1) <= k - less.sum(axis=-1, keepdims=True)))
    chosen = np.nonzero(take)[1].reshape(rows, k)  # index order within each row
    ranked = np.argsort(np.take_along_axis(words, chosen, -1), axis=-1, kind="stable")
    return np.take_along_axis(chosen, ranked, -1).astype(np.int64, copy=False)


class NumpySelect(GeneralSelectPlugin):
    name = "numpy_select"
    summary = "NumPy on the CPU: the k-th key by np.partition, then k keys sorted"
    device = "cpu"
    priority = 1000

    def run(self, job):
        order = selection_order(job.keys, job.largest, job.k)
        return np.take_along_axis(job.keys, order, axis=-1), order
