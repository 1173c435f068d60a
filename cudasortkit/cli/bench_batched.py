"""``python -m cudasortkit bench --batched``: sorts along the last axis of
rows x cols arrays, cudasortkit (auto) against cupy.sort(axis=-1) and
torch.sort(dim=-1), argsort against torch.argsort(dim=-1, stable=True),
and a ragged segmented sort against one global CuPy sort of 64-bit keys
with the segment id packed above the key. Medians of CUDA-event timings
(cudasortkit/gpu/timing.py) after warm-up; every cudasortkit result is checked
against NumPy first."""
from __future__ import annotations

import numpy as np

from .bench_family import warm_median_ms

SHAPES = [(1, 1 << 24), (16, 1 << 20), (1000, 1000), (1 << 12, 4096), (1 << 14, 1024),
          (1 << 17, 128), (1 << 20, 16), (1 << 22, 2)]
DTYPES = ("float32", "int32")


def _keys(rng, dtype, shape):
    if dtype == "float32":
        return rng.standard_normal(shape, dtype=np.float32)
    return rng.integers(-(1 << 31), 1 << 31, shape, dtype=np.int64).astype(np.int32)


def shapes_table(repeats: int = 10, shapes=SHAPES, dtypes=DTYPES) -> list:
    import cupy
    import torch

    import cudasortkit as csk

    rng = np.random.default_rng(0)
    rows = []
    for dtype in dtypes:
        for r, c in shapes:
            host = _keys(rng, dtype, (r, c))
            a = cupy.asarray(host)
            t = torch.as_tensor(a, device="cuda")
            ok = np.array_equal(csk.sort(a).get(), np.sort(host, axis=-1))
            ok = ok and np.array_equal(csk.argsort(a, stable=True).get(),
                                       np.argsort(host, axis=-1, kind="stable"))
            row = {"shape": f"{r}x{c}", "dtype": dtype, "ok": ok,
                   "algorithm": csk.explain(a).name,
                   "csk_sort": warm_median_ms(lambda: csk.sort(a), repeats),
                   "cupy_sort": warm_median_ms(lambda: cupy.sort(a, axis=-1), repeats),
                   "torch_sort": warm_median_ms(lambda: torch.sort(t, dim=-1), repeats),
                   "csk_argsort": warm_median_ms(lambda: csk.argsort(a, stable=True), repeats),
                   "torch_argsort": warm_median_ms(lambda: torch.argsort(t, dim=-1, stable=True), repeats)}
            rows.append(row)
    return rows


def ragged_data(seed: int = 0) -> tuple:
    """The issue's case: 200,000 segments of 0-40 keys mixed with 50 of
    1,000-200,000 keys, float32; (lengths, int64 offsets, keys) on the host."""
    rng = np.random.default_rng(seed)
    lengths = np.concatenate([rng.integers(0, 41, 200_000), rng.integers(1000, 200_001, 50)])
    rng.shuffle(lengths)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    return lengths, offsets, rng.standard_normal(int(offsets[-1]), dtype=np.float32)


def packed_keys(keys, lengths):
    """CuPy uint64 words segment << 32 | the float32 key's ordered bits: one
    global sort of them sorts every segment (NaN-free keys)."""
    import cupy

    seg = cupy.asarray(np.repeat(np.arange(len(lengths), dtype=np.uint64), lengths))
    bits = keys.view(cupy.uint32).astype(cupy.uint64)
    # NumPy's float order as unsigned bits (NaN-free input): flip negatives.
    return (seg << 32) | cupy.where(bits >> 31 != 0, bits ^ 0xFFFFFFFF, bits | 0x80000000)


def ragged_case(repeats: int = 10, seed: int = 0) -> dict:
    """ragged_data's case: cudasortkit with device and host offsets against
    one CuPy sort of packed_keys (made before the timing)."""
    import cupy

    import cudasortkit as csk

    lengths, offsets, host = ragged_data(seed)
    n = len(host)
    keys = cupy.asarray(host)
    dev_offsets = cupy.asarray(offsets)
    packed = packed_keys(keys, lengths)
    got = csk.segmented_sort(keys, dev_offsets).get()
    expected = np.concatenate([np.sort(host[lo:hi]) for lo, hi in zip(offsets[:-1], offsets[1:])])
    return {"case": f"ragged {len(lengths)} segments, {n:,} float32 keys",
            "ok": bool(np.array_equal(got, expected)),
            "algorithm": csk.explain(keys, offsets=offsets).name,
            "csk_segmented_sort": warm_median_ms(lambda: csk.segmented_sort(keys, dev_offsets), repeats),
            "csk_host_offsets": warm_median_ms(lambda: csk.segmented_sort(keys, offsets), repeats),
            "cupy_packed_sort": warm_median_ms(lambda: cupy.sort(packed), repeats)}


def print_tables(rows, ragged) -> None:
    print("sort along the last axis, ms (median); x = cupy / csk for sort, torch / csk for argsort")
    print(f"{'shape':>14} {'dtype':>8} {'auto->':>16} {'csk':>8} {'cupy':>8} {'torch':>8} {'x':>6}"
          f" | {'csk_arg':>8} {'torch_arg':>9} {'x':>6} ok")
    for r in rows:
        print(f"{r['shape']:>14} {r['dtype']:>8} {r['algorithm']:>16} {r['csk_sort']:8.3f} "
              f"{r['cupy_sort']:8.3f} {r['torch_sort']:8.3f} {r['cupy_sort'] / r['csk_sort']:6.2f}"
              f" | {r['csk_argsort']:8.3f} {r['torch_argsort']:9.3f} "
              f"{r['torch_argsort'] / r['csk_argsort']:6.2f} {r['ok']}")
    if ragged:
        print(f"{ragged['case']}: auto -> {ragged['algorithm']}: csk {ragged['csk_segmented_sort']:.3f} ms "
              f"(host offsets {ragged['csk_host_offsets']:.3f} ms), one CuPy sort of packed 64-bit "
              f"keys {ragged['cupy_packed_sort']:.3f} ms, ok={ragged['ok']}")


def main(repeats: int = 10) -> int:
    rows = shapes_table(repeats)
    ragged = ragged_case(repeats)
    print_tables(rows, ragged)
    return 0 if all(r["ok"] for r in rows) and ragged["ok"] else 1
