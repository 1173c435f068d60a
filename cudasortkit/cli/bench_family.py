"""``python -m cudasortkit bench --family``: the calls around a sort against
CuPy in the same run: lexsort of 2 and 3 keys (int32, float32) at 2^24
against cupy.lexsort, and unique rows (numpy.unique(axis=0)'s semantics) of
2^20 x 10 uint8 rows, which CuPy has no fast path for (its unique(axis=0)
is not timed). Medians of CUDA-event timings (cudasortkit/gpu/timing.py)
after warm-up; every cudasortkit result is checked against NumPy first, and
a case whose result is wrong is reported as such, never timed.

Each case is a function returning rows (dicts); other calls of the family
(unique, searchsorted) add theirs to CASES.
"""
from __future__ import annotations

import numpy as np

from ..gpu.timing import time_gpu

LEXSORT_N = 1 << 24
ROWS = (1 << 20, 10)


def _ms(fn, repeats):
    return time_gpu(lambda i: fn(), repeats=repeats, warmup=3)["median_ms"]


def _keys(rng, dtype, n):
    if dtype == "float32":
        return rng.standard_normal(n, dtype=np.float32)
    return rng.integers(-(1 << 31), 1 << 31, n, dtype=np.int64).astype(np.int32)


def lexsort_rows(repeats: int = 10, n: int = LEXSORT_N) -> list:
    """csk.lexsort against cupy.lexsort, 2 and 3 keys of int32 and float32."""
    import cupy

    import cudasortkit as csk

    rng = np.random.default_rng(0)
    rows = []
    for dtype in ("int32", "float32"):
        for count in (2, 3):
            host = [_keys(rng, dtype, n) for _ in range(count)]
            if dtype == "int32":  # ties in the primary key, so secondary keys matter
                host[-1] %= 1 << 12
            keys = [cupy.asarray(k) for k in host]
            stacked = cupy.stack(keys)
            ok = bool(np.array_equal(csk.lexsort(keys).get(), np.lexsort(host)))
            row = {"case": f"lexsort {count} x {dtype} keys, {n:,}", "ok": ok}
            if ok:
                row["csk_ms"] = _ms(lambda: csk.lexsort(keys), repeats)
                row["cupy_ms"] = _ms(lambda: cupy.lexsort(stacked), repeats)
            rows.append(row)
    return rows


def unique_rows_rows(repeats: int = 10, shape=ROWS) -> list:
    """unique_rows of uint8 rows with every flag (no CuPy counterpart timed)."""
    import cupy

    from ..calls.unique_rows import unique_rows

    host = np.random.default_rng(1).integers(0, 4, shape).astype(np.uint8)
    a = cupy.asarray(host)
    flags = dict(return_index=True, return_inverse=True, return_counts=True)
    got = unique_rows(a, **flags)
    want = np.unique(host, axis=0, **flags)
    ok = all(np.array_equal(g.get(), w) for g, w in zip(got, want))
    row = {"case": f"unique rows {shape[0]:,} x {shape[1]} uint8, all flags", "ok": ok}
    if ok:
        row["csk_ms"] = _ms(lambda: unique_rows(a, **flags), repeats)
    return [row]


#: The family's cases, in the order they run.
CASES = [lexsort_rows, unique_rows_rows]


def format_rows(rows) -> str:
    lines = [f"{'case':<48} {'csk ms':>9} {'cupy ms':>9} {'x':>6} ok"]
    for r in rows:
        csk_ms, cupy_ms = r.get("csk_ms"), r.get("cupy_ms")
        ratio = f"{cupy_ms / csk_ms:6.2f}" if csk_ms and cupy_ms else f"{'-':>6}"
        lines.append(f"{r['case']:<48} {csk_ms if csk_ms is not None else float('nan'):9.3f} "
                     f"{cupy_ms if cupy_ms is not None else float('nan'):9.3f} {ratio} {r['ok']}")
    return "\n".join(lines)


def main(repeats: int = 10) -> int:
    rows = []
    for case in CASES:
        rows += case(repeats)
    print("the sort family, ms (median); x = cupy / csk (>1: cudasortkit faster)")
    print(format_rows(rows))
    return 0 if all(r["ok"] for r in rows) else 1
