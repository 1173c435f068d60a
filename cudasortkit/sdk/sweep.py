"""Chained-scan LSD radix passes (kernels/include/onesweep.cuh) on a job's stream.

The onesweep plugin is these passes over the whole key; the counting plugin
uses them for pairs and argsort over the bits of its bins (ordered key minus
the smallest one). From a plugin's run()::

    from cudasortkit.sdk.sweep import SweepGeometry, sweep_sort

    geometry = SweepGeometry(block_size=384, items_per_thread=16, radix_bits=8)
    sweep_sort(job, "onesweep.cu", geometry)                    # every key bit
    sweep_sort(job, "counting_sweep.cu", geometry, base=b, limit=bins - 1, bad=flag)

The template must include onesweep.cuh and define the same geometry as
macros (BLOCK_SIZE, ITEMS_PER_THREAD, RADIX_BITS); it is compiled for the
job's dtype and config like any of the plugin's kernels.

Launches: onesweep_histogram (every digit of every sorted pass; its last
block plans the passes: offsets, trivial passes skipped on the device), one
onesweep_pass per digit.
For argsort (values_in == 0, the `makes_indices` contract) the first pass makes
the indices, the passes in between keep them as 32-bit words (n < 2^32) and
the last pass writes no keys (argsort's keys are never read). Pairs with
`gather` do the same with positions, and the last pass writes the caller's
value from each position (values_in[position]): 4 bytes a key carried
through the passes instead of the values' 8, and one random read at the end.
"""
from __future__ import annotations

from dataclasses import dataclass

#: Largest count a 32-bit status word holds (2 bits are flags); beyond it the
#: kernels are built with 64-bit status words.
NARROW_STATUS_MAX = (1 << 30) - 1
#: Keys per thread per histogram step, threads of a histogram block, and its
#: dynamic shared memory where the device gives a block that much
#: (kernels/include/onesweep.cuh).
HIST_ITEMS = 8
HIST_BLOCK = 1024
HIST_SHARED_BYTES = 65536
#: Static shared memory the histogram's plan step takes beside the dynamic
#: counts (an upper bound: a scan's warp sums and the trivial flags).
HIST_STATIC_BYTES = 1024
#: Widest digit (kernels/include/onesweep.cuh), and the tile size its 16-bit per-warp
#: counters stay below.
MAX_RADIX_BITS = 11
TILE_LIMIT = 1 << 16
#: value_mode of onesweep_pass (kernels/include/onesweep.cuh): the caller's
#: values carried; positions made by the first pass, written as indices or
#: turned into the caller's values by the last (gathered); and a flag: the
#: last pass writes the carried word as it is (a later kernel finishes).
VALUES_GIVEN, INDICES, GATHER, KEEP_CARRIED = 0, 1, 2, 4
#: Positions are carried as 32-bit words below this many keys.
NARROW_POSITIONS = 1 << 32
#: The kernels of a sweep template (declared in kernels/include/onesweep.cuh).
SWEEP_KERNELS = ("onesweep_histogram", "onesweep_pass")


@dataclass(frozen=True)
class SweepGeometry:
    block_size: int
    items_per_thread: int
    radix_bits: int = 8

    @property
    def tile(self) -> int:
        return self.block_size * self.items_per_thread

    @property
    def digits(self) -> int:
        return 1 << self.radix_bits

    @property
    def counter_bytes(self) -> int:
        """Bytes of a per-warp digit counter (kernels/include/onesweep.cuh, OS_PACK)."""
        return 2 if self.radix_bits > 8 else 4

    def passes(self, key_bytes: int) -> int:
        return -(-8 * key_bytes // self.radix_bits)

    def shared_bytes(self, key_bytes: int, value_bytes: int) -> int:
        """Dynamic shared memory of onesweep_pass (mirrors its layout)."""
        a8 = lambda x: -(-x // 8) * 8  # noqa: E731
        warps = self.block_size // 32
        return (a8(self.tile * value_bytes) + self.digits * 8 + a8(self.tile * key_bytes)
                + warps * self.digits * self.counter_bytes + (warps + 1) * 4 + 4)

    def fits(self, key_bytes: int, value_bytes: int, limits) -> bool:
        """Whether onesweep_pass can run with this geometry on a device with
        `limits` (a DeviceLimits): whole 32-lane warps, 2- to 11-bit digits,
        a tile below 2^16 keys (16-bit per-warp counters) and a layout that
        fits the most shared memory a block may opt into."""
        return (self.block_size % 32 == 0 and 2 <= self.radix_bits <= MAX_RADIX_BITS
                and self.block_size <= limits.max_threads_per_block and self.tile < TILE_LIMIT
                and self.shared_bytes(key_bytes, value_bytes) <= limits.shared_per_block_optin)


def histogram_shared_bytes(limits) -> int:
    """The histogram's dynamic shared memory on a device with `limits`:
    64 KiB, or the largest power of two below that which a block may opt
    into beside the kernel's static shared memory."""
    room = limits.shared_per_block_optin - HIST_STATIC_BYTES
    return HIST_SHARED_BYTES if room >= HIST_SHARED_BYTES else 1 << (room.bit_length() - 1)


def carry_bytes(job, mode: int) -> int:
    """Bytes a value takes between the passes (VALUE_CARRY): a position
    (modes INDICES and GATHER) 4 below NARROW_POSITIONS keys, else the
    values' own width (0: keys only)."""
    if job.value_bytes and mode & ~KEEP_CARRIED != VALUES_GIVEN and job.n < NARROW_POSITIONS:
        return 4
    return job.value_bytes


def sweep_defines(job, carry: int | None = None) -> dict:
    """Macros a sweep template is built with for this job besides its
    config: 64-bit status words for n >= 2^30, a smaller histogram where the
    device cannot give a block 64 KiB, and VALUE_CARRY where values are
    carried narrower than their width (`carry`, carry_bytes')."""
    defines = {"wide_status": 1} if job.n > NARROW_STATUS_MAX else {}
    hist_shared = histogram_shared_bytes(job.limits)
    if hist_shared != HIST_SHARED_BYTES:
        defines["hist_shared_bytes"] = hist_shared
    if carry is not None and carry != job.value_bytes:
        defines["value_carry"] = carry
    return defines


def status_word(job) -> int:
    """Bytes of a tile status word (kernels/include/onesweep.cuh, WIDE_STATUS)."""
    return 8 if job.n > NARROW_STATUS_MAX else 4


def resident_grid(job, kernel, block: int, shared: int, most: int) -> int:
    """As many blocks of `kernel` as the GPU holds at once (at least one),
    at most `most`: the grid of a kernel whose blocks loop over the work."""
    resident = job.limits.sm_count * kernel.resident_blocks(job.limits, block, shared)
    return min(most, max(resident, 1))


def launch_histogram(job, kernel, hist: int, *, base: int = 0, limit: int, bad: int = 0,
                     plan_at: dict | None = None) -> None:
    """onesweep_histogram over job.keys_in into `hist` (zeroed): as many
    blocks as the GPU holds at once, each adding its shared counts to `hist`
    at the end (and before a 16-bit count could overflow, on inputs of
    billions of keys). With `plan_at` (the sweep's buffers: "done", a zeroed
    word, "offsets" and "plan") the last block also plans the passes."""
    shared = histogram_shared_bytes(job.limits)
    grid = resident_grid(job, kernel, HIST_BLOCK, shared, job.blocks(job.n, HIST_BLOCK * HIST_ITEMS))
    plan = (plan_at["done"], plan_at["offsets"], plan_at["plan"]) if plan_at else (0, 0, 0)
    job.launch(kernel, grid, HIST_BLOCK, job.keys_in, job.n, job.desc_mask, base, limit, hist,
               bad, *plan, shared=shared)


def launch_pass(job, kernel, geometry: SweepGeometry, p: int, at: dict, *, keys_in=None,
                values=(0, 0, 0), value_mode: int = VALUES_GIVEN, write_keys: bool = True,
                base: int = 0, persistent: bool = False, carry: int | None = None) -> None:
    """onesweep_pass for digit p: `at` holds the sweep's buffers ("keys",
    "offsets", "plan", "status", "counters"); keys_in defaults to job.keys_in.
    A block per tile; with `persistent` (kernel is onesweep_pass_persistent,
    whose blocks take tile after tile) as many blocks as the GPU holds at
    once, at most one per tile. `carry`: the VALUE_CARRY the kernel was
    built with (default the values' width)."""
    tiles = job.blocks(job.n, geometry.tile)
    shared = geometry.shared_bytes(job.key_bytes, job.value_bytes if carry is None else carry)
    grid = resident_grid(job, kernel, geometry.block_size, shared, tiles) if persistent else tiles
    job.launch(kernel, grid, geometry.block_size, job.keys_in if keys_in is None else keys_in,
               job.keys_out, at["keys"], *values, job.n, job.desc_mask, base, p, value_mode,
               int(write_keys), at["offsets"], at["plan"], at["status"], at["counters"], tiles,
               shared=shared)


def sweep_mode(job, gather: bool = False) -> int:
    """The value_mode of a sweep of `job`: INDICES for an argsort (no
    values_in: the `makes_indices` contract), GATHER for pairs with
    `gather` where a position is narrower than a value (8-byte values,
    fewer than NARROW_POSITIONS keys), else VALUES_GIVEN (keys only too)."""
    if not job.value_bytes:
        return VALUES_GIVEN
    if job.values_in == 0:
        return INDICES
    if gather and job.value_bytes > 4 and job.n < NARROW_POSITIONS:
        return GATHER
    return VALUES_GIVEN


def sweep_sort(job, template: str, geometry: SweepGeometry, *, base: int = 0,
               limit: int | None = None, bad: int = 0, gather: bool = False) -> None:
    """Sort job.keys_in into job.keys_out (and values) by w = csk_encode(key)
    - base, running only the passes over the bits of `limit`, the largest w
    (default: the largest word). `bad` (a device word, or 0 when w <= limit
    always holds) is set if some w > limit; the output is then a permutation
    of the keys, not sorted. `gather`: pairs carry positions and the last
    pass gathers the values (sweep_mode)."""
    g, n = geometry, job.n
    kb, vb = job.key_bytes, job.value_bytes
    limit = (1 << 8 * kb) - 1 if limit is None else int(limit)
    passes = g.passes(kb)
    tiles = job.blocks(n, g.tile)
    mode = sweep_mode(job, gather)
    carry = carry_bytes(job, mode)

    # One temporary, carved: zeroed head (histogram, tile counters, status
    # half 0), then status half 1 (zeroed by the first pass), offsets, plan,
    # ping-pong keys and values.
    half_bytes = tiles * g.digits * status_word(job)
    at = job.alloc_parts([("hist", passes * g.digits * 8), ("counters", (passes + 1) * 4),
                          ("status", 2 * half_bytes), ("offsets", passes * g.digits * 8),
                          ("plan", passes * 4), ("keys", n * kb), ("values", n * carry)])
    defines = sweep_defines(job, carry)
    kernels = {name: job.kernel(template, name, defines=defines) for name in SWEEP_KERNELS}
    job.memset32(at["hist"], 0, (at["status"] + half_bytes - at["hist"]) // 4)

    at["done"] = at["counters"] + passes * 4  # zeroed with the counters
    launch_histogram(job, kernels["onesweep_histogram"], at["hist"], base=base, limit=limit,
                     bad=bad, plan_at=at)

    argsort = mode == INDICES  # the core gave no indices: make them
    vals = (job.values_in, job.values_out, at["values"]) if vb else (0, 0, 0)
    # Passes above limit's bits are skipped on the device: not launched.
    for p in range(min(passes, max(1, -(-limit.bit_length() // g.radix_bits)))):
        launch_pass(job, kernels["onesweep_pass"], g, p, at, values=vals, value_mode=mode,
                    write_keys=not argsort, base=base, carry=carry)
