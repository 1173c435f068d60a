"""`onesweep`: single-pass LSD radix sort (chained scan with decoupled look-back).

One up-front kernel counts every digit of every pass at once; then each digit
pass is ONE launch that reads and writes every key once: a block takes a tile
id from an atomic counter, ranks its keys by digit in shared memory (warp-level
multisplit), publishes its per-digit counts, looks back over earlier tiles for
its global offsets and scatters from shared memory. Passes whose digit is the
same for every key are skipped on the device (no host round trip), and the
buffer parity is picked on the device so the last pass writes keys_out.
Stable, so ascending/descending argsort and pairs follow NumPy's stable order.
See docs/algorithms/onesweep.md.
"""
from __future__ import annotations

from cudasortkit.dtypes import KEY_DTYPES
from cudasortkit.plugin import SortPlugin, Tunable

#: Largest count a 32-bit status word holds (2 bits are flags); beyond it the
#: kernels are built with 64-bit status words.
NARROW_STATUS_MAX = (1 << 30) - 1
#: Blocks of the histogram kernel at most (it loops over the keys).
HIST_GRID_CAP = 2048
HIST_ITEMS = 8  # keys per thread per histogram step (kernels/onesweep.cu)
SHARED_LIMIT = 227 * 1024
ALIGN = 256


def _align(x: int, a: int = ALIGN) -> int:
    return -(-x // a) * a


class OnesweepSort(SortPlugin):
    name = "onesweep"
    summary = "single-pass LSD radix sort, decoupled look-back (stable)"
    dtypes = KEY_DTYPES
    stable = True
    pairs = True
    makes_indices = True
    tunables = {
        "block_size": Tunable(384, (256, 384, 512), "threads per block (>= 2^radix_bits)"),
        "items_per_thread": Tunable(16, (8, 12, 16, 20, 24), "keys per thread in a tile "
                                    "(default 24 for keys only)"),
        "radix_bits": Tunable(8, (6, 7, 8), "bits per digit pass"),
        "warp_match": Tunable(0, (0, 1, 2, 3, 4), "every k-th key finds its digit peers with "
                              "__match_any_sync, the rest with ballots (0: never)"),
        "early_counts": Tunable(1, (0, 1), "1: count digits with shared atomics first, publish the "
                                "tile's counts before ranking and stage keys as they are ranked"),
    }
    templates = ("onesweep.cu",)

    def default_config(self, dtype=None, value_bytes=0):
        """Keys only: 24 keys a thread (bigger tiles, fewer look-backs); with
        values 16, since a bigger tile's staging area leaves too few blocks
        per SM. H100: keys-only 384 x 24 beat 384 x 16 by up to 13% (uint32
        2^28, uint64 7%; float32 within 1%); argsort with 384 x 24 was 40% slower than with 384 x 16."""
        config = super().default_config(dtype, value_bytes)
        if dtype is not None and value_bytes == 0:
            config["items_per_thread"] = 24
        return config

    # ------------------------------------------------------------ geometry
    @staticmethod
    def tile(config) -> int:
        return config["block_size"] * config["items_per_thread"]

    @staticmethod
    def passes(config, key_bytes: int) -> int:
        return -(-8 * key_bytes // config["radix_bits"])

    def shared_bytes(self, config, key_bytes: int, value_bytes: int) -> int:
        """Dynamic shared memory of onesweep_pass (mirrors its layout)."""
        tile, digits = self.tile(config), 1 << config["radix_bits"]
        warps = config["block_size"] // 32
        a8 = lambda x: -(-x // 8) * 8  # noqa: E731
        return (a8(tile * value_bytes) + digits * 8 + a8(tile * key_bytes)
                + warps * digits * 4 + (warps + 1) * 4 + 4)

    def valid_config(self, config, dtype, value_bytes):
        import numpy as np

        if config["block_size"] < (1 << config["radix_bits"]):
            return False
        return self.shared_bytes(config, np.dtype(dtype).itemsize, value_bytes) <= SHARED_LIMIT

    # ----------------------------------------------------------------- run
    def run(self, job):
        cfg, n = job.config, job.n
        if not self.valid_config(cfg, job.dtype, job.value_bytes):
            raise ValueError(f"{job.where}: invalid configuration (block_size must be >= "
                             f"2^radix_bits and the tile must fit in shared memory)")
        block, tile = cfg["block_size"], self.tile(cfg)
        digits = 1 << cfg["radix_bits"]
        passes = self.passes(cfg, job.key_bytes)
        tiles = job.blocks(n, tile)
        wide = n > NARROW_STATUS_MAX
        defines = {"wide_status": 1} if wide else None
        status_word = 8 if wide else 4
        kb, vb = job.key_bytes, job.value_bytes

        # One temporary, carved: zeroed head (histogram, tile counters, status
        # half 0), then status half 1 (zeroed by the first pass), offsets,
        # plan, ping-pong keys and values.
        half_bytes = _align(tiles * digits * status_word)
        at = job.alloc_parts([("hist", passes * digits * 8), ("counters", passes * 4),
                              ("status", 2 * half_bytes), ("offsets", passes * digits * 8),
                              ("plan", passes * 4), ("keys", n * kb), ("values", n * vb)], ALIGN)
        job.memset32(at["hist"], 0, (at["status"] + half_bytes - at["hist"]) // 4)

        histogram = job.kernel("onesweep.cu", "onesweep_histogram", "PqQP", defines=defines)
        plan = job.kernel("onesweep.cu", "onesweep_plan", "PqPP", defines=defines)
        sweep = job.kernel("onesweep.cu", "onesweep_pass", "PPPPPPqQiiPPPPQ", defines=defines)
        mask = job.desc_mask
        hist_grid = min(job.blocks(n, block * HIST_ITEMS), HIST_GRID_CAP)
        job.launch(histogram, hist_grid, block, job.keys_in, n, mask, at["hist"])
        job.launch(plan, 1, block, at["hist"], n, at["offsets"], at["plan"])

        iota = int(vb > 0 and job.values_in == 0)  # argsort: the core gave no indices
        vals = (job.values_in, job.values_out, at["values"]) if vb else (0, 0, 0)
        shared = self.shared_bytes(cfg, kb, vb)
        for p in range(passes):
            job.launch(sweep, tiles, block, job.keys_in, job.keys_out, at["keys"], *vals,
                       n, mask, p, iota, at["offsets"], at["plan"], at["status"],
                       at["counters"], tiles, shared=shared)
