"""What `python -m cudasortkit.tune` prints and draws: the cached table
(--show), throughput plots (--plot) and the bar check (--check)."""
from __future__ import annotations

import math

from ..dtypes import KEY_DTYPES
from ..sdk.plugin import Request
from .policy import OP_SHAPE, OPS, ROWS, ROWS_TOTAL_BUCKET, decide, plugin_results, points


class _Fake:
    """Stand-in plugin for reading a cache without the plugin installed."""

    def __init__(self, name, device):
        self.name, self.device = name, device

    def valid_config(self, *a):
        return True

    #: No declarations to read: last wherever the declared priority decides
    #: (measurements tied within policy.TIE).
    def priority_for(self, n):
        return float("inf")

    priority_for_segments = priority_for_request = priority_for


def _plugins_in(table: dict) -> dict:
    from ..sdk import registry

    live = registry.plugins()
    out = {}
    for name in sorted(table.get("plugins", {})):
        out[name] = live.get(name) or _Fake(name, "cpu" if name == "numpy" else "gpu")
    return out


def measured_cells(table):
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


def measured_row_cells(table):
    """{(op, dtype): sorted row-length buckets} of the rows entries (op@rows)."""
    cells = {}
    for block in table.get("plugins", {}).values():
        for op, by_dtype in block.get("results", {}).items():
            base, rows, _ = op.partition(ROWS)
            if rows and base in OPS:
                for dtype, by_bucket in by_dtype.items():
                    if dtype in KEY_DTYPES:
                        cells.setdefault((base, dtype), set()).update(int(b) for b in by_bucket)
    return {k: sorted(v) for k, v in sorted(cells.items(), key=lambda kv: (OPS.index(kv[0][0]), kv[0][1]))}


def _rows_section(table, plugins) -> list:
    """show()'s rows part: each segmented plugin's time at 2^22 keys in rows
    of each measured length, and what auto picks for such rows."""
    from ..sdk.segments import Segments

    cells = measured_row_cells(table)
    if not cells:
        return []
    cols = [n for n, p in plugins.items() if p.device == "gpu"
            and any(k.endswith(ROWS) for k in plugin_results(table, n))]
    head = f"{'rows':12} {'dtype':8} {'row len':>10} " + " ".join(f"{c[:15]:>15}" for c in cols) + \
        f"  {'auto':34}"
    lines = ["", f"rows: {1 << ROWS_TOTAL_BUCKET:,} keys in all, sorted along the last axis (ms)",
             head, "-" * len(head)]
    total = 1 << ROWS_TOTAL_BUCKET
    for (op, dtype), buckets in cells.items():
        for b in buckets:
            row = f"{op + ROWS:12} {dtype:8} {1 << b:>10} "
            for c in cols:
                e = plugin_results(table, c).get(op + ROWS, {}).get(dtype, {}).get(str(b))
                cell = "-" if not isinstance(e, dict) else "failed" if e.get("failed") else \
                    f"{e['ms']:.4f}"
                row += f"{cell:>15} "
            kind, vb = OP_SHAPE[op]
            length = min(1 << b, total)
            request = Request(kind=kind, dtype=dtype, n=total, value_bytes=vb,
                              segments=Segments.rows(total // length, length))
            d = decide(table, request, {c: plugins[c] for c in cols})
            row += f" {(d.name + ' ' + format_config(d.config)) if d else '-':34}"
            lines.append(row.rstrip())
    return lines


def format_config(cfg) -> str:
    if not cfg:
        return "-"
    short = {"block_size": "bs", "items_per_thread": "ipt", "digit_bits": "bits"}
    return ",".join(f"{short.get(k, k)}={v}" for k, v in sorted(cfg.items()))


def kinds_section(table: dict) -> list:
    """Lines of the other kinds' measurements (tune --kinds): per kind and
    shape, every plugin's ms, fastest first."""
    from .kinds import KINDS

    lines = []
    for group, by_name in sorted(table.get("kinds", {}).items()):
        kind = KINDS.get(group)
        shapes: dict = {}
        for name, block in by_name.items():
            for key, ms in block.get("results", {}).items():
                shapes.setdefault(key, []).append((ms, name))
        if not shapes:
            continue
        lines += ["", f"{kind.what if kind else group} (tune --kinds; ms, fastest first)"]
        for key in sorted(shapes):
            shape = kind.parse(key) if kind else None
            label = kind.describe(shape) if shape else key
            lines.append(f"  {label:48} " + ", ".join(f"{n} {ms:.4f}" for ms, n in sorted(shapes[key])))
    return lines


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
    for (op, dtype), buckets in measured_cells(table).items():
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
                row += f" {d.name + ' ' + format_config(d.config):34} {gain:>9}"
            else:
                row += f" {'-':34} {'-':>9}"
            hd = decide(table, Request(kind=kind, dtype=dtype, n=n, value_bytes=vb, on_device=False),
                        plugins)
            row += f"  {hd.name if hd else '-':12}"
            lines.append(row.rstrip())
    lines += _rows_section(table, plugins)
    lines += kinds_section(table)
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
                        lines.append(f"  {name} {op} {dtype} 2^{b}: {e['ms']:.4f} [{format_config(e['config'])}] "
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
    cells = [(op, dt) for (op, dt) in measured_cells(table) if op in ops] or list(measured_cells(table))
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
