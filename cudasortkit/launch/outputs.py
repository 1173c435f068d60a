"""The steps every GPU job takes to set up its outputs, whoever runs it (a
call through launch/run.py, a prepared call, the host pipeline's in-core
sort, an out-of-core piece):

- temporaries from the device pool, kept in the job's list and freed
  together (`temporary`, `free_all`);
- argsort's input indices, start, start + 1, ... (`index_buffer`);
- result spans filled with gpu.arrays.POISON_BYTE when tests set it, so an
  element a plugin forgets to write shows up (`poison`).

Where the results live (the caller's arrays, host downloads, persistent
pieces) and in-place backups stay with each caller. These are plain
functions over a list the caller owns: a prepared call (the per-call fast
path) pays a function call each, and no object more than before."""
from __future__ import annotations

from ..gpu import arrays

def temporary(state, bufs: list, nbytes: int, who) -> int:
    """The device address of nbytes from the state's pool, the buffer kept
    in `bufs` (free_all frees it). `who` names it if memory runs out."""
    buf = state.allocate(nbytes, who)
    bufs.append(buf)
    return int(buf)


def free_all(bufs: list) -> None:
    """Free a job's temporaries (the pool reuses blocks in the stream's
    order, so work already queued on it still reads them safely)."""
    for buf in bufs:
        buf.free()
    bufs.clear()


def index_buffer(state, bufs: list, n: int, who, fill, index_bytes: int = 8,
                 start: int = 0) -> int:
    """A temporary of n argsort indices (index_bytes each) = start,
    start + 1, ... queued on the state's stream by
    `fill(state, ptr, n, index_bytes=, start=)`: the core's iota
    (build.corekernels.iota64), or the host pipeline's launch of it."""
    ptr = temporary(state, bufs, n * index_bytes, who)
    fill(state, ptr, n, index_bytes=index_bytes, start=start)
    return ptr


def poison(state, ptr: int, nbytes: int, ptr2: int = 0, nbytes2: int = 0) -> None:
    """Fill the output spans (ptr, nbytes) and (ptr2, nbytes2) with
    arrays.POISON_BYTE when tests set it; a span at address 0 or of 0
    bytes is no output."""
    byte = arrays.POISON_BYTE
    if byte is None:
        return
    for p, nb in ((ptr, nbytes), (ptr2, nbytes2)):
        if p and nb:
            state.cuda.memset_d8_async(p, byte, nb, state.stream)
