"""`msd_local`: 8-byte keys alone, most significant digits first, then small
pieces sorted on chip.

Four onesweep passes over the top 32 bits of the sorted word leave the keys
ordered by that prefix; then a block per chunk of about 4096 keys, cut where
the prefix changes, ranks every key within its prefix group in shared memory.
That moves 8 + 4 x 16 + 16 = 88 bytes a key instead of onesweep's 136. The
device decides the route (kernels/msd_local.cu): keys whose top digits are
constant, or whose sample repeats a prefix (few distinct values), and any
input where a group turns out too long for a chunk, are sorted by onesweep's
eight passes instead, so no input costs much more than onesweep. Keys only
(not stable: equal keys are indistinguishable). See docs/algorithms/msd_local.md.
"""
from __future__ import annotations

from cudasortkit.sdk.plugin import Tunable
from cudasortkit.plugins.onesweep import OnesweepSort
from cudasortkit.sdk.sweep import launch_histogram, launch_pass, status_word, sweep_defines

#: Chunk stride and block size of msd_cuts and msd_local_sort, the first
#: MSD pass (kernels/msd_local.cu: MSD_SPAN, MSD_LOCAL_BLOCK, MSD_FIRST),
#: and the fewest keys the MSD route takes.
SPAN, LOCAL_BLOCK, MSD_FIRST = 2048, 256, 4
MIN_KEYS = 1 << 22
KERNELS = ("onesweep_histogram", "msd_plan", "onesweep_pass", "msd_cuts", "msd_local_sort",
           "msd_fallback", "onesweep_pass_persistent")


class MsdLocalSort(OnesweepSort):
    name = "msd_local"
    summary = "8-byte keys: MSD radix passes over the top 32 bits, then on-chip sorts of small groups"
    dtypes = ("int64", "uint64", "float64")
    stable = False
    pairs = False
    makes_indices = False
    priority = 19
    #: Below MIN_KEYS auto leaves 8-byte keys to onesweep (asked for by
    #: name, run() hands such a sort to onesweep's passes).
    priorities = ((MIN_KEYS - 1, 100),)
    replayable = True
    tunables = {**OnesweepSort.tunables,
                "radix_bits": Tunable(8, (8,), "bits per digit pass (8: the MSD passes are "
                                      "digits 4..7)")}
    templates = ("msd_local.cu",)

    def run(self, job):
        if job.n < MIN_KEYS:  # by name: a smaller sort is onesweep's
            super().run(job)
            return
        self.check_config(job)
        g, n = self.geometry(job.config), job.n
        passes, digits = g.passes(job.key_bytes), g.digits
        chunks = job.blocks(n, SPAN)
        half = job.blocks(n, g.tile) * digits * status_word(job)
        # Zeroed head: histogram, both sets of passes' tile counters, flags,
        # status half 0.
        at = job.alloc_parts([("hist", passes * digits * 8), ("counters", passes * 4),
                              ("counters2", passes * 4), ("flags", 8), ("status", 2 * half),
                              ("offsets", passes * digits * 8), ("plan", passes * 4),
                              ("lsd", passes * 4), ("plan2", passes * 4),
                              ("cuts", (chunks + 1) * 8), ("keys", n * job.key_bytes)])
        defines = sweep_defines(job)
        k = {name: job.kernel("msd_local.cu", name, defines=defines) for name in KERNELS}
        job.memset32(at["hist"], 0, (at["status"] + half - at["hist"]) // 4)
        launch_histogram(job, k["onesweep_histogram"], at["hist"], limit=(1 << 64) - 1)
        job.launch(k["msd_plan"], 1, g.block_size, job.keys_in, at["hist"], n, job.desc_mask,
                   at["offsets"], at["plan"], at["lsd"], at["plan2"], at["flags"])
        for p in range(MSD_FIRST, passes):
            launch_pass(job, k["onesweep_pass"], g, p, at)
        job.launch(k["msd_cuts"], job.blocks(chunks + 1, LOCAL_BLOCK), LOCAL_BLOCK, job.keys_out,
                   n, job.desc_mask, at["cuts"], chunks, at["flags"])
        job.launch(k["msd_local_sort"], chunks, LOCAL_BLOCK, job.keys_out, job.desc_mask,
                   at["cuts"], at["flags"])
        job.launch(k["msd_fallback"], 1, 1, at["flags"], at["lsd"], at["plan2"])
        # The LSD passes, skipped on the MSD route: on a persistent grid (a
        # few hundred blocks that return at their plan word, not one per tile).
        fallback = dict(at, plan=at["plan2"], counters=at["counters2"])
        for p in range(passes):
            launch_pass(job, k["onesweep_pass_persistent"], g, p, fallback, persistent=True)
