"""`radix_select`: top-k and single-kth partition by radix select (kernels/radix_select.cu).

Per row, 8-bit digit histograms of the selection words, most significant
digit first, narrow the candidates to the word T of rank `target` (k for
topk, kth + 1 for partition): one pass per key byte, each reading the row
once and keeping a 256-bin histogram per row. Then one counting pass and
one scatter pass, both in tiles of block_size x items_per_thread keys:

- topk: the words below T and the first ties (by index) land in index
  order in a candidate buffer of k per row, which the core's stable argsort
  (job.argsort_rows) orders; the results are gathered through it. About
  KEY_BYTES + 2 reads of the keys and a sort of k keys, instead of a sort
  of all of them.
- partition (one kth): a stable three-way partition around T (below,
  equal, above, each in index order) is written directly: no sort at all.

topk of several rows that each fit in a block's shared memory takes one
block per row instead (rs_block_select): the row is read once into shared
memory and every pass runs there.
"""
from __future__ import annotations

from cudasortkit.dtypes import KEY_DTYPES
from cudasortkit.sdk.plugin import Tunable
from cudasortkit.sdk.selection import MAX_GRID, WORD_DTYPES, SelectPlugin

#: Shared memory rs_block_select takes besides the row (bins, warp counts), rounded up.
BLOCK_STATIC = 4096
#: Threads of rs_block_select's block: many loads in flight per SM.
BLOCK_THREADS = 1024
#: One row of at most this many keys goes to sort_select by default (one
#: block's shared-memory sort beats the radix passes' launches).
SHORT_ROW = 4096


class RadixSelect(SelectPlugin):
    name = "radix_select"
    summary = "radix select: digit histograms narrow to the k-th key, then k keys sorted"
    dtypes = KEY_DTYPES
    ops = ("topk", "partition")
    priority = 100
    #: one short row: sort_select (priority 500, one block's sort) wins below
    #: this one's 600 (its passes are launches); several rows take the
    #: shared-memory path at the default 100.
    priorities = ((1, SHORT_ROW, None, 600),)
    tunables = {
        "block_size": Tunable(256, (128, 256, 512), "threads per block"),
        "items_per_thread": Tunable(16, (4, 8, 16, 32), "keys per thread of a tile"),
    }
    templates = ("radix_select.cu",)

    def unsupported(self, request):
        reason = super().unsupported(request)
        if reason is None and request.op == "partition" and len(request.kth) != 1:
            reason = f"{self.name} partitions around one kth (sort_select serves several)"
        return reason

    def run(self, job):
        if (job.request.op == "topk" and job.rows > 1
                and job.row_len * job.key_bytes + BLOCK_STATIC <= job.limits.shared_per_block_optin):
            return self._rows_in_shared_memory(job)
        rows, row_len, k = job.rows, job.row_len, job.k
        block = int(job.config["block_size"])
        tile = block * int(job.config["items_per_thread"])
        nb = job.blocks(row_len, tile)
        partition = job.request.op == "partition"
        target = job.request.kth[0] + 1 if partition else k
        largest = 0 if partition else int(job.largest)
        cand = rows * k if not partition else 0
        buf = job.alloc_parts((
            ("prefix", rows * 8), ("remaining", rows * 8), ("hist", rows * 256 * 8),
            ("counts", rows * nb * 16), ("totals", rows * 16),
            ("cand_words", cand * job.key_bytes), ("cand_index", cand * 8)))
        kernel = lambda name: job.kernel("radix_select.cu", name, value_bytes=0)  # noqa: E731
        job.launch(kernel("rs_init"), job.blocks(rows, 256), 256, buf["prefix"],
                   buf["remaining"], rows, target)
        job.memset32(buf["hist"], 0, rows * 256 * 2)
        hist, pick = kernel("rs_hist"), kernel("rs_pick")
        for shift in range(job.key_bits - 8, -1, -8):
            job.launch(hist, rows * nb, block, job.keys_in, row_len, nb, buf["prefix"],
                       buf["hist"], shift, largest)
            job.launch(pick, rows, 64, buf["hist"], buf["prefix"], buf["remaining"], shift)
        job.launch(kernel("rs_count"), rows * nb, block, job.keys_in, row_len, nb,
                   buf["prefix"], buf["counts"], largest)
        job.launch(kernel("rs_scan"), rows, block, buf["counts"], nb, buf["totals"])
        if partition:
            job.launch(kernel("rs_scatter"), rows * nb, block, job.keys_in, row_len, nb, k,
                       buf["prefix"], buf["counts"], buf["totals"], job.keys_out,
                       job.values_out, largest, 1)
            return
        job.launch(kernel("rs_scatter"), rows * nb, block, job.keys_in, row_len, nb, k,
                   buf["prefix"], buf["counts"], buf["totals"], buf["cand_words"],
                   buf["cand_index"], largest, 0)
        order = job.argsort_rows(buf["cand_words"], WORD_DTYPES[job.key_bytes], rows, k)
        job.launch(kernel("rs_finish"), min(job.blocks(rows * k, block), MAX_GRID), block,
                   job.keys_in, row_len, k, rows, buf["cand_index"], order, job.keys_out,
                   job.values_out)

    @staticmethod
    def _rows_in_shared_memory(job):
        """topk of several rows that each fit in shared memory: one block
        per row selects from the row held there (rs_block_select), reading
        the keys once; then the k candidates are sorted and gathered."""
        rows, row_len, k = job.rows, job.row_len, job.k
        buf = job.alloc_parts((("cand_words", rows * k * job.key_bytes),
                               ("cand_index", rows * k * 8)))
        config = dict(job.config, block_size=BLOCK_THREADS)
        select = job.kernel("radix_select.cu", "rs_block_select", config=config, value_bytes=0)
        job.launch(select, rows, BLOCK_THREADS, job.keys_in, row_len, k, buf["cand_words"],
                   buf["cand_index"], int(job.largest), shared=row_len * job.key_bytes)
        order = job.argsort_rows(buf["cand_words"], WORD_DTYPES[job.key_bytes], rows, k)
        block = int(job.config["block_size"])
        finish = job.kernel("radix_select.cu", "rs_finish", value_bytes=0)
        job.launch(finish, min(job.blocks(rows * k, block), MAX_GRID), block, job.keys_in,
                   row_len, k, rows, buf["cand_index"], order, job.keys_out, job.values_out)
