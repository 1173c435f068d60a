"""`onesweep`: single-pass LSD radix sort (chained scan with decoupled look-back).

One up-front kernel counts every digit of every pass at once; then each digit
pass is ONE launch that reads and writes every key once: a block takes a tile
id from an atomic counter, ranks its keys by digit in shared memory (warp-level
multisplit), publishes its per-digit counts, looks back over earlier tiles for
its global offsets and scatters from shared memory. Passes whose digit is the
same for every key are skipped on the device (no host round trip), and the
buffer parity is picked on the device so the last pass writes keys_out.
Stable, so ascending/descending argsort and pairs follow NumPy's stable order.
argsort carries 32-bit positions between passes; pairs with 8-byte values may
too (`gather_values`), the last pass then reading each value from its
position. See docs/algorithms/onesweep.md.
"""
from __future__ import annotations

from cudasortkit.dtypes import KEY_DTYPES, itemsize
from cudasortkit.sdk.plugin import WARP_MATCH, SortPlugin, Tunable, row_up_to, tile_tunables
from cudasortkit.sdk.sweep import SweepGeometry, sweep_sort


class OnesweepSort(SortPlugin):
    name = "onesweep"
    summary = "single-pass LSD radix sort, decoupled look-back (stable)"
    dtypes = KEY_DTYPES
    stable = True
    priority = 20
    pairs = True
    makes_indices = True
    #: Same launches for the same shape: geometry follows from n and config,
    #: skipped passes and buffer parity are decided on the device.
    replayable = True
    #: What each knob does. Its default for a dtype, value width and size
    #: is default_config's and size_config's (and a subclass's own rules).
    tunables = {
        **tile_tunables((384, (256, 384, 512)), (16, (8, 12, 16, 20, 24))),
        "radix_bits": Tunable(8, (7, 8, 10, 11), "bits per digit pass (more: fewer passes, "
                              "more shared memory a block)"),
        "warp_match": WARP_MATCH,
        "early_counts": Tunable(1, (0, 1), "1: a tile counts its digits with shared atomics and "
                                "publishes them before ranking its keys"),
        "min_blocks": Tunable(0, (0, 3, 4), "blocks per SM the pass's registers leave room for "
                              "(0: 768 threads' worth)"),
        "evict_last": Tunable(0, (0, 1), "1: passes store keys and carried values under an L2 "
                              "evict-last policy"),
        "lookback_window": Tunable(1, (1, 2, 4), "predecessors' status words a tile's "
                                   "look-back loads at once"),
        "gather_values": Tunable(0, (0, 1), "8-byte values: 1 carries 32-bit positions and reads "
                                 "each value from its position at the end"),
        "unordered_first": Tunable(0, (0, 1), "keys alone, with early_counts: 1 ranks the "
                                   "first pass's keys by shared atomics, in any order (the "
                                   "input's order carries nothing the sorted keys show)"),
        "unordered_later": Tunable(0, (0, 1), "keys alone, with early_counts: 1 also ranks "
                                   "in any order, in later passes, each warp whose keys agree "
                                   "on every digit below the pass's (passes leave them sorted "
                                   "by those digits)"),
        "batch_values": Tunable(1, (0, 1), "1: a tile loads all its values into registers, "
                                "whole warps without bounds tests, before staging them "
                                "(0: loads and stages each in turn)"),
    }
    templates = ("onesweep.cu",)

    def default_config(self, dtype=None, value_bytes=0):
        """Keys only: 24 keys a thread (bigger tiles, fewer look-backs); with
        values 16, since a bigger tile's staging area leaves too few blocks
        per SM. Keys of at most 4 bytes alone: 512 x 20 tiles, registers
        capped for 3 blocks an SM (40), every 4th key ranked by
        __match_any_sync, the first pass ranked in any order
        (unordered_first), and so each later pass's warps whose keys agree
        on every lower digit (unordered_later). docs/algorithms/onesweep.md
        has the measurements."""
        config = super().default_config(dtype, value_bytes)
        if dtype is not None and value_bytes == 0:
            config["items_per_thread"] = 24
            if itemsize(dtype) <= 4:
                config.update(block_size=512, items_per_thread=20, min_blocks=3, warp_match=4,
                              unordered_first=1, unordered_later=1)
        return config

    #: Keys-only 4-byte sorts of at most max_keys keys: (block_size,
    #: items_per_thread, min_blocks) of smaller tiles, so that more blocks
    #: share the SMs (one pass of 2^16 keys in 512 x 20 tiles runs on 7
    #: blocks). First match wins. Measured on an H200 (CUPTI kernel time per
    #: sort, uint32 and float32): 2^14 38.8 -> 27.5 us, 2^16 41.1 -> 33.2,
    #: 2^18 45.0 -> 41.2. With the wide look-back (below), 2^20 keys in 512 x
    #: 16 tiles (128 tiles a pass, one per SM of an H100) took 59.6 / 71.9 us
    #: against 62.6 / 76.3 in 512 x 20 (103 tiles; H100, CUDA events, two
    #: processes), and at 2^21 CUB prepared's time over ours went from 1.136 /
    #: 1.155 to 1.225 / 1.232 (two processes); from 2^22 on the 512 x 20
    #: default is fastest (docs/algorithms/onesweep.md).
    SMALL_TILES = ((1 << 17, 384, 8, 0), (1 << 19, 384, 12, 0), (1 << 21, 512, 16, 3))
    #: Keys-only 4-byte sorts of at most this many keys look back 4 tiles
    #: at once: their passes have few enough tiles to all run at once, so a
    #: tile's look-back walks back over tiles that published their counts
    #: together, one dependent load a step. Measured on an H100 (uint32,
    #: CUDA events, two processes): 2^16 49.9 / 44.8 -> 48.0 / 42.1 us, 2^18
    #: 62.6 / 54.7 -> 57.8 / 48.9, 2^20 79.2 / 76.2 -> 73.4 / 70.5, 2^21 in
    #: 512 x 16 tiles as above; from 2^22 on it was 5-10% slower (the
    #: default tile's 40 registers then spill; 512 x 16 tiles with 4 or 8 lost
    #: to it by 3-10% at 2^22-2^26) and a window of 2 no faster than 1. Other
    #: sorts keep 1 (not measured; 8-byte keys' tiles spill with 4).
    WIDE_LOOKBACK_UP_TO = 1 << 21
    #: Keys-only 4-byte sorts of more keys than this store their keys under
    #: an L2 evict-last policy (`evict_last`), once the keys in and out of a
    #: pass (8 bytes a key) outgrow an H100's 50 MB L2. H100, CUB prepared's
    #: time over onesweep's, two processes: uint32 2^24 1.09 / 1.08 ->
    #: 1.13 / 1.14, 2^26 1.09 / 1.05 -> 1.14 / 1.10, 2^28 1.10 / 1.10 ->
    #: 1.14 / 1.14; float32 2^24-2^28 +2-4% likewise; at 2^22, where it all
    #: fits in L2, level for uint32 and 1.28 / 1.15 -> 1.17 / 0.94 for float32.
    #: Pairs and argsorts of 4-byte keys past it store their keys and the
    #: values they carry that way too. H200, CUDA events, one run, CUB
    #: prepared's time over onesweep's without -> with: uint32 keys with
    #: int32 values 2^24 1.04 -> 1.05, 2^26 1.06 -> 1.07; float32 1.04 ->
    #: 1.07 and 1.07 -> 1.09; with int64 values 0.3-1% faster (1.34-1.40x).
    EVICT_LAST_ABOVE = 1 << 22

    #: Keys-only 8-byte sorts of at most max_keys keys: (block_size,
    #: items_per_thread) of smaller tiles, with the look-back 4 tiles wide.
    #: First match wins. The default 384 x 24 tile spills 40 bytes at 80
    #: registers; these do not (56 and 96 registers). One tile an SM is what
    #: pays: 2^20 keys in 512 x 16 tiles are 128 a pass, the default's 114
    #: leave SMs idle and 384 x 20's 137 put two on some. H100, CUDA events,
    #: CUB prepared's time over onesweep's (uint64 / float64):
    #: 2^19 1.05 / 1.06 -> 1.25 / 1.24 (384 x 12), 2^20 1.24 / 1.18 -> 1.36 /
    #: 1.32 and 2^21 1.27 / 1.25 -> 1.29 / 1.28 (512 x 16); without the wide
    #: look-back 512 x 16 gained 4% at 2^20 and lost 5% at 2^21. (From
    #: 2^22 on auto gives 8-byte keys to msd_local.)
    SMALL_WIDE_TILES = ((1 << 19, 384, 12), (1 << 21, 512, 16))
    #: Argsorts and pairs of at most max_keys keys: (block_size,
    #: items_per_thread) of smaller tiles, as SMALL_TILES for keys alone
    #: (a pass of 2^16 keys in the default 384 x 16 tiles runs on 11 blocks).
    #: First match wins. Up to WIDE_LOOKBACK_UP_TO keys the look-back is 4
    #: tiles wide, as for keys alone (no spills: 47-56 registers for 4-byte
    #: keys, 48-80 for 8-byte ones, nvcc 13 for sm_90). Not measured with
    #: values yet: the rows keys alone measured best (docs/algorithms/onesweep.md).
    SMALL_PAIR_TILES = ((1 << 17, 384, 8), (1 << 19, 384, 12))
    #: Pairs of 4-byte keys with 4-byte values (or 32-bit indices) of more
    #: keys than SMALL_PAIR_TILES covers: (max_keys, block_size,
    #: items_per_thread, lookback_window past WIDE_LOOKBACK_UP_TO keys) of
    #: bigger tiles, fewer and longer runs of each digit a tile scatters;
    #: first match wins. Measured on an H200 (uint32 keys, int32 values, CUDA
    #: events, against the default 384 x 16; two processes): 2^20
    #: 0.081-0.083 -> 0.076-0.077 ms (512 x 16), 2^22 0.212 -> 0.209, 2^24
    #: 0.608-0.656 -> 0.573-0.615 (512 x 20), 2^26 2.283 -> 2.027; float32
    #: keys likewise within 1-2% of the best of nine tiles at each size. A
    #: look-back window of 2, one H200 run (uint32 / float32, cuda.compute
    #: prepared's time over ours, window 1 -> 2): 2^22 1.14 / 1.14x -> 1.17 /
    #: 1.18x, 2^23 1.09 / 1.13x -> 1.14 / 1.16x; at 2^24, before values were
    #: loaded in a batch, 1.02x -> 1.05x; beyond, not measured. With values,
    #: min_blocks stays 0: a batch of values (batch_values) spills at
    #: min_blocks 3's 40 registers.
    PAIR4_TILES = ((1 << 22, 512, 16, 2), (1 << 24, 512, 20, 2), (1 << 40, 512, 20, 1))
    #: Pairs with 8-byte values and keys of at most 4 bytes gather their
    #: values (`gather_values`) up to this many keys, where the values read
    #: by the last pass (32 MiB at most) mostly come from the L2 cache;
    #: beyond it they carry the values, as before (uint32 keys with int64
    #: values were 1.19x / 1.31x CUB prepared at 2^24 / 2^28 that way, H200).
    #: 8-byte keys always gather: six middle passes carry 4 bytes instead
    #: of 8 for one random read.
    GATHER_UP_TO = 1 << 22

    def size_config(self, config, dtype, value_bytes, n):
        """For 4-byte keys, alone or with values: evict-last stores past
        EVICT_LAST_ABOVE. For keys-only 4-byte sorts: smaller tiles for
        small ones (SMALL_TILES) and a wide look-back up to
        WIDE_LOOKBACK_UP_TO keys; for keys-only 8-byte sorts,
        smaller tiles with a wide look-back for small ones (SMALL_WIDE_TILES);
        with values, smaller tiles for small sorts (SMALL_PAIR_TILES), bigger
        ones for 4-byte keys and values past them (PAIR4_TILES), and 8-byte
        values gathered (GATHER_UP_TO)."""
        if itemsize(dtype) == 4 and n > self.EVICT_LAST_ABOVE:
            config = dict(config, evict_last=1)
        if value_bytes:
            if value_bytes == 8 and itemsize(dtype) >= 4:
                config = dict(config, gather_values=int(itemsize(dtype) == 8
                                                        or n <= self.GATHER_UP_TO))
            if n <= self.WIDE_LOOKBACK_UP_TO:
                config = dict(config, lookback_window=4)
            row = row_up_to(self.SMALL_PAIR_TILES, n)
            if row is not None:
                return dict(config, block_size=row[1], items_per_thread=row[2])
            if value_bytes == 4 and itemsize(dtype) == 4:
                row = row_up_to(self.PAIR4_TILES, n)
                config = dict(config, block_size=row[1], items_per_thread=row[2])
                if n > self.WIDE_LOOKBACK_UP_TO:
                    config["lookback_window"] = row[3]
            return config
        if value_bytes == 0 and itemsize(dtype) == 8:
            row = row_up_to(self.SMALL_WIDE_TILES, n)
            if row is not None:
                return dict(config, block_size=row[1], items_per_thread=row[2],
                            lookback_window=4)
        if value_bytes == 0 and itemsize(dtype) == 4:
            if n <= self.WIDE_LOOKBACK_UP_TO:
                config = dict(config, lookback_window=4)
            row = row_up_to(self.SMALL_TILES, n)
            if row is not None:
                return dict(config, block_size=row[1], items_per_thread=row[2],
                            min_blocks=row[3])
        return config

    # ----------------------------------------------------------------- run
    @staticmethod
    def geometry(config) -> SweepGeometry:
        return SweepGeometry(config["block_size"], config["items_per_thread"], config["radix_bits"])

    def valid_config(self, config, dtype, value_bytes, limits):
        """The geometry fits the device (with the values' own width staged,
        whatever is carried), and gather_values only with 8-byte values."""
        return (self.geometry(config).fits(itemsize(dtype), value_bytes, limits)
                and (config.get("gather_values", 0) == 0 or value_bytes == 8))

    def check_config(self, job) -> None:
        """ValueError unless the job's config can run on its device."""
        if not self.valid_config(job.config, job.dtype, job.value_bytes, job.limits):
            raise ValueError(f"{job.where}: invalid configuration (whole warps, at most 11-bit "
                             f"digits, a tile below 2^16 keys, the layout must fit the "
                             f"device's shared memory per block, gather_values only with "
                             f"8-byte values)")

    def run(self, job):
        self.check_config(job)
        sweep_sort(job, "onesweep.cu", self.geometry(job.config),
                   gather=bool(job.config.get("gather_values", 0)))
