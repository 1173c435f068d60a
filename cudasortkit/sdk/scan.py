"""Device-wide prefix sum (exclusive or inclusive) of 32- or 64-bit counts.

The shared scan primitive of the radix and counting sorts. Use it from a
plugin's run() like this::

    from cudasortkit.sdk.scan import DeviceScan

    scan = DeviceScan(job, n, count_bytes=4)    # buffers for n counts, allocated once
    scan(src_ptr, dst_ptr, inclusive=False)     # dst[i] = src[0] + ... + src[i-1]
    scan(src2_ptr, dst2_ptr, inclusive=True)    # reuse: no allocation per call
    scan.total_ptr                              # device address of the grand total

`buffer=` gives the level sums a home the caller owns (an address of
DeviceScan.buffer_bytes(n, count_bytes) bytes) instead of job.alloc: a
caller that captures the scan into a CUDA graph allocates before capture.

src and dst are device pointers (ints) to n unsigned counts of count_bytes
each (4 or 8; sums wrap like numpy.cumsum of uint32 / uint64); src may equal
dst (in place). Launches go on the job's stream through job.launch, and the
level buffers come from job.alloc, so errors name the calling plugin and the
buffers are freed with the job. The kernels are the core's own
(SCAN_TEMPLATES, kernels/scan.cu), compiled on the job's device.

How: scan-then-propagate. kernels/scan.cu scans tiles of
block_size * items_per_thread counts (per-thread serial scans + a padded
Blelloch scan of the thread totals, kernels/include/scan.cuh) and writes each tile's
total; the totals are scanned the same way, recursively, and added back.
All levels' total buffers are one allocation made in the constructor.
"""
from __future__ import annotations

from ..build.template import KernelTemplate

SCAN_BLOCK = 256
SCAN_ITEMS = 8
COUNT_BYTES = (4, 8)
#: Settings the scan kernels are built and tested with: threads per block (a
#: power of two) and counts each thread scans serially.
SCAN_BLOCK_CHOICES = (128, 256, 512)
SCAN_ITEMS_CHOICES = (4, 8, 16)
#: The scan's kernels for 32- and 64-bit counts (keys play no part: rendered
#: for uint32).
SCAN_TEMPLATES = {count_bytes: KernelTemplate("scan.cu", defines={"scan_count_bytes": count_bytes})
                  for count_bytes in COUNT_BYTES}
SCAN_DTYPE = "uint32"


def scan_template(count_bytes: int) -> KernelTemplate:
    if count_bytes not in COUNT_BYTES:
        raise ValueError(f"count_bytes must be 4 or 8, got {count_bytes!r}")
    return SCAN_TEMPLATES[count_bytes]


def scan_config(block_size: int = SCAN_BLOCK, items_per_thread: int = SCAN_ITEMS) -> dict:
    """The macros (BLOCK_SIZE, ITEMS_PER_THREAD) of one scan geometry."""
    return {"block_size": int(block_size), "items_per_thread": int(items_per_thread)}


def _levels(n: int, tile: int) -> list:
    """(counts scanned, tile totals written) of each level: n counts, then
    their tiles' totals, and so on down to a level of one tile."""
    levels = []
    length = n
    while True:
        tiles = max(1, -(-length // tile))
        levels.append((length, tiles))
        if tiles == 1:
            return levels
        length = tiles


class DeviceScan:
    """Prefix sums of n counts on `job`'s stream; see the module docstring."""

    def __init__(self, job, n: int, count_bytes: int = 4, *, block_size: int = SCAN_BLOCK,
                 items_per_thread: int = SCAN_ITEMS, buffer: int | None = None):
        n = int(n)
        if n < 0:
            raise ValueError(f"scan length must be >= 0, got {n}")
        self.job = job
        self.n = n
        self.count_bytes = int(count_bytes)
        template = scan_template(self.count_bytes)
        config = scan_config(block_size, items_per_thread)
        self.block = config["block_size"]
        self.tile = config["block_size"] * config["items_per_thread"]
        owner = job.plugin.name
        self._tiles = template.kernel(job.state, SCAN_DTYPE, 0, config, "csk_scan_tiles",
                                      owner=owner)
        self._add = template.kernel(job.state, SCAN_DTYPE, 0, config, "csk_scan_add", owner=owner)
        # Level k scans `lengths[k]` values and writes tile totals to sums[k].
        levels = _levels(n, self.tile)
        self.lengths = [length for length, _ in levels]
        sums = [tiles for _, tiles in levels]
        base = int(job.alloc(sum(sums) * self.count_bytes) if buffer is None else buffer)
        self._sums = []
        for count in sums:
            self._sums.append(base)
            base += count * self.count_bytes

    @staticmethod
    def buffer_bytes(n: int, count_bytes: int = 4, *, block_size: int = SCAN_BLOCK,
                     items_per_thread: int = SCAN_ITEMS) -> int:
        """The bytes of the level sums a scan of n counts needs: what
        `buffer` must hold where the caller gives it."""
        levels = _levels(int(n), int(block_size) * int(items_per_thread))
        return sum(tiles for _, tiles in levels) * count_bytes

    @staticmethod
    def total_offset(n: int, count_bytes: int = 4, *, block_size: int = SCAN_BLOCK,
                     items_per_thread: int = SCAN_ITEMS) -> int:
        """Where in the buffer the grand total of a scan of n counts lies
        (total_ptr less the buffer's address): after every level's sums but
        the last's."""
        levels = _levels(int(n), int(block_size) * int(items_per_thread))
        return sum(tiles for _, tiles in levels[:-1]) * count_bytes

    @property
    def total_ptr(self) -> int:
        """Device address of the sum of all n counts (valid after a call)."""
        return self._sums[-1]

    def __call__(self, src: int, dst: int, inclusive: bool = False) -> None:
        if self.n == 0:
            self.job.memset32(self.total_ptr, 0, self.count_bytes // 4)
            return
        self._level(0, int(src), int(dst), bool(inclusive))

    def _level(self, k: int, src: int, dst: int, inclusive: bool) -> None:
        job, length = self.job, self.lengths[k]
        tiles = job.blocks(length, self.tile)
        job.launch(self._tiles, tiles, self.block, src, dst, self._sums[k], length, int(inclusive))
        if tiles > 1:
            self._level(k + 1, self._sums[k], self._sums[k], False)
            job.launch(self._add, tiles, self.block, dst, self._sums[k], length)
