"""`numpy`: the CPU plugin, for hosts without a GPU and for tiny host arrays."""
from __future__ import annotations

import numpy as np

from cudasortkit.api import numpy_sort
from cudasortkit.dtypes import KEY_DTYPES
from cudasortkit.plugin import SortPlugin


def stable_order(keys: np.ndarray, descending: bool) -> np.ndarray:
    """numpy.argsort(kind='stable'), or its descending twin that keeps
    equal keys in input order (NaNs first, as the exact reverse of ascending)."""
    if not descending:
        return np.argsort(keys, kind="stable")
    n = len(keys)
    return (n - 1) - np.argsort(keys[::-1], kind="stable")[::-1]


class NumpySort(SortPlugin):
    name = "numpy"
    summary = "NumPy on the CPU: no GPU needed, fastest for tiny host arrays"
    dtypes = KEY_DTYPES
    stable = True
    pairs = True
    device = "cpu"

    def run(self, job):
        keys = job.keys
        if job.kind == "sort":
            out = numpy_sort(keys, job.stable)
            return (out[::-1] if job.descending else out), None
        order = stable_order(keys, job.descending)
        if job.kind == "argsort":
            return keys[order], order
        return keys[order], job.values[order]
