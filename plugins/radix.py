"""`radix`: stable LSD radix sort, reduce-then-scan (kernels/radix.cu).

One read of the input first histograms every digit of every pass at once;
passes whose digit is the same for every key are skipped (keys that only use
12 bits cost two 8-bit passes, all-equal keys none), and the first pass
reuses those block counts. Each remaining pass: block digit counts (upsweep),
a scan of the digit x block table (one launch: a block per digit row, with
the shared block scan of kernels/scan.cuh and the digit totals), and a
scatter that ranks keys
stably in shared memory and writes each digit's run coalesced. Key
transforms (signed, float, descending) happen in the first pass's load and
the last pass's store; buffers ping-pong so the last pass lands in keys_out.
"""
from __future__ import annotations

import numpy as np

from cudasortkit.dtypes import KEY_DTYPES
from cudasortkit.errors import KernelError
from cudasortkit.plugin import SortPlugin, Tunable

#: Shared memory a downsweep block may take (leaves room for 2 blocks per SM
#: on sm_80/sm_90, and keeps sm_75's 64 KiB in reach for the defaults).
MAX_SHARED = 96 * 1024


class RadixSort(SortPlugin):
    name = "radix"
    summary = "stable LSD radix sort: digit histograms, scan, shared-memory ranked scatter"
    dtypes = KEY_DTYPES
    stable = True
    pairs = True
    tunables = {
        "digit_bits": Tunable(8, (4, 5, 6, 7, 8), "bits sorted per pass (2^bits buckets)"),
        "block_size": Tunable(256, (128, 256, 512), "threads per block"),
        "items_per_thread": Tunable(16, (4, 8, 12, 16, 20), "keys per thread in a tile"),
        "min_resident_threads": Tunable(0, (0, 512, 768, 1024),
                                        "scatter's register cap: threads kept resident per SM "
                                        "(0: 768 for keys-only keys of <= 4 bytes, else 512)"),
    }
    templates = ("radix.cu",)

    def __init__(self):
        self._resident = {}

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

    def valid_config(self, config, dtype, value_bytes):
        key_bytes = np.dtype(dtype).itemsize
        return self.shared_bytes(config, key_bytes, value_bytes) <= MAX_SHARED

    def _grid(self, job, kernel, shared: int, tiles: int) -> int:
        """Blocks of one full wave (each owns an equal run of tiles)."""
        state = job.state
        key = (state.ordinal, id(kernel.function), shared)
        resident = self._resident.get(key)
        if resident is None:
            cuda = state.cuda
            attr = cuda.device_attribute
            block = job.config["block_size"]
            threads_sm = state.device.get_attribute(attr.MAX_THREADS_PER_MULTIPROCESSOR)
            shared_sm = state.device.get_attribute(attr.MAX_SHARED_MEMORY_PER_MULTIPROCESSOR)
            regs_sm = state.device.get_attribute(attr.MAX_REGISTERS_PER_MULTIPROCESSOR)
            regs = max(1, kernel.function.get_attribute(cuda.function_attribute.NUM_REGS))
            warp_regs = -(-regs * 32 // 256) * 256
            per_sm = min(threads_sm // block,
                         regs_sm // (warp_regs * (block // 32)),
                         shared_sm // (shared + 1024),
                         32)
            resident = self._resident[key] = max(1, per_sm) * state.sm_count
        return max(1, min(tiles, resident))

    # ----------------------------------------------------------------- run
    def run(self, job):
        cfg, n = job.config, job.n
        bits, block = cfg["digit_bits"], cfg["block_size"]
        tile = block * cfg["items_per_thread"]
        radix = 1 << bits
        passes = self.passes(cfg, job.key_bytes)
        offset_bytes = 8 if n >= (1 << 32) else 4
        defines = {"offset_bytes": offset_bytes}
        hist_all = job.kernel("radix.cu", "radix_histogram_all", "PqQPP", defines=defines)
        upsweep = job.kernel("radix.cu", "radix_upsweep", "PqiP", defines=defines)
        downsweep = job.kernel("radix.cu", "radix_downsweep", "PPPPqiiiQP", defines=defines)
        scan_table = job.kernel("radix.cu", "radix_scan_table", "PPi", defines=defines)
        shared = self.shared_bytes(cfg, job.key_bytes, job.value_bytes)
        grid = self._grid(job, downsweep, shared, job.blocks(n, tile))
        table_len = radix * grid

        # One read of the input: every pass's block counts and digit totals.
        table = int(job.alloc(passes * table_len * offset_bytes))
        totals = int(job.alloc(passes * radix * 8))
        job.memset32(totals, 0, passes * radix * 2)
        job.launch(hist_all, grid, block, job.keys_in, n, job.desc_mask, table, totals)
        host_totals = np.empty(passes * radix, np.uint64)
        try:
            job.stream.synchronize()
            job.state.cuda.memcpy_dtoh(host_totals, totals)
        except job.state.cuda.Error as exc:
            raise KernelError(f"{job.where}: radix_histogram_all failed: {exc}") from exc
        per_pass = host_totals.reshape(passes, radix)
        active = [p for p in range(passes) if int(per_pass[p].max()) < n]

        vb = job.value_bytes
        if not active:  # every key is the same ordered word: already sorted
            job.copy(job.keys_out, job.keys_in, n * job.key_bytes)
            if vb:
                job.copy(job.values_out, job.values_in, n * vb)
            return

        tmp_keys = tmp_values = 0
        if len(active) > 1:
            tmp_keys = int(job.alloc(n * job.key_bytes))
            if vb:
                tmp_values = int(job.alloc(n * vb))
        src_k, src_v = job.keys_in, job.values_in
        for i, p in enumerate(active):
            lands_in_out = (len(active) - 1 - i) % 2 == 0
            dst_k = job.keys_out if lands_in_out else tmp_keys
            dst_v = (job.values_out if lands_in_out else tmp_values) if vb else 0
            part = table + p * table_len * offset_bytes
            if i > 0:
                job.launch(upsweep, grid, block, src_k, n, p * bits, part)
            job.launch(scan_table, radix, block, part, totals + p * radix * 8, grid)
            job.launch(downsweep, grid, block, src_k, src_v, dst_k, dst_v, n, p * bits,
                       int(i == 0), int(i == len(active) - 1), job.desc_mask, part, shared=shared)
            src_k, src_v = dst_k, dst_v
