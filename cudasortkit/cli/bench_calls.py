"""Whole-call benchmarks (`python -m cudasortkit bench --latency / --cold`):
what a caller waits for, host work included, against CuPy and PyTorch in
the same run.

Per-call wall clock is timed with the thread kept on one CPU
(gpu.timing.on_one_cpu: unpinned, the scheduler moved calls of 10-25 us by
up to 60% between processes).
--latency: wall clock of one synchronised call (median of interleaved
rounds, after warm-up) of auto sort on device float32 keys, 2^10 .. 2^22;
and a 1,000-key NumPy array against np.sort, its first call included.
--cold: with an empty tuning cache, a loop sorting 12 float32 CuPy arrays
from 1e4 to 6e7 keys, three rounds; each round's total and the slowest
single call, cudasortkit against cupy.sort.
--peers: NVIDIA's cuda.compute (cuda-cccl: CUB's radix sort compiled at run
time) where it is installed, in two forms: "cub(prepared)", the sorter built
once (make_radix_sort) with its temporary storage allocated up front and
called again into one preallocated output (the fastest way a user can call
it), and "cub(oneshot)", cuda.compute.radix_sort into a new output each
call. bench.py adds both to each sort cell's device time; peers_latency()
times the wall clock of one synchronised call of each against csk.sort, a
csk.plan (with and without out=), cupy.sort and torch.sort. "vs cub" is
cub(prepared)'s time over ours (> 1: we are faster).
"""
from __future__ import annotations

import os
import statistics
import tempfile
import time

import numpy as np

from ..dtypes import numpy_dtype
from ..gpu.timing import cpu_probe_ms, on_one_cpu, rotated_rounds
from ..launch import built, plans as launchplan

ROUNDS = 5


def _libraries():
    import cupy

    try:
        import torch
    except ImportError:
        torch = None
    return cupy, torch


def _wall_us(fn, sync, reps):
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        sync()
        times.append((time.perf_counter() - t) * 1e6)
    return statistics.median(times)


def latency(sizes=tuple(range(10, 23, 2)), reps=200) -> list:
    """Rows (n, {contender: median us})."""
    from .. import api

    cupy, torch = _libraries()
    rows = []
    rng = np.random.default_rng(0)
    for b in sizes:
        n = 1 << b
        h = rng.standard_normal(n).astype(np.float32)
        x = cupy.asarray(h)
        calls = {"cudasortkit": (lambda: api.sort(x), cupy.cuda.Device().synchronize),
                 "cupy": (lambda: cupy.sort(x), cupy.cuda.Device().synchronize)}
        if torch is not None:
            t = torch.from_numpy(h).cuda()
            calls["torch"] = (lambda: torch.sort(t), torch.cuda.synchronize)
        for fn, sync in calls.values():  # warm-up: compiles, allocations
            fn()
            built.wait()  # a config built aside (launch/built.py): time it, not its stand-in
            for _ in range(5):
                fn()
            sync()
        samples = {name: [] for name in calls}
        with on_one_cpu():  # as peers_latency
            for _ in range(ROUNDS):
                for name, (fn, sync) in calls.items():
                    samples[name].append(_wall_us(fn, sync, reps // ROUNDS))
        rows.append((n, {name: min(v) for name, v in samples.items()}))
    return rows


def host_tiny(n=1000, calls=20000, dtype="uint32") -> dict:
    """A 1,000-key NumPy array (uint32, or float32 normal): cudasortkit.sort's
    first call and its per-call best round against np.sort's (us),
    interleaved rounds."""
    from .. import api

    rng = np.random.default_rng(2)
    a = (rng.integers(0, 2**32, n, dtype=np.uint32) if dtype == "uint32"
         else rng.standard_normal(n).astype(dtype))
    t = time.perf_counter()
    api.sort(a)
    first = (time.perf_counter() - t) * 1e6
    per = {"cudasortkit": [], "numpy": []}
    with on_one_cpu():  # as peers_latency
        for _ in range(ROUNDS):
            for name, fn in (("cudasortkit", api.sort), ("numpy", np.sort)):
                t = time.perf_counter()
                for _ in range(calls // ROUNDS):
                    fn(a)
                per[name].append((time.perf_counter() - t) * 1e6 / (calls // ROUNDS))
    return {"first": first, **{name: min(v) for name, v in per.items()}}


COLD_SIZES = (10_000, 30_000, 100_000, 300_000, 1_000_000, 2_000_000, 4_000_000, 8_000_000,
              16_000_000, 30_000_000, 45_000_000, 60_000_000)


def cold(rounds=3) -> list:
    """Rows (round, {contender: (total s, slowest call s)}), from an empty cache."""
    from .. import api
    from ..tuning import runtime

    cupy, _ = _libraries()
    os.environ["CUDASORTKIT_CACHE_DIR"] = tempfile.mkdtemp(prefix="csk-cold-")
    runtime.reset()
    rng = np.random.default_rng(1)
    arrays = [cupy.asarray(rng.standard_normal(n).astype(np.float32)) for n in COLD_SIZES]
    sync = cupy.cuda.Device().synchronize
    rows = []
    for r in range(rounds):
        result = {}
        for name, fn in (("cudasortkit", api.sort), ("cupy", cupy.sort)):
            times = []
            for x in arrays:
                t = time.perf_counter()
                fn(x)
                sync()
                times.append(time.perf_counter() - t)
            result[name] = (sum(times), max(times))
        rows.append((r + 1, result))
    return rows


def print_latency(rows) -> None:
    names = list(rows[0][1])
    print(f"{'n':>10} " + " ".join(f"{n + ' us':>16}" for n in names) + "   csk vs cupy")
    for n, us in rows:
        print(f"{n:>10,} " + " ".join(f"{us[k]:16.1f}" for k in names)
              + f"   {us['cupy'] / us['cudasortkit']:.2f}x")


def print_host_tiny(row) -> None:
    print(f"host uint32 1,000 keys: cudasortkit {row['cudasortkit']:.2f} us per call "
          f"(first call {row['first']:.0f} us), np.sort {row['numpy']:.2f} us: "
          f"{row['cudasortkit'] / row['numpy']:.2f}x np.sort")


def print_cold(rows) -> None:
    print(f"{'round':>5} {'csk total s':>12} {'csk max s':>10} {'cupy total s':>13} {'cupy max s':>11}")
    for r, res in rows:
        (ct, cm), (pt, pm) = res["cudasortkit"], res["cupy"]
        print(f"{r:>5} {ct:12.3f} {cm:10.3f} {pt:13.3f} {pm:11.3f}")


# ------------------------------------------------------------------- peers
#: The peer rows: cuda.compute's radix sort, prepared and one-shot.
PREPARED, ONESHOT = "cub(prepared)", "cub(oneshot)"
#: Per-call sizes of --peers (log2 of n).
PEER_SIZES = (10, 12, 16, 20)
#: Per-call samples of each contender (median), over PEER_ROUNDS interleaved rounds.
PEER_REPS = 200
#: Interleaved rounds of a per-call cell: many short ones, so that when the
#: CPU changes speed during a cell (timing.cpu_probe_ms) every contender sees
#: about the same share of each speed. (With 5 rounds of 40 calls, a stretch
#: of a quarter of a cell's calls could hold 80 calls of one of the six
#: contenders and one of another; with 20 rounds, at most 1.5x as many.)
PEER_ROUNDS = 20
#: A cell whose CPU probe differs by more than this share before and after
#: is marked in the table: its CPU changed speed while it was timed.
PROBE_DRIFT = 0.15


def peer_module():
    """(cuda.compute, None) where cuda-cccl imports here, else (None, why not)."""
    try:
        import cuda.compute as cc

        cc.make_radix_sort, cc.radix_sort, cc.SortOrder  # noqa: B018  (the API used here)
        return cc, None
    except Exception as exc:  # not installed, or its CUDA libraries missing
        return None, f"{type(exc).__name__}: {exc}".splitlines()[0][:160]


def not_installed(reason: str) -> str:
    """The one line --peers prints where cuda.compute cannot be imported."""
    return f"peers: cuda.compute (cuda-cccl) is not installed here ({reason}); timing without it"


class CubPrepared:
    """cuda.compute's radix sort of arrays like `like`, the fastest way a
    user can call it: built once, temporary storage allocated up front,
    each call sorting into the one output it owns (returned). With
    `values_like`, its pair sort: a call returns (keys, values)."""

    def __init__(self, cc, cupy, like, values_like=None):
        self.n = like.size
        self.out = cupy.empty_like(like)
        self.values_out = None if values_like is None else cupy.empty_like(values_like)
        self.sorter = cc.make_radix_sort(d_in_keys=like, d_out_keys=self.out,
                                         d_in_values=values_like, d_out_values=self.values_out,
                                         order=cc.SortOrder.ASCENDING)
        nbytes = self.sorter(temp_storage=None, d_in_keys=like, d_out_keys=self.out,
                             d_in_values=values_like, d_out_values=self.values_out,
                             num_items=self.n)
        self.temp = cupy.empty(max(int(nbytes), 1), cupy.uint8)

    def __call__(self, x, values=None):
        self.sorter(temp_storage=self.temp, d_in_keys=x, d_out_keys=self.out, d_in_values=values,
                    d_out_values=self.values_out, num_items=self.n)
        return self.out if values is None else (self.out, self.values_out)


def cub_oneshot(cc, cupy, x):
    """cuda.compute.radix_sort of `x` into a new array (it sizes and allocates
    its temporary storage on each call)."""
    out = cupy.empty_like(x)
    cc.radix_sort(d_in_keys=x, d_out_keys=out, num_items=x.size, order=cc.SortOrder.ASCENDING)
    return out


def _peer_error(exc) -> RuntimeError:
    # bench.bench_case reports ValueError/MemoryError/RuntimeError as the row's error
    return RuntimeError(f"cuda.compute: {type(exc).__name__}: {exc}")


def device_peers(cc, cupy):
    """For bench.bench_case: runners(devs, op, vals, index_dtype) -> {row
    name: run(i)}: for op "sort" (devs: CuPy arrays of one dtype and size)
    the two peer forms; for "pairs" (vals: the values, one array per input)
    the prepared pair sort, run(i) -> (keys, values); for "argsort" the
    prepared pair sort of the keys with their positions (index_dtype) as
    values, run(i) -> the values: what an argsort costs through CUB. A form
    cuda.compute refuses (a dtype it does not sort) fails its row with
    RuntimeError."""
    def runners(devs, op="sort", vals=None, index_dtype="int64"):
        prepared = []
        positions = []

        def sorter():
            if not prepared:
                like = None
                if op == "pairs":
                    like = vals[0]
                elif op == "argsort":
                    positions.append(cupy.arange(devs[0].size, dtype=index_dtype))
                    like = positions[0]
                prepared.append(CubPrepared(cc, cupy, devs[0], like))
            return prepared[0]

        def run_prepared(i):
            try:
                cub = sorter()
                if op == "pairs":
                    return cub(devs[i], vals[i])
                if op == "argsort":
                    return cub(devs[i], positions[0])[1]
                return cub(devs[i])
            except Exception as exc:
                raise _peer_error(exc) from exc

        def run_oneshot(i):
            try:
                return cub_oneshot(cc, cupy, devs[i])
            except Exception as exc:
                raise _peer_error(exc) from exc

        if op != "sort":
            return {PREPARED: run_prepared}
        return {PREPARED: run_prepared, ONESHOT: run_oneshot}
    return runners


def add_vs_cub(rows) -> None:
    """vs_cub on each timed row of one cell: cub(prepared)'s time over its
    ("median_ms" rows of bench_case, "us" rows of peers_latency)."""
    for key in ("median_ms", "us"):
        base = next((r for r in rows if r["algorithm"] == PREPARED and key in r), None)
        if base is not None:
            for r in rows:
                if key in r:
                    r["vs_cub"] = base[key] / r[key]


def _made(make):
    """make() (a call), or where making it fails, a call raising that error
    (its row reports it; the other contenders still run)."""
    try:
        return make()
    except Exception as exc:
        error = exc  # (the except clause unbinds exc when it ends)

        def fail():
            raise error
        return fail


def peer_contenders(h, x, cupy, torch, cc, csk) -> dict:
    """name -> (call, synchronize) for the keys `h` (NumPy) on the device as
    `x` (CuPy)."""
    sync = cupy.cuda.Device().synchronize

    def plan(with_out):
        p, out = csk.plan(like=x), cupy.empty_like(x)
        return (lambda: p(x, out=out)) if with_out else (lambda: p(x))

    def prepared():
        sorter = CubPrepared(cc, cupy, x)
        return lambda: sorter(x)

    calls = {"csk.sort": (lambda: csk.sort(x), sync),
             "csk.plan": (_made(lambda: plan(False)), sync),
             "csk.plan(out=)": (_made(lambda: plan(True)), sync)}
    if cc is not None:
        calls[PREPARED] = (_made(prepared), sync)
        calls[ONESHOT] = (lambda: cub_oneshot(cc, cupy, x), sync)
    calls["cupy.sort"] = (lambda: cupy.sort(x), sync)
    if torch is not None:
        def torch_sort():
            t = torch.from_numpy(h).cuda()
            return lambda: torch.sort(t).values
        calls["torch.sort"] = (_made(torch_sort), torch.cuda.synchronize)
    return calls


def _uniform(dtype: str, n: int, rng) -> np.ndarray:
    """n keys spread over the whole integer dtype, or standard normal floats
    (bench.py's "uniform"; not imported from there: bench imports this)."""
    dt = numpy_dtype(dtype)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return rng.integers(info.min, info.max, size=n, dtype=dt, endpoint=True)
    return rng.standard_normal(n).astype(dt)


def _to_host(x) -> np.ndarray:
    if isinstance(x, np.ndarray):
        return x
    return x.get() if hasattr(x, "get") else x.cpu().numpy()


def peers_latency(dtypes=("float32",), sizes=None, reps=None, libraries=None,
                  csk=None) -> list:
    """Per-call wall clock with synchronisation, the thread kept on one CPU
    (timing.on_one_cpu): rows {op: "call", dtype, n, algorithm, us (median
    of `reps`, interleaved rounds after warm-up), ok, vs_cub, cpu (the CPU
    timed on; None: not pinned), cpu_probe_ms (timing.cpu_probe_ms before
    and after the cell), replays_without_graph (our calls of the cell's
    timed rounds that launched no CUDA graph: launch.plans.issued_replays)},
    or {..., ok: False, error} for a contender whose first result differs
    from np.sort's (never timed) or that fails. `libraries`: (cupy, torch, cuda.compute or None), default
    the installed ones; `csk`: the cudasortkit module (tests pass stand-ins)."""
    sizes = PEER_SIZES if sizes is None else sizes
    reps = PEER_REPS if reps is None else reps
    if csk is None:
        from .. import api as csk
    if libraries is None:
        cupy, torch = _libraries()
        cc, _ = peer_module()
    else:
        cupy, torch, cc = libraries
    rng = np.random.default_rng(3)
    rows = []
    with on_one_cpu() as cpu:  # every cell's contenders on one CPU
        for dtype in dtypes:
            for b in sizes:
                h = _uniform(dtype, 1 << b, rng)
                x = cupy.asarray(h)
                rows += _peer_cell(dtype, h, reps, peer_contenders(h, x, cupy, torch, cc, csk))
    for row in rows:
        row["cpu"] = cpu
    return rows


def _peer_cell(dtype: str, h, reps: int, contenders: dict) -> list:
    """One (dtype, n) cell of peers_latency: each contender's result checked
    against np.sort of the keys `h` (NumPy), then warmed up and timed in rotated
    rounds with the others; the CPU probe, and the count of replays that had
    no graph to launch, are read right before and after those rounds (a
    first cell's warm-up compiles for seconds); its rows."""
    ref = np.sort(h, kind="stable")
    cell, timed = [], {}
    for name, (fn, sync) in contenders.items():
        row = {"op": "call", "dtype": dtype, "n": h.size, "algorithm": name}
        cell.append(row)
        try:
            row["ok"] = bool(np.array_equal(_to_host(fn()), ref, equal_nan=ref.dtype.kind == "f"))
            if not row["ok"]:
                row["error"] = "wrong result"
                continue
            built.wait()  # a config built aside (launch/built.py): time it, not its stand-in
            for _ in range(5):  # warm-up: compiles, allocations, graphs
                fn()
            sync()
            timed[name] = (fn, sync)
        except Exception as exc:
            row.update(ok=False, error=f"{type(exc).__name__}: {exc}".splitlines()[0][:160])
    samples = {name: [] for name in timed}
    probe = [cpu_probe_ms()]  # bracketing the timed rounds, not the checks and warm-up
    issued = launchplan.issued_replays()
    per_round = -(-reps // PEER_ROUNDS)
    for order in rotated_rounds(timed, PEER_ROUNDS):
        for name in order:
            fn, sync = timed[name]
            for _ in range(per_round):
                t = time.perf_counter()
                fn()
                sync()
                samples[name].append((time.perf_counter() - t) * 1e6)
    issued = launchplan.issued_replays() - issued
    probe.append(cpu_probe_ms())
    for row in cell:
        row["cpu_probe_ms"] = probe
        row["replays_without_graph"] = issued
        if row["algorithm"] in samples:
            row["us"] = statistics.median(samples[row["algorithm"]])
    add_vs_cub(cell)
    return cell


def _drifted(probe) -> bool:
    """Whether a cell's CPU probe, before and after, moved past PROBE_DRIFT."""
    return bool(probe) and max(probe) > (1 + PROBE_DRIFT) * min(probe)


def format_peers(rows) -> str:
    """The per-call table: one line per (dtype, n), us per contender, then
    each of ours "vs cub" (cub(prepared)'s time over ours)."""
    names = list(dict.fromkeys(r["algorithm"] for r in rows))
    ours = [n for n in names if n.startswith("csk.")]
    head = f"{'dtype':8} {'n':>9} " + " ".join(f"{n:>14}" for n in names)
    if any("vs_cub" in r for r in rows):
        head += "   vs cub: " + ", ".join(ours)
    cpus = {r.get("cpu") for r in rows} - {None}
    pinned = f"; thread pinned to CPU {', '.join(map(str, sorted(cpus)))}" if cpus else ""
    lines = [f"per call, wall clock with synchronisation (us, median{pinned}):", head]
    for cell in dict.fromkeys((r["dtype"], r["n"]) for r in rows):
        got = {r["algorithm"]: r for r in rows if (r["dtype"], r["n"]) == cell}
        text = " ".join(f"{got[n]['us']:14.1f}" if "us" in got.get(n, {}) else
                        f"{('failed' if n in got else '-'):>14}" for n in names)
        vs = [f"{got[n]['vs_cub']:.2f}x" for n in ours if "vs_cub" in got.get(n, {})]
        first = next(iter(got.values()))
        issued = first.get("replays_without_graph")
        lines.append(f"{cell[0]:8} {cell[1]:>9,} {text}" + (f"   {', '.join(vs)}" if vs else "")
                     + (" *" if _drifted(first.get("cpu_probe_ms")) else "")
                     + (f" [{issued} without a graph]" if issued else ""))
    probes = [p for r in rows for p in r.get("cpu_probe_ms", ())]
    if probes:
        lines.append(f"  CPU probe (timing.cpu_probe_ms, more: a slower CPU) {min(probes):.1f}-"
                     f"{max(probes):.1f} ms over the cells; * its CPU changed speed during the cell")
    if any(r.get("replays_without_graph") for r in rows):
        lines.append("  [k without a graph]: k of our timed calls in the cell found no CUDA graph "
                     "of their buffers (launch.plans.issued_replays): slower calls")
    for r in rows:
        if "error" in r:
            lines.append(f"  {r['dtype']} {r['n']:,} {r['algorithm']}: {r['error']}")
    return "\n".join(lines)
