"""DeviceLimits without a GPU: read from pycuda-style attributes, the H100
default, the occupancy helper and the shared-memory budget per resident
block; and every built-in plugin's default config valid on an H100."""
import dataclasses
from types import SimpleNamespace

import pytest

from cudasortkit.sdk import registry
from cudasortkit.gpu.device import DeviceLimits, current_limits, gpu_available
from cudasortkit.build.template import Kernel

H100 = DeviceLimits.sm90()

#: What pycuda's Device.get_attributes() gives on an H100 SXM (the parts read).
H100_ATTRIBUTES = {
    "MULTIPROCESSOR_COUNT": 132, "WARP_SIZE": 32, "MAX_THREADS_PER_BLOCK": 1024,
    "MAX_THREADS_PER_MULTIPROCESSOR": 2048, "MAX_BLOCKS_PER_MULTIPROCESSOR": 32,
    "MAX_REGISTERS_PER_BLOCK": 65536, "MAX_REGISTERS_PER_MULTIPROCESSOR": 65536,
    "MAX_SHARED_MEMORY_PER_BLOCK": 49152, "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN": 232448,
    "MAX_SHARED_MEMORY_PER_MULTIPROCESSOR": 233472, "RESERVED_SHARED_MEMORY_PER_BLOCK": 1024,
}


def _attributes(values):
    """pycuda's form: a dict keyed by device_attribute members, and the enum."""
    names = SimpleNamespace(**{name: f"attr:{name}" for name in H100_ATTRIBUTES})
    return {getattr(names, name): value for name, value in values.items()}, names


def test_read_from_device_attributes():
    assert DeviceLimits.from_attributes(*_attributes(H100_ATTRIBUTES)) == H100


def test_attributes_older_drivers_lack_fall_back():
    old = {k: v for k, v in H100_ATTRIBUTES.items() if k not in (
        "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN", "RESERVED_SHARED_MEMORY_PER_BLOCK",
        "MAX_BLOCKS_PER_MULTIPROCESSOR")}
    limits = DeviceLimits.from_attributes(*_attributes(old))
    assert limits.shared_per_block_optin == limits.shared_per_block == 49152
    assert limits.shared_reserved_per_block == 0 and limits.max_blocks_per_sm == 32


def test_h100_default():
    assert H100.sm_count == 132 and H100.shared_per_block == 48 * 1024
    assert H100.shared_per_block_optin == 227 * 1024 and H100.shared_per_sm == 228 * 1024
    with pytest.raises(dataclasses.FrozenInstanceError):
        H100.sm_count = 1


def test_current_limits_without_a_gpu():
    if gpu_available():
        pytest.skip("a GPU is here: current_limits() reads it")
    assert current_limits() == H100


@pytest.mark.parametrize("block, registers, shared, expected", [
    (512, 32, 0, 4),            # threads: 2048 / 512
    (512, 64, 0, 2),            # registers: 65536 / (64 * 512)
    (256, 255, 0, 1),           # 255 registers round up to 256 a thread: 65536 / 65536
    (512, 128, 0, 1),           # 64K registers a block: exactly one fits
    (1024, 128, 0, 0),          # 128K registers a block: none
    (128, 16, 0, 16),           # threads
    (32, 16, 0, 32),            # the SM's block limit
    (512, 32, 89 * 1024, 2),    # shared: 228 KiB / (89 KiB + 1 KiB reserved)
    (512, 32, 113 * 1024, 2),   # two blocks at half an SM less the reserve
    (512, 32, 113 * 1024 + 1, 1),
    (256, 32, 227 * 1024, 1),   # the opt-in maximum
    (256, 32, 227 * 1024 + 1, 0),
    (2048, 16, 0, 0),           # more threads than a block may have
])
def test_resident_blocks(block, registers, shared, expected):
    assert H100.resident_blocks(block, registers, shared) == expected


def test_resident_blocks_matches_the_old_radix_calculator():
    """radix's hand-written grid used: min(threads, registers, shared with a
    1 KiB reserve, 32) per SM; the helper gives the same on an H100."""
    def old(block, regs, shared):
        warp_regs = -(-regs * 32 // 256) * 256
        return min(2048 // block, 65536 // (warp_regs * (block // 32)),
                   233472 // (shared + 1024), 32)

    for block in (128, 256, 512):
        for regs in (24, 40, 64, 72, 96, 128):
            for shared in (16 * 1024, 40 * 1024, 87 * 1024, 100 * 1024):
                assert H100.resident_blocks(block, regs, shared) == max(0, old(block, regs, shared))


def test_kernel_resident_blocks_counts_static_shared_memory():
    kernel = Kernel(None, "k", "k.cu", "P", registers=32, static_shared=20 * 1024)
    assert kernel.resident_blocks(H100, 256, 90 * 1024) == 2  # 110 KiB + 1 KiB a block
    assert kernel.resident_blocks(H100, 256, 100 * 1024) == 1


def test_shared_for_resident():
    assert H100.shared_for_resident(1) == 227 * 1024  # capped at the opt-in limit
    assert H100.shared_for_resident(2) == 113 * 1024
    assert H100.shared_for_resident(4) == 56 * 1024
    sm75 = dataclasses.replace(H100, shared_per_sm=64 * 1024, shared_per_block_optin=64 * 1024)
    assert sm75.shared_for_resident(2) == 31 * 1024


@pytest.mark.parametrize("name", ["bitonic", "counting", "merge_sort", "onesweep", "radix"])
def test_default_configs_are_valid_on_an_h100(name):
    plugin = registry.plugins()[name]
    for dtype in plugin.dtypes:
        for vb in ((0, 4, 8) if plugin.pairs else (0,)):
            assert plugin.valid_config(plugin.default_config(dtype, vb), dtype, vb, H100)


@pytest.mark.parametrize("name", ["bitonic", "counting", "merge_sort", "onesweep", "radix"])
def test_a_device_with_less_shared_memory_has_fewer_valid_configs(name):
    """valid_config follows the limits it is given, not constants."""
    import itertools

    plugin = registry.plugins()[name]
    space = plugin.config_space()
    small = dataclasses.replace(H100, shared_per_sm=64 * 1024, shared_per_block_optin=64 * 1024)

    def valid(limits):
        return {combo for combo in itertools.product(*space.values())
                if plugin.valid_config(dict(zip(space, combo)), "uint64", 8, limits)}

    on_h100, on_small = valid(H100), valid(small)
    assert on_small < on_h100


def test_device_limits_are_read_once_without_a_context(monkeypatch):
    """current_limits() (what selection passes valid_config) asks the driver
    for attributes only: no context is made, and only once per device."""
    from cudasortkit.gpu import device

    attrs, names = _attributes(H100_ATTRIBUTES)
    asked = []

    class Device:  # no retain_primary_context: making a context would fail
        def __init__(self, ordinal):
            self.ordinal = ordinal

        def get_attributes(self):
            asked.append(self.ordinal)
            return attrs

    fake_driver = SimpleNamespace(Device=Device, device_attribute=names)
    monkeypatch.setattr(device, "_driver", lambda: fake_driver)
    monkeypatch.setattr(device, "gpu_available", lambda: True)
    monkeypatch.setattr(device, "_limits", {})
    monkeypatch.setenv("CUDASORTKIT_DEVICE", "3")
    assert current_limits() == H100 and device.current_limits() == H100
    assert device.device_limits(3) == H100 and asked == [3]
