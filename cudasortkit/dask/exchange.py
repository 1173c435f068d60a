"""Moving the collective sort's pieces (layout.Piece) from the senders' send
arrays into the receivers' arrays, one array name at a time in one call
(keys, and values where there are), skipping each rank's pieces for itself
(collective.py reads those where they are). Two transports
(options.exchange):

- "nccl": one group of ncclSend/ncclRecv (comm.send_recv), the pieces
  between two ranks in the plan's order on both sides.
- "ipc": the ranks share their arrays (comm.share: CUDA IPC among one
  machine's GPUs; threads share theirs) and copy engines move the pieces
  (cuMemcpyAsync on copy streams; no SM, no staging copy): receivers copy
  out of the senders' send arrays (direction=pull) or senders into the
  receivers' arrays (push), every peer's pieces at once or one peer at a
  time in ring order (order=all | ring), on `streams` copy streams, in
  copies of at most `split` bytes. The copies are waited for, the
  mappings closed (unless keep), then a barrier: after it no rank reads or
  writes another's memory, so each may free or reuse its own.

`comm` is collective.Ordered (logical ranks). Nothing here knows Dask;
tests/test_dask_collective_cpu.py runs both transports with ThreadComm.
"""
from __future__ import annotations

import numpy as np

from ..gpu import libcuda


def exchange(comm, opts, plan, send: dict, recv: dict, transport: str, timer=None) -> None:
    """Move every piece of `plan` with src != dst for every array name of
    `send` (this rank's send arrays) into `recv` (this rank's received
    arrays, same names)."""
    names = list(send)
    me = comm.rank
    if transport == "nccl":
        sends = [(p.dst, send[k][p.src_offset:p.src_offset + p.n]) for k in names for p in plan
                 if p.src == me and p.dst != me]
        recvs = [(p.src, recv[k][p.dst_offset:p.dst_offset + p.n]) for k in names for p in plan
                 if p.dst == me and p.src != me]
        comm.send_recv(sends, recvs)
        if timer:
            timer.sub("exchange: transfer")
        return
    pull = opts.direction == "pull"
    shared = comm.share([send[k] if pull else recv[k] for k in names], bool(opts.keep))
    if timer:
        timer.sub("exchange: share")
    copies = []   # (peer, destination, its byte offset, source, its byte offset, bytes)
    for k, name in enumerate(names):
        size = send[name].dtype.itemsize
        for p in plan:
            if p.src == p.dst:
                continue
            if pull and p.dst == me:
                copies.append((p.src, recv[name], p.dst_offset * size, shared[p.src][k], p.src_offset * size,
                               p.n * size))
            elif not pull and p.src == me:
                copies.append((p.dst, shared[p.dst][k], p.dst_offset * size, send[name], p.src_offset * size,
                               p.n * size))
    try:
        if _on_device(send[names[0]]):
            _device_copies(comm, opts, copies)
        else:
            _host_copies(copies)
        if timer:
            timer.sub("exchange: transfer")
    finally:
        comm.unshare(bool(opts.keep))
    comm.barrier()
    if timer:
        timer.sub("exchange: barrier")


def _on_device(a) -> bool:
    return type(a).__module__.split(".")[0] == "cupy"


def _address(x) -> int:
    return x if isinstance(x, int) else int(x.data.ptr)


def _host_copies(copies) -> None:
    for _, dst, dst_at, src, src_at, nbytes in copies:
        dst.view(np.uint8)[dst_at:dst_at + nbytes] = src.view(np.uint8)[src_at:src_at + nbytes]


def ring_order(peers, me: int, size: int) -> list:
    """Peers in ring order from `me`: me + 1, me + 2, ... (mod size)."""
    return sorted(set(peers), key=lambda p: (p - me) % size)


def schedule(copies, opts, me: int, size: int) -> list:
    """Per copy stream, its copies in order: ring (one stream, one peer at
    a time, nearest first) or all (peer j of the ring on stream j mod
    streams), each copy split into parts of at most opts.split bytes."""
    peers = ring_order([c[0] for c in copies], me, size)
    count = 1 if opts.order == "ring" else max(1, opts.streams or len(peers))
    lanes = [[] for _ in range(count)]
    for j, peer in enumerate(peers):
        lane = lanes[0 if opts.order == "ring" else j % count]
        for c in copies:
            if c[0] != peer:
                continue
            _, dst, dst_at, src, src_at, nbytes = c
            step = opts.split or nbytes
            for at in range(0, nbytes, max(1, step)):
                lane.append((dst, dst_at + at, src, src_at + at, min(step, nbytes - at)))
    return [lane for lane in lanes if lane]


def _device_copies(comm, opts, copies) -> None:
    """The copies on copy streams that start after the current stream's
    work and that the current stream then waits for; returns once done."""
    import cupy

    main = cupy.cuda.get_current_stream()
    lanes = schedule(copies, opts, comm.rank, comm.size)
    streams = comm.copy_streams(len(lanes))
    ready = cupy.cuda.Event(disable_timing=True)
    ready.record(main)
    for stream, lane in zip(streams, lanes):
        stream.wait_event(ready)
        for dst, dst_at, src, src_at, nbytes in lane:
            libcuda.copy_async(_address(dst) + dst_at, _address(src) + src_at, nbytes, stream.ptr)
        done = cupy.cuda.Event(disable_timing=True)
        done.record(stream)
        main.wait_event(done)
    main.synchronize()
