"""Prepared uniques: a repeated plain unique of integer, bool or float
device keys of one exact length, made again without the general path
(calls/unique.py), as a repeated sort is (calls/sort_prepared.py).

A plain call (no return_*, axis=None, no stream=, equal_nan=True) of a 1-D
CuPy array or CUDA tensor of integer, bool or float keys, n from 2 to
ONE_PASS_UP_TO, goes through the general path once; that path sorts the
keys through the keys' prepared sort. The next call of the same (array
type, dtype, length) finds that sort again (which checks what a repeated
sort checks: its stamps, the array's layout and device) and, if it is the
one this prepared unique was made with, runs it and then, with the kernels
the first call compiled, the general path's kernels for keys sorted alone:
the one pass for integer and bool keys (calls/unique.queue_compact), the
tile counts, scan and write for floats (queue_offsets, csk_unique_write).
The values are made n long in the caller's library and cut to u after the
one wait. Nothing else is read, checked or chosen again. Any other call,
or a sort that is prepared anew (its decision moved), takes the general
path, which prepares the unique again.
"""
from __future__ import annotations

import numpy as np

from ..gpu.arrays import library_of, torch_to_numpy_dtype
from ..launch.outputs import poison
from . import unique as uniques
from .sort_prepared import adapter_for

#: Prepared uniques kept at most (dropped all together past it, as prepared sorts).
MAX_CALLS = 1024
_calls: dict = {}  # (array type, dtype, shape) -> PreparedUnique


class PreparedUnique:
    """One length's plain unique: the keys' prepared sort, then the one pass."""

    __slots__ = ("sort", "state", "adapter", "job", "kernels", "floats", "tiles", "dtype", "n",
                 "count_bytes", "make_values")

    def __init__(self, sort, state, adapter, job, kernels, dtype, n: int):
        """`sort`: the keys' prepared sort call; `job`: the Job unique's
        kernels run under (rebound for each call); `kernels`: its
        csk_unique_compact (calls/unique.compact_kernel) for integer and
        bool keys, (tile_kernels', csk_unique_write) for floats."""
        self.sort, self.state, self.adapter = sort, state, adapter
        self.job, self.kernels = job, kernels
        self.dtype, self.n = np.dtype(dtype), int(n)
        self.floats = self.dtype.kind == "f"
        self.tiles = job.blocks(self.n, uniques.UNIQUE_TILE)
        self.count_bytes = uniques.count_bytes_for(self.n)
        self.make_values = adapter.maker((self.n,), self.dtype)

    def __call__(self, a, equal_nan: bool):
        """The sorted unique values of `a`, an array of the caller's library."""
        state = self.state.activate()
        adapter = self.adapter
        sorted_keys = self.sort(a)[0]  # held until the one pass has run (the wait below)
        caller = adapter.stream(a)
        joins = state.joiner.join_caller(caller)
        keys_in, n = adapter.pointer(a), self.n
        job = self.job.rebound(keys_in, 0)
        try:
            values = state.allocating(self.make_values, a)
            at = adapter.pointer(values)
            poison(state, at, n * self.dtype.itemsize)
            sorted_at = adapter.pointer(sorted_keys)
            if self.floats:
                tile_kernels, write = self.kernels
                offsets, first, total = uniques.queue_offsets(job, tile_kernels, sorted_at,
                                                              keys_in, n, equal_nan)
                job.launch(write, self.tiles, uniques.UNIQUE_BLOCK, keys_in, sorted_at, 0, first,
                           offsets, n, int(equal_nan), at, 0, 0, 0, 0)
            else:
                total = uniques.queue_compact(job, self.kernels, sorted_at, n, equal_nan, at, 0)
            u = state.read_back(total, self.count_bytes)
            values = self._cut(values, at, u)
        finally:
            job.finish()
            if joins:
                state.joiner.signal((caller,))
        return values

    def _cut(self, values, at: int, u: int):
        """The first u values: the array, a view of it, or a copy where the
        view would hold more than twice their memory (Result.finish_first's
        rule), written on the device's stream."""
        if u == self.n:
            return values
        if 2 * u >= self.n:
            return values[:u]
        state = self.state
        head = state.allocating(self.adapter.maker((u,), self.dtype), values)
        if u:
            state.cuda.memcpy_dtod_async(self.adapter.pointer(head), at,
                                         u * self.dtype.itemsize, state.stream)
        return head


def unique(prepared, a, return_index=False, return_inverse=False, return_counts=False,
           axis=None, equal_nan=True, stream=None):
    """calls/unique.unique, through a prepared unique where one serves the call."""
    plain = not (return_index or return_inverse or return_counts) and axis is None \
        and stream is None
    if plain:
        call = find(prepared, a)
        if call is not None and (equal_nan or not call.floats):
            return call(a, bool(equal_nan))
    result = uniques.unique(prepared, a, return_index, return_inverse, return_counts, axis,
                            equal_nan, stream)
    if plain and equal_nan:  # (floats without it sort (keys, positions): not prepared here)
        note(prepared, a)
    return result


def _key(a):
    return type(a), getattr(a, "dtype", None), getattr(a, "shape", None)


def find(prepared, a):
    """The prepared unique for this plain call of `a`, or None."""
    call = _calls.get(_key(a)) if type(a) in _types else None
    if call is None or prepared.find("sort", a, False, False, "auto") is not call.sort:
        return None
    return call


_types: set = set()  # array types some prepared unique was made for


def note(prepared, a) -> None:
    """After the general path served a plain call of `a`: prepare its
    length if it can be (see the module docstring)."""
    adapter = adapter_for(library_of(a))
    if adapter is None or len(a.shape) != 1:
        return
    dtype = torch_to_numpy_dtype(a.dtype) if adapter.library == "torch" else np.dtype(a.dtype)
    n = int(a.shape[0])
    if dtype.kind not in "biuf" or not 2 <= n <= uniques.ONE_PASS_UP_TO:
        return
    sort = prepared.find("sort", a, False, False, "auto")
    if sort is None:
        return
    job = uniques.unique_job(sort.state, dtype, n)
    defines = uniques.unique_defines(dtype, n)
    if dtype.kind == "f":
        kernels = (uniques.tile_kernels(job, defines, True),
                   job.kernel("unique.cu", "csk_unique_write", defines))
    else:
        kernels = uniques.compact_kernel(job, defines)
    if len(_calls) >= MAX_CALLS:
        _calls.clear()
    _calls[_key(a)] = PreparedUnique(sort, sort.state, adapter, job, kernels, dtype, n)
    _types.add(type(a))

