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


def exchange(comm, opts, plan, send: dict, recv: dict, transport: str, timer=None, own: bool = False) -> None:
    """Move every piece of `plan` for every array name of `send` (this
    rank's send arrays: name -> a list, Piece.src_array picks one) into
    `recv` (this rank's received arrays, same names): the pieces between
    ranks, and with `own` this rank's pieces for itself too."""
    send = {k: v if isinstance(v, (list, tuple)) else [v] for k, v in send.items()}
    names = list(send)
    me = comm.rank
    mine = [p for p in plan if (p.src == me or p.dst == me) and (own or p.src != p.dst)]
    if transport == "nccl":
        sends = [(p.dst, _piece(send[k][p.src_array], p.src_offset, p.n)) for k in names for p in mine if p.src == me]
        recvs = [(p.src, _piece(recv[k], p.dst_offset, p.n)) for k in names for p in mine if p.dst == me]
        comm.send_recv(sends, recvs)
        if timer:
            timer.sub("exchange: transfer")
        return
    pull = opts.direction == "pull"
    copies = _copies(comm, opts, [p for p in mine if (p.dst if pull else p.src) == me], send, recv, timer)
    try:
        if _on_device(send[names[0]][0]):
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


def pull_in_segments(comm, opts, plan, send: dict, recv: dict, segment_of, segments: int, timer=None) -> list:
    """exchange() over CUDA IPC, receivers pulling, this rank's own pieces
    too, without waiting: the copies go on copy streams segment after
    segment (segment_of(piece) numbers them 0 .. segments - 1), and the
    result is, per segment, the events after which its pieces have
    landed (the caller makes its stream wait for them). finish_pull()
    ends it."""
    import cupy

    send = {k: v if isinstance(v, (list, tuple)) else [v] for k, v in send.items()}
    me = comm.rank
    mine = [p for p in plan if p.dst == me]
    copies = _copies(comm, options_pull(opts), mine, send, recv, timer)
    by_segment = [[] for _ in range(segments)]
    for p, c in zip(mine, _by_piece(copies, len(send))):
        by_segment[segment_of(p)].extend(c)
    main = cupy.cuda.get_current_stream()
    count = max(1, opts.streams or comm.size)
    streams = comm.copy_streams(count)
    ready = cupy.cuda.Event(disable_timing=True)
    ready.record(main)
    for stream in streams:
        stream.wait_event(ready)
    events = []
    for k, segment in enumerate(by_segment):
        used = set()
        for j, lane in enumerate(schedule(segment, opts, me, comm.size, count)):
            stream = streams[j]
            for dst, dst_at, src, src_at, nbytes in lane:
                libcuda.copy_async(_address(dst) + dst_at, _address(src) + src_at, nbytes, stream.ptr)
            used.add(j)
        marks = []
        for j in sorted(used):
            done = cupy.cuda.Event(disable_timing=True)
            done.record(streams[j])
            marks.append(done)
        events.append(marks)
    if timer:
        timer.sub("exchange: copies queued")
    return events


def options_pull(opts):
    from dataclasses import replace

    return replace(opts, direction="pull")


def finish_pull(comm, opts) -> None:
    """After pull_in_segments and the work waiting for it: wait for all of
    it, close the mappings, and the barrier after which senders may reuse
    their memory."""
    import cupy

    for stream in comm.copy_streams(max(1, opts.streams or comm.size)):
        stream.synchronize()
    cupy.cuda.get_current_stream().synchronize()
    comm.unshare(bool(opts.keep))
    comm.barrier()


def _piece(a, offset: int, n: int):
    return a[offset:offset + n]


def _copies(comm, opts, pieces, send: dict, recv: dict, timer) -> list:
    """(peer, destination, its byte offset, source, its byte offset, bytes)
    per piece and array name (names in `send`'s order), the peers' arrays
    shared (comm.share)."""
    names = list(send)
    pull = opts.direction == "pull"
    counts = [len(send[k]) for k in names]
    flat = [a for k in names for a in send[k]] if pull else [recv[k] for k in names]
    shared = comm.share(flat, bool(opts.keep))
    if timer:
        timer.sub("exchange: share")
    first = np.concatenate([[0], np.cumsum(counts)]).astype(int)
    copies = []
    for p in pieces:
        for k, name in enumerate(names):
            size = send[name][p.src_array].dtype.itemsize
            if pull:
                copies.append((p.src, recv[name], p.dst_offset * size, shared[p.src][first[k] + p.src_array],
                               p.src_offset * size, p.n * size))
            else:
                copies.append((p.dst, shared[p.dst][k], p.dst_offset * size, send[name][p.src_array],
                               p.src_offset * size, p.n * size))
    return copies


def _by_piece(copies, names: int) -> list:
    """copies grouped by piece (each piece has one copy per array name)."""
    return [copies[i:i + names] for i in range(0, len(copies), names)]


def _on_device(a) -> bool:
    return type(a).__module__.split(".")[0] == "cupy"


def _address(x) -> int:
    return x if isinstance(x, int) else int(x.data.ptr)


def _host_copies(copies) -> None:
    for _, dst, dst_at, src, src_at, nbytes in copies:
        dst.view(np.uint8)[dst_at:dst_at + nbytes] = src.view(np.uint8)[src_at:src_at + nbytes]


def ring_order(peers, me: int, size: int) -> list:
    """Peers in ring order from `me`: me + 1, me + 2, ... (mod size), `me`
    itself (local copies) last."""
    return sorted(set(peers), key=lambda p: (p - me - 1) % size)


def schedule(copies, opts, me: int, size: int, count: int = 0) -> list:
    """Per copy stream, its copies in order: ring (one stream, one peer at
    a time, nearest first, this rank itself last) or all (peer j of the
    ring on stream j mod `count` streams, default opts.streams or one per
    peer), each copy split into parts of at most opts.split bytes. With
    `count` given, lanes keep their stream numbers (empty ones too)."""
    peers = ring_order([c[0] for c in copies], me, size)
    fixed = count > 0
    count = 1 if opts.order == "ring" else (count or max(1, opts.streams or len(peers)))
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
    return lanes if fixed else [lane for lane in lanes if lane]


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
