"""`block_radix`: segments sorted by a block-wide LSD radix sort in shared
memory (kernels/block_radix.cu), keys of at most 4 bytes.

Uniform rows: sorted keys alone, rows of 33 to `row_network` keys go to a
bitonic network of one warp each (plugins/warp_rows.py); otherwise rows of
up to `tiles_up_to` keys go several to a block
(`block_radix_tiles`: the rows that start in a block's window of TILE / 2
keys, sorted by (row, key)); longer rows of up to 4096 keys one to a block
(`block_radix_rows`, the fewest keys per thread that hold the row).

One 1-D array of up to 4096 keys is one uniform row, or (keys only, the
`array_kernel` tunable) goes to a bitonic network in one block's registers
(kernels/block_bitonic.cu).

Ragged segments: segments of up to TILE / 2 keys by `block_radix_tiles`
straight from the offsets; longer ones of up to 4096 keys one to a block
from a list made on the device; the rest (few, long) compacted with their
segment's number above the key and sorted by one global radix sort (the
onesweep passes over the key's bits and log2(long segments) bits only),
then stored back. How many segments each kernel gets comes from the
segments' length buckets (cudasortkit/sdk/segments.py), so no list or length
comes back to the host.
"""
from __future__ import annotations

from dataclasses import replace

from cudasortkit.dtypes import KEY_DTYPES, itemsize
from cudasortkit.sdk.job import Job
from cudasortkit.sdk.plugin import WARP_MATCH, Tunable
from cudasortkit.sdk.scan import DeviceScan
from cudasortkit.sdk.segmented import MODE_KEYS, MODE_PAIRS, SegmentedSortPlugin
from cudasortkit.sdk.sweep import sweep_sort
from cudasortkit.plugins import warp_rows
from cudasortkit.plugins.onesweep import OnesweepSort

#: Longest segment one block sorts (16-bit tile positions; 4096 keys and
#: their aux words plus the digit counters fit the 48 KiB of static shared memory).
MAX_ROW = 4096
#: Static shared memory a block may use.
SHARED_LIMIT = 48 * 1024
_RADIX = OnesweepSort()


def _shared_bytes(block: int, items: int, key_bytes: int, aux: bool = True) -> int:
    """block_radix.cu's BrSharedT: with aux words (BR_TILE of them), or
    without (block_radix_rows moving keys alone: one slot); digit counters
    of 32 bits, 16 bits in rows of 258 above 512 threads."""
    aux_bytes = block * items * 4 if aux else 4
    counters = 258 * 2 if block > 512 else 256 * 4
    return (block * items * key_bytes + aux_bytes + (block // 32) * counters
            + (block // 32 + 1) * 4 + 32)


class BlockRadixSort(SegmentedSortPlugin):
    name = "block_radix"
    summary = "rows and segments, a block-wide LSD radix sort in shared memory (keys <= 4 bytes)"
    dtypes = tuple(d for d in KEY_DTYPES if itemsize(d) <= 4)
    #: Uniform rows issue the same launches for the same rows (ragged
    #: segments are never replayed).
    replayable = True
    #: Uniform rows of one block; ragged segments of any length (long ones
    #: go through a global sort that carries 32-bit positions).
    max_row = MAX_ROW
    max_ragged_keys = (1 << 32) - 1
    priority = 500
    #: Uniform rows: `rows` (bitonic, priority 10) keeps rows up to 256 keys.
    segment_priorities = ((256, 20), (MAX_ROW, 5))
    #: A 1-D array of up to MAX_ROW keys is one block: sorted keys alone by
    #: the unrolled bitonic network (H100 kernel time, uint32: 1,024 keys
    #: 2.5 us, 4,096 keys 6.4, against 7.6 / 15.8 for the radix passes, 11.0 /
    #: 15.9 for merge_sort and 9.0 / 10.1 for CUB's single tile), argsort
    #: and pairs by the radix passes (array_block threads), which beat
    #: merge_sort's tile sort there too (docs/algorithms/block_radix.md).
    one_array_up_to = MAX_ROW
    priorities = ((MAX_ROW, 12),)
    #: Ragged segments of any length.
    ragged_priority = 5
    tunables = {
        "block_size": Tunable(256, (256, 512), "threads per block (>= 256: one per digit)"),
        "tile_items": Tunable(16, (8, 16), "keys per thread of the several-segments kernel "
                              "(its window is half the tile)"),
        "tiles_up_to": Tunable(256, (0, 128, 256, 512, 1024),
                               "uniform rows up to this length go several to a block"),
        "warp_match": replace(WARP_MATCH, values=(0, 2, 4)),
        "array_block": Tunable(512, (256, 512, 1024), "threads per block for a 1-D array sorted "
                               "as one row (1024 with 16-bit digit counters; 512 x 8 and "
                               "1024 x 4 keys fit where they move alone)"),
        "array_kernel": Tunable(1, (0, 1), "a 1-D array sorted keys only: 0 the radix sort "
                                "(array_block threads), 1 a bitonic network in registers "
                                "(network_threads; argsort and pairs keep the radix sort)"),
        "network_threads": Tunable(256, (128, 256, 512), "threads of the bitonic network "
                                   "(fewer where it is narrower than twice as many keys)"),
        "network_unroll": Tunable(1, (0, 1), "the bitonic network's code: 0 a loop over its "
                                  "stages (a few KB), 1 every step unrolled (up to ~100 KB)"),
        "row_network": warp_rows.row_network((0, 512, 1024)),
    }
    templates = ("block_radix.cu", "block_bitonic.cu", warp_rows.TEMPLATE)

    def valid_config(self, config, dtype, value_bytes, limits):
        """The several-segments tile (block_size x tile_items slots) lives in
        static shared memory, within SHARED_LIMIT (512 x 16 needs 80 KiB)."""
        return _shared_bytes(config["block_size"], config["tile_items"],
                             itemsize(dtype)) <= SHARED_LIMIT

    def run(self, job):
        segments = self.segments_of(job)
        if job.n == 0:
            return
        mode = self.value_mode(job, segments)
        one_array = job.request is None or job.request.segments is None
        if one_array and mode == MODE_KEYS and job.config["array_kernel"] == 1:
            self._network(job)
            return
        if segments.uniform:
            if not one_array and warp_rows.serves(segments.row_len, job.config["row_network"],
                                                  mode == MODE_KEYS, job.key_bytes):
                warp_rows.sort_rows(job, segments.count, segments.row_len)
            elif segments.row_len <= min(job.config["tiles_up_to"], self._step(job)):
                self._tiles(job, segments, mode)
            else:
                block = job.config["array_block" if one_array else "block_size"]
                self._rows(job, segments.count, segments.row_len, 0, 0, mode, block)
            return
        self._ragged(job, segments, mode)

    # ------------------------------------------------------------ helpers
    def _tile_config(self, job, items: int, aux: bool = True, block: int | None = None) -> dict:
        """The job's config with a block size (`block`, default its
        block_size) whose tile of `items` keys a thread (with aux words, or
        keys alone) fits shared memory (256 threads always do, up to 16 keys)."""
        config = dict(job.config)
        if block is not None:
            config["block_size"] = block
        if _shared_bytes(config["block_size"], items, job.key_bytes, aux) > SHARED_LIMIT:
            config["block_size"] = 256
        return config

    def _step(self, job) -> int:
        config = self._tile_config(job, job.config["tile_items"])
        return config["block_size"] * job.config["tile_items"] // 2

    def _rows(self, job, count, row_len, offsets, seg_list, mode, block=None):
        """block_radix_rows over `count` segments (uniform rows of row_len,
        or ragged seg_list entries of at most MAX_ROW keys), `block`
        threads each (default the config's block_size) where the tile fits."""
        block = job.config["block_size"] if block is None else block
        items = 1
        while block * items < row_len:
            items *= 2
        config = self._tile_config(job, items, aux=job.value_bytes > 0, block=block)  # CSK_HAS_VALUES
        if config["block_size"] != block:
            items = 1
            while 256 * items < row_len:
                items *= 2
        kernel = job.kernel("block_radix.cu", "block_radix_rows", defines={"items_per_thread": items},
                            config=config)
        job.launch(kernel, int(count), config["block_size"], job.keys_in, job.keys_out,
                   job.values_in, job.values_out, row_len if not offsets else 0, offsets, seg_list,
                   job.desc_mask, mode)

    def _network(self, job):
        """One 1-D array, keys only, by block_bitonic_sort: a network as
        wide as the power of two that holds it (at least 64, warp_rows.width),
        network_threads threads or half its width if fewer (two keys a thread
        at least)."""
        width = warp_rows.width(job.n)
        threads = min(job.config["network_threads"], width // 2)
        kernel = job.kernel("block_bitonic.cu", "block_bitonic_sort",
                            defines={"net_keys": width, "net_unroll": job.config["network_unroll"]},
                            config={"block_size": threads})
        job.launch(kernel, 1, threads, job.keys_in, job.keys_out, job.n, job.desc_mask)

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

    def _ragged(self, job, segments, mode):
        """Short segments by block_radix_tiles; the longer ones listed on the
        device by block_radix_classify (how many of each the host knows from
        the segments' length buckets: no round trip), then one block each
        (block_radix_rows) or one global sort (_long)."""
        self._tiles(job, segments, mode)
        step = self._step(job)
        if segments.max_len <= step:
            return
        medium, _ = segments.longer(step, MAX_ROW)
        m, total = segments.longer(MAX_ROW)
        offsets = segments.offsets_ptr(job.state)
        at = job.alloc_parts([("counters", 8), ("medium", medium * 8), ("long_start", m * 8),
                              ("long_len", (m + 1) * 8), ("long_at", (m + 1) * 8)])
        job.memset32(at["counters"], 0, 2)
        job.memset32(at["long_len"] + m * 8, 0, 2)  # the scan's last term: long_at[m] = total
        config = dict(job.config, block_size=256)
        classify = job.kernel("block_radix.cu", "block_radix_classify", config=config)
        job.launch(classify, max(1, min(job.blocks(segments.count, 256), 8 * job.limits.sm_count)),
                   256, offsets, segments.count, step, MAX_ROW, at["medium"], at["long_start"],
                   at["long_len"], at["counters"])
        if medium:
            self._rows(job, medium, min(segments.max_len, MAX_ROW), offsets, at["medium"], mode)
        if m:
            DeviceScan(job, m + 1, count_bytes=8)(at["long_len"], at["long_at"])
            self._long(job, at["long_start"], at["long_at"], m, total, mode)

    def _long(self, job, long_start: int, long_at: int, m: int, total: int, mode):
        """Segments longer than a block (device lists of m, `total` keys):
        their keys compacted with the segment's number (0..m-1) above the
        key, one stable global radix sort over the key's bits and the
        log2(m) bits above them only, stored back (argsort/pairs through the
        sort's 32-bit positions)."""
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
        pack = job.kernel("block_radix.cu", "block_radix_long_pack", config=config, value_bytes=0)
        job.launch(pack, grid, block, job.keys_in, parts["packed"], parts["positions"] if given else 0,
                   total, long_at, long_start, m, job.desc_mask)
        sort_config = _RADIX.default_config("uint64", 4 if values else 0)
        sub = Job(job.plugin, job.state, dtype="uint64", n=total, keys_in=parts["packed"],
                  keys_out=parts["sorted"], values_in=parts["positions"] if given else 0,
                  values_out=parts["index"] if values else 0, value_bytes=4 if values else 0,
                  config=sort_config)
        try:
            # Only the passes over the key's bits and the segment number's run.
            sweep_sort(sub, "onesweep.cu", _RADIX.geometry(sort_config),
                       limit=((m - 1) << job.key_bits) | ((1 << job.key_bits) - 1))
        finally:
            sub.release()  # pool blocks are stream-ordered: freed once queued
        unpack = job.kernel("block_radix.cu", "block_radix_long_unpack", config=config)
        job.launch(unpack, grid, block, parts["sorted"], parts["index"] if values else 0,
                   job.keys_out, job.values_in, job.values_out, total, long_at, long_start, m,
                   job.desc_mask, mode)
