"""``python -m cudasortkit.tune --kinds [--quick]``: measure every plugin of
the selection, multikey and search kinds on a grid of shapes, so auto
chooses among them from this device's measurements (tuning/kinds.py).

Every plugin is run through the public function (topk, partition, lexsort,
searchsorted) with algorithm=<its name> on device arrays (CuPy); its first
result is checked against NumPy's, and only a right one is timed: CUDA-event
median after warm-up (gpu/timing.py). A plugin that cannot serve a shape
(ValueError naming why) is skipped there, one whose result is wrong or
which fails is reported and not stored. Times go to the tuning cache's
"kinds" section of this device (cache.Store.put_kind).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..sdk.multikey import key_bits
from ..tuning.kinds import KINDS, MULTIKEY, SEARCH, SELECTION, Kind, lg

#: Selection (op, rows, row length, k), float32 keys (quick and full).
SELECT_QUICK = [("topk", 1, 1 << 20, 16), ("topk", 1, 1 << 20, 1 << 14), ("topk", 1, 1 << 23, 1000),
                ("topk", 4096, 32000, 50), ("topk", 1 << 16, 1024, 8), ("topk", 1, 1 << 24, 1 << 20)]
SELECT_FULL = SELECT_QUICK + [("topk", 1, 1 << 16, 64), ("topk", 1024, 1 << 14, 256),
                              ("partition", 1, 1 << 20, None), ("partition", 1, 1 << 24, None)]
#: Search (n, m): every pair of these sizes, float32 keys, one row, no sorter;
#: the full grid adds int64 keys, a sorter and batched rows.
SEARCH_SIZES = (1 << 10, 1 << 16, 1 << 20, 1 << 24)
#: Multikey: key dtypes (most significant first) at these sizes, device keys;
#: plus host keys at 2^20 (the CPU plugin).
MULTIKEY_KEYS = (("int32", "float32"), ("int32", "float32", "int32"))
MULTIKEY_SIZES = (1 << 20, 1 << 24)
MULTIKEY_FULL_KEYS = MULTIKEY_KEYS + (("int64", "int64", "float64"), ("uint8", "int16"))


@dataclass
class Cell:
    """One shape of one kind: `label` says it, `setup(rng)` makes its inputs
    and returns a Case (run(name) through the public function, wrong(result)
    -> None or why, free()); `keys`: how many keys its inputs hold."""

    kind: Kind
    shape: tuple
    label: str
    setup: Callable
    keys: int = 0


def _select_cell(op, rows, row_len, k, dtype="float32") -> Cell:
    k = row_len // 2 if op == "partition" else k  # partition: kth at the middle
    shape = (op, dtype, lg(rows), lg(row_len), lg(row_len if op == "partition" else k))
    label = f"{op} {rows} x {row_len:,} {dtype} {'kth' if op == 'partition' else 'k'}={k:,}"
    return Cell(SELECTION, shape, label, lambda rng: _SelectCase(op, rows, row_len, k, dtype, rng),
                rows * row_len)


def _search_cell(n, m, dtype="float32", rows=1, sorter=False) -> Cell:
    shape = (dtype, lg(n), lg(m), lg(rows), str(int(sorter)))
    label = f"searchsorted {rows} x {n:,} keys, {m:,} {dtype} queries{' with sorter' if sorter else ''}"
    return Cell(SEARCH, shape, label, lambda rng: _SearchCase(n, m, dtype, rows, sorter, rng),
                rows * (n + m))


def _multikey_cell(dtypes, n, device=True) -> Cell:
    bits = sum(key_bits(d) for d in dtypes)
    shape = (str(len(dtypes)), str(bits), lg(n), "device" if device else "host")
    label = f"lexsort of {len(dtypes)} keys ({','.join(dtypes)}) x {n:,} on the {shape[3]}"
    return Cell(MULTIKEY, shape, label, lambda rng: _LexsortCase(dtypes, n, device, rng),
                n * len(dtypes))


def grid(quick: bool, kinds=None) -> list:
    """The cells of a sweep: quick (well under a minute on an H100) or full,
    of the kinds named (selection, multikey, search; default all)."""
    kinds = set(kinds or ("selection", "multikey", "search"))
    cells = []
    if "selection" in kinds:
        cells += [_select_cell(*c) for c in (SELECT_QUICK if quick else SELECT_FULL)]
    if "multikey" in kinds:
        for dtypes in (MULTIKEY_KEYS if quick else MULTIKEY_FULL_KEYS):
            cells += [_multikey_cell(dtypes, n) for n in MULTIKEY_SIZES]
        cells.append(_multikey_cell(MULTIKEY_KEYS[0], 1 << 20, device=False))
    if "search" in kinds:
        cells += [_search_cell(n, m) for n in SEARCH_SIZES for m in SEARCH_SIZES]
        if not quick:
            cells += [_search_cell(n, m, "int64") for n in SEARCH_SIZES for m in SEARCH_SIZES]
            cells += [_search_cell(n, 1 << 20, sorter=True) for n in SEARCH_SIZES]
            cells += [_search_cell(1 << 14, 1 << 10, rows=1024)]
    return cells


#: --quick measures the CPU plugins only at cells of at most this many keys:
#: above it they take seconds a call, far behind the GPU's.
QUICK_CPU_MAX_KEYS = 1 << 24


def plan(cells, plugins: dict, names=None, cpu_max_keys=None) -> list:
    """[(cell, [plugin names])]: every working plugin of the cell's kind
    (`plugins`: group -> {name: plugin}), those in `names` when given;
    CPU plugins only at cells of at most `cpu_max_keys` keys when given."""
    out = []
    for cell in cells:
        found = plugins.get(cell.kind.group, {})
        chosen = [n for n in sorted(found) if (names is None or n in names) and not (
            cpu_max_keys is not None and cell.keys > cpu_max_keys
            and getattr(found[n], "device", "gpu") == "cpu")]
        if chosen:
            out.append((cell, chosen))
    return out


# ------------------------------------------------------------------ cases
def _values(rng, dtype, size):
    dt = np.dtype(dtype)
    if dt in (np.float32, np.float64):
        return rng.standard_normal(size, dtype=dt)
    if dt.kind == "f":
        return rng.standard_normal(size).astype(dt)
    info = np.iinfo(dt)
    return rng.integers(info.min, info.max, size, dtype=dt, endpoint=True)


class _SelectCase:
    def __init__(self, op, rows, row_len, k, dtype, rng):
        import cupy

        self.op, self.k = op, k
        self.host = _values(rng, dtype, (rows, row_len)) if rows > 1 else _values(rng, dtype, row_len)
        self.dev = cupy.asarray(self.host)
        if op == "topk":  # the k largest per row, largest first (values are exact)
            part = -np.partition(-self.host, k - 1, axis=-1)[..., :k]
            self.want = -np.sort(-part, axis=-1)
        else:
            self.want = np.partition(self.host, k, axis=-1)[..., k]

    def run(self, name):
        from .. import api

        if self.op == "topk":
            return api.topk(self.dev, self.k, algorithm=name)
        return api.partition(self.dev, self.k, algorithm=name)

    def wrong(self, result):
        import cupy

        if self.op == "topk":
            values, indices = result
            got = cupy.asnumpy(values)
            if not np.array_equal(got, self.want):
                return "values differ from NumPy's top-k"
            picked = cupy.asnumpy(cupy.take_along_axis(self.dev, indices, -1))
            return None if np.array_equal(picked, got) else "indices do not point at the values"
        got = cupy.asnumpy(result)
        k = self.k
        if not np.array_equal(np.sort(got, axis=-1), np.sort(self.host, axis=-1)):
            return "not a permutation of the keys"
        if not (np.array_equal(got[..., k], self.want) and (got[..., :k] <= got[..., k:k + 1]).all()
                and (got[..., k + 1:] >= got[..., k:k + 1]).all()):
            return "not partitioned at kth as numpy.partition"
        return None

    def free(self):
        self.dev = None


class _SearchCase:
    def __init__(self, n, m, dtype, rows, sorter, rng):
        import cupy

        a = _values(rng, dtype, (rows, n) if rows > 1 else n)
        v = _values(rng, dtype, (rows, m) if rows > 1 else m)
        self.sorter = None
        if sorter:
            order = np.argsort(a, kind="stable")
            self.want = np.searchsorted(a, v, sorter=order)
            self.sorter = cupy.asarray(order.astype(np.int64))
        else:
            a = np.sort(a, axis=-1)
            if rows > 1:
                self.want = np.stack([np.searchsorted(a[r], v[r]) for r in range(rows)])
            else:
                self.want = np.searchsorted(a, v)
        self.a, self.v = cupy.asarray(a), cupy.asarray(v)

    def run(self, name):
        from .. import api

        return api.searchsorted(self.a, self.v, sorter=self.sorter, algorithm=name)

    def wrong(self, result):
        import cupy

        return None if np.array_equal(cupy.asnumpy(result), self.want) else \
            "insertion points differ from numpy.searchsorted"

    def free(self):
        self.a = self.v = self.sorter = None


class _LexsortCase:
    def __init__(self, dtypes, n, device, rng):
        # numpy.lexsort's keys: the LAST one primary; dtypes name the most significant first
        self.host = [_values(rng, d, n) for d in reversed(dtypes)]
        if device:
            import cupy

            self.keys = [cupy.asarray(k) for k in self.host]
        else:
            self.keys = self.host
        self.want = np.lexsort(self.host)

    def run(self, name):
        from .. import api

        return api.lexsort(self.keys, algorithm=name)

    def wrong(self, result):
        got = result if isinstance(result, np.ndarray) else __import__("cupy").asnumpy(result)
        return None if np.array_equal(got, self.want) else "order differs from numpy.lexsort"

    def free(self):
        self.keys = None


# ------------------------------------------------------------------ the sweep
def _gpu_ms(fn, repeats: int) -> float:
    """CUDA-event median of `repeats` runs after warm-up; one run (the
    checked one was its warm-up) where repeats is 1."""
    from ..gpu.timing import time_gpu
    from ..launch import built

    built.wait()  # a config the checked run built aside (launch/built.py): time it, not its stand-in
    return time_gpu(lambda i: fn(), warmup=0 if repeats <= 1 else 2, repeats=repeats,
                    max_repeats=repeats)["median_ms"]


def sweep(work, put, *, repeats=5, time_ms=_gpu_ms, log=print, rng=None, once=()) -> dict:
    """Measure `work` (plan()): per cell, each plugin's result checked once,
    then timed (time_ms(fn, repeats) -> ms; plugins named in `once`: one
    repeat) and stored (put(kind, name, shape, ms)). Returns {"entries",
    "skipped": [(label, name, why)], "wrong": [...], "failed": [...],
    "best": {(group, key): name}}."""
    rng = rng or np.random.default_rng(0)
    out = {"entries": 0, "skipped": [], "wrong": [], "failed": [], "best": {}}
    for cell, names in work:
        try:
            case = cell.setup(rng)
        except Exception as exc:  # inputs or the NumPy reference could not be made
            out["failed"] += [(cell.label, n, f"{type(exc).__name__}: {exc}") for n in names]
            log(f"{cell.label}: could not set up ({type(exc).__name__}: {exc})")
            continue
        times = {}
        for name in names:
            try:
                result = case.run(name)
            except ValueError as exc:  # the plugin does not serve this shape
                out["skipped"].append((cell.label, name, str(exc).splitlines()[0][:160]))
                continue
            except Exception as exc:
                out["failed"].append((cell.label, name, f"{type(exc).__name__}: {exc}"[:200]))
                log(f"{cell.label}: {name} failed ({type(exc).__name__}: {exc})")
                continue
            why = case.wrong(result)
            if why is not None:
                out["wrong"].append((cell.label, name, why))
                log(f"{cell.label}: {name} gave a WRONG result ({why}); not timed")
                continue
            times[name] = time_ms(lambda name=name: case.run(name), 1 if name in once else repeats)
            put(cell.kind, name, cell.shape, times[name])
            out["entries"] += 1
        case.free()
        if times:
            ranked = sorted(times.items(), key=lambda t: (t[1], t[0]))
            out["best"][(cell.kind.group, cell.kind.key(cell.shape))] = ranked[0][0]
            log(f"{cell.label}: " + ", ".join(f"{n} {ms:.3f} ms" for n, ms in ranked))
    return out


def main(args) -> int:
    """tune --kinds: the sweep into this device's cache."""
    from ..sdk import registry
    from ..tuning import cache, runtime

    quick = bool(args.quick)
    kinds = None if args.kinds in (None, "all") else [k.strip() for k in args.kinds.split(",")]
    words = {k.what for k in KINDS.values()}
    unknown = [k for k in kinds or () if k not in words]
    if unknown:
        raise SystemExit(f"unknown plugin kinds {unknown}; choose from {', '.join(sorted(words))}")
    names = {n.strip() for n in args.plugins.split(",") if n.strip()} if args.plugins else None
    plugins = {group: registry.plugins(group) for group in KINDS}
    for name in filter(None, (x.strip() for x in args.exclude.split(","))):
        for found in plugins.values():
            found.pop(name, None)
    work = plan(grid(quick, kinds), plugins, names, QUICK_CPU_MAX_KEYS if quick else None)
    if not work:
        raise SystemExit("no plugin of those kinds to measure")
    ctx = runtime.context()
    print(f"measuring {sum(len(n) for _, n in work)} (plugin, shape) pairs of "
          f"{', '.join(sorted({c.kind.what for c, _ in work}))} | "
          f"{'quick' if quick else 'full'} grid"
          + (f" (CPU plugins up to {QUICK_CPU_MAX_KEYS:,} keys)" if quick else ""), flush=True)
    start = time.monotonic()

    def put(kind, name, shape, ms):
        plugin = plugins[kind.group][name]
        ctx.store.put_kind(kind.group, name, cache.kind_hash(plugin), kind.key(shape), ms)

    # --quick times the CPU plugins once (their wall times vary little)
    once = {n for found in plugins.values() for n, p in found.items()
            if quick and getattr(p, "device", "gpu") == "cpu"}
    with runtime.tuning_now():  # the sorts inside (sort_select, passes) start no measuring
        summary = sweep(work, put, repeats=args.repeats or (3 if quick else 10), time_ms=_gpu_ms,
                        once=once)
    saved = ctx.store.save()
    ctx.changed()
    print(f"done in {time.monotonic() - start:.1f} s: {summary['entries']} entries, "
          f"{len(summary['wrong'])} wrong results, {len(summary['failed'])} failures")
    for label, name, why in summary["skipped"]:
        print(f"  skipped {name} at {label}: {why}")
    for label, name, why in summary["wrong"] + summary["failed"]:
        print(f"  NOT MEASURED {name} at {label}: {why}")
    print(f"cache: {ctx.store.path}" + ("" if saved else " (NOT saved: in memory only)"))
    if args.json:
        import json

        with open(args.json, "w") as f:
            json.dump({**summary, "best": {f"{g} {k}": n for (g, k), n in summary["best"].items()}},
                      f, indent=1, default=str)
    return 1 if summary["wrong"] or summary["failed"] else 0
