"""`msd_local`: 8-byte keys, most significant digits first, then small pieces
sorted on chip; alone, with the caller's values, or as an argsort.

Four onesweep passes over the top 32 bits of the sorted word leave the keys
ordered by that prefix; then a block per chunk of about 4096 keys, cut where
the prefix changes, ranks every key within its prefix group in shared memory.
That moves 8 + 4 x 16 + 16 = 88 bytes a key instead of onesweep's 136. The
device decides the route (kernels/msd_local.cu): keys whose top digits are
constant, or whose sample repeats a prefix (few distinct values), and any
input where a group turns out too long for a chunk, are sorted by onesweep's
eight passes instead, so no input costs much more than onesweep.

With values the passes carry one word a key (argsort's 32-bit input
position, or the value itself), and the local sort writes it where the key
goes: for uint64 keys with int64 values 8 + 4 x 32 + 32 = 168 bytes a key
against onesweep's 264. gather_values=1 carries 32-bit positions instead
and reads each 8-byte value from its position in the local sort (156 bytes
on paper), slower for the random reads (size_config). Stable: the passes
are, and the local sort ranks equal keys by position, so argsort is NumPy's
stable argsort and pairs follow it. See docs/algorithms/msd_local.md.
"""
from __future__ import annotations

from cudasortkit.sdk.plugin import Tunable
from cudasortkit.plugins.onesweep import OnesweepSort
from cudasortkit.sdk.sweep import (INDICES, KEEP_CARRIED, NARROW_POSITIONS, VALUES_GIVEN,
                                   carry_bytes, launch_histogram, launch_pass, status_word,
                                   sweep_defines, sweep_mode)

#: Chunk stride and block size of msd_cuts and msd_local_sort, the first
#: MSD pass (kernels/msd_local.cu: MSD_SPAN, MSD_LOCAL_BLOCK, MSD_FIRST),
#: and the fewest keys the MSD route takes: alone, and with values.
SPAN, LOCAL_BLOCK, MSD_FIRST = 2048, 256, 4
MIN_KEYS = 1 << 22
#: With values, the four passes it saves carry values too, so the MSD route
#: pays from fewer keys (not measured below 2^20: the sample's plan costs
#: about 20 us, a pass of 2^20 keys with values about as much).
MIN_PAIR_KEYS = 1 << 20
KERNELS = ("onesweep_histogram", "msd_plan", "onesweep_pass", "msd_cuts", "msd_local_sort",
           "msd_fallback", "onesweep_pass_persistent")


class MsdLocalSort(OnesweepSort):
    name = "msd_local"
    summary = ("8-byte keys (alone, pairs, argsort): MSD radix passes over the top 32 bits, "
               "then on-chip sorts of small groups (stable)")
    dtypes = ("int64", "uint64", "float64")
    stable = True
    pairs = True
    makes_indices = True
    priority = 19
    #: Below MIN_KEYS (keys alone) or MIN_PAIR_KEYS (with values) auto
    #: leaves 8-byte keys to onesweep (priority_for_request; asked for by
    #: name, run() hands such a sort to onesweep's passes).
    priorities = ((MIN_KEYS - 1, 100),)
    replayable = True
    tunables = {**OnesweepSort.tunables,
                "radix_bits": Tunable(8, (8,), "bits per digit pass (8: the MSD passes are "
                                      "digits 4..7)")}
    templates = ("msd_local.cu",)

    def priority_for_request(self, request) -> int:
        """19 from MIN_KEYS keys alone, from MIN_PAIR_KEYS with values
        (below NARROW_POSITIONS keys: 32-bit positions), else 100."""
        if request.value_bytes:
            fits = MIN_PAIR_KEYS <= request.n < NARROW_POSITIONS
            return self.priority if fits else 100
        return super().priority_for_request(request)

    def size_config(self, config, dtype, value_bytes, n):
        """onesweep's size rules; on the MSD route (MIN_PAIR_KEYS keys with
        values) 8-byte values ride the passes as they are (gather_values=0):
        at 2^24-2^26 uint64 keys with int64 values that took 1.08 / 4.06 ms
        against 1.48 / 5.76 ms gathering them from 32-bit positions, whose
        random 8-byte reads cost more than the four passes' wider words
        (H200); the same at 2^20."""
        config = super().size_config(config, dtype, value_bytes, n)
        if value_bytes == 8 and MIN_PAIR_KEYS <= n:
            config = dict(config, gather_values=0)
        return config

    def run(self, job):
        smallest = MIN_PAIR_KEYS if job.value_bytes else MIN_KEYS
        if job.n < smallest or job.n >= NARROW_POSITIONS:  # by name: onesweep's sort
            super().run(job)
            return
        self.check_config(job)
        g, n = self.geometry(job.config), job.n
        passes, digits = g.passes(job.key_bytes), g.digits
        chunks = job.blocks(n, SPAN)
        half = job.blocks(n, g.tile) * digits * status_word(job)
        vb = job.value_bytes
        # The value mode (sweep_mode): keys alone; argsort's positions made
        # by the first pass (no keys written at the end); 8-byte values
        # gathered from their positions (gather_values) or carried as they
        # are; 4-byte values carried. A position is carried as 4 bytes.
        mode = sweep_mode(job, gather=bool(job.config.get("gather_values", 0)))
        argsort = mode == INDICES
        carry = carry_bytes(job, mode)
        # Zeroed head: histogram, both sets of passes' tile counters, flags,
        # status half 0.
        at = job.alloc_parts([("hist", passes * digits * 8), ("counters", passes * 4),
                              ("counters2", passes * 4), ("flags", 8), ("status", 2 * half),
                              ("offsets", passes * digits * 8), ("plan", passes * 4),
                              ("lsd", passes * 4), ("plan2", passes * 4),
                              ("cuts", (chunks + 1) * 8), ("keys", n * job.key_bytes),
                              ("values", n * carry), ("carried", n * carry)])
        defines = sweep_defines(job, carry)
        k = {name: job.kernel("msd_local.cu", name, defines=defines) for name in KERNELS}
        job.memset32(at["hist"], 0, (at["status"] + half - at["hist"]) // 4)
        launch_histogram(job, k["onesweep_histogram"], at["hist"], limit=(1 << 64) - 1)
        job.launch(k["msd_plan"], 1, g.block_size, job.keys_in, at["hist"], n, job.desc_mask,
                   at["offsets"], at["plan"], at["lsd"], at["plan2"], at["flags"])
        # MSD passes: the carried words end in at["carried"], as they are.
        msd_values = (job.values_in, at["carried"], at["values"]) if vb else (0, 0, 0)
        for p in range(MSD_FIRST, passes):
            launch_pass(job, k["onesweep_pass"], g, p, at, values=msd_values,
                        value_mode=mode | KEEP_CARRIED if vb else VALUES_GIVEN, carry=carry)
        job.launch(k["msd_cuts"], job.blocks(chunks + 1, LOCAL_BLOCK), LOCAL_BLOCK, job.keys_out,
                   n, job.desc_mask, at["cuts"], chunks, at["flags"])
        job.launch(k["msd_local_sort"], chunks, LOCAL_BLOCK, job.keys_out,
                   at["carried"] if vb else 0, job.values_in, job.values_out, job.desc_mask,
                   at["cuts"], at["flags"], mode, int(not argsort))
        job.launch(k["msd_fallback"], 1, 1, at["flags"], at["lsd"], at["plan2"])
        # The LSD passes, skipped on the MSD route: on a persistent grid (a
        # few hundred blocks that return at their plan word, not one per tile).
        fallback = dict(at, plan=at["plan2"], counters=at["counters2"])
        lsd_values = (job.values_in, job.values_out, at["values"]) if vb else (0, 0, 0)
        for p in range(passes):
            launch_pass(job, k["onesweep_pass_persistent"], g, p, fallback, persistent=True,
                        values=lsd_values, value_mode=mode, write_keys=not argsort,
                        carry=carry)
