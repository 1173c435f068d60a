"""`radix_select`: top-k and single-kth partition by radix select (kernels/radix_select.cu).

Per row, digit histograms of the selection words, most significant digit
first, narrow the candidates to the word T of rank `target` (k for topk,
kth + 1 for partition): one pass per digit (11 bits for at most WIDE_ROWS
rows, else 8), each reading the row once and keeping a histogram per row;
the row's last block to finish a pass picks its digit (no launch of its
own). Then one counting pass (its last block per row scans the tiles'
counts) and one scatter pass, both in tiles of block_size x
items_per_thread keys:

- topk: the words below T and the first ties (by index) land in index
  order in a candidate buffer of k per row (tiles holding none of them
  stop at once); those are sorted and gathered (`_finish`). About
  passes + 2 reads of the keys and a sort of k keys, instead of a sort of
  all of them.
- partition (one kth): a stable three-way partition around T (below,
  equal, above, each in index order) is written directly: no sort at all.

topk of several rows of at most STREAM_ROW keys takes one block per row
instead (rs_stream_select): an 11-bit digit histogram over the row read
from global memory, then one more read gathering the few keys that share
the target's digit into shared memory (more histogram passes only where
over RS_CAP keys share it), so several blocks fit an SM and the rows' later
reads come from L2.

k <= SORT_CAP candidates per row are sorted and gathered by one block per
row in shared memory (rs_sort_small); larger k through the core's stable
argsort of the candidates' words (job.argsort_rows) and rs_finish.

topk of keys of at most 32 bits with k <= SORT_CAP, over rows of at least
SAMPLED_MIN_ROW keys, takes the sampled path instead (sample_plan): a
random sample of each row sets a threshold word, one pass over the row
keeps the words below it, and one block per row picks and sorts the first
k of those (rs_sample, rs_filter, rs_final): about one read of the keys
and three launches. The result is exact whatever the sample; a row whose
threshold missed (too few or too many words below it, about one row in
10^5 for keys in random order) takes rs_stream_row's exact path inside
rs_final.
"""
from __future__ import annotations

import functools
import math

from cudasortkit.sdk.plugin import tile_tunables
from cudasortkit.sdk.selection import MAX_GRID, WORD_DTYPES, GeneralSelectPlugin

#: topk of several rows of at most this many keys: one block per row (rs_stream_select).
STREAM_ROW = 1 << 16
#: Threads of rs_stream_select's block.
STREAM_THREADS = 512
#: k at most this: the candidates are sorted in one block (RS_SORT_CAP of radix_select.cu).
SORT_CAP = 2048
#: The long-row path's digit for at most WIDE_ROWS rows (RS_WIDE of
#: radix_select.cu: 2,048 bins a row, 3 passes for 32-bit keys instead of
#: 4); more rows keep 8-bit digits (256 bins a row).
WIDE_DIGIT = 11
WIDE_ROWS = 64
#: One row of at most this many keys goes to sort_select by default (one
#: block's shared-memory sort beats the radix passes' launches).
SHORT_ROW = 4096
#: The sampled path's shortest row, and its samples a row (powers of two).
SAMPLED_MIN_ROW = 1 << 13
MIN_SAMPLES, MAX_SAMPLES = 512, 2048
#: rs_sample and rs_final's threads: a whole SM's for at most WIDE_ROWS rows
#: (one row's candidates are many), a quarter of it for more (more blocks an SM).
FEW_ROWS_THREADS, MANY_ROWS_THREADS = 1024, 256


@functools.lru_cache(maxsize=1024)
def sample_plan(row_len: int, k: int):
    """(samples, m, cap) of the sampled path for rows of `row_len` keys and
    this k, or None where it does not pay (short rows, a threshold more than
    a quarter into the sample) or cannot run (positions of 32 bits or more).

    The threshold is the word of rank m in the sample, so about (m - 1) /
    samples of the row falls below it. With lam = k * samples / row_len
    samples expected among the row's k first, m - 1 = lam + 3 sqrt(lam) + 4
    leaves fewer than k words below the threshold about once in 10^5 rows
    (a gamma tail), and a row keeps at most `cap` = 3 m / samples of its
    length as candidates (overflow is rarer still): either miss sends the
    row to the exact path, so these constants set only the speed."""
    if k > SORT_CAP or row_len < SAMPLED_MIN_ROW or row_len >= 1 << 32:
        return None
    samples = min(MAX_SAMPLES, max(MIN_SAMPLES, 1 << max(0, (row_len // 64 - 1).bit_length())))
    lam = k * samples / row_len
    m = math.ceil(lam + 3 * math.sqrt(lam) + 4) + 1
    if m > samples // 4:
        return None
    cap = min(row_len, -(-(3 * m * row_len // samples + 64) // 64) * 64)
    return samples, m, cap


#: Threads of a block of the large-k path's passes over the row.
LARGE_K_THREADS = 512
#: The most samples of large_k_plan's row (rs_sample's dynamic shared
#: memory). 32,768 (a quarter fewer slots to sort at 2^24 keys, k = 2^20)
#: measured slower on an H200: the one block's sample took 40 us instead of 14.
LARGE_K_SAMPLES = 8192


@functools.lru_cache(maxsize=1024)
def large_k_plan(rows: int, row_len: int, k: int):
    """(samples, m, cap) of one row's topk for k over SORT_CAP through a
    sampled threshold and a sort of the candidates (RadixSelect._sampled_sort),
    or None where it does not pay or cannot run: several rows, fewer than
    MAX_SAMPLES samples of 16 keys each, k past half the row, positions of
    32 bits or more. Samples: a power of two, 16 keys each, at most
    LARGE_K_SAMPLES. m as sample_plan's; cap = (m - 1 + 4 sqrt(m - 1) + 64)
    / samples of the row, four standard deviations over the expected
    candidates: all cap slots are sorted, and a miss (about once in 10^4
    calls for keys in random order) costs the exact passes as well."""
    if rows != 1 or k <= SORT_CAP or row_len < 16 * MAX_SAMPLES or row_len >= 1 << 32:
        return None
    samples = min(LARGE_K_SAMPLES, 1 << ((row_len // 16).bit_length() - 1))
    lam = k * samples / row_len
    below = math.ceil(lam + 3 * math.sqrt(lam) + 4)
    if below + 1 > samples // 2:
        return None
    cap = min(row_len, math.ceil((below + 4 * math.sqrt(below) + 64) * row_len / samples))
    return samples, below + 1, cap


def sample_positions(row_len: int, samples: int) -> list:
    """The row positions rs_sample reads (its hash, for tests): one in each
    of `samples` strides of row_len // samples keys."""
    stride = row_len // samples
    out = []
    for j in range(samples):
        h = j
        h ^= h >> 16
        h = (h * 0x7FEB352D) & 0xFFFFFFFF
        h ^= h >> 15
        h = (h * 0x846CA68B) & 0xFFFFFFFF
        h ^= h >> 16
        out.append(j * stride + h % stride)
    return out


def digit_passes(key_bits: int, digit: int) -> list:
    """(shift, width) of each histogram pass, most significant digit first:
    `digit` bits a pass, the last pass the bits left (32 bits at 11: 11,
    11, 10)."""
    passes, top = [], key_bits
    while top > 0:
        width = min(digit, top)
        passes.append((top - width, width))
        top -= width
    return passes


class RadixSelect(GeneralSelectPlugin):
    name = "radix_select"
    summary = "radix select: digit histograms narrow to the k-th key, then k keys sorted"
    priority = 100
    replayable = True
    #: one short row: sort_select (priority 500, one block's sort) wins below
    #: this one's 600 (its passes are launches); everything else takes the
    #: default 100 (several rows of at most STREAM_ROW keys: rs_stream_select).
    priorities = ((1, SHORT_ROW, None, 600),)
    tunables = tile_tunables((256, (128, 256, 512)), (16, (4, 8, 16, 32)))
    templates = ("radix_select.cu",)

    def unsupported(self, request):
        reason = super().unsupported(request)
        if reason is None and request.op == "partition" and len(request.kth) != 1:
            reason = f"{self.name} partitions around one kth (sort_select serves several)"
        return reason

    def run(self, job):
        if job.request.op == "topk" and job.key_bits <= 32:
            plan = sample_plan(job.row_len, job.k)
            if plan is not None:
                return self._sampled(job, *plan)
            plan = large_k_plan(job.rows, job.row_len, job.k)
            if plan is not None:
                return self._sampled_sort(job, *plan)
        if job.request.op == "topk" and job.rows > 1 and job.row_len <= STREAM_ROW:
            return self._rows_streamed(job)
        return self._exact(job)

    def _exact(self, job):
        """The digit-histogram passes over tiles of every row (see the module's comment)."""
        rows, row_len, k = job.rows, job.row_len, job.k
        block = int(job.config["block_size"])
        tile = block * int(job.config["items_per_thread"])
        nb = job.blocks(row_len, tile)
        partition = job.request.op == "partition"
        target = job.request.kth[0] + 1 if partition else k
        largest = 0 if partition else int(job.largest)
        cand = rows * k if not partition else 0
        digit = WIDE_DIGIT if rows <= WIDE_ROWS else 8
        stride = 1 << digit  # bins per row
        # hist and done adjacent: one memset zeroes both (rs_hist zeroes them again per pass)
        buf = job.alloc_parts((
            ("prefix", rows * 8), ("remaining", rows * 8), ("hist", rows * stride * 8),
            ("done", rows * 4), ("counts", rows * nb * 16), ("totals", rows * 16),
            ("cand_words", cand * job.key_bytes), ("cand_index", cand * 8)))
        hist, count, scatter = job.kernels("radix_select.cu", ("rs_hist", "rs_count", "rs_scatter"),
                                           value_bytes=0)
        job.memset32(buf["hist"], 0, (buf["done"] + rows * 4 - buf["hist"]) // 4)
        for shift, width in digit_passes(job.key_bits, digit):
            job.launch(hist, rows * nb, block, job.keys_in, row_len, nb, buf["prefix"],
                       buf["remaining"], buf["hist"], stride, buf["done"], shift, width,
                       largest, target, 0, 0)
        job.launch(count, rows * nb, block, job.keys_in, row_len, nb,
                   buf["prefix"], buf["counts"], buf["totals"], buf["done"], largest, 0, 0, 0, 0)
        if partition:
            job.launch(scatter, rows * nb, block, job.keys_in, row_len, nb, k,
                       buf["prefix"], buf["counts"], buf["totals"], job.keys_out,
                       job.values_out, largest, 1, 0, 0)
            return
        job.launch(scatter, rows * nb, block, job.keys_in, row_len, nb, k,
                   buf["prefix"], buf["counts"], buf["totals"], buf["cand_words"],
                   buf["cand_index"], largest, 0, 0, 0)
        self._finish(job, buf["cand_words"], buf["cand_index"])

    def _sampled(self, job, samples: int, m: int, cap: int):
        """topk by a sampled threshold (sample_plan; radix_select.cu's
        sampled section): rs_sample, rs_filter over tiles, rs_final."""
        rows, row_len, k = job.rows, job.row_len, job.k
        tile = int(job.config["block_size"]) * int(job.config["items_per_thread"])
        nb = job.blocks(row_len, tile)
        buf = job.alloc_parts((
            ("thresh", rows * 8), ("counts", rows * 16), ("cand", rows * cap * 8),
            ("scratch_words", rows * k * job.key_bytes), ("scratch_index", rows * k * 8)))
        threads = FEW_ROWS_THREADS if rows <= WIDE_ROWS else MANY_ROWS_THREADS
        per_row = dict(job.config, block_size=threads)
        sample, final = job.kernels("radix_select.cu", ("rs_sample", "rs_final"), config=per_row,
                                    value_bytes=0)
        filt, = job.kernels("radix_select.cu", ("rs_filter",), value_bytes=0)
        largest = int(job.largest)
        job.launch(sample, rows, threads, job.keys_in, row_len, samples, m,
                   buf["thresh"], buf["counts"], largest, shared=samples * job.key_bytes)
        job.launch(filt, rows * nb, int(job.config["block_size"]), job.keys_in, row_len, nb,
                   buf["thresh"], buf["counts"], buf["cand"], cap, largest)
        job.launch(final, rows, threads, job.keys_in, row_len, k, buf["thresh"],
                   buf["counts"], buf["cand"], cap, buf["scratch_words"], buf["scratch_index"],
                   job.keys_out, job.values_out, largest)

    def _sampled_sort(self, job, samples: int, m: int, cap: int) -> None:
        """topk of one row for k over SORT_CAP (large_k_plan): rs_sample, then
        rs_filter_ordered keeps the words below the threshold and their
        32-bit positions in the row's order, in cap candidate slots; the
        exact passes behind them (rs_hist, rs_count, rs_scatter in mode 2)
        run only where the threshold missed and then put the exact k in the
        slots (rs_count marks the unused slots where they do not); the
        core's stable sort of the slots' words with their positions; rs_take.
        All queued at once, no wait: replayable."""
        row_len, k = job.row_len, job.k
        # tiles of LARGE_K_THREADS x items_per_thread keys: half the blocks
        # of the default's, for the exact passes that mostly return at once
        block = LARGE_K_THREADS
        tiled = dict(job.config, block_size=block)
        nb = job.blocks(row_len, block * int(job.config["items_per_thread"]))
        stride = 1 << WIDE_DIGIT
        # hist to next_tile: zeroed by one memset
        buf = job.alloc_parts((
            ("thresh", 8), ("counts", 16), ("words", cap * job.key_bytes), ("index", cap * 4),
            ("prefix", 8), ("remaining", 8), ("tiles", nb * 16), ("totals", 16),
            ("hist", stride * 8), ("done", 4), ("status", nb * 8), ("next_tile", 4)))
        per_row = dict(job.config, block_size=FEW_ROWS_THREADS)
        sample, = job.kernels("radix_select.cu", ("rs_sample",), config=per_row, value_bytes=0)
        filt, hist, count, scatter, take = job.kernels(
            "radix_select.cu",
            ("rs_filter_ordered", "rs_hist", "rs_count", "rs_scatter", "rs_take"),
            config=tiled, value_bytes=0)
        largest, gate = int(job.largest), buf["counts"]
        job.memset32(buf["hist"], 0, (buf["next_tile"] + 4 - buf["hist"]) // 4)
        job.launch(sample, 1, FEW_ROWS_THREADS, job.keys_in, row_len, samples, m, buf["thresh"],
                   buf["counts"], largest, shared=samples * job.key_bytes)
        job.launch(filt, nb, block, job.keys_in, row_len, buf["thresh"], buf["counts"],
                   buf["status"], buf["next_tile"], buf["words"], buf["index"], cap, largest)
        for shift, width in digit_passes(job.key_bits, WIDE_DIGIT):
            job.launch(hist, nb, block, job.keys_in, row_len, nb, buf["prefix"],
                       buf["remaining"], buf["hist"], stride, buf["done"], shift, width, largest,
                       k, gate, cap)
        job.launch(count, nb, block, job.keys_in, row_len, nb, buf["prefix"], buf["tiles"],
                   buf["totals"], buf["done"], largest, gate, k, cap, buf["words"])
        job.launch(scatter, nb, block, job.keys_in, row_len, nb, k, buf["prefix"], buf["tiles"],
                   buf["totals"], buf["words"], buf["index"], largest, 2, gate, cap)
        words, index = job.sort_rows(buf["words"], WORD_DTYPES[job.key_bytes], 1, cap,
                                     values=buf["index"])
        job.launch(take, min(job.blocks(k, block), MAX_GRID), block, job.keys_in, k, words,
                   index, job.keys_out, job.values_out, largest)

    def _rows_streamed(self, job):
        """topk of several rows of at most STREAM_ROW keys: one block per
        row streams it (rs_stream_select) into its k candidates."""
        rows, k = job.rows, job.k
        buf = job.alloc_parts((("cand_words", rows * k * job.key_bytes),
                               ("cand_index", rows * k * 8)))
        config = dict(job.config, block_size=STREAM_THREADS)
        select, = job.kernels("radix_select.cu", ("rs_stream_select",), config=config,
                              value_bytes=0)
        job.launch(select, rows, STREAM_THREADS, job.keys_in, job.row_len, k,
                   buf["cand_words"], buf["cand_index"], int(job.largest))
        self._finish(job, buf["cand_words"], buf["cand_index"])

    @staticmethod
    def _finish(job, cand_words, cand_index):
        """topk's results from rows x k candidates (selection words and
        positions in the row; equal words in index order): sorted by
        (word, index) and gathered."""
        rows, row_len, k = job.rows, job.row_len, job.k
        block = int(job.config["block_size"])
        if k <= SORT_CAP:
            small, = job.kernels("radix_select.cu", ("rs_sort_small",), value_bytes=0)
            job.launch(small, rows, block, job.keys_in, row_len, k, cand_words, cand_index,
                       job.keys_out, job.values_out)
            return
        order = job.argsort_rows(cand_words, WORD_DTYPES[job.key_bytes], rows, k)
        finish, = job.kernels("radix_select.cu", ("rs_finish",), value_bytes=0)
        job.launch(finish, min(job.blocks(rows * k, block), MAX_GRID), block, job.keys_in,
                   row_len, k, rows, cand_index, order, job.keys_out, job.values_out)
