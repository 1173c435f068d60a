"""``python -m cudasortkit bench --family``: the calls around a sort against
CuPy in the same run: lexsort of 2 and 3 keys (int32, float32) at 2^24
against cupy.lexsort; unique rows (numpy.unique(axis=0)'s semantics) of
2^20 x 10 uint8 rows, which CuPy has no fast path for (its unique(axis=0)
is not timed); unique of 2^24 keys with return_inverse and return_counts
against cupy.unique; searchsorted of 2^24 queries into 2^24 sorted keys,
auto and every search plugin, against cupy.searchsorted. Medians of CUDA-event timings (cudasortkit/gpu/timing.py)
after warm-up; every cudasortkit result is checked against NumPy first, and
a case whose result is wrong is reported as such, never timed.

Each case is a function returning rows (dicts); other calls of the family
(unique, searchsorted) add theirs to CASES.
"""
from __future__ import annotations

import numpy as np

from ..gpu.timing import time_gpu
from ..launch import built

LEXSORT_N = 1 << 24
ROWS = (1 << 20, 10)


def _ms(fn, repeats):
    fn()
    built.wait()  # a config its first call built aside (launch/built.py): time it, not its stand-in
    return time_gpu(lambda i: fn(), repeats=repeats, warmup=2)["median_ms"]


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


#: unique's inputs: (label, dtype, distinct values or None for normal floats)
UNIQUE_INPUTS = (("uint32 in [0, 2^20)", "uint32", 1 << 20), ("float32 normal", "float32", None))


def _failed(case, exc) -> dict:
    return {"case": case, "ok": False, "error": f"{type(exc).__name__}: {exc}"}


def unique_cases(repeats: int = 10, n: int = LEXSORT_N) -> list:
    """unique(a, return_inverse=True, return_counts=True) vs cupy.unique."""
    import cupy

    import cudasortkit as csk

    rng = np.random.default_rng(30)
    flags = dict(return_inverse=True, return_counts=True)
    rows = []
    for label, dtype, distinct in UNIQUE_INPUTS:
        host = (rng.integers(0, distinct, n) if distinct else rng.standard_normal(n)).astype(dtype)
        a = cupy.asarray(host)
        case = f"unique {label}, {n:,}, inverse+counts"
        try:
            got = csk.unique(a, **flags)
        except Exception as exc:  # reported, not timed
            rows.append(_failed(case, exc))
            continue
        ok = all(np.array_equal(g.get(), w) for g, w in zip(got, np.unique(host, **flags)))
        row = {"case": case, "ok": ok}
        if ok:
            row["csk_ms"] = _ms(lambda: csk.unique(a, **flags), repeats)
            row["cupy_ms"] = _ms(lambda: cupy.unique(a, **flags), repeats)
        rows.append(row)
    return rows


def searchsorted_cases(repeats: int = 10, n: int = LEXSORT_N) -> list:
    """searchsorted of n float32 queries into n sorted keys: auto and every
    search plugin vs cupy.searchsorted."""
    import cupy

    import cudasortkit as csk
    from ..sdk import registry
    from ..sdk.search import SearchPlugin

    rng = np.random.default_rng(31)
    a = np.sort(rng.standard_normal(n).astype(np.float32))
    v = rng.standard_normal(n).astype(np.float32)
    da, dv = cupy.asarray(a), cupy.asarray(v)
    expected = np.searchsorted(a, v)
    cupy_ms = _ms(lambda: cupy.searchsorted(da, dv), repeats)
    rows = []
    for name in ["auto", *sorted(registry.plugins(SearchPlugin.entry_point_group))]:
        case = f"searchsorted {name}, {n:,} into {n:,}"
        try:
            ok = bool(np.array_equal(csk.searchsorted(da, dv, algorithm=name).get(), expected))
        except Exception as exc:
            rows.append(_failed(case, exc))
            continue
        row = {"case": case, "ok": ok, "cupy_ms": cupy_ms}
        if ok:
            row["csk_ms"] = _ms(lambda: csk.searchsorted(da, dv, algorithm=name), repeats)
        rows.append(row)
    return rows


#: The family's cases, in the order they run.
CASES = [lexsort_rows, unique_rows_rows, unique_cases, searchsorted_cases]


def format_rows(rows) -> str:
    lines = [f"{'case':<48} {'csk ms':>9} {'cupy ms':>9} {'x':>6} ok"]
    for r in rows:
        csk_ms, cupy_ms = r.get("csk_ms"), r.get("cupy_ms")
        ratio = f"{cupy_ms / csk_ms:6.2f}" if csk_ms and cupy_ms else f"{'-':>6}"
        lines.append(f"{r['case']:<48} {csk_ms if csk_ms is not None else float('nan'):9.3f} "
                     f"{cupy_ms if cupy_ms is not None else float('nan'):9.3f} {ratio} {r['ok']}"
                     + (f" {r['error']}" if r.get("error") else ""))
    return "\n".join(lines)


def main(repeats: int = 10) -> int:
    rows = []
    for case in CASES:
        rows += case(repeats)
    print("the sort family, ms (median); x = cupy / csk (>1: cudasortkit faster)")
    print(format_rows(rows))
    return 0 if all(r["ok"] for r in rows) else 1
