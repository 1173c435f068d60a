"""`sort_select`: selection by sort-then-slice (kernels/select.cu), for every case.

Every key becomes its selection word (keys.cuh's ordered word, inverted for
largest=True: sdk/selection.py's order), the core's stable argsort sorts
each row of words (through the sort plugins auto picks: job.argsort_rows),
and the first k positions of each row are gathered with their keys. Serves
topk and partition (k = row length: a full stable order partitions at every
kth), every dtype, any rows; the fallback the faster plugins beat.
"""
from __future__ import annotations

from cudasortkit.sdk.plugin import Tunable
from cudasortkit.sdk.selection import MAX_GRID, WORD_DTYPES, GeneralSelectPlugin


class SortSelect(GeneralSelectPlugin):
    name = "sort_select"
    summary = "sort-then-slice: stable argsort of every row's selection words, first k kept"
    priority = 500
    tunables = {"block_size": Tunable(256, (128, 256, 512), "threads per block")}
    templates = ("select.cu",)

    def run(self, job):
        block = job.config["block_size"]
        words = int(job.alloc(max(job.n * job.key_bytes, 1)))
        encode, gather = job.kernels("select.cu", ("select_encode", "select_gather"), value_bytes=0)
        job.launch(encode, min(job.blocks(job.n, block), MAX_GRID), block, job.keys_in, words,
                   job.n, int(job.largest))
        order = job.argsort_rows(words, WORD_DTYPES[job.key_bytes])
        total = job.rows * job.k
        job.launch(gather, min(job.blocks(total, block), MAX_GRID), block, job.keys_in, order,
                   job.keys_out, job.values_out, job.rows, job.row_len, job.k)
