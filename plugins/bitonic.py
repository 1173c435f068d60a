"""`bitonic`: bitonic sorting network for any length (not stable).

Tiles of block_size x items_per_thread keys are sorted in shared memory in one
launch. Each later merge stage runs its first (mirror) step as a global launch,
its other long-distance steps up to MAX_FUSED at a time in registers (one read
and one write of the array for several steps), and all steps that fit in a
tile as one shared-memory launch.
"""
from __future__ import annotations

from cudasortkit.dtypes import KEY_DTYPES
from cudasortkit.sdk.plugin import Tunable, tile_tunables
from cudasortkit.sdk.tiles import TiledSortPlugin

GRID_CAP = 1 << 16  # global steps loop over comparators past this many blocks
MAX_FUSED = 4  # half-cleaner steps done per register pass (bitonic_global_steps2..4)
#: The widest block a one-launch sort uses (a 1024-thread tile was slower
#: than the tiles-and-merges path: docs/algorithms/bitonic.md).
ONE_LAUNCH_BLOCK = 512


class BitonicSort(TiledSortPlugin):
    name = "bitonic"
    summary = "bitonic network, shared-memory tiles + global merge steps (unstable)"
    dtypes = KEY_DTYPES
    stable = False
    priority = 50
    pairs = True
    #: Same launches for the same shape (the network follows from n and config).
    replayable = True
    tunables = {
        **tile_tunables((256, (128, 256, 512, 1024)), (8, (2, 4, 8, 16))),
        "one_launch": Tunable(1, (0, 1), "1: an input that one wider block (up to "
                              f"{ONE_LAUNCH_BLOCK} threads) holds is sorted in one launch"),
    }
    templates = ("bitonic.cu",)
    one_launch_block = ONE_LAUNCH_BLOCK

    def run(self, job):
        cfg = self.launch_config(job)
        block, tile, n = cfg["block_size"], self.tile(cfg), job.n
        shared = self.shared_bytes(cfg, job.key_bytes, job.value_bytes)
        sort_tiles = job.kernel("bitonic.cu", "bitonic_sort_tiles", config=cfg)
        merge_tiles = job.kernel("bitonic.cu", "bitonic_merge_tiles", config=cfg)
        global_step = job.kernel("bitonic.cu", "bitonic_global_step", config=cfg)
        fused = {s: job.kernel("bitonic.cu", f"bitonic_global_steps{s}", config=cfg)
                 for s in range(2, MAX_FUSED + 1)}
        tiles = job.blocks(n, tile)
        size = 1 << (n - 1).bit_length()  # virtual power-of-two length
        vin, vout = job.values_in, job.values_out
        job.launch(sort_tiles, tiles, block, job.keys_in, vin, job.keys_out, vout,
                   n, job.desc_mask, int(size <= tile), shared=shared)
        comparators = size // 2
        grid = min(job.blocks(comparators, block), GRID_CAP)
        k = 2 * tile
        while k <= size:
            job.launch(global_step, grid, block, job.keys_out, vout, n, comparators, k // 2, 1)
            j = k // 4
            while j >= tile:
                steps = min(MAX_FUSED, (j // tile).bit_length())
                if steps == 1:
                    job.launch(global_step, grid, block, job.keys_out, vout, n, comparators, j, 0)
                else:
                    groups = size >> steps
                    job.launch(fused[steps], min(job.blocks(groups, block), GRID_CAP), block,
                               job.keys_out, vout, n, groups, j)
                j >>= steps
            job.launch(merge_tiles, tiles, block, job.keys_out, vout, n, job.desc_mask,
                       int(k == size), shared=shared)
            k *= 2
