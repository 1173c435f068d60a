"""Communicators among the workers of one collective sort (collective.py).

A communicator joins `size` workers, each knowing its `rank`, and offers
what the collective sort needs, every call made by all ranks in the same
order:

    allgather(a)        a small host (NumPy) array from every rank, stacked
                        in rank order: shape (size,) + a.shape
    allreduce_sum(a)    the element-wise sum over the ranks of an int64
                        array (every rank gets it): a.shape, not size times it;
                        a device array stays on the device (nothing waits)
    alltoallv(buf, send_starts, send_counts, recv_counts)
                        this rank sends buf[send_starts[s] : send_starts[s] +
                        send_counts[s]] to every rank s and returns what it
                        received: one buffer, the pieces in source rank order
                        (recv_counts[s] elements from rank s)
    send_recv(sends, recvs)
                        sends: (peer, array) pairs, recvs: (peer, array to
                        fill) pairs; the k-th array this rank sends to a peer
                        fills the k-th array that peer receives from this
                        rank (a rank's pieces for itself too)
    share(arrays)       every rank's `arrays` as this rank can read and
                        write them (lists in rank order; this rank's own as
                        given): peers' device buffers mapped (CUDA IPC), a
                        thread's arrays themselves; unshare() ends it
    abort()             after a local error: other ranks' calls fail instead
                        of waiting forever (where the transport can)

Two transports:

- NcclComm: NCCL on CuPy arrays (cupy.cuda.nccl): device buffers move GPU to
  GPU (NVLink, PCIe, InfiniBand) and never through host memory; alltoallv and
  send_recv are one group of ncclSend/ncclRecv per call on the current CuPy
  stream; share maps the peers' buffers through CUDA IPC (ipc.py), for
  workers of one machine.
- ThreadComm: ranks that are threads of one process (a LocalCluster with
  processes=False), any array type; for tests and in-process clusters.

Both are made from a shared id that one place creates (new_id) and every
rank passes in (NCCL's unique id; for threads a key of this process's hubs).
"""
from __future__ import annotations

import threading
import uuid

import numpy as np

TRANSPORTS = ("nccl", "threads")


class CollectiveAborted(RuntimeError):
    """Another rank of the collective failed; its own error says why."""


def new_id(transport: str):
    """The id every rank's communicator is made from."""
    if transport == "nccl":
        from cupy.cuda import nccl

        return nccl.get_unique_id()
    if transport == "threads":
        return uuid.uuid4().hex
    raise ValueError(f"transport {transport!r}: one of {TRANSPORTS}")


def make(transport: str, uid, size: int, rank: int):
    """Rank `rank` of `size`'s communicator (NCCL: blocks until all ranks call it)."""
    return NcclComm(uid, size, rank) if transport == "nccl" else ThreadComm(uid, size, rank)


def nccl_available() -> bool:
    """Whether this process can make NCCL communicators (CuPy built with NCCL)."""
    try:
        from cupy.cuda import nccl

        return bool(getattr(nccl, "available", True)) and hasattr(nccl, "NcclCommunicator")
    except Exception:
        return False


def offsets(counts) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(np.asarray(counts, np.int64))]).astype(np.int64)


# ------------------------------------------------------------------ threads
class _Hub:
    """Where the ranks of one ThreadComm meet: a slot each and a barrier."""

    def __init__(self, size: int, timeout: float):
        self.slots = [None] * size
        self.barrier = threading.Barrier(size, timeout=timeout)


_hubs: dict = {}
_hubs_lock = threading.Lock()


class ThreadComm:
    #: seconds a rank waits for the others at one call before it fails
    timeout = 120.0

    def __init__(self, uid: str, size: int, rank: int):
        with _hubs_lock:
            self.hub = _hubs.setdefault(uid, _Hub(size, self.timeout))
        self.size, self.rank = size, rank
        self.arenas, self._streams = {}, []

    def _swap(self, item) -> list:
        """Every rank's item, in rank order."""
        try:
            self.hub.slots[self.rank] = item
            self.hub.barrier.wait()
            out = list(self.hub.slots)
            self.hub.barrier.wait()     # all have read before anyone writes again
            return out
        except threading.BrokenBarrierError:
            raise CollectiveAborted("cudasortkit.dask: another worker of this collective sort "
                                    "failed (its error is the sort's)") from None

    def allgather(self, a) -> np.ndarray:
        return np.stack([np.asarray(x) for x in self._swap(np.array(a, copy=True))])

    def allreduce_sum(self, a):
        """The sum, an array of a's library (ranks as threads may hold CuPy arrays)."""
        if type(a).__module__.split(".")[0] == "cupy":
            import cupy

            return cupy.stack(self._swap(a.astype(np.int64, copy=True))).sum(axis=0, dtype=np.int64)
        return np.sum(self._swap(np.array(a, np.int64, copy=True)), axis=0, dtype=np.int64)

    def alltoallv(self, buf, send_starts, send_counts, recv_counts):
        pieces = [buf[int(a):int(a) + int(c)].copy() for a, c in zip(send_starts, send_counts)]
        got = [p[self.rank] for p in self._swap(pieces)]
        if [len(g) for g in got] != [int(c) for c in recv_counts]:
            raise RuntimeError("cudasortkit.dask: received piece lengths differ from the counts agreed")
        return got[0][:0] if not any(len(g) for g in got) else _concatenate(got)

    def send_recv(self, sends, recvs) -> None:
        mail = {}
        for peer, a in sends:
            mail.setdefault(int(peer), []).append(a)
        boxes = self._swap(mail)
        taken = {}
        for peer, out in recvs:
            k = taken.get(int(peer), 0)
            got = boxes[int(peer)][self.rank][k]
            taken[int(peer)] = k + 1
            if len(got) != len(out):
                raise RuntimeError("cudasortkit.dask: a received piece's length differs from the counts agreed")
            out[...] = got
        self._swap(None)   # every rank has copied before any sender goes on

    #: ranks that are threads of one process share their arrays themselves
    ipc_ready = True

    def share(self, arrays, keep: bool = False) -> list:
        """Per rank, its arrays themselves."""
        return self._swap(list(arrays))

    def unshare(self, keep: bool = False) -> None:
        pass

    def barrier(self) -> None:
        self._swap(None)

    def copy_streams(self, count: int) -> list:
        return copy_streams(self, count)

    def abort(self) -> None:
        self.hub.barrier.abort()


def copy_streams(comm, count: int) -> list:
    """`count` non-blocking CuPy streams of `comm`'s, made once (exchange.py's copies)."""
    import cupy

    while len(comm._streams) < count:
        comm._streams.append(cupy.cuda.Stream(non_blocking=True))
    return comm._streams[:count]


def _concatenate(parts):
    mod = type(parts[0]).__module__.split(".")[0]
    if mod == "cupy":
        import cupy

        return cupy.concatenate(parts)
    return np.concatenate(parts)


# --------------------------------------------------------------------- NCCL
class NcclComm:
    """NCCL among one GPU per rank; every call on the current CuPy stream."""

    def __init__(self, uid, size: int, rank: int):
        from cupy.cuda import nccl

        self.nccl = nccl
        self.comm = nccl.NcclCommunicator(size, uid, rank)
        self.size, self.rank = size, rank
        self._links = None
        self.arenas, self._streams = {}, []
        self._connect()

    def _connect(self) -> None:
        """NCCL connects peers on their first send/recv: one element to every
        peer now, so the first sort does not pay for it."""
        import cupy

        ones = np.ones(self.size, np.int64)
        self.alltoallv(cupy.zeros(self.size, np.uint8), np.arange(self.size), ones, ones)
        self.allgather(np.zeros(1, np.int64))
        self.allreduce_sum(np.zeros(1, np.int64))
        from .ipc import probe

        self.ipc_ready = probe(self)   # whether share() works among these ranks

    def _stream(self):
        import cupy

        return cupy.cuda.get_current_stream()

    def allgather(self, a) -> np.ndarray:
        import cupy

        a = np.ascontiguousarray(a)
        send = cupy.asarray(a.reshape(-1).view(np.uint8))
        recv = cupy.empty(self.size * send.size, np.uint8)
        stream = self._stream()
        if send.size:
            self.comm.allGather(send.data.ptr, recv.data.ptr, send.size, self.nccl.NCCL_UINT8, stream.ptr)
        host = recv.get(stream=stream)   # waits for the gather
        return host.view(a.dtype).reshape((self.size,) + a.shape)

    def allreduce_sum(self, a):
        """A NumPy array's sum comes back to the host (waiting for it); a
        CuPy array's stays on the device, in stream order."""
        import cupy

        on_device = isinstance(a, cupy.ndarray)
        send = cupy.ascontiguousarray(a, np.int64) if on_device else cupy.asarray(np.ascontiguousarray(a, np.int64))
        recv = cupy.empty(send.shape, np.int64)
        stream = self._stream()
        if send.size:
            self.comm.allReduce(send.data.ptr, recv.data.ptr, send.size, self.nccl.NCCL_INT64,
                                self.nccl.NCCL_SUM, stream.ptr)
        return recv if on_device else recv.get(stream=stream)   # waits for the sum

    def alltoallv(self, buf, send_starts, send_counts, recv_counts):
        """One grouped ncclSend/ncclRecv per peer; the piece for this rank
        itself is a device copy. Enqueued on the current stream: later work
        on it sees the received data (nothing waits here)."""
        import cupy

        nccl, stream = self.nccl, self._stream()
        size = buf.dtype.itemsize
        at, rat = np.asarray(send_starts, np.int64), offsets(recv_counts)
        out = cupy.empty(int(rat[-1]), buf.dtype)
        me = self.rank
        if send_counts[me] != recv_counts[me]:
            raise RuntimeError("cudasortkit.dask: this rank's piece for itself differs from the counts agreed")
        if send_counts[me]:
            out[rat[me]:rat[me + 1]] = buf[at[me]:at[me] + int(send_counts[me])]
        nccl.groupStart()
        try:
            for peer in range(self.size):
                if peer == me:
                    continue
                if send_counts[peer]:
                    self.comm.send(buf.data.ptr + int(at[peer]) * size, int(send_counts[peer]) * size,
                                   nccl.NCCL_UINT8, peer, stream.ptr)
                if recv_counts[peer]:
                    self.comm.recv(out.data.ptr + int(rat[peer]) * size, int(recv_counts[peer]) * size,
                                   nccl.NCCL_UINT8, peer, stream.ptr)
        finally:
            nccl.groupEnd()
        return out

    def send_recv(self, sends, recvs) -> None:
        """One group of ncclSend/ncclRecv on the current stream (pieces in
        the order given, per peer); a rank's pieces for itself are device
        copies, matched in order."""
        nccl, stream = self.nccl, self._stream()
        mine = [a for p, a in sends if int(p) == self.rank]
        to_me = [a for p, a in recvs if int(p) == self.rank]
        if [len(a) for a in mine] != [len(a) for a in to_me]:
            raise RuntimeError("cudasortkit.dask: this rank's pieces for itself differ from the counts agreed")
        for a, out in zip(mine, to_me):
            if len(a):
                out[...] = a
        nccl.groupStart()
        try:
            for peer, a in sends:
                if int(peer) != self.rank and a.nbytes:
                    self.comm.send(a.data.ptr, a.nbytes, nccl.NCCL_UINT8, int(peer), stream.ptr)
            for peer, out in recvs:
                if int(peer) != self.rank and out.nbytes:
                    self.comm.recv(out.data.ptr, out.nbytes, nccl.NCCL_UINT8, int(peer), stream.ptr)
        finally:
            nccl.groupEnd()

    def links(self):
        """This communicator's CUDA IPC links (ipc.py), made on first use."""
        if self._links is None:
            from .ipc import IpcLinks

            self._links = IpcLinks(self)
        return self._links

    def share(self, arrays, keep: bool = False) -> list:
        """Per rank, the device addresses of its arrays in this process."""
        return self.links().share(arrays, keep)

    def unshare(self, keep: bool = False) -> None:
        if self._links is not None:
            self._links.unshare(keep)

    def barrier(self) -> None:
        self.allgather(np.zeros(1, np.int64))

    def copy_streams(self, count: int) -> list:
        return copy_streams(self, count)

    def abort(self) -> None:
        self.comm.abort()
