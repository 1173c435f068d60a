"""`numpy`: the CPU plugin, for hosts without a GPU and for tiny host arrays."""
from __future__ import annotations

from cudasortkit import order
from cudasortkit.dtypes import KEY_DTYPES
from cudasortkit.plugin import SortPlugin


class NumpySort(SortPlugin):
    name = "numpy"
    summary = "NumPy on the CPU: no GPU needed, fastest for tiny host arrays"
    dtypes = KEY_DTYPES
    stable = True
    priority = 1000
    host_sort_is_numpy = True
    pairs = True
    device = "cpu"

    def run(self, job):
        keys = job.keys
        if job.kind == "sort":
            return order.sort(keys, job.descending, job.stable), None
        idx = order.argsort(keys, job.descending)
        if job.kind == "argsort":
            return keys[idx], idx
        return keys[idx], job.values[idx]
