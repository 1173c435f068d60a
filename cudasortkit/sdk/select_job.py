"""SelectJob: what a GPU selection plugin's run() gets (sdk/selection.py)."""
from __future__ import annotations

import threading
from typing import Any, Callable, Mapping

from ..gpu import caches
from .job import Job
from .selection import SelectRequest

#: SelectJob.kernels' answers: the Kernel objects of build/template.py's
#: kernel cache (the one cache: nothing is compiled or prepared here),
#: under the key that cache uses plus the names asked for; cleared with it.
_kept: dict = {}
_kept_lock = threading.Lock()
MAX_KEPT = 1024
caches.register(_kept.clear)


class SelectJob(Job):
    """What a GPU selection plugin's run() gets: a Job (kernel, alloc,
    launch, copy, memset32 on the caller's ordered stream) over
    keys_in (rows x row_len contiguous keys, never written), keys_out
    (rows x k keys) and values_out (rows x k int64), plus `argsort_rows`:
    the core's stable ascending argsort of rows of unsigned words, for
    plugins that sort (the calls layer hands it in: sort-then-slice)."""

    def __init__(self, plugin, state, request: SelectRequest, *, keys_in, keys_out, indices_out,
                 config=None, argsort_rows: Callable | None = None):
        super().__init__(plugin, state, dtype=request.dtype, n=request.n, keys_in=keys_in,
                         keys_out=keys_out, values_out=indices_out, value_bytes=8,
                         descending=request.largest, config=config, request=request)
        self.rows, self.row_len, self.k = request.rows, request.row_len, request.k
        self.largest, self.sorted = request.largest, request.sorted
        self._argsort_rows = argsort_rows

    def slot_bytes(self) -> tuple:
        """keys_in: rows x row_len keys; keys_out and values_out (indices):
        rows x k of each; no values_in."""
        count = self.rows * self.k
        return self.n * self.key_bytes, count * self.key_bytes, 0, count * 8

    def kernels(self, template: str, names: tuple, defines: Mapping[str, Any] = None,
                config: Mapping[str, Any] = None, value_bytes: int | None = None) -> tuple:
        """Job.kernel(template, name, ...) of each of `names` (a tuple), in
        order: the kernel cache is asked once per (device, template,
        defines, names, dtype, value_bytes, config) and its Kernel objects
        kept, so a repeat call of the shape costs one lookup."""
        config = self.config if config is None else config
        value_bytes = self.value_bytes if value_bytes is None else value_bytes
        defined = tuple(defines.items()) if defines else ()
        key = (self.state.ordinal, type(self.plugin).template_package, template, defined, names,
               self.dtype, value_bytes, tuple(config.items()))
        found = _kept.get(key)
        if found is None:
            found = tuple(self.kernel(template, name, defines, config, value_bytes)
                          for name in names)
            with _kept_lock:
                if len(_kept) >= MAX_KEPT:
                    _kept.clear()
                _kept[key] = found
        return found

    def argsort_rows(self, words: int, word_dtype: str, rows: int | None = None,
                     row_len: int | None = None) -> int:
        """Device address of rows x row_len int64 positions in the row that
        sort each row of the unsigned words at `words` (of `word_dtype`,
        e.g. "uint32"; rows x row_len of them, by default the job's) ascending, stably (equal words in index order),
        through the core's sort plugins; freed with the job."""
        if self._argsort_rows is None:
            raise RuntimeError(f"{self.plugin.name}: this job has no sort to hand out")
        return self._argsort_rows(self, words, word_dtype, self.rows if rows is None else rows,
                                  self.row_len if row_len is None else row_len)

    def sort_rows(self, words: int, word_dtype: str, rows: int, row_len: int,
                  values: int = 0):
        """Device address of the unsigned words at `words` (rows x row_len of
        `word_dtype`) with each row sorted ascending, through the core's sort
        plugins (argsort_rows' sort, keys only); with `values` (4-byte
        values, one per word), stably, as (sorted words, their values).
        Freed with the job."""
        if self._argsort_rows is None:
            raise RuntimeError(f"{self.plugin.name}: this job has no sort to hand out")
        return self._argsort_rows(self, words, word_dtype, rows, row_len, order=False,
                                  values=values)
