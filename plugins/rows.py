"""`rows`: segments sorted in shared memory, whole segments per block (kernels/rows.cu).

For rows of an N-D array (and ragged segments) of at most MAX_ROW keys. A
block loads TILE slots: uniform rows of length L take P = the power of two
>= L slots each, TILE / P rows per block (so 2-key rows still fill a
block); a ragged segment takes one block. Each row is sorted by (key, index
in the row) with a bitonic network in shared memory, which is the stable
order, then stored decoded; argsort indices and pair values follow the
index. One launch, one read and one write of the keys.
"""
from __future__ import annotations

from cudasortkit.dtypes import KEY_DTYPES
from cudasortkit.plugin import SortPlugin, Tunable
from cudasortkit.segments import Segments

#: Longest segment a block holds (slots of TILE are 16-bit indexed; 4096
#: slots of 8-byte keys and their indices fit the 48 KiB of static shared memory).
MAX_ROW = 4096

#: rows.cu's `mode`: what the values are.
MODE_KEYS, MODE_LOCAL, MODE_GLOBAL, MODE_PAIRS = 0, 1, 2, 3


class RowsSort(SortPlugin):
    name = "rows"
    summary = "rows and segments of <= 4096 keys, a block's shared memory each: stable bitonic"
    dtypes = KEY_DTYPES
    stable = True
    pairs = True
    makes_indices = True
    segmented = True
    #: Uniform rows issue the same launches for the same rows (ragged
    #: segments are never replayed).
    replayable = True
    #: Serves only segmented requests: checked by the batched tests instead.
    conformance_exempt = True
    priority = 500
    segment_priorities = ((MAX_ROW, 10),)
    tunables = {
        "block_size": Tunable(256, (128, 256, 512), "threads per block"),
        "min_tile": Tunable(2048, (1024, 2048, 4096),
                            "slots per block at least (short rows share a block)"),
    }
    templates = ("rows.cu",)

    def unsupported(self, request):
        reason = super().unsupported(request)
        if reason is not None:
            return reason
        segments = request.segments
        if segments is None:
            return "rows sorts rows and segments only (one array goes to the 1-D plugins)"
        if segments.max_len > MAX_ROW:
            return (f"rows holds segments of at most {MAX_ROW} keys in shared memory; the "
                    f"longest here has {segments.max_len}")
        return None

    def run(self, job):
        segments = job.request.segments
        if segments is None:  # run directly (the tuner): one row
            if job.n > MAX_ROW:
                raise ValueError(f"rows sorts at most {MAX_ROW} keys in one row, not {job.n}")
            segments = Segments.rows(1, job.n)
        log_p = (max(segments.max_len, 1) - 1).bit_length()
        tile = max(job.config["min_tile"], 1 << log_p)
        config = dict(job.config, block_size=min(job.config["block_size"], tile // 2))
        kernel = job.kernel("rows.cu", "rows_sort", defines={"tile": tile}, config=config)
        if job.request.kind == "argsort":
            mode = MODE_LOCAL if segments.local_indices else MODE_GLOBAL
        else:
            mode = MODE_PAIRS if job.value_bytes else MODE_KEYS
        if segments.uniform:
            grid, offsets = job.blocks(segments.count, tile >> log_p), 0
        else:
            grid, offsets = segments.count, segments.offsets_ptr(job.state)
        job.launch(kernel, grid, config["block_size"], job.keys_in, job.keys_out, job.values_in,
                   job.values_out, segments.count, segments.row_len, log_p, offsets,
                   job.desc_mask, mode)
