"""SelectJob: what a GPU selection plugin's run() gets (sdk/selection.py)."""
from __future__ import annotations

from typing import Callable

from .job import Job
from .selection import SelectRequest


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
