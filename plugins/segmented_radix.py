"""`segmented_radix`: segments of any length, through global radix passes
(kernels/segmented.cu and the onesweep plugin's onesweep.cu).

Keys of up to 4 bytes: each key's ordered word (keys.cuh) gets its
segment's id packed above it into a 64-bit word; one stable radix sort of
the words (onesweep's passes on uint64 keys; they skip the passes whose
digit is the same for every word, so only key bits + segment bits cost) sorts
every segment on its own; the key comes back from the low bits. Values ride
along (pairs; 8-byte values as 32-bit positions, gathered by the last pass),
or 32-bit positions that become argsort's int64 indices.
8-byte keys (and any key whose bits plus the segment bits pass 64): a
stable radix sort of the keys with 32-bit positions, then a stable radix
sort of those positions by their segment id, then one gather.
"""
from __future__ import annotations

from cudasortkit.dtypes import KEY_DTYPES
from cudasortkit.sdk.job import Job
from cudasortkit.sdk.plugin import Tunable
from cudasortkit.sdk.segmented import SegmentedSortPlugin
from cudasortkit.plugins.onesweep import OnesweepSort

#: Positions travel as 32-bit words.
MAX_KEYS = (1 << 32) - 1
_RADIX = OnesweepSort()


class SegmentedRadixSort(SegmentedSortPlugin):
    name = "segmented_radix"
    summary = "segments of any length: segment id packed above the key, global LSD radix passes"
    dtypes = KEY_DTYPES
    max_keys = MAX_KEYS
    priority = 50
    tunables = {"block_size": Tunable(256, (128, 256, 512), "threads of the pack/unpack kernels")}
    templates = ("segmented.cu",)

    def run(self, job):
        segments = self.segments_of(job)
        seg_bits = (segments.count - 1).bit_length()
        geometry = (segments.row_len if segments.uniform else 0,
                    0 if segments.uniform else segments.offsets_ptr(job.state), segments.count)
        if job.key_bits + seg_bits <= 64:
            self._packed(job, geometry, segments.local_indices)
        else:
            self._two_sorts(job, geometry, self.value_mode(job, segments))

    # ------------------------------------------------------------ helpers
    @staticmethod
    def _grid(job, n: int) -> int:
        return max(1, min(job.blocks(n, job.config["block_size"]), 32 * job.limits.sm_count))

    @staticmethod
    def _radix(job, dtype, keys_in, keys_out, values_in, values_out, value_bytes, descending):
        """onesweep's stable sort of n `dtype` keys, as a job of this plugin;
        8-byte values carried as positions and gathered (gather_values)."""
        config = dict(_RADIX.default_config(dtype, value_bytes),
                      gather_values=int(value_bytes == 8))
        sub = Job(job.plugin, job.state, dtype=dtype, n=job.n, keys_in=keys_in, keys_out=keys_out,
                  values_in=values_in, values_out=values_out, value_bytes=value_bytes,
                  descending=descending, config=config)
        try:
            _RADIX.run(sub)
        finally:
            sub.release()  # pool blocks are stream-ordered: freed once queued

    def _packed(self, job, geometry, local: bool):
        n, block = job.n, job.config["block_size"]
        grid = self._grid(job, n)
        at = job.alloc_parts([("packed", n * 8), ("sorted", n * 8),
                              ("index", n * 4 if job.request.kind == "argsort" else 0)])
        pack = job.kernel("segmented.cu", "seg_pack", value_bytes=0)
        unpack = job.kernel("segmented.cu", "seg_unpack", value_bytes=0)
        job.launch(pack, grid, block, job.keys_in, at["packed"], n, *geometry, job.desc_mask)
        if job.request.kind == "argsort":
            self._radix(job, "uint64", at["packed"], at["sorted"], 0, at["index"], 4, False)
            index, order = at["index"], job.values_out
        else:
            self._radix(job, "uint64", at["packed"], at["sorted"], job.values_in, job.values_out,
                        job.value_bytes, False)
            index = order = 0
        job.launch(unpack, grid, block, at["sorted"], job.keys_out, index, order, n, *geometry,
                   int(local), job.desc_mask)

    def _two_sorts(self, job, geometry, mode: int):
        n, block = job.n, job.config["block_size"]
        grid = self._grid(job, n)
        at = job.alloc_parts([("keys", n * job.key_bytes), ("index", n * 4), ("segkey", n * 4),
                              ("segsorted", n * 4), ("index2", n * 4)])
        self._radix(job, job.dtype, job.keys_in, at["keys"], 0, at["index"], 4, job.descending)
        ids = job.kernel("segmented.cu", "seg_ids_of", value_bytes=0)
        job.launch(ids, grid, block, at["index"], at["segkey"], n, *geometry)
        self._radix(job, "uint32", at["segkey"], at["segsorted"], at["index"], at["index2"], 4, False)
        gather = job.kernel("segmented.cu", "seg_gather")
        job.launch(gather, grid, block, job.keys_in, job.keys_out, job.values_in, job.values_out,
                   at["index2"], n, *geometry, mode)
