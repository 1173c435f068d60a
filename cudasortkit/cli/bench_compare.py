"""``python -m cudasortkit bench compare``: two versions' ``bench --json``
tables, cell by cell.

A kernel's time moves by several percent from one process to the next (the
GPU's clocks, where the pool's buffers fall), for code that did not change as
for code that did. So each version's table is run several times, in turn
with the other's, and a cell is compared by the median over runs of its time
over CuPy's in the same run (CuPy's code is the same in both, so what moves
it moves the run). The raw median times are shown beside it.
"""
from __future__ import annotations

import json
import statistics

#: What names a cell in a bench table's rows.
CELL = ("op", "dtype", "n", "values", "algorithm")


def _runs(paths) -> list:
    """Each file's rows, as {cell: (ms, ms over CuPy's of the same case)}."""
    runs = []
    for path in paths:
        with open(path) as f:
            rows = [r for r in json.load(f) if "median_ms" in r]
        cupy = {tuple(r.get(k) for k in CELL[:-1]): r["median_ms"]
                for r in rows if r["algorithm"] == "cupy"}
        runs.append({tuple(r.get(k) for k in CELL):
                     (r["median_ms"], r["median_ms"] / cupy.get(tuple(r.get(k) for k in CELL[:-1]),
                                                                 float("nan")))
                     for r in rows})
    return runs


def spread(values) -> float:
    """How far one version's runs of a cell lie apart: largest over smallest,
    less 1 (nan for a single run)."""
    values = list(values)
    return max(values) / min(values) - 1 if len(values) > 1 else float("nan")


def compare(before, after, tolerance: float) -> tuple[list, int, int]:
    """(lines of the table, cells whose time over CuPy's moved by more than
    `tolerance`, as a fraction, and how many of those moved by less than
    the spread of either version's own runs of the cell) of two versions'
    runs (lists of JSON paths)."""
    old, new = _runs(before), _runs(after)
    cells = [c for c in old[0] if c[-1] != "cupy" and all(c in r for r in old + new)]
    lines = [f"{'op':9} {'dtype':8} {'n':>10} {'algorithm':14} {'before ms':>10} {'after ms':>10} "
             f"{'raw':>6} {'vs CuPy':>8} {'spread':>7}"]
    moved = within = 0
    for c in cells:
        b_ms = statistics.median(r[c][0] for r in old)
        a_ms = statistics.median(r[c][0] for r in new)
        ratio = statistics.median(r[c][1] for r in new) / statistics.median(r[c][1] for r in old)
        noise = max(spread(r[c][1] for r in old), spread(r[c][1] for r in new))
        flag = ""
        if abs(ratio - 1) > tolerance:
            moved += 1
            within += abs(ratio - 1) < noise
            flag = "  <- moved"
        op = c[0] if c[3] is None else f"{c[0]}/{c[3]}"
        lines.append(f"{op:9} {c[1]:8} {c[2]:>10} {c[4]:14} {b_ms:>10.3f} {a_ms:>10.3f} "
                     f"{a_ms / b_ms:>6.3f} {ratio:>8.3f} {noise:>7.1%}{flag}")
    return lines, moved, within


def main(args) -> int:
    lines, moved, within = compare(args.before, args.after, args.tolerance)
    print("\n".join(lines))
    print(f"{moved} of {len(lines) - 1} cells moved by more than {args.tolerance:.0%} "
          f"(after over before, each run's time over CuPy's, median of "
          f"{len(args.before)} and {len(args.after)} runs); {within} of them by less than the "
          f"spread of one version's own runs (the spread column: largest over smallest, less 1)")
    return 1 if moved else 0


def add_tool(tools) -> None:
    """The compare subcommand, on bench's subparsers `tools`."""
    c = tools.add_parser("compare", help="two versions' bench --json tables, cell by cell "
                                         "(no GPU)",
                         description=__doc__.split("\n\n", 1)[1].strip())
    c.add_argument("--before", nargs="+", required=True, metavar="JSON",
                   help="bench --json files of the earlier version, one a run")
    c.add_argument("--after", nargs="+", required=True, metavar="JSON",
                   help="bench --json files of the later version, one a run")
    c.add_argument("--tolerance", type=float, default=0.02,
                   help="a cell moved when after over before is further from 1 (default 0.02)")
    c.set_defaults(func=main)
