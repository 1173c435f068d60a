"""Merging the sorted runs a rank receives (collective.py, step 4): pairwise
merges of adjacent runs, earlier runs first on equal keys (merge_by_key with
values: stable), so that runs given in global index order merge into global
index order among equal keys.
"""
from __future__ import annotations

from ..calls.sort_merge import merge, merge_by_key


def merge_runs(runs: list, descending: bool):
    """Merge sorted runs (keys, values or None) pairwise, earlier runs first
    on equal keys (with values: merge_by_key, stable). The list is consumed:
    each level of merges replaces its runs, so that their memory goes back
    (given no other reference) while the next level merges."""
    runs[:] = [r for r in runs if len(r[0])] or runs[:1]
    while len(runs) > 1:
        runs[:] = [_merge_pair(*runs[i:i + 2], descending) for i in range(0, len(runs) - 1, 2)] \
            + runs[len(runs) - len(runs) % 2:]
    return runs.pop()


def _merge_pair(a, b, descending: bool):
    if a[1] is None:
        return merge(a[0], b[0], descending=descending), None
    return merge_by_key(a[0], a[1], b[0], b[1], descending=descending)
