"""`merge_sort`: stable merge sort from block sorts and merge-path merges.

Each block sorts a tile of block_size x items_per_thread keys in registers
and shared memory, then log2(n / tile) global passes merge pairs of sorted
runs, ping-ponging between keys_out and a temporary so the last pass lands in
keys_out. Every merge is partitioned by co-rank (merge path), so all threads
work in every step. The same kernels serve cudasortkit.merge (`merge` below).
"""
from __future__ import annotations

from cudasortkit.dtypes import KEY_DTYPES, itemsize
from cudasortkit.sdk.plugin import Tunable, row_up_to, tile_tunables
from cudasortkit.sdk.tiles import TiledSortPlugin

TEMPLATE = "merge_sort.cu"
PARTITION_BLOCK = 128  # threads of the co-rank search kernels (a thread per split)
#: The widest block a one-launch sort uses (ITEMS_PER_THREAD keys in registers
#: per thread: wider blocks would cap registers below what a thread holds).
ONE_LAUNCH_BLOCK = 512


class MergeSort(TiledSortPlugin):
    name = "merge_sort"
    summary = "merge sort: register + shared-memory tile sort, merge-path global passes (stable)"
    dtypes = KEY_DTYPES
    stable = True
    priority = 40
    #: Up to 2^15 keys: few launches (one launch up to 7,680 keys), ahead of
    #: onesweep's six (docs/algorithms/merge_sort.md has the measurements).
    priorities = ((1 << 15, 15),)
    #: Sorts of 8-byte keys alone stay with merge_sort up to this many keys.
    #: Past it onesweep, with its smaller 8-byte tiles (SMALL_WIDE_TILES),
    #: leads: H100, empty cache, device time, uint64 / float64: 2^16 0.069 /
    #: 0.069 ms against onesweep's 0.068 / 0.068, 2^18 0.090 / 0.092 against
    #: 0.078 / 0.079 (docs/algorithms/merge_sort.md).
    WIDE_KEYS_UP_TO = 1 << 16
    WIDE_KEYS_PRIORITY = 15
    #: Sorts of 8-byte keys alone of at most max_keys keys default to
    #: (max_keys, block_size, items_per_thread): a tile that wastes less on
    #: padding and merges fewer items a thread (H100, per call, 1,024 keys:
    #: 23 against 28.5 us; 4,096: 32.5 against 36.6 us).
    SMALL_WIDE_TILES = ((1 << 11, 256, 7), (1 << 12, 128, 11))
    merges = True
    pairs = True
    #: Same launches for the same shape (pass count and grids follow from n and config).
    replayable = True
    tunables = {
        # block_size: a power of two. items_per_thread: keys each thread sorts
        # and merges; odd counts keep the thread-major shared-memory accesses
        # (stride IPT) free of bank conflicts.
        **tile_tunables((256, (128, 256, 512)), (15, (7, 8, 11, 15, 16))),
        "one_launch": Tunable(1, (0, 1), "1: an input that one wider block (up to "
                              f"{ONE_LAUNCH_BLOCK} threads) holds is sorted in one launch"),
    }
    templates = (TEMPLATE,)
    one_launch_block = ONE_LAUNCH_BLOCK

    def priority_for_request(self, request) -> int:
        if _wide_keys_alone(request.kind, request.dtype, request.value_bytes) \
                and request.n <= self.WIDE_KEYS_UP_TO:
            return self.WIDE_KEYS_PRIORITY
        return self.priority_for(request.n)

    def size_config(self, config, dtype, value_bytes, n):
        """Smaller tiles for small sorts of 8-byte keys alone (SMALL_WIDE_TILES)."""
        row = row_up_to(self.SMALL_WIDE_TILES, n)
        if row is not None and _wide_keys_alone("sort", dtype, value_bytes):
            return dict(config, block_size=row[1], items_per_thread=row[2])
        return config

    def run(self, job):
        cfg = self.launch_config(job)
        kb, vb = job.key_bytes, job.value_bytes
        block, tile, n = cfg["block_size"], self.tile(cfg), job.n
        shared = self.shared_bytes(cfg, kb, vb)
        passes, width = 0, tile
        while width < n:
            passes, width = passes + 1, width * 2
        blocks = job.blocks(n, tile)
        out = (job.keys_out, job.values_out)
        tmp = (int(job.alloc(n * kb)), int(job.alloc(n * vb)) if vb else 0) if passes else out
        # Ping-pong so that the last pass writes keys_out.
        src, dst = (out, tmp) if passes % 2 == 0 else (tmp, out)
        sort_tiles = job.kernel(TEMPLATE, "merge_sort_tiles", config=cfg)
        job.launch(sort_tiles, blocks, block, job.keys_in, job.values_in, src[0], src[1],
                   n, job.desc_mask, int(passes == 0), shared=shared)
        if not passes:
            return
        partition = job.kernel(TEMPLATE, "merge_sort_partition", config=cfg)
        merge_pass = job.kernel(TEMPLATE, "merge_sort_pass", config=cfg)
        splits = int(job.alloc(8 * blocks))
        width = tile
        for p in range(passes):
            job.launch(partition, job.blocks(blocks, PARTITION_BLOCK), PARTITION_BLOCK,
                       src[0], n, width, splits, blocks)
            job.launch(merge_pass, blocks, block, src[0], src[1], dst[0], dst[1], n, width, splits,
                       job.desc_mask, int(p == passes - 1), shared=shared)
            src, dst, width = dst, src, width * 2

    def merge(self, job, a, a_values, na: int, b, b_values, nb: int) -> None:
        """Stable merge of sorted device arrays a (na keys) and b (nb keys)
        into job.keys_out / job.values_out (na + nb each); job.descending
        means both inputs are sorted descending. Used by cudasortkit.merge.

        Unsorted inputs give the concatenation [a..., b...] (values with
        their keys): merge_arrays checks the order on the device as it
        merges and sets a flag instead of merging when it finds a pair out of
        order, and merge_fallback then copies the concatenation (for sorted
        inputs it only reads the flag). No host synchronisation."""
        cfg = job.config
        block, tile, total = cfg["block_size"], self.tile(cfg), na + nb
        if total == 0:
            return
        blocks = job.blocks(total, tile)
        partition = job.kernel(TEMPLATE, "merge_partition")
        merge = job.kernel(TEMPLATE, "merge_arrays")
        fallback = job.kernel(TEMPLATE, "merge_fallback")
        tmp = job.alloc_parts((("splits", 8 * blocks), ("unsorted", 4)))
        splits, unsorted = tmp["splits"], tmp["unsorted"]
        job.memset32(unsorted, 0, 1)
        job.launch(partition, job.blocks(blocks, PARTITION_BLOCK), PARTITION_BLOCK,
                   a, na, b, nb, splits, blocks, job.desc_mask)
        job.launch(merge, blocks, block, a, a_values, na, b, b_values, nb, job.keys_out,
                   job.values_out, splits, job.desc_mask, unsorted,
                   shared=self.shared_bytes(cfg, job.key_bytes, job.value_bytes))
        job.launch(fallback, blocks, block, a, a_values, na, b, b_values, nb, job.keys_out,
                   job.values_out, unsorted)


def _wide_keys_alone(kind: str, dtype: str, value_bytes: int) -> bool:
    """A sort of 8-byte keys with no payload."""
    return kind == "sort" and value_bytes == 0 and itemsize(dtype) == 8
