"""`counting`: counting sort for integer keys that take few distinct values.

Keys become bins 0 .. bins-1 (bin = ordered key - smallest ordered key, so
descending is the same code with the keys.cuh mask). The number of bins is the
key range, max - min + 1:

* 8- and 16-bit integer keys (and bool, which sorts as uint8): always, over the
  whole dtype (256 or 65,536 bins), or the caller's key_range.
* 32- and 64-bit integer keys: when max - min + 1 <= RANGE_LIMIT (2^20), taken
  from key_range=(lo, hi) if the caller gives it, else measured by one GPU
  min/max pass (Request.keys_range). Wider ranges are declined, so "auto"
  moves on and a request by name gets ValueError with the reason.
* Float keys: not supported (no small set of bins; use radix or onesweep).

Keys only: histogram -> exclusive scan (cudasortkit.sdk.scan.DeviceScan) -> every
output slot gets its bin's key (no scatter). Pairs and argsort: the
chained-scan LSD passes of cudasortkit.sdk.sweep (one launch per 8-bit digit of
the bin, reading and writing every key once), so up to 256 bins take one pass
and 65,536 two. Stable throughout, ascending and descending. kernels/counting.cu has the details; docs/algorithms/counting.md
the limits.

Replayable where its launches follow from the shape alone: 8- and 16-bit keys
without a key_range promise (the whole dtype's bins; the 16-byte vectors'
offset of the arrays is found on the device). A run that reads the keys'
range (32- and 64-bit keys), checks a promise (a wait for its flag) or gets
arrays not aligned to their keys' size is not recorded.
"""
from __future__ import annotations

import math

import numpy as np

from cudasortkit.dtypes import KIND_FLOAT, itemsize, key_kind
from cudasortkit.sdk.plugin import WARP_MATCH, SortPlugin, Tunable
from cudasortkit.sdk.scan import DeviceScan
from cudasortkit.sdk.sweep import SweepGeometry, sweep_sort

INT_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
#: Most bins (max - min + 1) the plugin sorts into; wider ranges are declined.
RANGE_LIMIT = 1 << 20
#: Counts and output positions are 32-bit.
MAX_KEYS = (1 << 32) - 1
#: Shared memory for a histogram with several counters per bin (<= 256 bins
#: get one per lane, so equal keys never serialize).
COPIES_BYTES = 32 * 1024
#: More bins than MAX_SLICES * slice_bins: count with global atomics.
MAX_SLICES = 4
#: Bits of the bin sorted per stable scatter pass (256 digits).
DIGIT_BITS = 8


def bin_layout(dtype, lo: int, hi: int, descending: bool) -> tuple:
    """(base, bins): the ordered word (keys.cuh, mask applied) of the first bin
    and the number of bins for keys in [lo, hi]."""
    dt = np.dtype(dtype)
    bits = 8 * dt.itemsize
    shift = -int(np.iinfo(dt).min)  # ordered word of a signed key: key + 2^(bits-1)
    olo, ohi = int(lo) + shift, int(hi) + shift
    base = ((1 << bits) - 1) - ohi if descending else olo
    return base, ohi - olo + 1


def clamp_range(dtype, key_range) -> tuple | None:
    """The caller's key_range as integers inside the dtype, or None if no key
    of the dtype can lie in it."""
    info = np.iinfo(np.dtype(dtype))
    lo, hi = key_range
    lo, hi = max(int(math.ceil(lo)), int(info.min)), min(int(math.floor(hi)), int(info.max))
    return (lo, hi) if lo <= hi else None


class CountingSort(SortPlugin):
    name = "counting"
    summary = "counting sort for integer keys with a small range (<= 2^20 values; stable)"
    dtypes = INT_DTYPES
    stable = True
    pairs = True
    makes_indices = True
    #: A key_range promise is checked by the counting kernels (a flag).
    checks_key_range = True
    #: 8- and 16-bit keys without a key_range: the same launches for the
    #: same shape (run() refuses the recording of any other run).
    replayable = True
    #: First when nothing is measured for 8- and 16-bit keys (it declines
    #: floats); up to 2^22 keys onesweep goes first (counting's launches cost
    #: more there). 32- and 64-bit keys: WIDE_KEYS_FROM.
    priority = 10
    priorities = ((1 << 22, 25),)
    #: 1-byte keys alone go to counting first from more keys than this (its
    #: range read is a histogram of 256 bins; one H200 run, uint8:
    #: 2^16 onesweep 0.018 ms, counting slower; 2^20 counting 0.022 against
    #: onesweep's 0.024).
    BYTE_KEYS_FROM = 1 << 18
    #: 32- and 64-bit keys: unsupported() measures their range.
    decides_on_key_range = True
    #: The generic suite sorts uniform int32/int64/uint32/uint64 keys by name,
    #: which this plugin correctly declines (range far above RANGE_LIMIT) with
    #: ValueError; tests/test_counting_gpu.py runs the same checks with ranges
    #: it serves and asserts the ValueError for those it does not.
    conformance_exempt = True
    tunables = {
        "block_size": Tunable(512, (256, 512, 1024), "threads per block"),
        "vec_loads": Tunable(2, (1, 2, 4), "16-byte loads/stores in flight per thread (histogram, fill)"),
        "slice_bins": Tunable(65536, (16384, 32768, 65536),
                              "packed 16-bit shared counters per histogram block (more bins: slices)"),
        "aggregate": Tunable(0, (0, 1), "warp-aggregated histogram atomics (__match_any_sync)"),
        "warp_match": WARP_MATCH,
        "scatter_block": Tunable(384, (256, 384, 512), "threads per block of the pairs/argsort passes"),
        "scatter_items": Tunable(16, (8, 12, 16, 20), "keys per thread in a pairs/argsort pass tile"),
    }
    templates = ("counting.cu", "counting_sweep.cu")

    #: 32- and 64-bit keys go to counting first (with nothing measured) only
    #: when sorted alone, from WIDE_KEYS_FROM keys, spanning more than 2^8
    #: and at most 2^14 values (WIDE_KEYS_BINS); else behind onesweep
    #: (WIDE_KEYS_PRIORITY). Counting reads their range and waits for it
    #: (about 0.15 ms at every size), onesweep skips the digits every key
    #: shares: one pass for 256 values, two up to 2^16. One H200 run, int32
    #: keys in [0, 2^b), counting against onesweep, ms: at 2^26 keys, b = 8
    #: 0.426 / 0.394, b = 10, 12, 14 0.436-0.536 / 0.624-0.631, b = 16-20
    #: 0.79-1.65 / 0.66-0.92; at 2^22 and 2^24 onesweep was faster for every
    #: b (2^24: 0.21-0.56 / 0.12-0.27), and for argsort in every cell.
    WIDE_KEYS_FROM = 1 << 25
    WIDE_KEYS_BINS = (1 << 8, 1 << 14)
    WIDE_KEYS_PRIORITY = 25

    def priority_for_request(self, request) -> int:
        """priority_for(n); first for 1-byte keys alone past BYTE_KEYS_FROM;
        32- and 64-bit keys as WIDE_KEYS_FROM says (their range was read once
        for the request, by unsupported)."""
        if (request.value_bytes == 0 and itemsize(request.dtype) == 1
                and request.n > self.BYTE_KEYS_FROM):
            return self.priority
        if itemsize(request.dtype) >= 4:
            return self.priority if self._wide_keys_first(request) else self.WIDE_KEYS_PRIORITY
        return self.priority_for(request.n)

    def _wide_keys_first(self, request) -> bool:
        """Whether 32/64-bit keys go to counting before onesweep."""
        if request.needs_values or request.n < self.WIDE_KEYS_FROM:
            return False
        measured = request.keys_range()
        clamped = None if measured is None else clamp_range(request.dtype, measured)
        if clamped is None:
            return False
        fewest, most = self.WIDE_KEYS_BINS
        return fewest < clamped[1] - clamped[0] + 1 <= most

    # ------------------------------------------------------------ support
    def unsupported(self, request):
        if key_kind(request.dtype) == KIND_FLOAT:
            return ("counting sorts integer keys only: float keys have no small set of bins "
                    "(use radix or onesweep)")
        reason = super().unsupported(request)
        if reason is not None:
            return reason
        if request.n > MAX_KEYS:
            return f"counting counts with 32-bit counters: at most {MAX_KEYS:,} keys"
        if request.n <= 1:
            return None
        if request.key_range is not None and clamp_range(request.dtype, request.key_range) is None:
            return f"key_range={request.key_range} holds no {request.dtype} value"
        if itemsize(request.dtype) <= 2:
            return None  # 256 or 65,536 bins at most
        measured = request.keys_range()
        if measured is None:
            return "counting needs the key range; pass key_range=(lo, hi)"
        lo, hi = clamp_range(request.dtype, measured)
        bins = hi - lo + 1
        if bins > RANGE_LIMIT:
            return (f"keys span {bins:,} values ({lo} .. {hi}); counting sorts at most "
                    f"{RANGE_LIMIT:,} (2^20) distinct values")
        return None

    @staticmethod
    def sweep_geometry(config) -> SweepGeometry:
        return SweepGeometry(config["scatter_block"], config["scatter_items"], DIGIT_BITS)

    def valid_config(self, config, dtype, value_bytes, limits):
        return (config["block_size"] <= limits.max_threads_per_block
                and self.sweep_geometry(config).fits(itemsize(dtype), value_bytes, limits))

    # ---------------------------------------------------------------- run
    def run(self, job):
        if job.n > MAX_KEYS:
            raise ValueError(f"counting: {job.n:,} keys is more than {MAX_KEYS:,}")
        lo, hi, promised = self._key_range(job)
        base, bins = bin_layout(job.dtype, lo, hi, job.descending)
        if bins > RANGE_LIMIT:
            raise ValueError(f"counting: keys span {bins:,} values, more than {RANGE_LIMIT:,}")
        if job.recorder is not None:
            why = self._not_replayable(job, promised)
            if why is not None:
                job.recorder.refuse(why)
        flag = 0
        if promised:  # the caller's key_range: verify it while counting
            flag = int(job.alloc(4))
            job.memset32(flag, 0, 1)
        if job.value_bytes == 0:
            self._sort_keys(job, base, bins, flag)
        else:
            self._sort_pairs(job, base, bins, flag)

    @staticmethod
    def _not_replayable(job, promised: bool) -> str | None:
        """Why this run's launches do not follow from its shape (its plan key,
        launch/plans.py: the key_range is part of it), or None."""
        if promised:
            return "counting waits for its key_range check"
        if job.key_bytes > 2:
            return "counting's bins come from the keys' range, read for each call"
        if any(p % job.key_bytes for p in (job.keys_in, job.keys_out)):
            return "counting copies keys not aligned to their size"
        return None

    def _key_range(self, job):
        """(lo, hi, promised): the keys' range and whether it is only the
        caller's promise (then kernels check it)."""
        request = job.request
        info = np.iinfo(np.dtype(job.dtype))
        if request is not None and request.key_range is not None:
            clamped = clamp_range(job.dtype, request.key_range)
            if clamped is None:
                raise ValueError(f"counting: key_range={request.key_range} holds no {job.dtype} value")
            return clamped[0], clamped[1], True
        if job.key_bytes <= 2:
            return int(info.min), int(info.max), False
        measured = request.keys_range() if request is not None else None
        if measured is None:
            measured = job.keys_minmax()
        return int(measured[0]), int(measured[1]), False

    def _check_flag(self, job, flag, request_range):
        if not flag:
            return
        state = job.state
        host = np.zeros(1, np.uint32)
        state.stream.synchronize()
        state.cuda.memcpy_dtoh(host, flag)
        if host[0]:
            raise ValueError(f"counting: some keys lie outside key_range={request_range}")

    def _kernel(self, job, name):
        return job.kernel("counting.cu", name)  # compiled and prepared once

    # ---------------------------------------------------------- keys only
    def histogram_layout(self, bins: int, slice_cap: int) -> tuple:
        """(slices, slice_bins, copies) of counting_histogram: copies >= 2 are
        32-bit counters per bin (few bins), copies == 0 packed 16-bit counters
        in slices of slice_cap bins; slices == 0: global atomics."""
        copies = 32
        while copies > 1 and bins * copies * 4 > COPIES_BYTES:
            copies //= 2
        if copies > 1:
            return 1, bins, copies
        if bins <= slice_cap:
            return 1, bins, 0
        slices = -(-bins // slice_cap)
        if slices > MAX_SLICES:
            return 0, 0, 1
        return slices, slice_cap, 0

    @staticmethod
    def histogram_shared(slices: int, slice_bins: int, copies: int) -> int:
        if not slices:
            return 0
        return slice_bins * copies * 4 if copies else -(-slice_bins // 2) * 4

    def _sort_keys(self, job, base, bins, flag):
        cfg, n = job.config, job.n
        keys_in = job.keys_in
        if keys_in % job.key_bytes:  # vector loads need keys aligned to their size
            aligned = job.alloc(n * job.key_bytes)
            job.copy(int(aligned), keys_in, n * job.key_bytes)
            keys_in = int(aligned)
        block, vec_loads = cfg["block_size"], cfg["vec_loads"]
        kpv = 16 // job.key_bytes
        counts = int(job.alloc(bins * 4))
        job.memset32(counts, 0, bins)
        histogram = self._kernel(job, "counting_histogram")
        limits = job.limits
        # 2 bytes a bin, in what a block may opt into beside its static shared memory
        slice_cap = min(cfg["slice_bins"],
                        (limits.shared_per_block_optin - histogram.static_shared) // 2)
        slice_cap = 1 << (slice_cap.bit_length() - 1)
        slices, slice_bins, copies = self.histogram_layout(bins, slice_cap)
        shared = self.histogram_shared(slices, slice_bins, copies)
        # The kernels find the arrays' offset in their first 16-byte vector
        # themselves (vec_span); the grids cover the most vectors any offset
        # needs, so a replay on other addresses is served.
        vectors = (kpv - 1 + n + kpv - 1) // kpv
        target = limits.sm_count * max(1, histogram.resident_blocks(limits, block, shared))
        chunks = max(1, min(target // max(slices, 1), job.blocks(vectors, block * vec_loads)))
        per_chunk = job.blocks(vectors, chunks)
        chunks = job.blocks(vectors, per_chunk)
        job.launch(histogram, chunks * max(slices, 1), block, keys_in, n, job.desc_mask, base,
                   bins, counts, flag, slices, slice_bins, copies, per_chunk, shared=shared)
        self._check_flag(job, flag, job.request.key_range if job.request else None)
        DeviceScan(job, bins)(counts, counts)
        out = job.keys_out
        staged = out % job.key_bytes != 0
        if staged:  # vector stores need an aligned output
            out = int(job.alloc(n * job.key_bytes))
        out_vectors = (kpv - 1 + n + kpv - 1) // kpv  # (as `vectors`)
        job.launch(self._kernel(job, "counting_fill"), job.blocks(out_vectors, block * vec_loads),
                   block, out, n, counts, bins, job.desc_mask, base)
        if staged:
            job.copy(job.keys_out, out, n * job.key_bytes)

    # ------------------------------------------------------ pairs, argsort
    def _sort_pairs(self, job, base, bins, flag):
        """Stable LSD passes over the bin's bits (cudasortkit.sdk.sweep); a broken
        key_range promise still yields a permutation, then ValueError."""
        sweep_sort(job, "counting_sweep.cu", self.sweep_geometry(job.config), base=base,
                   limit=bins - 1, bad=flag)
        self._check_flag(job, flag, job.request.key_range if job.request else None)
