"""Multi-key order plugins (cudasortkit/sdk/multikey.py): numpy, packed, passes.

packed: every key's order-preserving field (keys.cuh's encoding, bool keys
1 bit) concatenated into one word of 8 to 64 bits, or a 64-bit low word and
a high word for the rest (at most 128 bits, the first key highest), each
word as narrow as its bits allow; then one stable argsort of the words; two
words sort as the low word first, then the high word gathered in that order
(stable, so the low word breaks ties). passes: a stable argsort by the least
significant key, then for each next key, that key gathered in the current
order and stable-sorted with the order as its values (what PyG does with
torch's argsort), any number of keys of any width.
"""
from __future__ import annotations

import numpy as np

from cudasortkit import order
from cudasortkit.sdk.multikey import MultikeyPlugin, gather, key_bits, launch

U64 = np.dtype(np.uint64)


def word_dtype(bits: int) -> np.dtype:
    """The narrowest unsigned dtype of at least `bits` bits (1 to 64): the
    packed words, so that a short packed key sorts as a short key."""
    return np.dtype(f"u{next(b for b in (1, 2, 4, 8) if 8 * b >= bits)}")


class NumpyLexsort(MultikeyPlugin):
    name = "numpy_lexsort"
    summary = "host keys: numpy.lexsort, or stable NumPy passes when a key descends"
    #: The one plugin for host keys (device plugins take device keys only),
    #: so it needs no priority.
    device = "cpu"

    def run(self, job):
        keys = job.host_keys()
        if not any(job.descending):  # numpy.lexsort's last key is its primary
            return np.lexsort([order.comparable(k) for k in reversed(keys)],
                              axis=job.axis).astype(np.int64, copy=False)
        result = np.arange(job.n, dtype=np.int64)  # 1-D keys (sort_by_key)
        for k, desc in zip(reversed(keys), reversed(job.descending)):
            result = result[order.argsort(k[result], desc)]
        return result


class PackedLexsort(MultikeyPlugin):
    name = "packed"
    summary = "device keys of <= 128 bits together: one packed key, one or two stable radix sorts"
    priority = 10

    def supports(self, job):
        return super().supports(job) and job.bits <= 128

    def run(self, job):
        two = job.bits > 64
        lo_dtype = U64 if two else word_dtype(job.bits)
        hi_dtype = word_dtype(job.bits - 64) if two else None
        lo, lo_ptr = job.empty(job.n, lo_dtype)
        hi, hi_ptr = job.empty(job.n, hi_dtype) if two else (None, 0)
        shift = job.bits
        for i, (k, desc) in enumerate(zip(job.keys, job.descending)):
            width = key_bits(k.dtype)
            shift -= width  # the first (most significant) key takes the highest bits
            mask = (1 << (8 * k.key_dtype.itemsize)) - 1 if desc else 0
            if job.n:
                launch(self.name, job.state, k.dtype, "csk_pack", job.n,
                       (k.device_ptr(job.state), job.n, int(lo_ptr), lo_dtype.itemsize,
                        int(hi_ptr), hi_dtype.itemsize if two else 0, shift, width, mask,
                        int(i == 0)))
        first = job.argsort(lo, False)
        if not two:
            return first
        high = gather(self.name, job, hi, hi_dtype, first)
        return job.sort_pairs(high, first, False)[1]


class PassesLexsort(MultikeyPlugin):
    name = "passes"
    summary = "device keys of any width: one stable sort per key, least significant first"
    priority = 20

    def run(self, job):
        result = job.argsort(job.keys[-1].array, job.descending[-1])
        for k, desc in zip(reversed(job.keys[:-1]), reversed(job.descending[:-1])):
            ordered = gather(self.name, job, k.array, k.dtype, result)
            result = job.sort_pairs(ordered, result, desc)[1]
        return result
