"""`numpy_select`: selection on the CPU with NumPy (host arrays, no GPU).

A stable argsort of every row in the selection order of sdk/selection.py
(largest: NaNs first, then descending; smallest: ascending, NaNs last;
equal keys by index), cut at k. A full stable order also partitions at
every kth, so it serves partition as well.
"""
from __future__ import annotations

import numpy as np

from cudasortkit.dtypes import KEY_DTYPES
from cudasortkit.order import comparable
from cudasortkit.sdk.selection import SelectPlugin


def selection_order(keys: np.ndarray, largest: bool) -> np.ndarray:
    """int64 positions sorting every row of 2-D `keys` in the selection
    order: a stable sort (equal keys, -0.0 and +0.0 among them, by index)."""
    c = comparable(keys)
    if not largest:
        return np.argsort(c, axis=-1, kind="stable").astype(np.int64, copy=False)
    if c.dtype.kind == "f":
        # primary key: not NaN (NaNs first); then the negated key (exact).
        return np.lexsort((-c, ~np.isnan(c)), axis=-1).astype(np.int64, copy=False)
    inverted = ~c.view(np.uint8 if c.dtype == np.bool_ else c.dtype)
    return np.argsort(inverted, axis=-1, kind="stable").astype(np.int64, copy=False)


class NumpySelect(SelectPlugin):
    name = "numpy_select"
    summary = "NumPy on the CPU: stable argsort of every row, cut at k"
    dtypes = KEY_DTYPES
    ops = ("topk", "partition")
    device = "cpu"
    priority = 1000

    def run(self, job):
        order = selection_order(job.keys, job.largest)[:, :job.k]
        return np.take_along_axis(job.keys, order, axis=-1), order
