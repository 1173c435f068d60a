"""Host arrays bigger than the device budget: sorted in pieces that fit.

A sample sort whose local sort is the chosen plugin (docs/algorithms/host.md
says why this and not sorted runs merged in passes):

1. Splitters. A random sample of the keys is encoded on the device
   (keys.cuh's words: their unsigned order is the requested order, NaNs
   last both ways) and cut into buckets of about half the keys one in-core
   sort holds. A word the sample holds more than once gets a bucket of its
   own ([w, w + 1): one key value, never sorted again).
2. Distribution pass: each chunk goes up (with its values, or its global
   indices for argsort), is sorted by the plugin, its keys are counted per
   bucket, and each bucket's part comes down to where the sample's estimate
   put that bucket (cudasortkit/placement.py: a region of the result, and
   spill arrays for what the estimate did not foresee), parts of earlier
   chunks first, so equal keys keep input order.
3. Bucket pass: runs of neighbouring buckets that fit one sort go up from
   their places, are sorted by the plugin and come down to their true
   place in the result (what they would overwrite unread is saved first).
   One-value buckets too big for one sort are moved in pieces, unsorted.

So each key crosses PCIe four times and the keys stream up once more only
where the estimates fail: when the spill would pass its limit or a bucket
of several values came out bigger than one sort (or in registered transfer
mode), the sort starts again counted: a count pass first streams the keys
up and counts them per bucket, so every bucket's place is exact before the
distribution writes (more buckets and a recount if one is too big), and the
bucket pass sorts each run of buckets where it already is.

Host memory: the result arrays, argsort's bucketed keys (n keys), the
spill arrays (at most SPILL_LIMIT bytes), the pinned staging pool; out=a
sorts into a fresh array first and copies it into `a` at the end (a second
full copy, the one case that needs it).
"""
from __future__ import annotations

import numpy as np

from .dtypes import itemsize
from .pinned import pool as pinned_pool
from .placement import Placement, SpillFull, estimates
from .hostkernels import MAX_SPLITTERS, bucket_count, encode_words, iota64_from
from .devicesort import bytes_per_key, reserve, run_job
from .transfer import Pipe, as_bytes, parallel_copy

#: The fewest keys one in-core piece may hold before the budget is called too small.
MIN_PIECE = 1 << 12
#: Buckets aim at this share of an in-core piece (room for sampling error).
FILL = 0.5
#: Sampled keys per bucket.
OVERSAMPLE = 256
ATTEMPTS = 3
#: Most host bytes the estimated placement may spill (and at least 4 MiB or
#: a quarter of the data, whichever is more, below that).
SPILL_LIMIT = 512 << 20


class _Unlucky(MemoryError):
    """A bucket of several key values came out bigger than one device sort."""


def spill_limit(n: int, per_key: int) -> int:
    return min(SPILL_LIMIT, max(4 << 20, n * per_key // 4))


def plan(n: int, per_key: int, budget: int) -> tuple:
    """(keys per in-core piece, buckets) for n keys needing per_key device
    bytes each under `budget` bytes. MemoryError if the budget is too small."""
    piece = (budget - reserve(budget)) // per_key
    if piece < MIN_PIECE:
        raise MemoryError(f"a device memory budget of {budget:,} bytes holds {max(piece, 0):,} keys "
                          f"of {per_key} bytes; out-of-core sorting needs room for at least "
                          f"{MIN_PIECE:,} (raise the limit: cudasortkit.set_device_memory_limit or "
                          "CUDASORTKIT_DEVICE_MEMORY_LIMIT)")
    buckets = max(2, -(-n // max(1, int(piece * FILL))))
    if buckets > (MAX_SPLITTERS + 1) // 2:
        raise MemoryError(f"sorting {n:,} keys out of core in pieces of {piece:,} needs {buckets:,} "
                          f"buckets, more than the {(MAX_SPLITTERS + 1) // 2} it supports; raise the "
                          "device memory limit")
    return int(piece), int(buckets)


def chunks(n: int, piece: int) -> list:
    """[(start, stop)] cutting n keys into pieces of at most `piece`, near equal."""
    count = max(1, -(-n // piece))
    edges = [(n * i) // count for i in range(count + 1)]
    return [(edges[i], edges[i + 1]) for i in range(count)]


def splitters_from_sample(words: np.ndarray, buckets: int, max_word: int) -> np.ndarray:
    """Ascending unique uint64 splitters cutting sorted sample words into
    about `buckets` equal parts; a word picked more than once also ends its
    own one-value bucket (w + 1 follows it)."""
    words = np.sort(np.asarray(words, np.uint64))
    if len(words) == 0:
        return np.zeros(0, np.uint64)
    picks = words[(np.arange(1, buckets) * len(words)) // buckets]
    values, counts = np.unique(picks, return_counts=True)
    heavy = values[(counts > 1) & (values < max_word)]
    return np.unique(np.concatenate([values, heavy + np.uint64(1)]))


def one_value(splitters: np.ndarray, b: int, max_word: int) -> bool:
    """True if bucket b ([splitters[b-1], splitters[b])) can hold one key value only."""
    if b == 0:
        return False
    lo = int(splitters[b - 1])
    if b == len(splitters):
        return lo == max_word
    return int(splitters[b]) == lo + 1


def groups(totals, single, piece: int) -> list:
    """[(first bucket, stop bucket)] runs of neighbouring buckets to sort
    together (at most `piece` keys); one-value and empty or 1-key buckets
    are left out (already in place)."""
    out, start, size = [], None, 0
    for b, t in enumerate(totals):
        t = int(t)
        if single[b] or t <= 1:
            if start is not None:
                out.append((start, b))
                start = None
            continue
        if start is not None and size + t > piece:
            out.append((start, b))
            start = None
        if start is None:
            start, size = b, 0
        size += t
    if start is not None:
        out.append((start, len(totals)))
    return out


def sort(plugin, config, request, state, keys, values, outputs, budget, expected, bar):
    """Sort host keys (values) into outputs.keys / outputs.values out of core."""
    n = keys.n
    kb, vb = itemsize(request.dtype), request.value_bytes
    piece, buckets = plan(n, bytes_per_key(request), budget)
    max_word = (1 << (8 * kb)) - 1
    mask = max_word if request.descending else 0
    src_keys = keys.array
    src_values = values.array if request.kind == "pairs" else None
    # Where buckets are written: the result arrays, unless one is the input (out=a).
    in_place = [(outputs.keys is not None and np.may_share_memory(outputs.keys, src_keys)),
                (src_values is not None and np.may_share_memory(outputs.values, src_values))]
    out_keys = (np.empty(n, keys.dtype) if request.kind == "argsort" or in_place[0]
                else outputs.keys)
    out_values = None
    if vb:
        out_values = np.empty(n, outputs.values.dtype) if in_place[1] else outputs.values
    pieces = chunks(n, piece)
    bar.set_total(n * kb * 2 * 2 + n * vb * 4)
    rng = np.random.default_rng()
    with Pipe(state, progress=bar.update) as pipe:
        for array in (src_keys, src_values, out_keys, out_values):
            pipe.pin(array)  # registered mode: once, whole
        if pipe.mode == "staged":
            splitters, words = _splitters(state, request, src_keys, buckets, mask, max_word,
                                          budget, rng)
            try:
                _sort_placed(plugin, config, request, state, pipe, pieces, piece, splitters, words,
                             src_keys, src_values, out_keys, out_values, mask, max_word, expected)
                done = True
            except (SpillFull, _Unlucky):
                pipe.drain()  # nothing queued may land after the counted sort writes
                done = False
        else:
            done = False
        if not done:
            _sort_counted(plugin, config, request, state, pipe, pieces, piece, buckets, src_keys,
                          src_values, out_keys, out_values, mask, max_word, budget, rng, expected)
    if in_place[0]:
        parallel_copy(outputs.keys, out_keys)
    if in_place[1]:
        parallel_copy(outputs.values, out_values)
    if request.kind == "argsort":
        outputs.values = out_values


def _sort_counted(plugin, config, request, state, pipe, pieces, piece, buckets, src_keys,
                  src_values, out_keys, out_values, mask, max_word, budget, rng, expected):
    """Count pass, exact distribution, buckets sorted where they are."""
    n = len(src_keys)
    for attempt in range(ATTEMPTS):
        splitters, _ = _splitters(state, request, src_keys, buckets << attempt, mask, max_word,
                                  budget, rng)
        counts = _count(state, request, pipe, src_keys, pieces, splitters, mask)
        totals = counts.sum(axis=0)
        single = [one_value(splitters, b, max_word) for b in range(len(totals))]
        if all(single[b] or totals[b] <= piece for b in range(len(totals))):
            break
    else:
        raise MemoryError(f"out-of-core sort of {n:,} keys: after {ATTEMPTS} samples a bucket "
                          f"still holds more than the {piece:,} keys one device sort can take; "
                          "raise the device memory limit")
    starts = np.concatenate([[0], np.cumsum(totals)[:-1]]).astype(np.int64)
    dest = starts + np.concatenate([np.zeros((1, len(totals)), np.int64),
                                    np.cumsum(counts, axis=0)[:-1]]).astype(np.int64)
    _distribute(plugin, config, request, state, pipe, pieces, counts, dest, src_keys,
                src_values, out_keys, out_values, expected, piece)
    pipe.drain()  # the bucket pass reads what the distribution wrote
    _sort_buckets(plugin, config, request, state, pipe, groups(totals, single, piece), starts,
                  totals, out_keys, out_values, expected, piece)
    pipe.drain()


class _Buffers:
    """Device buffers for one in-core piece (keys, values in and out)."""

    def __init__(self, state, plugin, piece, kb, vb):
        self.state, self.plugin, self.piece, self.kb, self.vb = state, plugin, piece, kb, vb
        self._bufs = []

    def alloc(self, nbytes, what):
        buf = self.state.allocate(nbytes, f"{self.plugin.name}: {what} of an out-of-core piece "
                                          f"of {self.piece:,} keys")
        self._bufs.append(buf)
        return int(buf)

    def free(self):
        for buf in self._bufs:
            buf.free()
        self._bufs.clear()


def _splitters(state, request, src_keys, buckets, mask, max_word, budget, rng) -> tuple:
    """(splitters, the sample's words)."""
    n, kb = len(src_keys), itemsize(request.dtype)
    size = min(n, OVERSAMPLE * buckets + 4096, max(1024, budget // (4 * (kb + 8))))
    sample = np.ascontiguousarray(src_keys[np.sort(rng.integers(0, n, size))])
    words = np.empty(size, np.uint64)
    dkeys = state.allocate(size * kb, "host pipeline: sampled keys")
    dwords = state.allocate(size * 8, "host pipeline: sampled words")
    try:
        state.cuda.memcpy_htod_async(int(dkeys), as_bytes(sample), state.stream)
        encode_words(state, request.dtype, int(dkeys), size, mask, int(dwords))
        state.stream.synchronize()
        state.cuda.memcpy_dtoh(words, int(dwords))
    finally:
        dkeys.free()
        dwords.free()
    return splitters_from_sample(words, buckets, max_word), words


def _count(state, request, pipe, src_keys, pieces, splitters, mask) -> np.ndarray:
    """counts[chunk, bucket] of the keys."""
    nb = len(splitters) + 1
    kb = itemsize(request.dtype)
    longest = max(b - a for a, b in pieces)
    host = np.zeros((len(pieces), nb), np.uint64)
    dkeys = state.allocate(longest * kb, "host pipeline: keys to count")
    dsplit = state.allocate(max(1, len(splitters)) * 8, "host pipeline: splitters")
    dcounts = state.allocate(host.nbytes, "host pipeline: bucket counts")
    try:
        if len(splitters):
            state.cuda.memcpy_htod(int(dsplit), np.ascontiguousarray(splitters))
        state.cuda.memset_d8_async(int(dcounts), 0, host.nbytes, state.stream)
        for c, (a, b) in enumerate(pieces):
            pipe.upload(int(dkeys), src_keys[a:b])
            bucket_count(state, request.dtype, int(dkeys), b - a, mask, int(dsplit),
                         len(splitters), int(dcounts) + c * nb * 8)
        state.stream.synchronize()
        state.cuda.memcpy_dtoh(host, int(dcounts))
    finally:
        state.stream.synchronize()
        for buf in (dkeys, dsplit, dcounts):
            buf.free()
    return host.astype(np.int64)


def _distribute(plugin, config, request, state, pipe, pieces, counts, dest, src_keys, src_values,
                out_keys, out_values, expected, piece) -> None:
    kb, vb = itemsize(request.dtype), request.value_bytes
    bufs = _Buffers(state, plugin, piece, kb, vb)
    try:
        kin, kout = bufs.alloc(piece * kb, "keys"), bufs.alloc(piece * kb, "sorted keys")
        vin = bufs.alloc(piece * vb, "values") if vb else 0
        vout = bufs.alloc(piece * vb, "sorted values") if vb else 0
        for c, (a, b) in enumerate(pieces):
            m = b - a
            # The upload runs while the previous chunk's parts come down.
            pipe.upload(kin, src_keys[a:b])
            if request.kind == "pairs":
                pipe.upload(vin, src_values[a:b])
            elif request.kind == "argsort":
                iota64_from(state, vin, m, a)
            if c:  # the sort rewrites kout/vout: after the previous chunk's downloads read them
                state.stream.wait_for_event(pipe.downloads_done_event())
            run_job(plugin, config, request, state, m, kin, kout, vin, vout, expected)
            pipe.after_device_work()
            offset = 0
            for bucket, count in enumerate(counts[c]):
                count = int(count)
                if count:
                    at = int(dest[c, bucket])
                    pipe.download(out_keys[at:at + count], kout + offset * kb)
                    if vb:
                        pipe.download(out_values[at:at + count], vout + offset * vb)
                offset += count
        pipe.downloads_done_event()
    finally:
        pipe.settle()
        bufs.free()


def _sort_buckets(plugin, config, request, state, pipe, runs, starts, totals, out_keys,
                  out_values, expected, piece) -> None:
    """Each run of buckets: up, sorted by the plugin, down where it was."""
    kb, vb = itemsize(request.dtype), request.value_bytes
    bufs = _Buffers(state, plugin, piece, kb, vb)
    try:
        kin, kout = bufs.alloc(piece * kb, "keys"), bufs.alloc(piece * kb, "sorted keys")
        vin = bufs.alloc(piece * vb, "values") if vb else 0
        vout = bufs.alloc(piece * vb, "sorted values") if vb else 0
        for r, (first, stop) in enumerate(runs):
            lo, hi = int(starts[first]), int(starts[stop - 1] + totals[stop - 1])
            pipe.upload(kin, out_keys[lo:hi])
            if vb:
                pipe.upload(vin, out_values[lo:hi])
            if r:
                state.stream.wait_for_event(pipe.downloads_done_event())
            run_job(plugin, config, request, state, hi - lo, kin, kout, vin, vout, expected)
            pipe.after_device_work()
            if request.kind != "argsort":
                pipe.download(out_keys[lo:hi], kout)
            if vb:
                pipe.download(out_values[lo:hi], vout)
        pipe.downloads_done_event()
    finally:
        pipe.settle()
        bufs.free()




# ------------------------------------------------------ estimated placement
def _sort_placed(plugin, config, request, state, pipe, pieces, piece, splitters, words, src_keys,
                 src_values, out_keys, out_values, mask, max_word, expected) -> None:
    """No count pass: buckets placed by the sample's estimates, then moved
    to their true places by the bucket pass. SpillFull or _Unlucky: the
    estimates failed (the caller sorts again, counted)."""
    n = len(src_keys)
    kb, vb = itemsize(request.dtype), request.value_bytes
    words = np.asarray(words, np.uint64)
    sample = np.bincount(np.searchsorted(splitters, words, side="right"),
                         minlength=len(splitters) + 1)
    placement = Placement(out_keys, out_values, estimates(sample, n), spill_limit(n, kb + vb))
    totals = _distribute_placed(plugin, config, request, state, pipe, pieces, piece, splitters,
                                mask, src_keys, src_values, placement, expected)
    pipe.drain()  # the bucket pass reads what the distribution wrote
    for b, total in enumerate(totals):
        if total > piece and not one_value(splitters, b, max_word):
            raise _Unlucky(f"bucket {b} holds {int(total):,} keys, more than one sort's {piece:,}")
    placement.start_reading()
    _move_buckets(plugin, config, request, state, pipe, placed_parts(totals, piece), placement,
                  out_keys, out_values, expected, piece)
    pipe.drain()


def placed_parts(totals, piece: int) -> list:
    """[(lo, hi, sort?)] of the result in order: runs of neighbouring buckets
    that fit one sort, and pieces of a bucket bigger than one sort (one
    value: moved, not sorted)."""
    out, lo, size = [], 0, 0
    for t in (int(t) for t in totals):
        if t > piece:
            if size:
                out.append((lo, lo + size, True))
                lo, size = lo + size, 0
            out.extend((a, min(a + piece, lo + t), False) for a in range(lo, lo + t, piece))
            lo += t
            continue
        if size + t > piece:
            out.append((lo, lo + size, True))
            lo, size = lo + size, 0
        size += t
    if size:
        out.append((lo, lo + size, True))
    return out


def _distribute_placed(plugin, config, request, state, pipe, pieces, piece, splitters, mask,
                       src_keys, src_values, placement, expected) -> np.ndarray:
    """Each chunk up, sorted, counted per bucket on the device; its parts
    down to where `placement` puts them. Returns the keys per bucket."""
    kb, vb = itemsize(request.dtype), request.value_bytes
    nb = len(splitters) + 1
    totals = np.zeros(nb, np.int64)
    bufs = _Buffers(state, plugin, piece, kb, vb)
    slot = pinned_pool.take(1, at_least=1)
    try:
        kin, kout = bufs.alloc(piece * kb, "keys"), bufs.alloc(piece * kb, "sorted keys")
        vin = bufs.alloc(piece * vb, "values") if vb else 0
        vout = bufs.alloc(piece * vb, "sorted values") if vb else 0
        dsplit = bufs.alloc(max(1, len(splitters)) * 8, "splitters")
        dcounts = bufs.alloc(nb * 8, "bucket counts")
        if len(splitters):
            state.cuda.memcpy_htod(dsplit, np.ascontiguousarray(splitters, np.uint64))
        host_counts = slot[0][:nb * 8].view(np.uint64)
        done = None  # (event after the last chunk's counts came down, its length)

        def place_last():
            event, m = done
            pipe.wait_for(event)
            counts = host_counts.astype(np.int64)
            offset = 0
            for bucket in np.flatnonzero(counts):
                for keys, values in placement.place(int(bucket), int(counts[bucket])):
                    pipe.download(keys, kout + offset * kb)
                    if vb:
                        pipe.download(values, vout + offset * vb)
                    offset += len(keys)
            totals[:] += counts

        for c, (a, b) in enumerate(pieces):
            m = b - a
            # A first part of the chunk goes up while the device sorts the
            # last one; then the last one's parts are queued, and they come
            # down while the rest of this chunk goes up.
            first = m // 4 if done else m
            pipe.upload(kin, src_keys[a:a + first])
            if done:
                place_last()
            pipe.upload(kin + first * kb, src_keys[a + first:b])
            if request.kind == "pairs":
                pipe.upload(vin, src_values[a:b])
            elif request.kind == "argsort":
                iota64_from(state, vin, m, a)
            if c:  # the sort rewrites kout/vout: after the last chunk's downloads read them
                state.stream.wait_for_event(pipe.downloads_done_event())
            run_job(plugin, config, request, state, m, kin, kout, vin, vout, expected)
            state.cuda.memset_d8_async(dcounts, 0, nb * 8, state.stream)
            bucket_count(state, request.dtype, kout, m, mask, dsplit, len(splitters), dcounts)
            state.cuda.memcpy_dtoh_async(host_counts, dcounts, state.stream)
            event = state.cuda.Event(state.cuda.event_flags.DISABLE_TIMING)
            event.record(state.stream)
            pipe.after_device_work()
            done = (event, m)
        if done:
            place_last()
        pipe.downloads_done_event()
    finally:
        pipe.settle()
        state.stream.synchronize()
        bufs.free()
        pinned_pool.give(slot)
    return totals


def _move_buckets(plugin, config, request, state, pipe, parts, placement, out_keys, out_values,
                  expected, piece) -> None:
    """Each part: its keys (values) up from where they were placed, sorted
    (or moved), down to out[lo:hi] once what was unread there is saved."""
    kb, vb = itemsize(request.dtype), request.value_bytes
    bufs = _Buffers(state, plugin, piece, kb, vb)
    try:
        kin, kout = bufs.alloc(piece * kb, "keys"), bufs.alloc(piece * kb, "sorted keys")
        vin = bufs.alloc(piece * vb, "values") if vb else 0
        vout = bufs.alloc(piece * vb, "sorted values") if vb else 0
        for r, (lo, hi, sort) in enumerate(parts):
            offset = 0
            for keys, values in placement.take(hi - lo):
                pipe.upload(kin + offset * kb, keys)
                if vb:
                    pipe.upload(vin + offset * vb, values)
                offset += len(keys)
            if r:
                state.stream.wait_for_event(pipe.downloads_done_event())
            if sort:
                run_job(plugin, config, request, state, hi - lo, kin, kout, vin, vout, expected)
            else:
                state.cuda.memcpy_dtod_async(kout, kin, (hi - lo) * kb, state.stream)
                if vb:
                    state.cuda.memcpy_dtod_async(vout, vin, (hi - lo) * vb, state.stream)
            pipe.after_device_work()
            placement.protect(lo, hi)
            if request.kind != "argsort":
                pipe.download(out_keys[lo:hi], kout)
            if vb:
                pipe.download(out_values[lo:hi], vout)
        pipe.downloads_done_event()
    finally:
        pipe.settle()
        bufs.free()
