"""What the chained-scan passes carry between passes, without a GPU
(cudasortkit/sdk/sweep.py): argsort's positions and 8-byte values gathered
from positions as 32-bit words (VALUE_CARRY 4), the caller's values as they
are otherwise; the defines, value modes and temporaries sweep_sort issues
for onesweep's run; and which counting runs refuse to be recorded."""
import types

import pytest

from cudasortkit.build.template import Kernel, KernelTemplate
from cudasortkit.gpu.device import DeviceLimits
from cudasortkit.sdk import registry, sweep


class RecordingJob:
    """The parts of a Job that sweep_sort uses, recording kernels (with
    their defines), temporaries and launches."""

    def __init__(self, plugin, dtype, n, value_bytes, values_in, config=None):
        self.plugin, self.dtype, self.n = plugin, dtype, n
        self.config = dict(config or registry.default_config(plugin, dtype, value_bytes, n))
        self.key_bytes = {"uint8": 1, "int16": 2, "uint32": 4, "float64": 8}[dtype]
        self.value_bytes, self.values_in = value_bytes, values_in
        self.keys_in, self.keys_out = 0x1000, 0x2000
        self.values_out = 0x3000 if value_bytes else 0
        self.desc_mask, self.limits, self.where = 0, DeviceLimits.sm90(), "test"
        self.defines, self.launches, self.parts = set(), [], []

    def kernel(self, template, name, defines=None, config=None, value_bytes=None):
        source = KernelTemplate(template, type(self.plugin).template_package, defines)
        self.defines.add(tuple(sorted((defines or {}).items())))
        return Kernel(None, name, template, source.signature(name, self.dtype, self.value_bytes,
                                                             self.config), registers=56)

    def alloc_parts(self, parts):
        self.parts = dict(parts)
        return {name: 0x100000 * (i + 1) for i, (name, _) in enumerate(parts)}

    def memset32(self, dst, value, count):
        pass

    def blocks(self, items, per_block):
        return -(-int(items) // int(per_block))

    def launch(self, kernel, grid, block, *args, shared=0):
        kernel.check(args, self.plugin.name, self.dtype, self.config)
        self.launches.append((kernel.name, args, shared))


def _passes(job):
    return [(args, shared) for name, args, shared in job.launches if name == "onesweep_pass"]


@pytest.mark.parametrize("dtype, vb, values_in, gather, mode, carry", [
    ("uint32", 8, 0, 0, sweep.INDICES, 4),            # argsort, int64 indices
    ("uint32", 4, 0, 0, sweep.INDICES, 4),            # argsort, int32 indices
    ("float64", 8, 0x4000, 1, sweep.GATHER, 4),       # pairs, 8-byte values gathered
    ("float64", 8, 0x4000, 0, sweep.VALUES_GIVEN, 8),  # pairs, 8-byte values carried
    ("uint32", 4, 0x4000, 0, sweep.VALUES_GIVEN, 4),   # pairs, 4-byte values
    ("uint32", 0, 0, 0, sweep.VALUES_GIVEN, 0)])       # keys alone
def test_onesweep_carries_positions_as_32_bit_words(dtype, vb, values_in, gather, mode, carry):
    plugin = registry.plugins()["onesweep"]
    n = 100_003
    config = dict(registry.default_config(plugin, dtype, vb, n), gather_values=gather)
    job = RecordingJob(plugin, dtype, n, vb, values_in, config)
    plugin.run(job)
    defines = {(("value_carry", carry),)} if carry != vb else {()}
    assert job.defines == defines
    assert job.parts["values"] == n * carry
    geometry = plugin.geometry(job.config)
    for args, shared in _passes(job):
        assert args[10] == mode and args[11] == int(not (vb and values_in == 0))
        assert args[3:6] == ((values_in, job.values_out, 0x100000 * 7) if vb else (0, 0, 0))
        assert shared == geometry.shared_bytes(job.key_bytes, carry)


def test_gather_needs_eight_byte_values_and_32_bit_positions():
    job = types.SimpleNamespace(value_bytes=8, values_in=0x10, n=1000)
    assert sweep.sweep_mode(job, gather=True) == sweep.GATHER
    assert sweep.sweep_mode(job, gather=False) == sweep.VALUES_GIVEN
    assert sweep.carry_bytes(job, sweep.GATHER) == 4
    job.n = sweep.NARROW_POSITIONS  # past 32-bit positions: the values are carried
    assert sweep.sweep_mode(job, gather=True) == sweep.VALUES_GIVEN
    assert sweep.carry_bytes(job, sweep.INDICES) == 8
    job.n, job.value_bytes = 1000, 4
    assert sweep.sweep_mode(job, gather=True) == sweep.VALUES_GIVEN
    job.values_in = 0
    assert sweep.sweep_mode(job) == sweep.INDICES and sweep.carry_bytes(job, sweep.INDICES) == 4
    job.value_bytes = 0
    assert sweep.sweep_mode(job) == sweep.VALUES_GIVEN and sweep.carry_bytes(job, 0) == 0
    assert sweep.carry_bytes(types.SimpleNamespace(value_bytes=8, n=5),
                             sweep.INDICES | sweep.KEEP_CARRIED) == 4


def test_sweep_defines_name_the_carry_only_where_it_narrows():
    job = types.SimpleNamespace(n=1000, value_bytes=8, limits=DeviceLimits.sm90())
    assert sweep.sweep_defines(job) == {}
    assert sweep.sweep_defines(job, 8) == {}
    assert sweep.sweep_defines(job, 4) == {"value_carry": 4}
    job.n = sweep.NARROW_STATUS_MAX + 1
    assert sweep.sweep_defines(job, 4) == {"wide_status": 1, "value_carry": 4}


@pytest.mark.parametrize("key_bytes, keys_in, promised, replayable", [
    (1, 0x1000, False, True), (2, 0x1002, False, True), (1, 0x1003, False, True),
    (2, 0x1001, False, False),   # not aligned to its size: copied first
    (1, 0x1000, True, False),    # a key_range promise: checked, waited on
    (4, 0x1000, False, False),   # the range read for the bins
    (8, 0x1000, False, False)])
def test_counting_records_only_runs_that_follow_from_their_shape(key_bytes, keys_in, promised,
                                                                 replayable):
    counting = registry.plugins()["counting"]
    assert counting.replayable
    job = types.SimpleNamespace(key_bytes=key_bytes, keys_in=keys_in, keys_out=0x8000)
    why = counting._not_replayable(job, promised)
    assert (why is None) == replayable, why
