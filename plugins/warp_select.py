"""`warp_select`: top-k of short rows, one warp per row (kernels/warp_select.cu).

A warp holds its row in registers (ITEMS keys per lane, striped) and takes
the k best one at a time: each lane's best untaken key, then a warp-wide
minimum by shuffles. One read of the keys and k x (ITEMS + 10) steps per
row: for rows of up to 2,048 keys and k up to 32 (the many-rows, small-k
shape) it beats sorting every row.
"""
from __future__ import annotations

from cudasortkit.dtypes import KEY_DTYPES
from cudasortkit.sdk.plugin import Tunable
from cudasortkit.sdk.selection import SelectPlugin

#: Longest row a warp holds (64 keys per lane) and largest k it takes.
MAX_ROW, MAX_K = 2048, 32


class WarpSelect(SelectPlugin):
    name = "warp_select"
    summary = "top-k of rows <= 2048 keys, k <= 32: one warp per row, k warp-wide minimums"
    dtypes = KEY_DTYPES
    ops = ("topk",)
    priority = 50
    replayable = True
    tunables = {"block_size": Tunable(128, (64, 128, 256), "threads per block (4 rows at 128)")}
    templates = ("warp_select.cu",)

    def unsupported(self, request):
        reason = super().unsupported(request)
        if reason is None and (request.row_len > MAX_ROW or request.k > MAX_K):
            reason = (f"{self.name} takes rows of at most {MAX_ROW} keys and k <= {MAX_K} "
                      f"(got {request.row_len}, k={request.k})")
        return reason

    def run(self, job):
        items = 1
        while 32 * items < job.row_len:  # a power of two: few compiled variants
            items *= 2
        block = int(job.config["block_size"])
        kernel, = job.kernels("warp_select.cu", ("warp_select",), defines={"row_items": items},
                              value_bytes=0)
        job.launch(kernel, job.blocks(job.rows, block // 32), block, job.keys_in, job.keys_out,
                   job.values_out, job.rows, job.row_len, job.k, int(job.largest))
