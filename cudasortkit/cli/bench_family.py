"""``python -m cudasortkit bench --family``: the calls around a sort against
CuPy and PyTorch in the same run, each cell's bar marked.

- lexsort of 2 and 3 keys (int32, float32) at 2^24 against cupy.lexsort;
- unique rows (numpy.unique(axis=0)'s semantics) of 2^20 x 10 uint8 rows,
  which CuPy has no fast path for (its unique(axis=0) is not timed);
- unique: int32 (in [0, 2^20)) and float64 (normal) at 2^20, 2^22, 2^24 and
  2^26 keys, plain and with return_inverse and return_counts, against
  cupy.unique and torch.unique (bar: at least UNIQUE_BAR x both);
- searchsorted: every pair of query count and key count in
  {2^10, 2^16, 2^20, 2^24}, float32 and int64, random queries into sorted
  random keys, auto (and each search plugin, for the record) against
  cupy.searchsorted and torch.searchsorted (bar: at least SEARCH_BAR x
  both);
- a sort of 1,000 host float32 keys against numpy.sort (bar: at most
  HOST_BAR x NumPy's time).

Device cells: medians of CUDA-event timings (cudasortkit/gpu/timing.py) of
one call each, the contenders interleaved over gpu.timing's ROUNDS rounds
(rotated_rounds) after warm-up, a contender's round at least MIN_ROUND_S
of calls (short calls are repeated more); a call's window holds its host
time, as a caller waits for it. Every contender's result (the peers' too)
is checked against NumPy before it is timed, and a contender whose result
is wrong is reported as such, never timed. `--family-cases` picks the
groups to run.
"""
from __future__ import annotations

import statistics

import numpy as np

from ..gpu.timing import MAX_ROUND_REPEATS, MIN_ROUND_S, ROUNDS, rotated_rounds, time_gpu
from ..launch import built

LEXSORT_N = 1 << 24
ROWS = (1 << 20, 10)
#: Bars: ratio = the peer's time over ours (>= bar, both peers) and for the
#: host sort ours over NumPy's (<= bar).
SEARCH_BAR, UNIQUE_BAR, HOST_BAR = 1.0, 1.2, 1.2
#: The searchsorted grid (log2 of the query and key counts) and dtypes.
SEARCH_LOGS = (10, 16, 20, 24)
SEARCH_DTYPES = ("float32", "int64")
#: The unique sizes (log2) and dtypes.
UNIQUE_LOGS = (20, 22, 24, 26)
UNIQUE_DTYPES = ("int32", "float64")


def warm_median_ms(fn, repeats):
    """The median ms of fn() (CUDA events) after a first call and the wait
    for any config that call built aside (launch/built.py): the config is
    timed, not its stand-in."""
    fn()
    built.wait()
    return time_gpu(lambda i: fn(), repeats=repeats, warmup=2)["median_ms"]


def race(contenders: dict, repeats: int, rounds: int = ROUNDS) -> dict:
    """{name: median ms} of one call of each contender (name -> fn), the
    names interleaved over `rounds` rotated rounds of at least `repeats`
    calls each (more where they take less than MIN_ROUND_S),
    every contender warmed up first (and the configs its first call built
    aside built: the calls' own, not their stand-ins)."""
    times = {name: [] for name in contenders}
    for fn in contenders.values():
        fn()
    built.wait()  # configs the first calls built aside (launch/built.py): time them
    for r, order in enumerate(rotated_rounds(contenders, rounds)):
        for name in order:
            fn = contenders[name]
            times[name] += time_gpu(lambda i: fn(), repeats=repeats,
                                    warmup=3 if r == 0 else 1, min_time_s=MIN_ROUND_S,
                                    max_repeats=MAX_ROUND_REPEATS)["times"]
    return {name: statistics.median(t) for name, t in times.items()}


def _keys(rng, dtype, n):
    if dtype == "float32":
        return rng.standard_normal(n, dtype=np.float32)
    return rng.integers(-(1 << 31), 1 << 31, n, dtype=np.int64).astype(np.int32)


def _libraries():
    import cupy

    try:
        import torch
    except ImportError:  # the torch column stays empty
        torch = None
    return cupy, torch


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
                row["csk_ms"] = warm_median_ms(lambda: csk.lexsort(keys), repeats)
                row["cupy_ms"] = warm_median_ms(lambda: cupy.lexsort(stacked), repeats)
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
        row["csk_ms"] = warm_median_ms(lambda: unique_rows(a, **flags), repeats)
    return [row]


def _failed(case, exc) -> dict:
    return {"case": case, "ok": False, "error": f"{type(exc).__name__}: {exc}"}


def _checked(name, fn, check, row) -> bool:
    """Run fn once and check its result (check(result) -> bool); a failure
    or an exception is noted in the row (its contender is not timed)."""
    try:
        ok = bool(check(fn()))
    except Exception as exc:  # noqa: BLE001 - reported, not timed
        row.setdefault("errors", []).append(f"{name}: {type(exc).__name__}: {exc}"[:200])
        return False
    if not ok:
        row.setdefault("errors", []).append(f"{name}: wrong result")
    return ok


def _ratios(row, bar: float) -> None:
    """x_cupy, x_torch (the peer's time over ours) and whether the bar holds."""
    ours = row.get("csk_ms")
    for peer in ("cupy", "torch"):
        theirs = row.get(f"{peer}_ms")
        if ours and theirs:
            row[f"x_{peer}"] = theirs / ours
    ratios = [row[k] for k in ("x_cupy", "x_torch") if k in row]
    row["bar"] = bar
    row["met"] = bool(ratios) and row["ok"] and all(x >= bar for x in ratios)


# ------------------------------------------------------------------ unique
UNIQUE_FLAGS = (("plain", {}), ("inverse+counts", {"return_inverse": True,
                                                    "return_counts": True}))


def _unique_input(rng, dtype, n):
    if dtype == "int32":
        return rng.integers(0, 1 << 20, n).astype(np.int32)
    return rng.standard_normal(n)


def unique_grid(repeats: int = 10, logs=UNIQUE_LOGS, dtypes=UNIQUE_DTYPES) -> list:
    """csk.unique against cupy.unique and torch.unique: each size and dtype,
    plain and with return_inverse + return_counts."""
    import cudasortkit as csk

    cupy, torch = _libraries()
    rng = np.random.default_rng(30)
    rows = []
    for dtype in dtypes:
        for lg in logs:
            n = 1 << lg
            host = _unique_input(rng, dtype, n)
            values, inverse, counts = np.unique(host, return_inverse=True, return_counts=True)
            a = cupy.asarray(host)
            want = {"plain": (cupy.asarray(values),),
                    "inverse+counts": tuple(cupy.asarray(x) for x in (values, inverse, counts))}
            t = None if torch is None else torch.as_tensor(a, device="cuda")
            for label, flags in UNIQUE_FLAGS:
                row = {"case": f"unique {dtype} 2^{lg}, {label}", "op": "unique", "dtype": dtype,
                       "n": n, "flags": label, "ok": True}
                expected = want[label]

                def same(got, expected=expected):
                    got = got if isinstance(got, tuple) else (got,)
                    return len(got) == len(expected) and all(
                        cupy.array_equal(cupy.asarray(g), e) for g, e in zip(got, expected))

                contenders = {"csk": lambda flags=flags: csk.unique(a, **flags),
                              "cupy": lambda flags=flags: cupy.unique(a, **flags)}
                if t is not None:
                    contenders["torch"] = lambda flags=flags: torch.unique(t, sorted=True,
                                                                           **flags)
                checked = {k: fn for k, fn in contenders.items() if _checked(k, fn, same, row)}
                row["ok"] = "csk" in checked
                for name, ms in race(checked, repeats).items():
                    row[f"{name}_ms"] = ms
                _ratios(row, UNIQUE_BAR)
                rows.append(row)
    return rows


# ------------------------------------------------------------ searchsorted
#: Search plugins timed by name besides auto, and the largest query count
#: each is timed at (kary is for few queries: 32 lanes a query).
NAMED_SEARCH = {"binary": 1 << 24, "tree": 1 << 24, "kary": 1 << 20}


def _search_keys(rng, dtype, n):
    if dtype == "float32":
        return rng.standard_normal(n, dtype=np.float32)
    return rng.integers(-(1 << 62), 1 << 62, n, dtype=np.int64)


def search_grid(repeats: int = 10, logs=SEARCH_LOGS, dtypes=SEARCH_DTYPES) -> list:
    """csk.searchsorted (auto; each plugin for the record) against
    cupy.searchsorted and torch.searchsorted on every (queries, keys) cell:
    random queries (a quarter of them keys of a) into sorted random keys."""
    import cudasortkit as csk

    cupy, torch = _libraries()
    rng = np.random.default_rng(31)
    rows = []
    for dtype in dtypes:
        queries = {mlog: _search_keys(rng, dtype, 1 << mlog) for mlog in logs}
        for nlog in logs:
            a = np.sort(_search_keys(rng, dtype, 1 << nlog))
            da = cupy.asarray(a)
            ta = None if torch is None else torch.as_tensor(da, device="cuda")
            for mlog in logs:
                v = queries[mlog].copy()
                v[: v.size // 4] = a[rng.integers(0, a.size, v.size // 4)]  # ties
                # NumPy's answer, fast: through the queries in sorted order
                order = np.argsort(v, kind="stable")
                expected = np.empty(v.size, np.int64)
                expected[order] = np.searchsorted(a, v[order])
                dv, want = cupy.asarray(v), cupy.asarray(expected)
                tv = None if torch is None else torch.as_tensor(dv, device="cuda")
                row = {"case": f"searchsorted {dtype} 2^{mlog} into 2^{nlog}",
                       "op": "searchsorted", "dtype": dtype, "m": 1 << mlog, "n": 1 << nlog,
                       "plugin": csk.explain_searchsorted(da, dv).plugin, "ok": True}

                def same(got):
                    return cupy.array_equal(cupy.asarray(got), want)

                contenders = {"csk": lambda: csk.searchsorted(da, dv),
                              "cupy": lambda: cupy.searchsorted(da, dv)}
                if ta is not None:
                    contenders["torch"] = lambda: torch.searchsorted(ta, tv)
                for name, most in NAMED_SEARCH.items():
                    if v.size <= most:
                        contenders[name] = lambda name=name: csk.searchsorted(da, dv,
                                                                              algorithm=name)
                checked = {k: fn for k, fn in contenders.items() if _checked(k, fn, same, row)}
                row["ok"] = "csk" in checked
                # auto races the peers alone, the plugins by name after it:
                # a plugin by name replays the launch plan auto's choice
                # replays, and their results' buffers together outgrow the
                # plan's graphs (launch/graphs.py), which a caller of one
                # of them never sees
                named = {k: fn for k, fn in checked.items() if k in NAMED_SEARCH}
                peers = race({k: fn for k, fn in checked.items() if k not in named}, repeats)
                row.update({f"{name}_ms": ms for name, ms in peers.items()})
                if named:
                    row["plugins_ms"] = race(named, repeats)
                _ratios(row, SEARCH_BAR)
                rows.append(row)
    return rows


# --------------------------------------------------------------------- host
def host_sort_row(calls: int = 20000) -> list:
    """csk.sort of 1,000 host float32 keys against numpy.sort (bench_calls.host_tiny)."""
    from .bench_calls import host_tiny

    import cudasortkit as csk

    a = np.random.default_rng(2).standard_normal(1000).astype(np.float32)
    row = {"case": "sort 1,000 host float32 keys (us per call)", "op": "host sort",
           "ok": bool(np.array_equal(csk.sort(a), np.sort(a)))}
    if row["ok"]:
        timed = host_tiny(1000, calls, dtype="float32")
        row.update(csk_us=timed["cudasortkit"], numpy_us=timed["numpy"],
                   first_us=timed["first"], bar=HOST_BAR)
        row["x_numpy"] = timed["cudasortkit"] / timed["numpy"]
        row["met"] = row["x_numpy"] <= HOST_BAR
    return [row]


#: The family's groups of cases by name, in the order they run.
GROUPS = {"lexsort": lexsort_rows, "unique_rows": unique_rows_rows, "unique": unique_grid,
          "searchsorted": search_grid, "host": host_sort_row}
#: Every case, in the order they run (the groups' functions).
CASES = list(GROUPS.values())


def format_rows(rows) -> str:
    """The table: ms (median) of ours, CuPy's and PyTorch's, their ratios
    (peer / ours: > 1 we are faster), the bar and whether it holds."""
    lines = [f"{'case':<44} {'csk ms':>9} {'cupy ms':>9} {'torch ms':>9} {'x cupy':>7} "
             f"{'x torch':>7}  bar    ok"]
    for r in rows:
        if r.get("op") == "host sort":
            continue
        cells = [r.get(k) for k in ("csk_ms", "cupy_ms", "torch_ms")]
        x_cupy = r.get("x_cupy")
        if x_cupy is None and r.get("csk_ms") and r.get("cupy_ms"):
            x_cupy = r["cupy_ms"] / r["csk_ms"]
        ratios = [x_cupy, r.get("x_torch")]
        bar = ""
        if "bar" in r:
            bar = f">={r['bar']:.1f} {'met ' if r.get('met') else 'MISS'}"
        lines.append(f"{r['case']:<44} "
                     + " ".join(f"{c:9.3f}" if c is not None else f"{'-':>9}" for c in cells)
                     + " " + " ".join(f"{x:7.2f}" if x is not None else f"{'-':>7}"
                                      for x in ratios)
                     + f"  {bar:<9} {r['ok']}"
                     + (f"  plugin {r['plugin']}" if r.get("plugin") else "")
                     + (" (" + ", ".join(f"{k} {v:.3f}" for k, v in r["plugins_ms"].items())
                        + ")" if r.get("plugins_ms") else "")
                     + (f"  {r['error']}" if r.get("error") else "")
                     + ("  " + "; ".join(r["errors"]) if r.get("errors") else ""))
    for r in rows:
        if r.get("op") == "host sort":
            if "csk_us" in r:
                lines.append(f"{r['case']}: cudasortkit {r['csk_us']:.2f} us, numpy.sort "
                             f"{r['numpy_us']:.2f} us: {r['x_numpy']:.2f}x NumPy's time (bar "
                             f"<={r['bar']:.1f}x {'met' if r['met'] else 'MISS'}; first call "
                             f"{r['first_us']:.0f} us)")
            else:
                lines.append(f"{r['case']}: wrong result")
    return "\n".join(lines)


def summary(rows) -> str:
    """How many cells with a bar meet it, and which miss."""
    barred = [r for r in rows if "bar" in r]
    missed = [r["case"] for r in barred if not r.get("met")]
    text = f"bars met in {len(barred) - len(missed)} of {len(barred)} cells"
    return text + (": missed " + "; ".join(missed) if missed else "")


def main(repeats: int = 10, groups=None) -> int:
    """Run the groups named (default: all of GROUPS) and print the table."""
    names = list(GROUPS) if not groups else list(groups)
    unknown = [g for g in names if g not in GROUPS]
    if unknown:
        raise SystemExit(f"unknown --family-cases {', '.join(unknown)}; choose from "
                         f"{', '.join(GROUPS)}")
    rows = []
    for name in names:
        new = GROUPS[name](repeats) if name != "host" else GROUPS[name]()
        print(format_rows(new).split("\n", 1)[-1], flush=True)
        rows += new
    print()
    print("the sort family, ms (median of CUDA-event timed calls); x = peer / csk "
          "(>1: cudasortkit faster)")
    print(format_rows(rows))
    print(summary(rows))
    return 0 if all(r["ok"] for r in rows) else 1
