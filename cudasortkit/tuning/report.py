"""What `python -m cudasortkit.tune` prints and draws: the cached table
(--show), throughput plots (--plot) and the bar check (--check)."""
from __future__ import annotations

import math

import numpy as np

from ..dtypes import KEY_DTYPES
from ..plugin import Request
from .policy import OP_SHAPE, OPS, decide, fits, plugin_results, points


class _Fake:
    """Stand-in plugin for reading a cache without the plugin installed."""

    def __init__(self, name, device):
        self.name, self.device = name, device

    def valid_config(self, *a):
        return True


def _plugins_in(table: dict) -> dict:
    from .. import registry

    live = registry.plugins()
    out = {}
    for name in sorted(table.get("plugins", {})):
        out[name] = live.get(name) or _Fake(name, "cpu" if name == "numpy" else "gpu")
    return out


def _cells(table):
    """{(op, dtype): sorted buckets} measured for any GPU plugin, of the
    operations and key dtypes this version knows (plugins are asked about
    these cells; others are another version's, or corrupt)."""
    cells = {}
    for name, block in table.get("plugins", {}).items():
        if name == "numpy":
            continue
        for op, by_dtype in block.get("results", {}).items():
            for dtype, by_bucket in by_dtype.items():
                if op in OPS and dtype in KEY_DTYPES:
                    cells.setdefault((op, dtype), set()).update(int(b) for b in by_bucket)
    return {k: sorted(v) for k, v in sorted(cells.items(), key=lambda kv: (OPS.index(kv[0][0]), kv[0][1]))}


def _fmt_cfg(cfg) -> str:
    if not cfg:
        return "-"
    short = {"block_size": "bs", "items_per_thread": "ipt", "digit_bits": "bits"}
    return ",".join(f"{short.get(k, k)}={v}" for k, v in sorted(cfg.items()))


def show(table: dict, path: str = "", verbose: bool = False) -> str:
    """The cached table: per (op, dtype, size) each plugin's best time (ms,
    device-array call time; numpy: host wall time) and what auto picks for device and
    for host input, with its config and its gain over the default config."""
    dev = table.get("device", {})
    lines = [f"tuning cache {path}",
             f"device: {dev.get('name')} (cc {dev.get('compute_capability')}, {dev.get('sm_count')} SMs), "
             f"driver {dev.get('driver')}, nvcc [{dev.get('nvcc')}], cudasortkit {dev.get('cudasortkit')}"]
    plugins = _plugins_in(table)
    gpu = [n for n, p in plugins.items() if p.device == "gpu"]
    cols = gpu + (["numpy"] if "numpy" in plugins else [])
    head = f"{'op':7} {'dtype':8} {'n':>10} " + " ".join(f"{c[:11]:>11}" for c in cols) + \
        f"  {'auto(device)':34} {'tuned/def':>9}  {'auto(host)':12}"
    lines += [head, "-" * len(head)]
    for (op, dtype), buckets in _cells(table).items():
        for b in buckets:
            n = 1 << b
            row = f"{op:7} {dtype:8} {n:>10} "
            for c in cols:
                e = plugin_results(table, c).get(op, {}).get(dtype, {}).get(str(b))
                if not isinstance(e, dict):
                    cell = "-"
                elif e.get("failed"):
                    cell = "failed"
                else:
                    cell = f"{e['ms']:.4f}"
                row += f"{cell:>11} "
            kind, vb = OP_SHAPE.get(op, ("sort", 0))
            cands = {k: v for k, v in plugins.items() if v.device == "gpu"}
            d = decide(table, Request(kind=kind, dtype=dtype, n=n, value_bytes=vb), cands)
            if d is not None:
                e = plugin_results(table, d.name).get(op, {}).get(dtype, {}).get(str(b), {})
                # tuned vs default as the sweep measured them (same moment)
                gain = (f"{e.get('sweep_ms', e['ms']) / e['default_ms']:.2f}x" if e.get("default_ms") else "-")
                row += f" {d.name + ' ' + _fmt_cfg(d.config):34} {gain:>9}"
            else:
                row += f" {'-':34} {'-':>9}"
            hd = decide(table, Request(kind=kind, dtype=dtype, n=n, value_bytes=vb, on_device=False),
                        plugins)
            row += f"  {hd.name if hd else '-':12}"
            lines.append(row.rstrip())
    if verbose:
        lines.append("")
        lines.append("entries (plugin op dtype n: ms [config] default_ms tried rejected)")
        for name in gpu:
            for op, by_dtype in plugin_results(table, name).items():
                for dtype, by_bucket in by_dtype.items():
                    for b in sorted(by_bucket, key=int):
                        e = by_bucket[b]
                        if e.get("failed"):
                            lines.append(f"  {name} {op} {dtype} 2^{b}: failed: {e['failed']}")
                            continue
                        dm = e.get("default_ms")
                        lines.append(f"  {name} {op} {dtype} 2^{b}: {e['ms']:.4f} [{_fmt_cfg(e['config'])}] "
                                     f"default {dm if dm is None else round(dm, 4)} tried {e.get('tried')} "
                                     f"rejected {e.get('rejected_count', 0)}"
                                     + (" (lazy)" if e.get("lazy") else "")
                                     + ("" if e.get("complete", True) else " (incomplete)"))
        host = table.get("host", {})
        for op, by_dtype in host.items():
            for dtype, by_bucket in by_dtype.items():
                for b in sorted(by_bucket, key=int):
                    h = by_bucket[b]
                    lines.append(f"  host {op} {dtype} 2^{b}: GPU overhead {h['extra_ms']:.4f} ms via {h.get('via')}")
    return "\n".join(lines)


def plot(table: dict, filename: str, ops=("sort",)) -> str:
    """Throughput (GK/s) vs size per plugin, one panel per dtype, saved as PNG."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise SystemExit(f"--plot needs matplotlib (pip install cudasortkit[plot]): {exc}")
    cells = [(op, dt) for (op, dt) in _cells(table) if op in ops] or list(_cells(table))
    if not cells:
        raise SystemExit("the cache holds no measurements to plot")
    cols = min(len(cells), 3)
    rows = math.ceil(len(cells) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 3.8 * rows), squeeze=False)
    host = table.get("host", {})
    for ax, (op, dtype) in zip(axes.flat, cells):
        for name in sorted(table.get("plugins", {})):
            pts = points(plugin_results(table, name).get(op, {}).get(dtype))
            if not pts:
                continue
            xs = sorted(pts)
            ys = [(1 << b) / pts[b] / 1e6 for b in xs]
            style = "--" if name == "numpy" else "-"
            label = "numpy (CPU, host wall)" if name == "numpy" else name
            ax.plot([1 << b for b in xs], ys, style, marker="o", ms=3, label=label)
        extra = points(host.get(op, {}).get(dtype), "extra_ms")
        if extra:
            best = {}
            for name in table.get("plugins", {}):
                if name == "numpy":
                    continue
                for b, ms in points(plugin_results(table, name).get(op, {}).get(dtype)).items():
                    best[b] = min(best.get(b, math.inf), ms)
            xs = sorted(b for b in extra if b in best)
            if xs:
                ax.plot([1 << b for b in xs], [(1 << b) / (best[b] + extra[b]) / 1e6 for b in xs], ":",
                        color="gray", label="best GPU from host array")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(f"{op} {dtype}")
        ax.set_xlabel("keys")
        ax.set_ylabel("GKeys/s")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(cells):]:
        ax.axis("off")
    dev = table.get("device", {})
    fig.suptitle(f"cudasortkit tuned throughput on {dev.get('name')} (device arrays; numpy: host wall)")
    fig.tight_layout()
    fig.savefig(filename, dpi=110)
    plt.close(fig)
    return filename


# ------------------------------------------------------------------ bars
def check(table: dict, *, repeats: int = 10, inputs: int = 3, host_n: int = 1000, rounds: int = 5,
          log=print) -> dict:
    """Measure the issue's bars in one run, against the tuned table.

    1. auto sort vs the best single plugin (each run by name with its tuned
       config), device arrays, every (dtype, bucket) of the cached sort sweep;
       bar: auto <= 1.1x best. At 2^10-2^16 keys a whole call is 50-150 us,
       mostly Python, and one round's medians differ by up to ~15% with host
       jitter alone (an H100 run at 3 rounds had auto, the same plugin and
       config, 1.17x its by-name call at 1,024 keys): hence `rounds` rounds,
       each contender keeping its best median.
    2. tuned config vs default config per plugin, same inputs; bar: <= 1.05x.
    3. host arrays of `host_n` keys: auto vs numpy.sort (and vs the numpy
       plugin through cudasortkit); bar: auto <= 1.2x numpy.sort.
    """
    from .. import api, registry
    from ..device import get_device
    from .runtime import context
    from .tuner import Case, Tuner, race, random_keys, wall_ms

    import os

    os.environ["CUDASORTKIT_AUTOTUNE"] = "0"  # measure the cached table, never tune here
    state = get_device()
    ctx = context(state)
    plugins = registry.plugins()
    gpu = {n: p for n, p in plugins.items() if p.device == "gpu"}
    rng = np.random.default_rng()
    cells = {k: v for k, v in _cells(table).items() if k[0] == "sort"}
    out = {"auto": [], "tuned": [], "host": []}
    log(f"{'dtype':8} {'n':>10} {'auto pick':12} {'auto ms':>9} {'best single':12} {'best ms':>9} {'ratio':>6}  bar<=1.10")
    for (op, dtype), buckets in cells.items():
        for b in buckets:
            n = 1 << b
            hosts = [random_keys(dtype, n, rng) for _ in range(inputs)]
            devs = _to_device(hosts)
            names = [nm for nm in sorted(gpu) if _ok(table, nm, dtype, b)
                     and registry.call(gpu[nm], "unsupported", Request("sort", dtype, n)) is None]
            ref = np.sort(hosts[0])
            runners, times = {}, {}
            for name in names + ["auto"]:
                try:
                    got = _host(api.sort(devs[0], algorithm=name))
                    if np.array_equal(got, ref, equal_nan=got.dtype.kind == "f"):
                        runners[name] = (lambda alg: lambda i: api.sort(devs[i], algorithm=alg))(name)
                    else:
                        log(f"  {name} {dtype} 2^{b}: WRONG RESULT")
                except Exception as exc:
                    log(f"  {name} {dtype} 2^{b}: {type(exc).__name__}: {str(exc)[:120]}")
            # Rounds alternate among the contenders; each keeps its best median,
            # so a hiccup in one round does not decide the comparison.
            times = race(runners, inputs=inputs, rounds=rounds, repeats=repeats)
            pick = api_pick(dtype, n)
            singles = {k: v for k, v in times.items() if k != "auto" and v}
            if not singles or not times.get("auto"):
                log(f"{dtype:8} {n:>10} auto or every plugin failed")
                continue
            best = min(singles, key=singles.get)
            ratio = times["auto"] / singles[best]
            row = {"dtype": dtype, "n": n, "auto": pick, "auto_ms": times["auto"], "best": best,
                   "best_ms": singles[best], "ratio": ratio, "ok": ratio <= 1.10, "all": singles}
            out["auto"].append(row)
            log(f"{dtype:8} {n:>10} {pick:12} {times['auto']:>9.4f} {best:12} {singles[best]:>9.4f} "
                f"{ratio:>6.2f}  {'ok' if row['ok'] else 'MISSED'}")
    log("")
    log(f"{'plugin':12} {'dtype':8} {'n':>10} {'tuned config':28} {'tuned ms':>9} {'default ms':>10} {'ratio':>6}  bar<=1.05")
    tuner = Tuner(state, repeats=repeats, warmup=2)
    for (op, dtype), buckets in cells.items():
        for b in buckets:
            case = None
            for name in sorted(gpu):
                e = plugin_results(ctx.table, name).get("sort", {}).get(dtype, {}).get(str(b))
                if (not isinstance(e, dict) or e.get("failed") or e.get("config") is None
                        or not fits(e["config"], gpu[name])):
                    continue
                default = registry.call(gpu[name], "default_config", dtype)
                if e["config"] == default:
                    out["tuned"].append({"plugin": name, "dtype": dtype, "n": 1 << b, "ratio": 1.0,
                                         "ok": True, "same": True})
                    continue
                case = case or Case(state, "sort", dtype, 1 << b, inputs=inputs)
                try:
                    # alternate, best of `rounds` each, so drift favours neither
                    t_tuned = t_def = float("inf")
                    for _ in range(rounds):
                        t_tuned = min(t_tuned, tuner.measure(gpu[name], case, e["config"]))
                        t_def = min(t_def, tuner.measure(gpu[name], case, default))
                except Exception as exc:
                    log(f"{name:12} {dtype:8} {1 << b:>10} {type(exc).__name__}: {str(exc)[:100]}")
                    continue
                ratio = t_tuned / t_def
                out["tuned"].append({"plugin": name, "dtype": dtype, "n": 1 << b, "config": e["config"],
                                     "tuned_ms": t_tuned, "default_ms": t_def, "ratio": ratio,
                                     "ok": ratio <= 1.05})
                log(f"{name:12} {dtype:8} {1 << b:>10} {_fmt_cfg(e['config']):28} {t_tuned:>9.4f} "
                    f"{t_def:>10.4f} {ratio:>6.2f}  {'ok' if ratio <= 1.05 else 'MISSED'}")
            if case is not None:
                case.free()
    same = sum(1 for r in out["tuned"] if r.get("same"))
    log(f"({same} more entries use the default config itself: ratio 1.00 by construction)")
    log("")
    log(f"host arrays of {host_n} keys: {'dtype':8} {'auto pick':10} {'auto us':>8} {'np.sort us':>10} "
        f"{'csk numpy us':>12} {'auto/np.sort':>12}  bar<=1.20")
    for dtype in sorted({dt for (_, dt) in cells}):
        a = random_keys(dtype, host_n, rng)
        api.sort(a)
        contenders = {"auto": lambda: api.sort(a), "np": lambda: np.sort(a),
                      "csk": lambda: api.sort(a, algorithm="numpy")}
        best = {}
        for _ in range(rounds):  # alternate; each keeps its best median
            for k, fn in contenders.items():
                ms = wall_ms(fn, min_s=0.1, max_reps=20000)
                best[k] = min(best.get(k, ms), ms)
        t_auto, t_np, t_csk = best["auto"], best["np"], best["csk"]
        pick = api_pick(dtype, host_n, on_device=False)
        ratio = t_auto / t_np
        out["host"].append({"dtype": dtype, "n": host_n, "auto": pick, "auto_us": t_auto * 1e3,
                            "numpy_us": t_np * 1e3, "csk_numpy_us": t_csk * 1e3, "ratio": ratio,
                            "ratio_vs_csk_numpy": t_auto / t_csk, "ok": ratio <= 1.2})
        log(f"{'':29}{dtype:8} {pick:10} {t_auto * 1e3:>8.2f} {t_np * 1e3:>10.2f} {t_csk * 1e3:>12.2f} "
            f"{ratio:>12.2f}  {'ok' if ratio <= 1.2 else 'MISSED'} (auto / csk numpy {t_auto / t_csk:.2f})")
    return out


def _ok(table, name, dtype, b) -> bool:
    e = plugin_results(table, name).get("sort", {}).get(dtype, {}).get(str(b))
    return isinstance(e, dict) and not e.get("failed") and bool(e.get("ms"))


def api_pick(dtype, n, on_device=True) -> str:
    from .. import select

    req = Request(kind="sort", dtype=dtype, n=n, on_device=on_device)
    plugin, _ = select.choose(req, "auto")
    return plugin.name


def _to_device(hosts):
    try:
        import cupy

        return [cupy.asarray(h) for h in hosts]
    except Exception:
        from pycuda import gpuarray

        return [gpuarray.to_gpu(h) for h in hosts]


def _host(x):
    if isinstance(x, np.ndarray):
        return x
    return x.get() if hasattr(x, "get") else x.cpu().numpy()
