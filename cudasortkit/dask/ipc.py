"""CUDA IPC among the ranks of one NCCL communicator whose workers share a
machine (comm.NcclComm.share): every rank's device arrays mapped into every
other rank's process, so that copy engines move the collective's pieces GPU
to GPU (exchange.py) with no SM and no staging buffer.

share(arrays): each rank exports the allocation holding each array
(cuIpcGetMemHandle of the allocation's base: pools hand out parts of larger
allocations) and its offset in it; one allgather of the handles; each rank
opens its peers' (cuIpcOpenMemHandle, peer access enabled as needed) and
gets, per rank, the arrays' addresses in its own process (its own as they
are). Rules it keeps:

- a mapping is opened once per (peer, handle) and reused while open;
- unshare(keep=False) closes every mapping; the exporter may free or reuse
  its memory only after every peer has closed its mappings of it, so
  callers unshare before the barrier that ends the exchange;
- with keep=True mappings stay open between exchanges, for memory the
  exporter keeps (collective.py's send arena); a mapping of a peer's handle
  that the peer no longer shares is closed at the next share, before that
  exchange's barrier, and an exporter frees a replaced allocation only
  after that barrier (buffers.Arena.retire).

Nothing here runs without a GPU; the logic that uses it (exchange.py) runs
on the CPU with ThreadComm, whose ranks share their arrays themselves.
"""
from __future__ import annotations

import numpy as np

from ..gpu import libcuda

#: Bytes of one shared array's row in the allgather: handle, offset, size, flags.
ROW = 64 + 8 + 8 + 8


class IpcLinks:
    """One rank's mappings of its peers' device memory."""

    def __init__(self, comm):
        self.comm = comm
        self.opened = {}          # (peer, handle bytes) -> base address in this process
        self.used = set()         # keys mapped by the current share

    def share(self, arrays, keep: bool = False) -> list:
        """Per rank (rank order), the device addresses of its `arrays` in
        this process: every rank passes as many arrays, in one order. A
        rank that cannot export raises after the allgather, and so does
        every other (no rank is left waiting)."""
        me = self.comm.rank
        rows = np.zeros((len(arrays) + 1, ROW), np.uint8)    # the last row: this rank's error flag
        failed = None
        try:
            for k, a in enumerate(arrays):
                if a is None or not a.nbytes:
                    continue
                ptr = int(a.data.ptr)
                base, size = libcuda.address_range(ptr)
                rows[k, :64] = np.frombuffer(libcuda.ipc_handle(base), np.uint8)
                rows[k, 64:88] = np.array([ptr - base, size, 1], np.int64).view(np.uint8)
        except Exception as e:   # raised below, once every rank has its table
            failed, rows[-1, 0] = e, 1
        table = self.comm.allgather(rows)
        if failed is not None:
            raise failed
        if table[:, -1, 0].any():
            raise RuntimeError("cudasortkit.dask: another worker could not share its device memory "
                               "(CUDA IPC); its error is the sort's")
        out = []
        for peer in range(self.comm.size):
            if peer == me:
                out.append([0 if a is None or not a.nbytes else int(a.data.ptr) for a in arrays])
                continue
            addresses = []
            for k in range(len(arrays)):
                row = table[peer, k]
                offset, _, present = (int(v) for v in row[64:88].view(np.int64))
                if not present:
                    addresses.append(0)
                    continue
                key = (peer, row[:64].tobytes())
                if key not in self.opened:
                    self.opened[key] = libcuda.ipc_open(key[1])
                self.used.add(key)
                addresses.append(self.opened[key] + offset)
            out.append(addresses)
        if keep:   # peers' handles not shared this time: their memory may go once this exchange ends
            for key in [k for k in self.opened if k not in self.used]:
                libcuda.ipc_close(self.opened.pop(key))
        return out

    def unshare(self, keep: bool = False) -> None:
        """Close the mappings (all of them unless `keep`); call before the
        barrier after which exporters may free their memory."""
        if not keep:
            for key in list(self.opened):
                libcuda.ipc_close(self.opened.pop(key))
        self.used.clear()

    def close(self) -> None:
        self.unshare(False)


def probe(comm) -> bool:
    """Whether every rank can map every other rank's device memory: each
    shares a small buffer, writes its rank into the next rank's through the
    mapping and checks what its previous rank wrote into its own. All ranks
    take the same steps and agree on the answer (a failure anywhere is
    False everywhere)."""
    def agreed(ok) -> bool:
        return bool(comm.allgather(np.array([bool(ok)], np.int64)).all())

    links = buf = addresses = None
    try:
        import cupy

        buf = cupy.full(1, -1, np.int64)
        links, ok = IpcLinks(comm), True
    except Exception:
        ok = False
    if agreed(ok):
        try:
            addresses = links.share([buf])
        except Exception:
            ok = False
        if agreed(ok):
            try:
                mine = cupy.full(1, comm.rank, np.int64)
                stream = cupy.cuda.get_current_stream()
                libcuda.copy_async(addresses[(comm.rank + 1) % comm.size][0], int(mine.data.ptr), 8, stream.ptr)
                stream.synchronize()
            except Exception:
                ok = False
            if agreed(ok):
                ok = int(buf.get()[0]) == (comm.rank - 1) % comm.size
        try:
            links.close()
        except Exception:
            ok = False
    return agreed(ok)
