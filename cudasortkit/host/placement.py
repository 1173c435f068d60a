"""Where an out-of-core sort's buckets lie on the host between its two
passes when no count pass told it their sizes (cudasortkit/host/outofcore.py).

The distribution pass places each bucket by the sample's estimate: bucket b
owns the region out[R_b, R_b + est_b) of the result array (regions tile it);
a chunk's part of b fills the rest of that region, and what does not fit
goes to a spill array of its own (host memory, bounded by `limit` bytes;
SpillFull past it). So a bucket's keys are its region's filled part, then
its spill arrays, in chunk order: a stable sort of them keeps equal keys in
input order.

The bucket pass then takes buckets in order (`take`) and writes each
bucket's sorted keys to its true place [S_b, S_b+1). That place overlaps
regions of later buckets wherever the estimates were off, so before a
write lands, `protect(lo, hi)` copies every part of out[lo, hi) that is
still unread into a spill array first (about as many keys as the estimates
were off: little, and counted against the same limit).

An in-place sort (out=a) has no regions: its distribution pass leaves every
chunk, sorted, where it was, and `lay` queues the parts where they lie. Its
bucket pass writes over the input itself, so it keeps the input a
permutation of its keys at every step: `mark`/`rollback` undo a `take`
whose keys were not written yet, and after a failure `give_back` writes the
spill into the places whose keys were taken and written elsewhere (exactly
as many).
"""
from __future__ import annotations

from collections import deque

import numpy as np

from .transfer import parallel_copy


class SpillFull(MemoryError):
    """The estimates were too far off for the spill limit."""


def estimates(counts: np.ndarray, n: int) -> np.ndarray:
    """Bucket sizes (int64, summing to n) in proportion to the sample's
    counts per bucket."""
    counts = np.asarray(counts, np.float64)
    total = counts.sum()
    if total <= 0:
        est = np.zeros(len(counts), np.int64)
        est[-1] = n
        return est
    edges = np.floor(np.cumsum(counts) * (n / total) + 0.5).astype(np.int64)
    edges[-1] = n
    return np.diff(np.concatenate([[0], edges]))


class Placement:
    """The host places of every bucket's keys between the passes: one array
    per column (keys, values: the result arrays), each part a tuple of
    views or spill arrays, one per column."""

    def __init__(self, columns, est, limit: int):
        self.columns = list(columns)
        self.est = np.asarray(est, np.int64)
        self.region = np.concatenate([[0], np.cumsum(self.est)[:-1]]).astype(np.int64)
        self.fill = np.zeros(len(self.est), np.int64)
        self.spills = [[] for _ in self.est]  # per bucket: spill parts in order
        self.limit = int(limit)
        self.spilled = 0  # bytes of spill arrays alive now
        self._queue = deque()  # unread parts in bucket order: [bucket, offset or None, part]
        self._per_key = sum(a.itemsize for a in self.columns)

    # ------------------------------------------------ distribution pass
    def place(self, b: int, count: int) -> list:
        """Parts (tuples of host arrays, one per column), in order, for the
        next `count` keys of bucket b."""
        out = []
        here = min(int(self.est[b] - self.fill[b]), count)
        if here > 0:
            at = int(self.region[b] + self.fill[b])
            out.append(self._views(at, at + here))
            self.fill[b] += here
        rest = count - max(here, 0)
        if rest > 0:
            spill = self._spill(rest)
            self.spills[b].append(spill)
            out.append(spill)
        return out

    def _views(self, lo, hi):
        return tuple(a[lo:hi] for a in self.columns)

    def _spill(self, count: int):
        nbytes = count * self._per_key
        if self.spilled + nbytes > self.limit:
            raise SpillFull(f"bucket estimates off by more than the {self.limit:,}-byte spill limit")
        self.spilled += nbytes
        return tuple(np.empty(count, a.dtype) for a in self.columns)

    # ------------------------------------------------------ bucket pass
    def start_reading(self) -> None:
        """After the distribution pass: queue every bucket's parts in order."""
        for b in range(len(self.est)):
            if self.fill[b]:
                lo = int(self.region[b])
                self._queue.append([b, lo, self._views(lo, lo + int(self.fill[b]))])
            for part in self.spills[b]:
                self._queue.append([b, None, part])
            self.spills[b] = []

    def lay(self, parts) -> None:
        """In place: queue parts that already lie in the columns,
        [(bucket, offset, count)] in the order the bucket pass reads them."""
        for b, offset, count in parts:
            self._queue.append([int(b), int(offset), self._views(offset, offset + count)])

    def mark(self):
        """The unread parts now, for `rollback`."""
        return [list(entry) for entry in self._queue], self.spilled

    def rollback(self, mark) -> None:
        """Back to `mark`: what was taken since is unread again (its keys
        must still be where they were: nothing written over them)."""
        entries, self.spilled = mark
        self._queue = deque(entries)

    def give_back(self) -> None:
        """After a failed in-place sort: the first (len - unread keys) places
        hold final keys; of the places after them, those no unread part holds
        are as many as the spill holds: write the spill there, so the
        columns hold a permutation of the input. Empties the queue."""
        n = len(self.columns[0])
        at = n - sum(len(entry[2][0]) for entry in self._queue)
        free = []
        for lo, hi in sorted((e[1], e[1] + len(e[2][0])) for e in self._queue if e[1] is not None):
            if lo > at:
                free.append((at, lo))
            at = max(at, hi)
        if at < n:
            free.append((at, n))
        spill = [entry[2] for entry in self._queue if entry[1] is None]
        if sum(hi - lo for lo, hi in free) != sum(len(part[0]) for part in spill):
            raise AssertionError("cudasortkit: in-place placement lost count of its spill")
        places = iter(free)
        lo = hi = 0
        for part in spill:
            i, m = 0, len(part[0])
            while i < m:
                if lo == hi:
                    lo, hi = next(places)
                k = min(m - i, hi - lo)
                for dst, src in zip(self.columns, part):
                    np.copyto(dst[lo:lo + k], src[i:i + k])
                lo, i = lo + k, i + k
        self._queue.clear()
        self.spilled = 0

    def take(self, count: int) -> list:
        """Parts holding the next `count` unread keys, in order."""
        out = []
        while count > 0:
            entry = self._queue[0]
            _, offset, part = entry
            m = len(part[0])
            if m <= count:
                self._queue.popleft()
                if offset is None:
                    self.spilled -= m * self._per_key
            else:  # split: the rest stays first in the queue
                entry[2] = tuple(a[count:] for a in part)
                if offset is not None:
                    entry[1] = offset + count
                else:
                    self.spilled -= count * self._per_key
                part, m = tuple(a[:count] for a in part), count
            out.append(part)
            count -= m
        return out

    def protect(self, lo: int, hi: int) -> None:
        """Copy every unread part of [lo, hi) of the columns to a spill part
        of its own (same place in the order) before something writes there."""
        queue = deque()
        for entry in self._queue:
            b, offset, part = entry
            m = len(part[0])
            if offset is None or offset >= hi or offset + m <= lo:
                queue.append(entry)
                continue
            a, z = max(lo, offset) - offset, min(hi, offset + m) - offset
            saved = self._spill(z - a)
            for dst, src in zip(saved, part):
                parallel_copy(dst, src[a:z])
            if a:
                queue.append([b, offset, tuple(x[:a] for x in part)])
            queue.append([b, None, saved])
            if z < m:
                queue.append([b, offset + z, tuple(x[z:] for x in part)])
        self._queue = queue
