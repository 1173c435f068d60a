"""cudasortkit: fast sorting on NVIDIA GPUs, with pluggable algorithms.

    >>> import cudasortkit as csk
    >>> csk.sort(a)               # NumPy, CuPy, PyTorch, pycuda or CAI arrays
    >>> csk.argsort(a, stable=True)
    >>> p = csk.plan(like=a); p(a)   # a repeated sort of device arrays, checked once

See docs/ for the algorithms, tuning and writing a plugin.
"""
from .api import (algorithms, argpartition, argsort, explain, explain_searchsorted, lexsort,
                  partition, plan, searchsorted, segmented_argsort, segmented_sort, sort,
                  sort_by_key, topk, unique)
from .sdk.selection import SelectPlugin
from .host.memlimit import device_memory_limit, set_device_memory_limit
from .calls.sort_merge import merge, merge_by_key
from .sdk.plugin import Request, SortPlugin, Tunable
from .version import __version__

__all__ = ["sort", "argsort", "sort_by_key", "segmented_sort", "segmented_argsort", "merge", "merge_by_key", "lexsort", "algorithms", "explain",
           "plan",
           "unique", "searchsorted", "explain_searchsorted",
           "set_device_memory_limit", "device_memory_limit",
           "SortPlugin", "Tunable", "Request", "__version__",
           "topk", "partition", "argpartition", "SelectPlugin"]
