"""Uniform rows of at most WIDEST keys of at most 4 bytes, sorted keys alone
by one warp each with a bitonic network in registers
(kernels/warp_bitonic.cu): what block_radix and rows run for such rows
where their `row_network` tunable reaches the row's length. One read and
one write of the keys, no shared-memory passes: a row of 256 keys is 8
words a lane."""
from __future__ import annotations

from cudasortkit.sdk.plugin import Tunable

#: The widest network a warp holds (32 words a lane).
WIDEST = 1024
#: The narrowest (two words a lane).
NARROWEST = 64
#: Threads of a block (BLOCK_SIZE / 32 rows a block).
BLOCK = 256
TEMPLATE = "warp_bitonic.cu"


def serves(row_len: int, limit: int, keys_only: bool, key_bytes: int = 4) -> bool:
    """Whether uniform rows of row_len keys (key_bytes wide) go to the warp
    network under a `row_network` limit (0: never): keys alone of at most 4
    bytes, rows longer than half the narrowest network (shorter ones would
    be mostly padding: 2^24 keys in rows of 16 took 0.30 ms here against
    0.18 in rows.cu, H100)."""
    return keys_only and key_bytes <= 4 and NARROWEST // 2 < row_len <= min(limit, WIDEST)


def row_network(values: tuple) -> Tunable:
    """The `row_network` tunable, declared here for every plugin that hands
    uniform rows to this network so that it means the same in each: the
    limit `serves` reads (rows of up to that many keys come here, 0 never),
    WIDEST by default; `values` are the limits the tuner tries."""
    return Tunable(WIDEST, values, "uniform rows of up to this many keys of at most 4 bytes, "
                   "sorted keys alone, go to a bitonic network of one warp each (0: never)")


def width(row_len: int) -> int:
    """A bitonic network's width for row_len keys (a row here, block_radix's
    1-D array too): the power of two that holds them, at least NARROWEST."""
    w = NARROWEST
    while w < row_len:
        w *= 2
    return w


def sort_rows(job, rows: int, row_len: int) -> None:
    """Launch warp_bitonic_rows over `rows` uniform rows of row_len keys
    (the network unrolled: NET_UNROLL 1)."""
    kernel = job.kernel(TEMPLATE, "warp_bitonic_rows",
                        defines={"net_keys": width(row_len), "net_unroll": 1, "wb_threads": BLOCK},
                        config={"block_size": BLOCK})
    job.launch(kernel, job.blocks(rows, BLOCK // 32), BLOCK, job.keys_in, job.keys_out, rows,
               row_len, job.desc_mask)
