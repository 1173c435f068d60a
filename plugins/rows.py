"""`rows`: segments sorted in shared memory, whole segments per block (kernels/rows.cu).

For rows of an N-D array (and ragged segments) of at most MAX_ROW keys. A
block loads TILE slots: uniform rows of length L take P = the power of two
>= L slots each, TILE / P rows per block (so 2-key rows still fill a
block); a ragged segment takes one block. Each row is sorted by (key, index
in the row) with a bitonic network in shared memory, which is the stable
order, then stored decoded; argsort indices and pair values follow the
index. One launch, one read and one write of the keys.

Uniform rows of 33 to `row_network` keys of at most 4 bytes, sorted keys
alone, go to one warp each instead (plugins/warp_rows.py): a network in
registers, not stable, which keys alone cannot show.
"""
from __future__ import annotations

from cudasortkit.dtypes import KEY_DTYPES
from cudasortkit.plugins import warp_rows
from cudasortkit.sdk.plugin import Tunable
from cudasortkit.sdk.segmented import MODE_KEYS, SegmentedSortPlugin

#: Longest segment a block holds (slots of TILE are 16-bit indexed; 4096
#: slots of 8-byte keys and their indices fit the 48 KiB of static shared memory).
MAX_ROW = 4096


class RowsSort(SegmentedSortPlugin):
    name = "rows"
    summary = "rows and segments of <= 4096 keys, a block's shared memory each: stable bitonic"
    dtypes = KEY_DTYPES
    #: Uniform rows issue the same launches for the same rows (ragged
    #: segments are never replayed).
    replayable = True
    max_row = max_segment = MAX_ROW
    priority = 500
    segment_priorities = ((MAX_ROW, 10),)
    tunables = {
        "block_size": Tunable(256, (128, 256, 512), "threads per block"),
        "min_tile": Tunable(2048, (1024, 2048, 4096),
                            "slots per block at least (short rows share a block)"),
        "row_network": warp_rows.row_network((0, 256, 1024)),
    }
    templates = ("rows.cu", warp_rows.TEMPLATE)

    def run(self, job):
        segments = self.segments_of(job)
        mode = self.value_mode(job, segments)
        if segments.uniform and warp_rows.serves(segments.row_len, job.config["row_network"],
                                                 mode == MODE_KEYS, job.key_bytes):
            warp_rows.sort_rows(job, segments.count, segments.row_len)
            return
        log_p = (max(segments.max_len, 1) - 1).bit_length()
        tile = max(job.config["min_tile"], 1 << log_p)
        config = dict(job.config, block_size=min(job.config["block_size"], tile // 2))
        kernel = job.kernel("rows.cu", "rows_sort", defines={"tile": tile}, config=config)
        if segments.uniform:
            grid, offsets = job.blocks(segments.count, tile >> log_p), 0
        else:
            grid, offsets = segments.count, segments.offsets_ptr(job.state)
        job.launch(kernel, grid, config["block_size"], job.keys_in, job.keys_out, job.values_in,
                   job.values_out, segments.count, segments.row_len, log_p, offsets,
                   job.desc_mask, mode)
