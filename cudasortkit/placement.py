"""Where an out-of-core sort's buckets lie on the host between its two
passes when no count pass told it their sizes (cudasortkit/outofcore.py).

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
    """The host places of every bucket's keys (values) between the passes."""

    def __init__(self, out_keys, out_values, est, limit: int):
        self.out_keys, self.out_values = out_keys, out_values
        self.est = np.asarray(est, np.int64)
        self.region = np.concatenate([[0], np.cumsum(self.est)[:-1]]).astype(np.int64)
        self.fill = np.zeros(len(self.est), np.int64)
        self.spills = [[] for _ in self.est]  # per bucket: [(keys, values or None)]
        self.limit = int(limit)
        self.spilled = 0  # bytes of spill arrays alive now
        self._queue = deque()  # unread parts in bucket order: [bucket, offset or None, keys, values]
        self._per_key = out_keys.itemsize + (out_values.itemsize if out_values is not None else 0)

    # ------------------------------------------------ distribution pass
    def place(self, b: int, count: int) -> list:
        """[(keys, values or None)] host arrays, in order, for the next
        `count` keys of bucket b."""
        out = []
        room = int(self.est[b] - self.fill[b])
        here = min(room, count)
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
        values = self.out_values[lo:hi] if self.out_values is not None else None
        return self.out_keys[lo:hi], values

    def _spill(self, count: int):
        nbytes = count * self._per_key
        if self.spilled + nbytes > self.limit:
            raise SpillFull(f"bucket estimates off by more than the {self.limit:,}-byte spill limit")
        self.spilled += nbytes
        values = (np.empty(count, self.out_values.dtype) if self.out_values is not None else None)
        return np.empty(count, self.out_keys.dtype), values

    # ------------------------------------------------------ bucket pass
    def start_reading(self) -> None:
        """After the distribution pass: queue every bucket's parts in order."""
        for b in range(len(self.est)):
            if self.fill[b]:
                lo = int(self.region[b])
                keys, values = self._views(lo, lo + int(self.fill[b]))
                self._queue.append([b, lo, keys, values])
            for keys, values in self.spills[b]:
                self._queue.append([b, None, keys, values])
            self.spills[b] = []

    def take(self, count: int) -> list:
        """[(keys, values or None)] of the next `count` unread keys, in order."""
        out = []
        while count > 0:
            part = self._queue[0]
            _, offset, keys, values = part
            m = len(keys)
            if m <= count:
                self._queue.popleft()
                if offset is None:
                    self.spilled -= m * self._per_key
            else:  # split: the rest stays first in the queue
                part[2], part[3] = keys[count:], (values[count:] if values is not None else None)
                if offset is not None:
                    part[1] = offset + count
                else:
                    self.spilled -= count * self._per_key
                keys, values, m = keys[:count], (values[:count] if values is not None else None), count
            out.append((keys, values))
            count -= m
        return out

    def unread(self) -> int:
        return sum(len(p[2]) for p in self._queue)

    def protect(self, lo: int, hi: int) -> None:
        """Copy every unread part of out[lo, hi) to a spill array of its own
        (same place in the order) before something writes there."""
        for i in range(len(self._queue)):
            b, offset, keys, values = self._queue[i]
            if offset is None or offset >= hi or offset + len(keys) <= lo:
                continue
            a, z = max(lo, offset) - offset, min(hi, offset + len(keys)) - offset
            saved_keys, saved_values = self._spill(z - a)
            parallel_copy(saved_keys, keys[a:z])
            if values is not None:
                parallel_copy(saved_values, values[a:z])
            pieces = []
            if a:
                pieces.append([b, offset, keys[:a], values[:a] if values is not None else None])
            pieces.append([b, None, saved_keys, saved_values])
            if z < len(keys):
                pieces.append([b, offset + z, keys[z:], values[z:] if values is not None else None])
            self._queue[i] = pieces
        flat = deque()
        for part in self._queue:
            if isinstance(part[0], list):
                flat.extend(part)
            else:
                flat.append(part)
        self._queue = flat
