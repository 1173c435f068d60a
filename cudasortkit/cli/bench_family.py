"""``python -m cudasortkit bench --family``: what follows a sort, against
CuPy in the same run (issue 30's bars, on an H100):

- unique of 2^24 keys with return_inverse and return_counts vs cupy.unique
  (bar: >= 1.5x);
- searchsorted of 2^24 queries into 2^24 sorted keys vs cupy.searchsorted
  (bar: >= 1.2x), auto and every search plugin.

Every result is checked against NumPy first; a wrong one is reported, never
timed. Times: CUDA events after warm-up, median of repeats (gpu/timing.py);
`vs_cupy` is CuPy's median over ours (> 1: we are faster). The cells of each
family are separate functions (unique_cells, searchsorted_cells), so other
families' cells sit beside them.
"""
from __future__ import annotations

import numpy as np

from ..gpu.timing import time_gpu

N = 1 << 24
#: unique's inputs: (label, dtype, distinct values or None for uniform floats)
UNIQUE_INPUTS = (("uint32 in [0, 2^20)", "uint32", 1 << 20), ("float32 normal", "float32", None))


def _row(cell, label, ours, cupy_ms, ok, error=None) -> dict:
    return {"cell": cell, "input": label, "ours_ms": ours, "cupy_ms": cupy_ms,
            "vs_cupy": (cupy_ms / ours) if ours and cupy_ms else None, "ok": ok, "error": error}


def _time(run, inputs, repeats) -> float:
    return time_gpu(run, inputs=inputs, warmup=2, repeats=repeats)["median_ms"]


def unique_cells(n: int = N, repeats: int = 10, rng=None) -> list:
    """unique(a, return_inverse=True, return_counts=True), ours vs cupy.unique."""
    import cupy

    import cudasortkit as csk

    rng = rng or np.random.default_rng(30)
    rows = []
    for label, dtype, distinct in UNIQUE_INPUTS:
        hosts = [(rng.integers(0, distinct, n) if distinct else rng.standard_normal(n))
                 .astype(dtype) for _ in range(2)]
        devs = [cupy.asarray(h) for h in hosts]
        values, inverse, counts = np.unique(hosts[0], return_inverse=True, return_counts=True)
        try:
            got = csk.unique(devs[0], return_inverse=True, return_counts=True)
            ok = all(np.array_equal(g.get(), e) for g, e in zip(got, (values, inverse, counts)))
        except Exception as exc:  # reported, not timed
            rows.append(_row("unique", label, None, None, False, f"{type(exc).__name__}: {exc}"))
            continue
        cupy_ms = _time(lambda i: cupy.unique(devs[i], return_inverse=True, return_counts=True),
                        len(devs), repeats)
        ours = _time(lambda i: csk.unique(devs[i], return_inverse=True, return_counts=True),
                     len(devs), repeats) if ok else None
        rows.append(_row("unique", label, ours, cupy_ms, ok))
    return rows


def searchsorted_cells(n: int = N, m: int = N, repeats: int = 10, rng=None) -> list:
    """searchsorted of m float32 queries into n sorted keys: auto and every
    search plugin vs cupy.searchsorted."""
    import cupy

    import cudasortkit as csk
    from ..sdk import registry
    from ..sdk.search import SearchPlugin

    rng = rng or np.random.default_rng(31)
    a = np.sort(rng.standard_normal(n).astype(np.float32))
    vs = [rng.standard_normal(m).astype(np.float32) for _ in range(2)]
    da, dvs = cupy.asarray(a), [cupy.asarray(v) for v in vs]
    expected = np.searchsorted(a, vs[0])
    cupy_ms = _time(lambda i: cupy.searchsorted(da, dvs[i]), len(dvs), repeats)
    label = f"{m:,} float32 into {n:,}"
    rows = []
    names = ["auto", *sorted(registry.plugins(SearchPlugin.entry_point_group))]
    for name in names:
        cell = f"searchsorted {name}"
        try:
            ok = bool(np.array_equal(csk.searchsorted(da, dvs[0], algorithm=name).get(), expected))
        except Exception as exc:
            rows.append(_row(cell, label, None, cupy_ms, False, f"{type(exc).__name__}: {exc}"))
            continue
        ours = _time(lambda i: csk.searchsorted(da, dvs[i], algorithm=name), len(dvs),
                     repeats) if ok else None
        rows.append(_row(cell, label, ours, cupy_ms, ok))
    return rows


def format_rows(rows) -> str:
    lines = [f"{'cell':<24} {'input':<28} {'ours ms':>9} {'cupy ms':>9} {'vs_cupy':>8}  ok"]
    for r in rows:
        ours = f"{r['ours_ms']:9.3f}" if r["ours_ms"] else f"{'-':>9}"
        cupy_ms = f"{r['cupy_ms']:9.3f}" if r["cupy_ms"] else f"{'-':>9}"
        vs = f"{r['vs_cupy']:7.2f}x" if r["vs_cupy"] else f"{'-':>8}"
        tail = "yes" if r["ok"] else f"NO {r['error'] or 'wrong result'}"
        lines.append(f"{r['cell']:<24} {r['input']:<28} {ours} {cupy_ms} {vs}  {tail}")
    return "\n".join(lines)


def main(repeats: int = 10) -> int:
    rows = unique_cells(repeats=repeats) + searchsorted_cells(repeats=repeats)
    print(format_rows(rows))
    return 0 if all(r["ok"] for r in rows) else 1
