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
   put that bucket (cudasortkit/host/placement.py: a region of the result, and
   spill arrays for what the estimate did not foresee), parts of earlier
   chunks first, so equal keys keep input order.
3. Bucket pass: runs of neighbouring buckets that fit one sort go up from
   their places, are sorted by the plugin and come down to their true
   place in the result (what they would overwrite unread is saved first).
   One-value buckets too big for one sort are moved in pieces, unsorted.

So each key crosses PCIe four times and the keys stream up once more only
where the estimates fail (the spill would pass its limit, or a bucket of
several values came out bigger than one sort) or in registered transfer
mode (the default out of core: with the arrays page-locked, that extra
upload is a DMA and no host copy). The sort then runs counted: a count
pass first streams the keys up and counts them per bucket, so every
bucket's place is exact before the distribution writes (more buckets and a
recount if one is too big), and the bucket pass sorts each run of buckets
where it already is.

Host memory: the result arrays, the spill arrays (at most SPILL_LIMIT
bytes), one piece of gathered keys for argsort (it keeps no keys on the
host: a bucket's keys are gathered from the input by its indices), the
pinned staging pool.

In place (out=a; sort_by_key also values_out=values, or only one of the
two): no result arrays, the input is sorted where it lies
(`_sort_in_place`). The distribution pass writes each sorted chunk back
where it was and the device counts its keys per bucket; the bucket pass
reads each run of buckets from its parts in all chunks, sorts it, saves what
its final place still holds unread into spill arrays, and writes it there
(placement.py's `lay`). The spill then holds what a finished prefix of the
result overwrote unread: at most half the data (at most the prefix, at most
what is left), plus one piece taken and not yet written,
`in_place_spill_bytes`; sorted input spills nothing, uniform keys about a
third, reverse-sorted about half. If anything raises (a device sort, a copy,
Ctrl-C, MemoryError), the arrays hold a permutation of the input, each key
with its value: a result half come down is brought down again whole from
the device, and the spill is written back into the places whose keys were
already written elsewhere (as many as it holds). Not the input as it was:
that is gone once it is sorted in place.
"""
from __future__ import annotations

import numpy as np

from ..dtypes import itemsize
from .pinned import pool as pinned_pool
from .placement import Placement, SpillFull, estimates
from .kernels import MAX_SPLITTERS, bucket_count, encode_words, iota64_from
from ..launch.outputs import free_all, poison, temporary
from ..launch.run import bytes_per_key, reserve, run_job
from .transfer import Pipe, as_bytes, mode_chosen, parallel_copy, parallel_take, transfer_mode

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
    if request.kind != "argsort" and _sorts_in_place([(outputs.keys, src_keys),
                                                      (outputs.values, src_values)]):
        _sort_in_place(plugin, config, request, state, src_keys, src_values, outputs, budget,
                       expected, bar)
        return
    # Where buckets are written: the result arrays; one overlapping its input
    # otherwise than exactly is sorted into a fresh array, copied over at the end.
    in_place = [(outputs.keys is not None and np.may_share_memory(outputs.keys, src_keys)),
                (src_values is not None and np.may_share_memory(outputs.values, src_values))]
    out_keys = None  # argsort: none (a pass that needs a bucket's keys gathers them by index)
    if request.kind != "argsort":
        out_keys = np.empty(n, keys.dtype) if in_place[0] else outputs.keys
    out_values = None
    if vb:
        out_values = np.empty(n, outputs.values.dtype) if in_place[1] else outputs.values
    pieces = chunks(n, piece)
    bar.set_total(n * (kb + vb) * 4 - (n * kb * 2 if request.kind == "argsort" else 0))
    rng = np.random.default_rng()
    with _pipe(state, request, bar, (src_keys, src_values, out_keys, out_values)) as pipe:
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


def _pipe(state, request, bar, arrays) -> Pipe:
    """The out-of-core sort's Pipe: registered unless CUDASORTKIT_HOST_TRANSFER
    says staged, its arrays pinned whole, once. If pinning fails and no mode
    was asked for, staged (the pinned pieces are released first). Argsort
    is staged unless registered is asked for: it gathers keys on the host
    each pass, and only sort and sort_by_key were measured registered."""
    mode = transfer_mode(out_of_core=True)
    if request.kind == "argsort" and not mode_chosen():
        mode = "staged"
    pipe = Pipe(state, mode=mode, progress=bar.update)
    try:
        for array in arrays:
            pipe.pin(array)
    except RuntimeError:
        pipe.close()
        if mode_chosen():
            raise
        pipe = Pipe(state, mode="staged", progress=bar.update)
    except BaseException:
        pipe.close()
        raise
    return pipe


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
                  totals, out_keys, out_values, expected, piece, src_keys)
    pipe.drain()


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


class _Piece:
    """One in-core piece on the device (keys and values, in and out) and the
    steps every pass takes with it: parts up, sorted (or moved), parts down.
    A sort waits until the downloads of the one before have read kout/vout.
    Argsort keeps no keys on the host: where a pass needs a part's keys, they
    are gathered from the input by the part's indices."""

    def __init__(self, plugin, config, request, state, pipe, piece, expected, src_keys):
        self.plugin, self.config, self.request = plugin, config, request
        self.state, self.pipe, self.piece, self.expected = state, pipe, piece, expected
        self.src_keys = src_keys
        self.kb, self.vb = itemsize(request.dtype), request.value_bytes
        self._bufs, self._gather, self._sorted = [], None, False
        try:
            self.kin = self.alloc(piece * self.kb, "keys")
            self.kout = self.alloc(piece * self.kb, "sorted keys")
            self.vin = self.alloc(piece * self.vb, "values") if self.vb else 0
            self.vout = self.alloc(piece * self.vb, "sorted values") if self.vb else 0
            poison(state, self.kout, piece * self.kb, self.vout, piece * self.vb)
        except BaseException:
            self._free()
            raise

    def alloc(self, nbytes, what) -> int:
        return temporary(self.state, self._bufs, nbytes, f"{self.plugin.name}: {what} of an "
                                                         f"out-of-core piece of {self.piece:,} keys")

    def up(self, keys, values, at: int = 0) -> None:
        """Host keys (None: argsort's, gathered by the indices in `values`)
        and values (or None) up to the piece at key offset `at`."""
        if keys is None:
            keys = self._gathered(values)
        self.pipe.upload(self.kin + at * self.kb, keys)
        if values is not None:
            self.pipe.upload(self.vin + at * self.vb, values)

    def _gathered(self, indices) -> np.ndarray:
        if self._gather is None:  # the pipe's: pinned once in registered mode, and kept
            self._gather = self.pipe.scratch(self.piece, self.src_keys.dtype)
        if self.pipe.mode == "registered":  # the last upload's DMA may still read the buffer
            self.pipe.up.synchronize()
        keys = self._gather[:len(indices)]
        parallel_take(keys, self.src_keys, indices)
        return keys

    def sort(self, m: int, index_start=None, move: bool = False) -> None:
        """Sort the m keys (values) in the piece (argsort: indices from
        index_start, if given); move: copy them unsorted. Downloads queued
        next fetch the result."""
        state = self.state
        if index_start is not None:
            iota64_from(state, self.vin, m, index_start)
        if self._sorted:
            state.stream.wait_for_event(self.pipe.downloads_done_event())
        if move:
            state.cuda.memcpy_dtod_async(self.kout, self.kin, m * self.kb, state.stream)
            if self.vb:
                state.cuda.memcpy_dtod_async(self.vout, self.vin, m * self.vb, state.stream)
        else:
            run_job(self.plugin, self.config, self.request, state, m, self.kin, self.kout,
                    self.vin, self.vout, self.expected)
        self._sorted = True

    def down(self, keys, values, at: int = 0) -> None:
        """Sorted keys and values (either None: not wanted) from key offset `at` to the host."""
        if keys is not None:
            self.pipe.download(keys, self.kout + at * self.kb)
        if values is not None:
            self.pipe.download(values, self.vout + at * self.vb)

    def _free(self):
        free_all(self._bufs)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *exc):
        try:
            if exc_type is None:
                self.pipe.downloads_done_event()
        finally:
            self.pipe.settle()
            self.state.stream.synchronize()
            self._free()
        return False


def _distribute(plugin, config, request, state, pipe, pieces, counts, dest, src_keys, src_values,
                out_keys, out_values, expected, piece) -> None:
    with _Piece(plugin, config, request, state, pipe, piece, expected, src_keys) as dev:
        for c, (a, b) in enumerate(pieces):
            # The upload runs while the previous chunk's parts come down.
            dev.up(src_keys[a:b], src_values[a:b] if src_values is not None else None)
            dev.sort(b - a, index_start=a if request.kind == "argsort" else None)
            pipe.after_device_work()
            offset = 0
            for bucket, count in enumerate(counts[c]):
                count = int(count)
                if count:
                    at = int(dest[c, bucket])
                    dev.down(_part(out_keys, at, count), _part(out_values, at, count), offset)
                offset += count


def _part(array, at, count):
    return array[at:at + count] if array is not None else None


def _sort_buckets(plugin, config, request, state, pipe, runs, starts, totals, out_keys,
                  out_values, expected, piece, src_keys) -> None:
    """Each run of buckets: up, sorted by the plugin, down where it was."""
    with _Piece(plugin, config, request, state, pipe, piece, expected, src_keys) as dev:
        for first, stop in runs:
            lo, hi = int(starts[first]), int(starts[stop - 1] + totals[stop - 1])
            dev.up(_part(out_keys, lo, hi - lo), _part(out_values, lo, hi - lo))
            dev.sort(hi - lo)
            pipe.after_device_work()
            dev.down(_part(out_keys, lo, hi - lo), _part(out_values, lo, hi - lo))


# ------------------------------------------------------ estimated placement
def _sort_placed(plugin, config, request, state, pipe, pieces, piece, splitters, words, src_keys,
                 src_values, out_keys, out_values, mask, max_word, expected) -> None:
    """No count pass: buckets placed by the sample's estimates, then moved
    to their true places by the bucket pass. SpillFull or _Unlucky: the
    estimates failed (the caller sorts again, counted)."""
    n = len(src_keys)
    words = np.asarray(words, np.uint64)
    sample = np.bincount(np.searchsorted(splitters, words, side="right"),
                         minlength=len(splitters) + 1)
    columns = [a for a in (out_keys, out_values) if a is not None]
    placement = Placement(columns, estimates(sample, n),
                          spill_limit(n, sum(a.itemsize for a in columns)))
    totals = _distribute_placed(plugin, config, request, state, pipe, pieces, piece, splitters,
                                mask, src_keys, src_values, placement, expected)
    pipe.drain()  # the bucket pass reads what the distribution wrote
    for b, total in enumerate(totals):
        if total > piece and not one_value(splitters, b, max_word):
            raise _Unlucky(f"bucket {b} holds {int(total):,} keys, more than one sort's {piece:,}")
    placement.start_reading()
    _move_buckets(plugin, config, request, state, pipe, placed_parts(totals, piece), placement,
                  out_keys, out_values, expected, piece, src_keys)
    pipe.drain()


def _columns(request, part):
    """(keys or None, values or None) of a placement part (argsort's holds indices only)."""
    if request.kind == "sort":
        return part[0], None
    if request.kind == "argsort":
        return None, part[0]
    return part[0], part[1]


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
    nb = len(splitters) + 1
    totals = np.zeros(nb, np.int64)
    slot = pinned_pool.take(1, at_least=1)
    try:
        with _Piece(plugin, config, request, state, pipe, piece, expected, src_keys) as dev:
            dsplit = dev.alloc(max(1, len(splitters)) * 8, "splitters")
            dcounts = dev.alloc(nb * 8, "bucket counts")
            if len(splitters):
                state.cuda.memcpy_htod(dsplit, np.ascontiguousarray(splitters, np.uint64))
            host_counts = slot[0][:nb * 8].view(np.uint64)
            last = None  # the event after the last chunk's counts came down

            def place_last():
                pipe.wait_for(last)
                counts = host_counts.astype(np.int64)
                offset = 0
                for bucket in np.flatnonzero(counts):
                    for part in placement.place(int(bucket), int(counts[bucket])):
                        dev.down(*_columns(request, part), offset)
                        offset += len(part[0])
                totals[:] += counts

            for a, b in pieces:
                m = b - a
                # A first part of the chunk goes up while the device sorts the
                # last one; then the last one's parts are queued, and they come
                # down while the rest of this chunk goes up.
                first = m // 4 if last else m
                dev.up(src_keys[a:a + first], None)
                if last:
                    place_last()
                dev.up(src_keys[a + first:b], None, first)
                if src_values is not None:
                    pipe.upload(dev.vin, src_values[a:b])
                dev.sort(m, index_start=a if request.kind == "argsort" else None)
                state.cuda.memset_d8_async(dcounts, 0, nb * 8, state.stream)
                bucket_count(state, request.dtype, dev.kout, m, mask, dsplit, len(splitters),
                             dcounts)
                state.cuda.memcpy_dtoh_async(host_counts, dcounts, state.stream)
                last = state.cuda.Event(state.cuda.event_flags.DISABLE_TIMING)
                last.record(state.stream)
                pipe.after_device_work()
            if last:
                place_last()
    finally:
        pinned_pool.give(slot)
    return totals


def _move_buckets(plugin, config, request, state, pipe, parts, placement, out_keys, out_values,
                  expected, piece, src_keys) -> None:
    """Each part: its keys (values) up from where they were placed, sorted
    (or moved), down to out[lo:hi] once what was unread there is saved."""
    with _Piece(plugin, config, request, state, pipe, piece, expected, src_keys) as dev:
        for lo, hi, sort in parts:
            offset = 0
            for part in placement.take(hi - lo):
                dev.up(*_columns(request, part), offset)
                offset += len(part[0])
            dev.sort(hi - lo, move=not sort)
            pipe.after_device_work()
            placement.protect(lo, hi)
            dev.down(_part(out_keys, lo, hi - lo), _part(out_values, lo, hi - lo))


# ------------------------------------------------------------ in place (out=a)
def _same(x, y) -> bool:
    """True if x and y are the same memory seen the same way."""
    return (x is not None and y is not None and x.dtype == y.dtype and x.shape == y.shape
            and x.strides == y.strides
            and x.__array_interface__["data"][0] == y.__array_interface__["data"][0])


def _sorts_in_place(columns) -> bool:
    """True if an (output, input) pair of `columns` is one array and no
    other pair overlaps otherwise."""
    pairs = [(out, src) for out, src in columns if out is not None and src is not None]
    return (any(_same(out, src) for out, src in pairs)
            and not any(np.may_share_memory(out, src) and not _same(out, src)
                        for out, src in pairs))


def in_place_spill_bytes(n: int, piece: int, per_key: int) -> int:
    """Most host bytes the spill of an in-place sort holds: half the keys
    (what a finished prefix of the result overwrote unread is at most what
    is left to read, and at most the prefix) plus one piece taken but not
    yet written (undone if a failure comes first)."""
    return (n // 2 + 1 + piece) * per_key


def _sort_in_place(plugin, config, request, state, src_keys, src_values, outputs, budget,
                   expected, bar) -> None:
    """Sort with the outputs as the working arrays, one of them (or both)
    the input itself (out=a, values_out=values): the other is filled from
    its input first. The distribution pass writes each sorted chunk back
    where it was; the bucket pass reads the buckets' parts where they lie
    and saves what a result would overwrite unread (placement.py). At every
    step the arrays hold a permutation of the input's keys (each with its
    value); a failure leaves them so (the spill written back) and raises."""
    n = len(src_keys)
    keys, values = outputs.keys, outputs.values if request.kind == "pairs" else None
    for work, src in ((keys, src_keys), (values, src_values)):
        if work is not None and not _same(work, src):
            parallel_copy(work, src)
    kb, vb = itemsize(request.dtype), request.value_bytes
    piece, buckets = plan(n, bytes_per_key(request), budget)
    max_word = (1 << (8 * kb)) - 1
    mask = max_word if request.descending else 0
    pieces = chunks(n, piece)
    bar.set_total(n * (kb + vb) * 4)
    rng = np.random.default_rng()
    # Staged: the spill arrays come and go, and are never page-locked.
    with Pipe(state, mode="staged", progress=bar.update) as pipe:
        splitters, _ = _splitters(state, request, keys, buckets, mask, max_word, budget, rng)
        counts = _distribute_in_place(plugin, config, request, state, pipe, pieces, piece,
                                      splitters, mask, keys, values, expected)
        for attempt in range(1, ATTEMPTS + 1):
            totals = counts.sum(axis=0)
            if all(t <= piece or one_value(splitters, b, max_word) for b, t in enumerate(totals)):
                break
            if attempt == ATTEMPTS:
                raise MemoryError(f"out-of-core sort of {n:,} keys: after {ATTEMPTS} samples a "
                                  f"bucket still holds more than the {piece:,} keys one device "
                                  "sort can take; raise the device memory limit")
            # The chunks lie sorted now: counted again against more buckets.
            splitters, _ = _splitters(state, request, keys, buckets << attempt, mask, max_word,
                                      budget, rng)
            counts = _count(state, request, pipe, keys, pieces, splitters, mask)
        columns = [a for a in (keys, values) if a is not None]
        placement = Placement(columns, totals,
                              in_place_spill_bytes(n, piece, sum(a.itemsize for a in columns)))
        placement.lay(_laid_parts(pieces, counts))
        _move_in_place(plugin, config, request, state, pipe, placed_parts(totals, piece),
                       placement, keys, values, expected, piece)


def _laid_parts(pieces, counts) -> list:
    """[(bucket, offset, count)] of each sorted chunk's part of each bucket,
    buckets in order, chunks in order within one."""
    starts = np.array([a for a, _ in pieces], np.int64)
    within = np.cumsum(counts, axis=1) - counts
    return [(b, starts[c] + within[c, b], counts[c, b])
            for b in range(counts.shape[1]) for c in range(counts.shape[0]) if counts[c, b]]


def _land(pipe, dev, keys, values, lo, hi) -> None:
    """After a failure while [lo, hi) came down from the device: let the
    copies in flight end, then bring all of it down again, synchronously."""
    pipe.close()
    dev.state.stream.synchronize()
    if hi > lo:
        dev.state.cuda.memcpy_dtoh(keys[lo:hi], dev.kout)
        if values is not None:
            dev.state.cuda.memcpy_dtoh(values[lo:hi], dev.vout)


def _distribute_in_place(plugin, config, request, state, pipe, pieces, piece, splitters, mask,
                         keys, values, expected) -> np.ndarray:
    """Each chunk up, sorted, counted per bucket on the device, and down to
    where it was. Returns counts[chunk, bucket]. A chunk's result has landed
    before the next sort starts; a failure while it comes down brings it
    down again whole (the device still holds it)."""
    nb = len(splitters) + 1
    counts = np.zeros((len(pieces), nb), np.uint64)
    with _Piece(plugin, config, request, state, pipe, piece, expected, keys) as dev:
        dsplit = dev.alloc(max(1, len(splitters)) * 8, "splitters")
        dcounts = dev.alloc(counts.nbytes, "bucket counts")
        if len(splitters):
            state.cuda.memcpy_htod(dsplit, np.ascontiguousarray(splitters, np.uint64))
        state.cuda.memset_d8_async(dcounts, 0, counts.nbytes, state.stream)
        landing = None  # (lo, hi) coming down
        try:
            for c, (a, b) in enumerate(pieces):
                dev.up(keys[a:b], _part(values, a, b - a))  # while the last chunk comes down
                pipe.drain()
                landing = None
                dev.sort(b - a)
                bucket_count(state, request.dtype, dev.kout, b - a, mask, dsplit, len(splitters),
                             dcounts + c * nb * 8)
                pipe.after_device_work()
                landing = (a, b)
                dev.down(keys[a:b], _part(values, a, b - a))
            pipe.drain()
            landing = None
            state.stream.synchronize()
            state.cuda.memcpy_dtoh(counts, dcounts)
        except BaseException:
            if landing is not None:
                _land(pipe, dev, keys, values, *landing)
            raise
    return counts.astype(np.int64)


def _move_in_place(plugin, config, request, state, pipe, parts, placement, keys, values,
                   expected, piece) -> None:
    """Each part [lo, hi) of the result: its keys up from where they lie
    (placement), sorted (or moved), and down to [lo, hi) once what lay
    unread there is saved. `phase` says, in one assignment, what a failure
    must undo: (a mark to roll the placement back to: taken, not written;
    (lo, hi) coming down from the device)."""
    with _Piece(plugin, config, request, state, pipe, piece, expected, keys) as dev:
        phase = (None, None)
        try:
            for lo, hi, sort in parts:
                phase = (placement.mark(), phase[1])
                offset = 0
                for part in placement.take(hi - lo):  # while the last part comes down
                    dev.up(*_columns(request, part), offset)
                    offset += len(part[0])
                pipe.drain()
                phase = (phase[0], None)
                dev.sort(hi - lo, move=not sort)
                pipe.after_device_work()
                placement.protect(lo, hi)
                phase = (None, (lo, hi))
                dev.down(keys[lo:hi], _part(values, lo, hi - lo))
            pipe.drain()
            phase = (None, None)
        except BaseException:
            mark, landing = phase
            if mark is not None:
                placement.rollback(mark)
            if landing is not None:
                _land(pipe, dev, keys, values, *landing)
            else:
                pipe.close()
            placement.give_back()
            raise
