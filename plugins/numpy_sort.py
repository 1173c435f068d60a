"""`numpy`: the CPU plugin, for hosts without a GPU and for tiny host arrays."""
from __future__ import annotations

from cudasortkit import order
from cudasortkit.dtypes import KEY_DTYPES
from cudasortkit.sdk.plugin import SortPlugin


class NumpySort(SortPlugin):
    name = "numpy"
    summary = "NumPy on the CPU: no GPU needed, fastest for tiny host arrays"
    dtypes = KEY_DTYPES
    stable = True
    priority = 1000
    host_sort_is_numpy = True
    pairs = True
    device = "cpu"
    segmented = True

    def run(self, job):
        keys = job.keys
        if job.segments is not None:
            return self._run_segments(job)
        if job.kind == "sort":
            return order.sort(keys, job.descending, job.stable), None
        idx = order.argsort(keys, job.descending)
        if job.kind == "argsort":
            return keys[idx], idx
        return keys[idx], job.values[idx]

    @staticmethod
    def _run_segments(job):
        """Rows or ragged segments, each sorted on its own (stably); argsort
        indices count from each row's start for rows, else are positions."""
        keys, segments = job.keys, job.segments
        idx = order.segmented_argsort(keys, segments, job.descending)
        if job.kind == "sort":
            return keys[idx], None
        if job.kind == "pairs":
            return keys[idx], job.values[idx]
        if segments.local_indices:
            return keys[idx], idx - order.segment_ids(segments, len(keys)) * segments.row_len
        return keys[idx], idx
