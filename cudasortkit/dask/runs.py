"""Merging the sorted runs a rank receives (collective.py, step 4): pairwise
merges (stable with values), and for runs of interleaved chunks, whose ties
go by global index, packed (key, global index) words where 64 bits hold
them, else cudasortkit.lexsort. `spec` is the sort's collective.Spec.
"""
from __future__ import annotations

import numpy as np

from .. import api as csk
from ..calls.sort_merge import merge, merge_by_key
from . import chunks


def merge_runs(runs: list, descending: bool):
    """Merge sorted runs (keys, values or None) pairwise, earlier runs first
    on equal keys (with values: merge_by_key, stable). The list is consumed:
    each level of merges replaces its runs, so that their memory goes back
    (given no other reference) while the next level merges."""
    runs[:] = [r for r in runs if len(r[0])] or runs[:1]
    while len(runs) > 1:
        runs[:] = [_merge_pair(*runs[i:i + 2], descending) for i in range(0, len(runs) - 1, 2)] \
            + runs[len(runs) - len(runs) % 2:]
    return runs.pop()


def _merge_pair(a, b, descending: bool):
    if a[1] is None:
        return merge(a[0], b[0], descending=descending), None
    return merge_by_key(a[0], a[1], b[0], b[1], descending=descending)


def packable(spec) -> bool:
    """Whether (key, global index) pairs may be packed into one uint64 at
    all (merge_interleaved: where the rank's key range and the indices fit):
    keys and values come back exactly, so float keys only for argsort
    (their -0.0 and NaN payloads are folded together, and argsort returns
    no keys)."""
    kind = spec.dtype.kind
    return kind in "biu" or (kind == "f" and spec.op == "argsort")


def ordered_bits(keys, descending: bool, xp):
    """uint64 words ordering like the keys in the requested order: unsigned
    keys as they are, signed with the sign bit flipped, floats by their IEEE
    bits (negatives inverted) after -0.0 -> +0.0 and every NaN -> one NaN
    (last, as NumPy)."""
    k = chunks.ascending(keys, descending)
    bits = 8 * k.dtype.itemsize
    if k.dtype.kind == "f":
        k = xp.where(xp.isnan(k), k.dtype.type(np.nan), k) + k.dtype.type(0)   # x + 0: -0.0 -> +0.0
        u = k.view(f"u{k.dtype.itemsize}").astype(np.uint64)
        top = np.uint64(1 << (bits - 1))
        return xp.where(u >= top, ~u & np.uint64((1 << bits) - 1), u | top)
    if k.dtype.kind == "i":
        unsigned = np.dtype(f"u{k.dtype.itemsize}")
        return (k.view(unsigned) ^ unsigned.type(1 << (bits - 1))).astype(np.uint64)
    return k.astype(np.uint64)


def packing(spec, keys, at, total: int, xp):
    """(base, shift) of words ((ordered bits - base) << shift) | global index
    for this rank's runs (joined `keys`, run r at [at[r], at[r+1])), each
    sorted in the requested order, or None where they do not fit 64 bits.
    base: the smallest ordered key the rank holds (its runs' first keys);
    shift: the bits of the largest global index."""
    if not packable(spec):
        return None
    ends = [e for a, b in zip(at[:-1], at[1:]) if b > a for e in (int(a), int(b) - 1)]
    shift = max(1, (int(total) - 1).bit_length())
    if not ends:
        return 0, shift
    u = chunks.to_host(ordered_bits(keys[xp.asarray(np.asarray(ends, np.int64))], spec.descending, xp))
    base, width = int(u.min()), int(u.max()) - int(u.min())
    return (base, shift) if width.bit_length() + shift <= 64 else None


def merge_interleaved(spec, received: dict, at, total: int, xp):
    """Runs from ranks whose chunks interleave, each sorted by (key, global
    index), in the order of (key, global index): merged as packed words
    where they fit (packing), else ordered by cudasortkit.lexsort. argsort
    -> (None, indices); sort_by_key -> (keys, values). received: the joined
    runs ("keys", "index": their global indices, or None for argsort, whose
    "values" are its indices, "values"; run r at [at[r], at[r+1])), taken
    out of the dict so that each array's memory goes back once used."""
    keys, index, values = received.pop("keys"), received.pop("index"), received.pop("values")
    if index is None:
        index = values
    pack = packing(spec, keys, at, total, xp)
    if pack is None:
        order = csk.lexsort((index, chunks.ascending(keys, spec.descending)))
        return (None, index[order]) if spec.op == "argsort" else (keys[order], values[order])
    base, shift = pack

    def runs(a):
        return [a[int(b):int(e)] for b, e in zip(at[:-1], at[1:])]

    words = ordered_bits(keys, spec.descending, xp)   # in place from here: one uint64 a key
    keys = None
    words -= np.uint64(base)
    words <<= np.uint64(shift)
    words |= index.view(np.uint64)                     # global indices are never negative
    index = None
    low = np.uint64((1 << shift) - 1)
    if spec.op == "argsort":
        pairs, words, values = [(w, None) for w in runs(words)], None, None
        merged, _ = merge_runs(pairs, False)
        return None, (merged & low).astype(np.int64)
    pairs, words, values = list(zip(runs(words), runs(values))), None, None
    merged, vals = merge_runs(pairs, False)
    u = ((merged >> np.uint64(shift)) + np.uint64(base)).astype(f"u{spec.dtype.itemsize}")
    merged = None
    if spec.dtype.kind == "b":
        k = u.astype(bool)
    elif spec.dtype.kind == "i":
        bits = 8 * spec.dtype.itemsize
        k = (u ^ u.dtype.type(1 << (bits - 1))).view(spec.dtype)
    else:
        k = u.view(spec.dtype)
    return chunks.ascending(k, spec.descending), vals
