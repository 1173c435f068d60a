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

    def __init__(self, plugin, dtype, n, limits=None):
        self.plugin, self.dtype, self.n = plugin, dtype, n
        self.config = plugin.default_config(dtype, 0)
        self.key_bytes, self.value_bytes = 8, 0
        self.keys_in, self.keys_out, self.values_in = 0x1000, 0x2000, 0
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
        return dict(self.parts)

    def memset32(self, dst, value, count):
        self.memsets.append((dst, value, count))

    def blocks(self, items, per_block):
        return -(-int(items) // int(per_block))

    def launch(self, kernel, grid, block, *args, shared=0):
        kernel.check(args, self.plugin.name, self.dtype, self.config)
        assert shared <= self.limits.shared_per_block_optin, (kernel.name, shared)
        self.launches.append((kernel.name, grid, block, args, shared))


def _run(n, dtype="float64", limits=None):
    plugin = registry.plugins()["msd_local"]
    job = RecordingJob(plugin, dtype, n, limits)
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
