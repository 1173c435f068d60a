"""`radix`: stable LSD radix sort, reduce-then-scan (kernels/radix.cu).

One read of the input first histograms every digit of every pass at once; a
one-block kernel then plans on the device which passes are trivial (one digit
holds every key: skipped; keys that only use 12 bits cost two 8-bit passes)
and which buffer each remaining pass reads and writes, so the host launches
every pass without waiting for anything: the kernels of a skipped pass return
at once. The first active pass reuses the histogram's block counts. Each
active pass: block digit counts (upsweep), a scan of the digit x block table
(one launch: a block per digit row, with the shared block scan of
kernels/include/scan.cuh and the digit totals), and a scatter that ranks keys stably
in shared memory and writes each digit's run coalesced. Key transforms
(signed, float, descending) happen in the first active pass's load and the
last one's store; buffers ping-pong so the last active pass lands in
keys_out. If every pass is trivial, pass 0 runs anyway as a stable copy.
"""
from __future__ import annotations


from cudasortkit.dtypes import KEY_DTYPES, itemsize
from cudasortkit.sdk.plugin import WARP_MATCH, SortPlugin, Tunable, tile_tunables

#: Downsweep blocks that must fit on one SM together: a valid config's block
#: takes at most this share of the SM's shared memory.
DOWNSWEEP_BLOCKS_PER_SM = 2
#: Alignment of the parts of the one temporary.
ALIGN = 256


class RadixSort(SortPlugin):
    name = "radix"
    summary = "stable LSD radix sort: digit histograms, scan, shared-memory ranked scatter"
    dtypes = KEY_DTYPES
    stable = True
    priority = 30
    pairs = True
    makes_indices = True
    #: Same launches for the same shape: the plan of passes is made on the device.
    replayable = True
    tunables = {
        "digit_bits": Tunable(8, (4, 5, 6, 7, 8), "bits sorted per pass (2^bits buckets)"),
        **tile_tunables((512, (128, 256, 512)), (16, (4, 8, 12, 16, 20))),
        "warp_match": WARP_MATCH,
        "min_resident_threads": Tunable(0, (0, 512, 768, 1024),
                                        "scatter's register cap: threads kept resident per SM "
                                        "(0: 1024 for keys-only keys of <= 4 bytes, else 512)"),
    }
    templates = ("radix.cu",)

    # ------------------------------------------------------------ geometry
    @staticmethod
    def passes(config, key_bytes: int) -> int:
        return -(-8 * key_bytes // config["digit_bits"])

    @staticmethod
    def shared_bytes(config, key_bytes: int, value_bytes: int) -> int:
        """Dynamic shared memory of radix_downsweep (the layout in radix.cu)."""
        radix, warps = 1 << config["digit_bits"], config["block_size"] // 32
        head = 16 * radix + 4 * warps * radix + 4 * radix + 4 * (warps + 2)
        head = -(-head // 16) * 16
        return head + config["block_size"] * config["items_per_thread"] * max(key_bytes, value_bytes)

    def valid_config(self, config, dtype, value_bytes, limits):
        """The downsweep's shared memory leaves room for
        DOWNSWEEP_BLOCKS_PER_SM blocks on one SM of the device."""
        key_bytes = itemsize(dtype)
        return (config["block_size"] <= limits.max_threads_per_block
                and self.shared_bytes(config, key_bytes, value_bytes)
                <= limits.shared_for_resident(DOWNSWEEP_BLOCKS_PER_SM))

    @staticmethod
    def _grid(job, kernel, shared: int, tiles: int) -> int:
        """Blocks of one full wave (each owns an equal run of tiles)."""
        limits = job.limits
        per_sm = kernel.resident_blocks(limits, job.config["block_size"], shared)
        return max(1, min(tiles, max(1, per_sm) * limits.sm_count))

    # ----------------------------------------------------------------- run
    def run(self, job):
        cfg, n = job.config, job.n
        bits, block = cfg["digit_bits"], cfg["block_size"]
        tile = block * cfg["items_per_thread"]
        radix = 1 << bits
        passes = self.passes(cfg, job.key_bytes)
        kb, vb = job.key_bytes, job.value_bytes
        offset_bytes = 8 if n >= (1 << 32) else 4
        defines = {"offset_bytes": offset_bytes}
        hist_all = job.kernel("radix.cu", "radix_histogram_all", defines=defines)
        plan_kernel = job.kernel("radix.cu", "radix_plan", defines=defines)
        upsweep = job.kernel("radix.cu", "radix_upsweep", defines=defines)
        scan_table = job.kernel("radix.cu", "radix_scan_table", defines=defines)
        downsweep = job.kernel("radix.cu", "radix_downsweep", defines=defines)
        shared = self.shared_bytes(cfg, kb, vb)
        grid = self._grid(job, downsweep, shared, job.blocks(n, tile))
        table_len = radix * grid

        # One temporary, carved: every pass's digit x block table, the digit
        # totals, the plan, and (with more than one pass: which ones run is
        # known only on the device) the ping-pong keys and values.
        spare = passes > 1
        at = job.alloc_parts([("table", passes * table_len * offset_bytes),
                              ("totals", passes * radix * 8),
                              ("plan", passes * 4),
                              ("keys", n * kb if spare else 0),
                              ("values", n * vb if spare else 0)], ALIGN)
        tmp_keys = at["keys"] if spare else 0
        tmp_values = at["values"] if spare and vb else 0

        # One read of the input: every pass's block counts and digit totals;
        # then the plan (skipped passes, buffer parity), all on the device.
        job.memset32(at["totals"], 0, passes * radix * 2)
        job.launch(hist_all, grid, block, job.keys_in, n, job.desc_mask, at["table"], at["totals"])
        job.launch(plan_kernel, 1, block, at["totals"], n, at["plan"])

        keys = (job.keys_in, job.keys_out, tmp_keys)
        values = (job.values_in, job.values_out, tmp_values) if vb else (0, 0, 0)
        for p in range(passes):
            part = at["table"] + p * table_len * offset_bytes
            if p > 0:  # pass 0, when it runs, is the first active pass: no upsweep
                job.launch(upsweep, grid, block, job.keys_out, tmp_keys, n, p, at["plan"], part)
            job.launch(scan_table, radix, block, part, at["totals"] + p * radix * 8, grid, p,
                       at["plan"])
            job.launch(downsweep, grid, block, *keys, *values, n, p, job.desc_mask, at["plan"],
                       part, shared=shared)
