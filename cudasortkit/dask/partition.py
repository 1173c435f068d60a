"""The partition-first collective sort (options method=partition): every
rank cuts its unsorted chunks into buckets of key ranges, each bucket goes
to the rank whose output holds it, and each receiver sorts its buckets into
its output one by one as they land, so that moving the keys hides under the
sorts and nothing is merged. Called by collective.sort_on_rank after its
checkpoint; the output is the same as the merge method's.

1. splitters: every rank samples SAMPLES keys in all (each its share, in
   proportion to its keys), every rank gathers all samples' ordered words
   and picks the same splitter words from them (splitter_fractions): each
   receiver's range cut into segments_per_receiver buckets of about equal
   counts, and a bracket of narrow buckets around every receiver boundary,
   so that the bucket the boundary falls in is small.
2. partition: kernels/dask_partition.cu (counting.partition) lays each
   chunk out in the rank's send arena bucket after bucket, each bucket in
   index order: the keys; for argsort their positions in the chunk; for
   sort_by_key the values. Every rank then knows every chunk's bucket sizes
   (an allgather), so where every bucket lies in the output.
3. split buckets: a bucket with a receiver boundary strictly inside is cut
   exactly: each rank sorts every chunk's elements of those buckets (stably)
   into the union arena, and cuts.exact_cuts over those runs places each
   boundary (ties by rank for a plain sort, by global index otherwise: the
   runs are chunks, so global index order is run order, then order within
   the run). Every rank learns the cuts.
4. exchange and sort (layout.segment_plan): receiver d's output is its
   buckets in key order, each a segment made of the bucket's pieces from
   every chunk in global order, so that a stable sort of the segment keeps
   equal keys in global index order. Over CUDA IPC the receiver pulls the
   segments one after another on copy streams and sorts each (argsort:
   indices made first, chunk start + position) as soon as it has landed
   (exchange.pull_in_segments); otherwise every piece moves first.

Nothing here knows Dask; tests/test_dask_collective_cpu.py runs it with
threads for ranks against NumPy.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import api as csk
from . import counting, layout
from .buffers import Arena, aligned, receive_buffers
from .cuts import Run, exact_cuts
from .exchange import exchange, finish_pull, pull_in_segments

#: Keys sampled over all ranks together for the splitters.
SAMPLES = 1 << 16
#: Buckets a receiver's range is cut into by default (options segments=0):
#: its sorts start as soon as the first has landed, so the exchange hides
#: under them; fewer where a bucket would hold less than MIN_BUCKET keys.
SEGMENTS = 8
MIN_BUCKET = 1 << 22
#: Splitter words fit a byte's buckets: at most 255 of them.
MOST_SPLITTERS = 255
#: Each receiver boundary is bracketed by splitters this many standard
#: deviations of a sampled quantile (sqrt(p (1 - p) / SAMPLES) at most
#: 0.5 / sqrt(SAMPLES)) to each side, and one at the boundary's own quantile:
#: the boundary then almost always falls inside a bucket of about 1% of the
#: keys, the only elements that are sorted before the exchange to place it
#: exactly (union_runs).
BRACKET_SIGMAS = 4.0
#: Splitters rounded to the top byte's boundaries (options align=1) where
#: that keeps this share of them apart (the receivers' segments, never the
#: brackets): buckets of uniform keys then start on a top digit.
ALIGN_KEEP = 0.9


def segments_per_receiver(opts, ranks: int, total: int) -> int:
    """Buckets each receiver's range is cut into (besides the brackets)."""
    if opts.segments:
        want = opts.segments
    else:
        want = max(1, min(SEGMENTS, total // max(1, ranks * MIN_BUCKET)))
    room = (MOST_SPLITTERS + 1 - 3 * (ranks - 1)) // ranks     # every bucket, brackets included, in 256
    return max(1, min(want, room))


def splitter_fractions(starts, total: int, per_receiver: int, samples: int) -> tuple:
    """(segment fractions, bracket fractions) of the global order where the
    splitters go: per receiver r, per_receiver - 1 evenly inside its range
    [starts[r], starts[r+1]); per inner boundary, the boundary itself and
    BRACKET_SIGMAS sample deviations to each side (no brackets where they
    would not fit MOST_SPLITTERS: the segments' splitters alone)."""
    f = np.asarray(starts, np.float64) / max(1, total)
    segments = [f[r] + (f[r + 1] - f[r]) * k / per_receiver
                for r in range(len(f) - 1) for k in range(1, per_receiver)]
    inner = f[1:-1]
    eps = BRACKET_SIGMAS * 0.5 / np.sqrt(max(1, samples))
    brackets = [x for t in inner for x in (t - eps, t, t + eps)]
    if len(segments) + len(brackets) > MOST_SPLITTERS:
        return np.asarray(segments + list(inner), np.float64)[:MOST_SPLITTERS], np.zeros(0)
    return np.asarray(segments, np.float64), np.clip(np.asarray(brackets, np.float64), 0.0, 1.0)


def aligned_splitters(words: np.ndarray, bits: int) -> np.ndarray:
    """Splitter words rounded to the nearest multiple of 2^(bits - 8) (the
    top byte's boundaries), duplicates dropped, where that keeps ALIGN_KEEP
    of the distinct splitters; else the splitters as they are."""
    if bits <= 8 or not len(words):
        return words
    shift = np.uint64(bits - 8)
    rounded = np.unique(((words + (np.uint64(1) << (shift - np.uint64(1)))) >> shift) << shift)
    rounded = rounded[rounded > 0]                  # a splitter at word 0 makes an empty first bucket
    return rounded if len(rounded) >= ALIGN_KEEP * len(np.unique(words)) else words


def splitter_words(comm, spec, local, total: int, starts, per_receiver: int, xp, align: bool = True) -> np.ndarray:
    """Step 1: the splitter words every rank picks alike, ascending and
    distinct: the receivers' segments' (aligned to the top byte where that
    keeps them apart) and the brackets around the receiver boundaries."""
    n = int(sum(local.sizes))
    want = 0 if not total else -(-SAMPLES * n // total)
    cap = SAMPLES + 64
    picked = []
    for chunk in local.keys:
        m = len(chunk)
        count = min(m, -(-want * m // n)) if n else 0
        if count:
            pos = (np.arange(count, dtype=np.int64) * m) // count + (m // count) // 2
            picked.append(chunk[xp.asarray(pos)])
    words = np.zeros(0, np.uint64)
    if picked:
        keys = xp.concatenate(picked)
        keys = keys.get() if hasattr(keys, "get") else np.asarray(keys)
        words = counting.encode(keys, spec.descending)[:cap]
    row = np.zeros(cap + 1, np.uint64)
    row[0], row[1:1 + len(words)] = len(words), words
    rows = comm.allgather(row)
    every = np.concatenate([r[1:1 + int(r[0])] for r in rows])
    if not len(every):
        return np.zeros(0, np.uint64)
    segments, brackets = splitter_fractions(starts, total, per_receiver, len(every))
    at = np.clip((np.concatenate([segments, brackets]) * len(every)).astype(np.int64), 0, len(every) - 1)
    chosen = np.partition(every, np.unique(at))[at]     # those order statistics alone, not a whole sort
    inside, around = chosen[:len(segments)], chosen[len(segments):]
    if align:
        inside = aligned_splitters(np.unique(inside), counting.key_bits(spec.dtype))
    return np.unique(np.concatenate([inside, around]))


@dataclass
class Partitioned:
    """A rank's chunks laid out bucket after bucket in its send arena."""
    send: dict            # name -> the send arena's view ("keys", and "values" where there are)
    buckets: np.ndarray   # (chunks, B) bucket sizes
    arena: Arena


def partition_chunks(spec, local, splitters, buckets: int, arenas: dict, opts, xp, value_dtype, timer) -> Partitioned:
    """Step 2: every chunk's elements laid out by bucket, stably."""
    n = int(sum(local.sizes))
    kbytes = aligned(n * spec.dtype.itemsize)
    arena = arenas.setdefault("send", Arena()).take(
        kbytes + (n * value_dtype.itemsize if value_dtype is not None else 0), xp, keep=bool(opts.keep))
    keys_all = arena.view(0, n, spec.dtype)
    values_all = arena.view(kbytes, n, value_dtype) if value_dtype is not None else None
    words = xp.asarray(np.asarray(splitters, np.uint64))
    sizes, at = [], 0
    for i, chunk in enumerate(local.keys):
        m = len(chunk)
        values = {"sort": None, "argsort": "positions", "sort_by_key": local.values[i] if local.values else None}
        sizes.append(counting.partition(chunk, words, spec.descending, keys_all[at:at + m], values[spec.op],
                                        values_all[at:at + m] if values_all is not None else None))
        at += m
    sizes = xp.stack(sizes) if sizes else xp.zeros((0, buckets), np.int64)
    sizes = sizes.get() if hasattr(sizes, "get") else sizes
    send = {"keys": keys_all}
    if values_all is not None:
        send["values"] = values_all
    timer.sub("local sort: buckets")
    return Partitioned(send, np.asarray(sizes, np.int64), arena)


def union_runs(spec, local, parts: Partitioned, split, arenas: dict, opts, xp, timer) -> tuple:
    """Step 3's runs: each chunk's elements of the split buckets, sorted
    stably into the union arena ({name: view}), and per chunk a cuts.Run
    (keys; positions standing in for indices: increasing with them)."""
    sizes = parts.buckets
    per_chunk = [int(sizes[i, split].sum()) if split else 0 for i in range(len(local.keys))]
    n = sum(per_chunk)
    names = list(parts.send)
    widths = [parts.send[k].dtype for k in names]
    regions = [aligned(n * w.itemsize) for w in widths]
    arena = arenas.setdefault("union", Arena()).take(sum(regions), xp, keep=bool(opts.keep))
    union, at = {}, 0
    for name, w, r in zip(names, widths, regions):
        union[name] = arena.view(at, n, w)
        at += r
    within = np.cumsum(sizes, axis=1) - sizes
    first = np.concatenate([[0], np.cumsum(local.sizes)]).astype(np.int64)
    runs, at = [], 0
    stable = spec.op != "sort"
    index = np.dtype(np.uint32 if max(per_chunk, default=0) < (1 << 32) - 1 else np.int64)
    for i, m in enumerate(per_chunk):
        keys = union["keys"][at:at + m]
        if m:
            def gathered(a):
                return xp.concatenate([a[int(first[i] + within[i, b]):int(first[i] + within[i, b] + sizes[i, b])]
                                       for b in split])
            got = gathered(parts.send["keys"])
            if "values" in parts.send:
                csk.sort_by_key(got, gathered(parts.send["values"]), descending=spec.descending, out=keys,
                                values_out=union["values"][at:at + m])
            else:
                csk.sort(got, descending=spec.descending, out=keys)
        runs.append(Run(keys, xp.arange(m, dtype=index) if stable else None, int(local.starts[i])))
        at += m
    timer.sub("splitters: split buckets")
    return union, runs


def partition_on_rank(comm, spec, local, opts, xp, timer, counts, starts, transport: str, value_dtype, width: int):
    """This rank's (keys or None, values or None), global ranks [starts[r],
    starts[r+1]), in the requested order; comm is collective.Ordered,
    width the most chunks a rank holds. Its phases are timed under the
    merge method's names: "local sort" (sample, buckets), "splitters" (the
    split buckets' cuts), "exchange" (over CUDA IPC only queued: its copies
    overlap the sorts), "merge" (the receivers' sorts)."""
    total = int(np.sum(counts))
    per_receiver = segments_per_receiver(opts, comm.size, total)
    splitters = splitter_words(comm, spec, local, total, starts, per_receiver, xp, bool(opts.align))
    buckets = len(splitters) + 1
    timer.sub("local sort: sample")
    parts = partition_chunks(spec, local, splitters, buckets, comm.arenas, opts, xp, value_dtype, timer)
    rows = comm.allgather(layout.chunk_row(local.starts, local.sizes, parts.buckets, width))
    _, sizes = layout.chunk_table(rows, buckets, [])
    inner = [int(t) for t in starts[1:-1]]
    split = layout.split_buckets(sizes, inner)
    chunks, sizes = layout.chunk_table(rows, buckets, split)
    timer("local sort")

    union, runs = union_runs(spec, local, parts, split, comm.arenas, opts, xp, timer)
    targets, union_total = layout.union_targets(sizes, split, inner)
    inner_cuts = exact_cuts(comm, runs, targets, union_total, spec.op != "sort", spec.descending, spec.dtype, xp,
                            indices=total)
    mine = np.zeros((comm.size + 1, width), np.int64)
    mine[:, :len(runs)] = layout.cut_rows(inner_cuts, [len(r.keys) for r in runs])
    every = comm.allgather(mine)
    cuts = [every[c.rank][:, c.index] for c in chunks]
    plan, segments = layout.segment_plan(chunks, sizes, starts, split, cuts, comm.size)
    del runs
    timer("splitters")

    n_out = int(starts[comm.rank + 1] - starts[comm.rank])
    send = {k: [parts.send[k], union[k]] for k in parts.send}
    pipelined = transport == "ipc" and opts.direction == "pull" and xp is not np
    push = transport == "ipc" and opts.direction == "push"
    recv = receive_buffers(comm.arenas, parts.send, n_out, xp, push, bool(opts.keep))
    mine_segments = segments[comm.rank]
    events = None
    if pipelined:
        first = [s[1] for s in mine_segments]
        events = pull_in_segments(comm, opts, plan, send, recv,
                                  lambda p: int(np.searchsorted(first, p.dst_offset, side="right")) - 1,
                                  len(mine_segments), timer if spec.timings else None)
    else:
        exchange(comm, opts, plan, send, recv, transport, timer if spec.timings else None, own=True)
    timer("exchange")

    out = sort_segments(spec, comm.rank, plan, chunks, mine_segments, recv, events, n_out, xp)
    if pipelined:
        finish_pull(comm, opts)
    for arena in comm.arenas.values():    # after the barrier: no peer maps a replaced allocation
        arena.free_retired()
    timer("merge")
    return out


def sort_segments(spec, rank: int, plan, chunks, segments, recv: dict, events, n: int, xp):
    """Step 4's sorts: each received segment sorted (stably) into its place
    in the output, after its events where the pieces are still landing."""
    keys_out = xp.empty(n, spec.dtype) if spec.op != "argsort" else None
    values_out = None
    if spec.op == "argsort":
        values_out = xp.empty(n, np.int64)
        longest = max((length for _, _, length in segments), default=0)
        scratch = xp.empty(longest, spec.dtype)
        index = xp.empty(longest, np.int64)
        mine = sorted((p for p in plan if p.dst == rank), key=lambda p: p.dst_offset)
    elif spec.op == "sort_by_key":
        values_out = xp.empty(n, spec.value_dtype)
    stream = xp.cuda.get_current_stream() if xp is not np else None
    for k, (_, begin, length) in enumerate(segments):
        if events is not None:
            for e in events[k]:
                stream.wait_event(e)
        end = begin + length
        keys = recv["keys"][begin:end]
        if spec.op == "sort":
            csk.sort(keys, descending=spec.descending, out=keys_out[begin:end])
        elif spec.op == "sort_by_key":
            csk.sort_by_key(keys, recv["values"][begin:end], descending=spec.descending, out=keys_out[begin:end],
                            values_out=values_out[begin:end])
        else:
            for p in mine:
                if begin <= p.dst_offset < end:
                    xp.add(recv["values"][p.dst_offset:p.dst_offset + p.n], np.int64(chunks[p.run].start),
                           out=index[p.dst_offset - begin:p.dst_offset - begin + p.n], dtype=np.int64)
            csk.sort_by_key(keys, index[:length], descending=spec.descending, out=scratch[:length],
                            values_out=values_out[begin:end])
    return keys_out, values_out
