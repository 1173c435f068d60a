"""Plugins that sort shared-memory tiles (bitonic, merge_sort): a block
sorts block_size x items_per_thread keys (and their values) in shared
memory. TiledSortPlugin gives such a plugin its tile, the tile's shared
memory, the config check and the one-launch widening of the block."""
from __future__ import annotations

from typing import ClassVar

from ..dtypes import itemsize
from .plugin import SortPlugin

#: Tile blocks that must fit on one SM together: a valid config's tile takes
#: at most this share of the SM's shared memory.
TILE_BLOCKS_PER_SM = 2


class TiledSortPlugin(SortPlugin):
    """A plugin whose tunables include block_size and items_per_thread (and
    optionally one_launch), sorting tiles of their product in shared memory."""

    #: The widest block a one-launch sort uses (config one_launch=1).
    one_launch_block: ClassVar[int] = 512

    def tile(self, config) -> int:
        """Keys a block sorts: block_size x items_per_thread."""
        return config["block_size"] * config["items_per_thread"]

    def shared_bytes(self, config, key_bytes: int, value_bytes: int) -> int:
        """Shared memory of a tile: its keys and their values."""
        return self.tile(config) * (key_bytes + value_bytes)

    def valid_config(self, config, dtype, value_bytes, limits):
        """The tile fits in shared memory with room for TILE_BLOCKS_PER_SM
        blocks on one SM of the device."""
        return (config["block_size"] <= limits.max_threads_per_block
                and self.shared_bytes(config, itemsize(dtype), value_bytes)
                <= limits.shared_for_resident(TILE_BLOCKS_PER_SM))

    def launch_config(self, job) -> dict:
        """The config to run `job` with: job.config, except that with
        one_launch on (the default) an input past one tile that one wider
        block (up to one_launch_block threads, Job.one_block) holds gets that
        block_size, so it is sorted in one launch."""
        cfg = job.config
        if cfg.get("one_launch", 1) and job.n > self.tile(cfg):
            wide = job.one_block(cfg["items_per_thread"], job.key_bytes + job.value_bytes,
                                 self.one_launch_block)
            if wide is not None:
                return dict(cfg, block_size=wide)
        return cfg
