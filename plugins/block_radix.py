"""`block_radix`: segments sorted by a block-wide LSD radix sort in shared
memory (kernels/block_radix.cu), keys of at most 4 bytes.

Uniform rows: rows of up to `tiles_up_to` keys go several to a block
(`block_radix_tiles`: the rows that start in a block's window of TILE / 2
keys, sorted by (row, key)); longer rows of up to 4096 keys one to a block
(`block_radix_rows`, the fewest keys per thread that hold the row).

Ragged segments (lengths known on the host): segments of up to TILE / 2
keys by `block_radix_tiles` straight from the offsets; longer ones of up to
4096 keys one to a block from a list; the rest (few, long) compacted with
their segment's number above the key and sorted by one global radix sort
(the onesweep plugin's passes, whose constant high digits are skipped), then
stored back.
"""
from __future__ import annotations

import numpy as np

from cudasortkit.dtypes import KEY_DTYPES, itemsize
from cudasortkit.job import Job
from cudasortkit.plugin import SortPlugin, Tunable
from cudasortkit.segments import Segments
from cudasortkit.plugins.onesweep import OnesweepSort

#: Longest segment one block sorts (16-bit tile positions; 4096 keys and
#: their aux words plus the digit counters fit the 48 KiB of static shared memory).
MAX_ROW = 4096
#: block_radix.cu's `mode`: what the values are.
MODE_KEYS, MODE_LOCAL, MODE_GLOBAL, MODE_PAIRS = 0, 1, 2, 3
#: Static shared memory a block may use.
SHARED_LIMIT = 48 * 1024
_RADIX = OnesweepSort()


def _shared_bytes(block: int, items: int, key_bytes: int) -> int:
    """block_radix.cu's BrShared."""
    return block * items * (key_bytes + 4) + (block // 32) * 256 * 4 + (block // 32 + 1) * 4 + 32


class BlockRadixSort(SortPlugin):
    name = "block_radix"
    summary = "rows and segments, a block-wide LSD radix sort in shared memory (keys <= 4 bytes)"
    dtypes = tuple(d for d in KEY_DTYPES if itemsize(d) <= 4)
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
    #: Uniform rows: `rows` (bitonic, priority 10) keeps rows up to 256 keys.
    segment_priorities = ((256, 20), (MAX_ROW, 5))
    #: Ragged segments of any length.
    ragged_priority = 5
    tunables = {
        "block_size": Tunable(256, (256, 512), "threads per block (>= 256: one per digit)"),
        "tile_items": Tunable(16, (8, 16), "keys per thread of the several-segments kernel "
                              "(its window is half the tile)"),
        "tiles_up_to": Tunable(256, (0, 128, 256, 512, 1024),
                               "uniform rows up to this length go several to a block"),
        "warp_match": Tunable(0, (0, 2, 4), "every k-th key finds its digit peers with "
                              "__match_any_sync, the rest with ballots (0: never)"),
    }
    templates = ("block_radix.cu",)

    def valid_config(self, config, dtype, value_bytes, limits):
        """The several-segments tile (block_size x tile_items slots) lives in
        static shared memory, within SHARED_LIMIT (512 x 16 needs 80 KiB)."""
        return _shared_bytes(config["block_size"], config["tile_items"],
                             itemsize(dtype)) <= SHARED_LIMIT

    def unsupported(self, request):
        reason = super().unsupported(request)
        if reason is not None:
            return reason
        segments = request.segments
        if segments is None:
            return "block_radix sorts rows and segments only (one array goes to the 1-D plugins)"
        if segments.uniform and segments.max_len > MAX_ROW:
            return (f"block_radix sorts rows of at most {MAX_ROW} keys in a block; these have "
                    f"{segments.max_len}")
        if not segments.uniform and request.n >= 1 << 32:
            return "block_radix carries 32-bit positions for long segments: fewer than 2^32 keys"
        return None

    def priority_for_segments(self, segments) -> int:
        if not segments.uniform:
            return self.ragged_priority
        return super().priority_for_segments(segments)

    def run(self, job):
        segments = job.request.segments
        if segments is None:  # run directly (the tuner): one row
            if job.n > MAX_ROW:
                raise ValueError(f"block_radix sorts at most {MAX_ROW} keys in one row, not {job.n}")
            segments = Segments.rows(1, job.n)
        if job.n == 0:
            return
        if job.request is not None and job.request.kind == "argsort":
            mode = MODE_LOCAL if segments.local_indices else MODE_GLOBAL
        else:
            mode = MODE_PAIRS if job.value_bytes else MODE_KEYS
        if segments.uniform:
            if segments.row_len <= min(job.config["tiles_up_to"], self._step(job)):
                self._tiles(job, segments, mode)
            else:
                self._rows(job, segments.count, segments.row_len, 0, 0, mode)
            return
        self._ragged(job, segments, mode)

    # ------------------------------------------------------------ helpers
    def _tile_config(self, job, items: int) -> dict:
        """The job's config with a block size whose tile of `items` keys a
        thread fits shared memory (256 threads always do, up to 16 keys)."""
        config = dict(job.config)
        if _shared_bytes(config["block_size"], items, job.key_bytes) > SHARED_LIMIT:
            config["block_size"] = 256
        return config

    def _step(self, job) -> int:
        config = self._tile_config(job, job.config["tile_items"])
        return config["block_size"] * job.config["tile_items"] // 2

    def _rows(self, job, count, row_len, offsets, seg_list, mode):
        """block_radix_rows over `count` segments (uniform rows of row_len,
        or ragged seg_list entries of at most MAX_ROW keys)."""
        block = job.config["block_size"]
        items = 1
        while block * items < row_len:
            items *= 2
        config = self._tile_config(job, items)
        if config["block_size"] != block:
            items = 1
            while 256 * items < row_len:
                items *= 2
        kernel = job.kernel("block_radix.cu", "block_radix_rows", defines={"items_per_thread": items},
                            config=config)
        job.launch(kernel, int(count), config["block_size"], job.keys_in, job.keys_out,
                   job.values_in, job.values_out, row_len if not offsets else 0, offsets, seg_list,
                   job.desc_mask, mode)

    def _tiles(self, job, segments, mode):
        items = job.config["tile_items"]
        config = self._tile_config(job, items)
        step = config["block_size"] * items // 2
        kernel = job.kernel("block_radix.cu", "block_radix_tiles", defines={"items_per_thread": items},
                            config=config)
        offsets = 0 if segments.uniform else segments.offsets_ptr(job.state)
        job.launch(kernel, job.blocks(job.n, step), config["block_size"], job.keys_in, job.keys_out,
                   job.values_in, job.values_out, job.n, segments.row_len if segments.uniform else 0,
                   offsets, segments.count, job.desc_mask, mode)

    def _upload(self, job, array: np.ndarray) -> int:
        buf = job.alloc(array.nbytes)
        job.state.cuda.memcpy_htod_async(int(buf), array, job.stream)
        return int(buf)

    def _ragged(self, job, segments, mode):
        self._tiles(job, segments, mode)
        step = self._step(job)
        if segments.max_len <= step:
            return
        lengths = segments.lengths
        big = np.flatnonzero(lengths > step)
        big_len = lengths[big]
        medium = np.ascontiguousarray(big[big_len <= MAX_ROW], dtype=np.int64)
        if len(medium):
            self._rows(job, len(medium), int(big_len[big_len <= MAX_ROW].max()),
                       segments.offsets_ptr(job.state), self._upload(job, medium), mode)
        long = big[big_len > MAX_ROW]
        if len(long):
            self._long(job, segments.offsets[long].astype(np.int64), lengths[long], mode)

    def _long(self, job, starts: np.ndarray, lengths: np.ndarray, mode):
        """Segments longer than a block: their keys compacted with the
        segment's number (0..m-1) above the key, one stable global radix
        sort, stored back (argsort/pairs through the sort's 32-bit positions)."""
        m = len(starts)
        at = np.zeros(m + 1, np.int64)
        np.cumsum(lengths, out=at[1:])
        total = int(at[-1])
        block = 256
        config = dict(job.config, block_size=block)
        grid = max(1, min(job.blocks(total, block), 32 * job.limits.sm_count))
        values = mode != MODE_KEYS
        # Argsort: the sort makes the positions itself (and writes no keys:
        # argsort's keys are never read). Pairs: pack writes the positions
        # and the sort carries them as values, keys and all.
        given = mode == MODE_PAIRS
        parts = job.alloc_parts([("packed", total * 8), ("sorted", total * 8),
                                 ("index", total * 4 if values else 0),
                                 ("positions", total * 4 if given else 0)])
        long_at, long_start = self._upload(job, at), self._upload(job, starts)
        pack = job.kernel("block_radix.cu", "block_radix_long_pack", config=config, value_bytes=0)
        job.launch(pack, grid, block, job.keys_in, parts["packed"], parts["positions"] if given else 0,
                   total, long_at, long_start, m, job.desc_mask)
        sub = Job(job.plugin, job.state, dtype="uint64", n=total, keys_in=parts["packed"],
                  keys_out=parts["sorted"], values_in=parts["positions"] if given else 0,
                  values_out=parts["index"] if values else 0, value_bytes=4 if values else 0,
                  config=_RADIX.default_config("uint64", 4 if values else 0))
        try:
            _RADIX.run(sub)
        finally:
            sub.release()  # pool blocks are stream-ordered: freed once queued
        unpack = job.kernel("block_radix.cu", "block_radix_long_unpack", config=config)
        job.launch(unpack, grid, block, parts["sorted"], parts["index"] if values else 0,
                   job.keys_out, job.values_in, job.values_out, total, long_at, long_start, m,
                   job.desc_mask, mode)
