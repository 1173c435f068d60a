"""The host pipeline's own kernels (kernels/hostpipe.cu): encoded words of
sampled keys and per-bucket counts against splitters; and argsort indices of
one piece of a bigger array (the core's iota, kernels/util.cu). Launched on
the device state's stream; errors name the kernel and "core (host pipeline)"."""
from __future__ import annotations

from ..build.corekernels import iota64
from ..build.template import KernelTemplate

HOSTPIPE = KernelTemplate("hostpipe.cu")
BLOCK = 256
CONFIG = {"block_size": BLOCK}
#: Most splitters csk_bucket_count takes (its shared-memory table).
MAX_SPLITTERS = 1023
OWNER = "core (host pipeline)"


def _launch(state, dtype, name: str, n: int, args) -> None:
    kernel = HOSTPIPE.kernel(state, dtype, 0, CONFIG, name, owner=OWNER)
    grid = max(1, min(-(-int(n) // BLOCK), state.limits.sm_count * 16))
    kernel.launch(state, state.stream, (grid, 1), (BLOCK, 1, 1), args, owner=OWNER, dtype=dtype)


def iota64_from(state, ptr: int, n: int, start: int, index_bytes: int = 8) -> None:
    """n int64 (index_bytes 4: int32) at ptr = start, start + 1, ..."""
    iota64(state, ptr, n, OWNER, index_bytes, start=start, max_grid=state.limits.sm_count * 16)


def encode_words(state, dtype: str, keys: int, n: int, mask: int, out: int) -> None:
    """n uint64 at out = the encoded words (keys.cuh csk_encode) of n keys."""
    if n > 0:
        _launch(state, dtype, "csk_encode_words", n, (int(keys), int(n), int(mask), int(out)))


def bucket_count(state, dtype: str, keys: int, n: int, mask: int, splitters: int,
                 nsplit: int, counts: int) -> None:
    """counts[b] (uint64, nsplit + 1 of them) += keys whose encoded word has
    b splitters at or below it."""
    if not 0 <= nsplit <= MAX_SPLITTERS:
        raise ValueError(f"bucket_count takes at most {MAX_SPLITTERS} splitters, got {nsplit}")
    if n > 0:
        _launch(state, dtype, "csk_bucket_count", n,
                (int(keys), int(n), int(mask), int(splitters), int(nsplit), int(counts)))
