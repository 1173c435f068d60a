"""msd_local's launch sequence without a GPU (plugins/msd_local.py): run()
against a job that records its kernels and launches. The eight LSD fallback
passes, skipped on the MSD route, run on a persistent grid (as many blocks as
the device holds at once: onesweep_pass_persistent takes tile after tile),
the four MSD passes on a block per tile; every launch passes as many
arguments as its kernel's prototype declares."""
import dataclasses

import pytest

from cudasortkit.build.template import Kernel, KernelTemplate
from cudasortkit.gpu.device import DeviceLimits
from cudasortkit.sdk import registry
from cudasortkit.sdk.sweep import NARROW_STATUS_MAX

#: Registers ptxas gives onesweep_pass(_persistent) for 8-byte keys at the
#: default config (nvcc -arch=sm_90 -Xptxas -v): two 384-thread blocks an SM.
PASS_REGISTERS = 80


class RecordingJob:
    """The parts of a Job that MsdLocalSort.run uses, recording launches
    (kernel name, grid, block, arguments) instead of running them. Kernels
    are build.template.Kernel objects with the prototype's signature and
    PASS_REGISTERS registers, so resident_blocks and check() are the real
    ones."""

    def __init__(self, plugin, dtype, n, limits=None, value_bytes=0, values_in=0, **settings):
        self.plugin, self.dtype, self.n = plugin, dtype, n
        self.config = dict(registry.default_config(plugin, dtype, value_bytes, n), **settings)
        self.key_bytes, self.value_bytes = 8, value_bytes
        self.keys_in, self.keys_out, self.values_in = 0x1000, 0x2000, values_in
        self.values_out = 0x3000 if value_bytes else 0
        self.desc_mask = 0
        self.limits = limits or DeviceLimits.sm90()
        self.where = "msd_local (test)"
        self.kernels, self.launches, self.memsets = {}, [], []
        self.parts = {}

    def kernel(self, template, name, defines=None, config=None, value_bytes=None):
        source = KernelTemplate(template, type(self.plugin).template_package, defines)
        signature = source.signature(name, self.dtype, 0, self.config)
        self.kernels[name] = (template, dict(defines or {}))
        return Kernel(None, name, template, signature, registers=PASS_REGISTERS)

    def alloc_parts(self, parts):
        self.parts = {name: 0x100000 * (i + 1) for i, (name, _) in enumerate(parts)}
        self.sizes = dict(parts)
        return dict(self.parts)

    def memset32(self, dst, value, count):
        self.memsets.append((dst, value, count))

    def blocks(self, items, per_block):
        return -(-int(items) // int(per_block))

    def launch(self, kernel, grid, block, *args, shared=0):
        kernel.check(args, self.plugin.name, self.dtype, self.config)
        assert shared <= self.limits.shared_per_block_optin, (kernel.name, shared)
        self.launches.append((kernel.name, grid, block, args, shared))


def _run(n, dtype="float64", limits=None, value_bytes=0, values_in=0, **settings):
    plugin = registry.plugins()["msd_local"]
    job = RecordingJob(plugin, dtype, n, limits, value_bytes, values_in, **settings)
    plugin.run(job)
    return job


def _tiles(job):
    config = job.config
    return job.blocks(job.n, config["block_size"] * config["items_per_thread"])


def test_launch_sequence():
    job = _run(1 << 26)
    names = [name for name, *_ in job.launches]
    assert names == (["onesweep_histogram", "msd_plan"] + ["onesweep_pass"] * 4
                     + ["msd_cuts", "msd_local_sort", "msd_fallback"]
                     + ["onesweep_pass_persistent"] * 8)
    assert {template for template, _ in job.kernels.values()} == {"msd_local.cu"}


@pytest.mark.parametrize("n", [1 << 26, (1 << 22) + 12345])
def test_fallback_passes_run_on_a_persistent_grid(n):
    """The MSD passes: a block per tile. The fallback passes: as many blocks
    as an H100 holds at once (132 SMs x 2 blocks of 384 threads, 80
    registers, ~88 KiB of shared memory), with the tile count as `tiles`,
    their own plan and tile counters, digits 0..7."""
    job = _run(n)
    tiles = _tiles(job)
    msd = [launch for launch in job.launches if launch[0] == "onesweep_pass"]
    lsd = [launch for launch in job.launches if launch[0] == "onesweep_pass_persistent"]
    block = job.config["block_size"]
    resident = 132 * 2
    assert tiles > resident
    for name, grid, b, args, shared in msd:
        assert (grid, b, args[-1]) == (tiles, block, tiles)
    assert [args[9] for *_, args, _ in msd] == [4, 5, 6, 7], "digits 4..7"
    for name, grid, b, args, shared in lsd:
        assert (grid, b, args[-1]) == (resident, block, tiles)
        assert job.limits.resident_blocks(block, PASS_REGISTERS, shared) == 2
    assert [args[9] for *_, args, _ in lsd] == list(range(8)), "digits 0..7"
    # plan, status, counters: the fallback's plan2 and counters2, the shared status
    assert {args[-5:-1] for *_, args, _ in lsd} == {
        (job.parts["offsets"], job.parts["plan2"], job.parts["status"], job.parts["counters2"])}
    assert {args[-5:-1] for *_, args, _ in msd} == {
        (job.parts["offsets"], job.parts["plan"], job.parts["status"], job.parts["counters"])}


def test_persistent_grid_is_at_most_one_block_per_tile():
    """A device holding more blocks at once than there are tiles gets a
    block per tile (the grid comes from the device's limits, not constants)."""
    limits = dataclasses.replace(DeviceLimits.sm90(), sm_count=1000)
    job = _run((1 << 22) + 5, limits=limits)
    tiles = _tiles(job)
    assert tiles < 2000
    grids = {grid for name, grid, *_ in job.launches if name == "onesweep_pass_persistent"}
    assert grids == {tiles}
    few = dataclasses.replace(DeviceLimits.sm90(), sm_count=7)
    job = _run((1 << 22) + 5, limits=few)
    grids = {grid for name, grid, *_ in job.launches if name == "onesweep_pass_persistent"}
    assert grids == {14}


def test_wide_status_builds_every_kernel_with_it():
    """From 2^30 keys the status words are 64-bit: the persistent passes are
    built from the same template with the same defines as the others."""
    job = _run(NARROW_STATUS_MAX + 1)
    defines = {tuple(defines.items()) for _, defines in job.kernels.values()}
    assert defines == {(("wide_status", 1),)}


def test_below_its_size_it_is_onesweep():
    """Below 2^22 keys (asked for by name) run() is onesweep's: no
    persistent passes."""
    plugin = registry.plugins()["msd_local"]
    job = RecordingJob(plugin, "uint64", 100_003)
    plugin.run(job)
    assert {name for name, *_ in job.launches} == {"onesweep_histogram", "onesweep_pass"}


# ------------------------------------------------------------ argsort, pairs
from cudasortkit.sdk.sweep import GATHER, INDICES, KEEP_CARRIED, VALUES_GIVEN  # noqa: E402

#: onesweep_pass's arguments: keys_in, keys_out, keys_tmp, values_in,
#: values_out, values_tmp, n, mask, base, pass, value_mode, write_keys, ...
VALUES, MODE, WRITE_KEYS = slice(3, 6), 10, 11


@pytest.mark.parametrize("vb, values_in, gather, mode, carry", [
    (8, 0, None, INDICES, {"value_carry": 4}),        # argsort, int64 indices
    (4, 0, None, INDICES, {}),                        # argsort, int32 indices
    (8, 0x4000, None, VALUES_GIVEN, {}),              # pairs of 8-byte values: carried
    (8, 0x4000, 1, GATHER, {"value_carry": 4}),       # ... or gathered (gather_values=1)
    (4, 0x4000, None, VALUES_GIVEN, {})])             # pairs of 4-byte values: carried
def test_values_ride_as_one_word(vb, values_in, gather, mode, carry):
    """The MSD passes carry one word a key (a 32-bit position, or the
    value itself) and keep it as it is in the last (into `carried`); the
    local sort turns it into the value (the mode without the flag); the LSD
    fallback carries the same words to values_out. argsort writes no keys
    at the end (local sort, last LSD pass); every kernel is built with the
    same defines, and the temporaries hold a word a key."""
    settings = {} if gather is None else {"gather_values": gather}
    job = _run(1 << 21, "uint64", value_bytes=vb, values_in=values_in, **settings)
    parts = job.parts
    word = carry.get("value_carry", vb)
    assert job.sizes["carried"] == job.sizes["values"] == (1 << 21) * word
    msd = [args for name, _, _, args, _ in job.launches if name == "onesweep_pass"]
    lsd = [args for name, _, _, args, _ in job.launches if name == "onesweep_pass_persistent"]
    local = next(args for name, _, _, args, _ in job.launches if name == "msd_local_sort")
    for args in msd:
        assert args[VALUES] == (values_in, parts["carried"], parts["values"])
        assert args[MODE] == mode | KEEP_CARRIED and args[WRITE_KEYS] == 1
    for args in lsd:
        assert args[VALUES] == (values_in, job.values_out, parts["values"])
        assert args[MODE] == mode and args[WRITE_KEYS] == int(values_in != 0)
    assert local[1:4] == (parts["carried"], values_in, job.values_out)
    assert local[-2:] == (mode, int(values_in != 0))
    assert {tuple(d.items()) for _, d in job.kernels.values()} == {tuple(carry.items())}


def test_keys_alone_carry_nothing_and_write_their_keys():
    job = _run(1 << 22, "int64")
    for name, _, _, args, _ in job.launches:
        if name.startswith("onesweep_pass"):
            assert args[VALUES] == (0, 0, 0) and args[MODE] == VALUES_GIVEN
            assert args[WRITE_KEYS] == 1
    local = next(args for name, _, _, args, _ in job.launches if name == "msd_local_sort")
    assert local[1:4] == (0, 0, 0) and local[-1] == 1


def test_pairs_below_two_pow_20_are_onesweep():
    job = _run((1 << 20) - 1, "uint64", value_bytes=8, values_in=0x4000)
    assert {name for name, *_ in job.launches} == {"onesweep_histogram", "onesweep_pass"}
    job = _run(1 << 20, "uint64", value_bytes=8, values_in=0x4000)
    assert "msd_local_sort" in {name for name, *_ in job.launches}


def test_declared_priorities_by_payload():
    from cudasortkit.sdk.plugin import Request

    plugin = registry.plugins()["msd_local"]
    assert plugin.stable and plugin.pairs and plugin.makes_indices
    prio = lambda kind, n, vb: plugin.priority_for_request(Request(kind, "uint64", n, value_bytes=vb))  # noqa: E731
    assert prio("sort", 1 << 22, 0) == 19 and prio("sort", (1 << 22) - 1, 0) == 100
    assert prio("argsort", 1 << 20, 8) == prio("pairs", 1 << 20, 4) == 19
    assert prio("argsort", (1 << 20) - 1, 8) == 100 and prio("pairs", 1 << 32, 8) == 100
