"""sdk.tiles.TiledSortPlugin: the tile, shared-memory, config and one-launch
rules that bitonic and merge_sort share (no GPU: a stub job)."""
import pytest

from cudasortkit.gpu.device import DeviceLimits
from cudasortkit.plugins.bitonic import BitonicSort
from cudasortkit.plugins.merge_sort import MergeSort
from cudasortkit.sdk.job import Job
from cudasortkit.sdk.tiles import TILE_BLOCKS_PER_SM, TiledSortPlugin

LIMITS = DeviceLimits.sm90()
SHARED = ("tile", "shared_bytes", "valid_config", "launch_config")


class StubJob:
    """What launch_config reads of a Job; one_block is Job's own."""
    one_block = Job.one_block

    def __init__(self, config, n, key_bytes=4, value_bytes=0):
        self.config, self.n = config, n
        self.key_bytes, self.value_bytes = key_bytes, value_bytes
        self.limits = LIMITS


@pytest.mark.parametrize("cls", [BitonicSort, MergeSort])
def test_bitonic_and_merge_sort_take_the_tile_rules_from_the_sdk(cls):
    assert issubclass(cls, TiledSortPlugin)
    assert not set(SHARED) & set(vars(cls)), "one definition, in sdk/tiles.py"
    assert cls.one_launch_block == 512


@pytest.mark.parametrize("cls", [BitonicSort, MergeSort])
def test_tile_shared_memory_and_config_check(cls):
    plugin = cls()
    config = dict(plugin.default_config(), block_size=256, items_per_thread=8)
    assert plugin.tile(config) == 2048
    assert plugin.shared_bytes(config, 4, 8) == 2048 * 12
    assert plugin.valid_config(config, "uint32", 8, LIMITS)
    big = dict(config, block_size=512, items_per_thread=16)  # 8192 x 16 bytes: 128 KiB
    assert 8192 * 16 > LIMITS.shared_for_resident(TILE_BLOCKS_PER_SM)
    assert not plugin.valid_config(big, "uint64", 8, LIMITS)
    assert not plugin.valid_config(dict(config, block_size=2048), "uint8", 0, LIMITS)


@pytest.mark.parametrize("cls", [BitonicSort, MergeSort])
def test_launch_config_widens_the_block_for_one_launch(cls):
    plugin = cls()
    config = dict(plugin.default_config(), block_size=256, items_per_thread=8, one_launch=1)
    # within one tile: the job's own config
    assert plugin.launch_config(StubJob(config, 2048)) is config
    # 3000 keys: a 512-thread block (4096 keys) holds them
    assert plugin.launch_config(StubJob(config, 3000)) == dict(config, block_size=512)
    # past what the widest one-launch block holds, or one_launch off: unchanged
    assert plugin.launch_config(StubJob(config, 5000)) is config
    off = dict(config, one_launch=0)
    assert plugin.launch_config(StubJob(off, 3000)) is off
