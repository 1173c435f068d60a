"""``python -m cudasortkit bench versions DIR``: this version against
another, in one process, call batch by call batch.

DIR holds the other version's ``cudasortkit`` package: a checkout whose
package holds its plugins and kernels, or any version installed there with
``pip install --no-deps --target DIR <checkout or wheel>``. Both versions
live in this process side by side: each keeps its own set of
``cudasortkit.*`` modules, put into ``sys.modules`` while its calls run, so
that what a call imports on its way is its own version's. Both sort the
same inputs on the same device, in interleaved rounds (each round in
another order: gpu.timing's rotated_rounds) with CuPy's sort as a
control; each version's results are checked against NumPy first. Tuning
is off and the tuning cache is a new empty one, so both run their
plugins' default configs.

Separate processes differ by several percent whatever their code (the
GPU's clocks, where the pools' buffers fall: ``bench compare`` reads such
runs); in one process the two versions share all of that.
"""
from __future__ import annotations

import contextlib
import importlib
import os
import sys
import tempfile

import numpy as np

from ..gpu.timing import rotated_rounds
from ..sdk import registry
from ..settings import AUTOTUNE, BUILD_ASIDE, CACHE_DIR, parse_size
from .bench import make_input, require_gpu

PACKAGE = "cudasortkit"


def _in_package(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


class Version:
    """One version's modules of `package`. The version this process
    imported is the current one (path None); another is imported from
    `path` and kept out of sys.modules except inside active()."""

    def __init__(self, label: str, path: str | None = None, package: str = PACKAGE):
        self.label, self.path, self.package = label, path, package
        self.modules = {}  # another version's, while it is not active
        if path is None:
            self.root = sys.modules[package]
            return
        with self.active():
            self.root = importlib.import_module(package)
        where = os.path.realpath(os.path.dirname(self.root.__file__))
        if not where.startswith(os.path.realpath(path) + os.sep):
            raise SystemExit(f"{path} holds no {package} package of its own ({package} "
                             f"came from {where})")

    @contextlib.contextmanager
    def active(self):
        """This version's modules in sys.modules (and its path first on
        sys.path) while the block runs; the process's own ones back after
        it, with whatever this version imported meanwhile kept for it."""
        if self.path is None:  # the process's own modules are in place
            yield self
            return
        own = {k: sys.modules.pop(k) for k in list(sys.modules) if _in_package(k, self.package)}
        sys.modules.update(self.modules)
        sys.path.insert(0, self.path)
        try:
            yield self
        finally:
            sys.path.remove(self.path)
            self.modules = {k: sys.modules.pop(k) for k in list(sys.modules)
                            if _in_package(k, self.package)}
            sys.modules.update(own)


def _timed(cupy, run, calls: int) -> list:
    """ms of `calls` calls of run(i), i over the 3 inputs, by CuPy's CUDA
    events on the legacy default stream around each (not gpu.timing's
    time_gpu: its device lookup would find the other version's modules
    while that one is active)."""
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    times = []
    for k in range(calls):
        start.record()
        run(k % 3)
        end.record()
        end.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, end))
    return times


def _cell(cupy, versions, names, dtype, n, rounds, calls, rng) -> tuple:
    """(rows, CuPy's median ms) of one (dtype, n): a row is (algorithm,
    {label: median ms}, quartiles of the rounds' this-over-other ratios).
    `versions`: (other, this)."""
    hosts = [make_input(dtype, n, "uniform", rng) for _ in range(3)]
    devs = [cupy.asarray(h) for h in hosts]
    refs = [np.sort(h) for h in hosts]
    runners = {("cupy", None): (None, lambda i: cupy.sort(devs[i]))}
    for name in names:
        for v in versions:
            def run(i, csk=v.root, name=name):
                return csk.sort(devs[i], algorithm=name)

            with v.active():
                try:
                    ok = all(np.array_equal(cupy.asnumpy(run(i)), refs[i]) for i in range(3))
                    for i in range(6):  # warm-up: compiles, pools, plans
                        run(i % 3)
                    cupy.cuda.Device().synchronize()
                except (ValueError, TypeError, RuntimeError, MemoryError) as exc:
                    ok = f"{type(exc).__name__}: {exc}".splitlines()[0][:100]
            if ok is True:
                runners[(name, v.label)] = (v, run)
            else:
                print(f"  {dtype} {n} {name} ({v.label}): not timed, "
                      f"{'a wrong result' if ok is False else ok}", flush=True)
    samples = {key: [] for key in runners}
    for order in rotated_rounds(runners, rounds):
        for key in order:
            version, run = runners[key]
            with version.active() if version else contextlib.nullcontext():
                samples[key].append(_timed(cupy, run, calls))
    other, this = (v.label for v in versions)
    rows = []
    for name in names:
        if (name, this) not in samples or (name, other) not in samples:
            continue
        medians = {label: float(np.median(np.concatenate(samples[(name, label)])))
                   for label in (other, this)}
        ratios = [np.median(a) / np.median(b)
                  for a, b in zip(samples[(name, this)], samples[(name, other)])]
        rows.append((name, medians, tuple(np.percentile(ratios, [25, 75]))))
    return rows, float(np.median(np.concatenate(samples[("cupy", None)])))


def main(args) -> int:
    require_gpu("bench versions")
    import cupy

    os.environ[AUTOTUNE] = "0"
    os.environ[BUILD_ASIDE] = "0"
    os.environ[CACHE_DIR] = tempfile.mkdtemp(prefix="csk-versions-")
    names = (args.algorithms.split(",") if args.algorithms else
             [n for n, p in registry.plugins().items() if p.device == "gpu" and not p.segmented])
    versions = (Version("other", os.path.abspath(args.dir)), Version("this"))
    rng = np.random.default_rng(args.seed)
    print(f"this version: {os.path.dirname(versions[1].root.__file__)}; other: "
          f"{os.path.dirname(versions[0].root.__file__)}; {args.rounds} rounds of {args.calls} "
          f"calls each, interleaved; ms are medians; ratio = this / other")
    total = within = 0
    for dtype in args.dtypes.split(","):
        for size in args.sizes.split(","):
            n = parse_size(size)
            rows, cupy_ms = _cell(cupy, versions, names, dtype, n, args.rounds, args.calls, rng)
            print(f"{dtype} {size} ({n} keys), cupy.sort {cupy_ms:.4f} ms", flush=True)
            for name, ms, (q1, q3) in rows:
                ratio = ms["this"] / ms["other"]
                total += 1
                within += abs(ratio - 1) <= args.tolerance
                print(f"  {name:12} other {ms['other']:.4f}  this {ms['this']:.4f}  "
                      f"ratio {ratio:.3f}  (rounds' ratios, quartiles {q1:.3f}-{q3:.3f})",
                      flush=True)
    print(f"{within} of {total} cells within {args.tolerance:.0%}")
    return 0 if within == total else 1


def add_tool(tools) -> None:
    """The versions subcommand, on bench's subparsers `tools`."""
    v = tools.add_parser("versions", help="this version against another in one process, "
                                          "interleaved (GPU, CuPy)",
                         description=__doc__.split("\n\n", 1)[1].strip())
    v.add_argument("dir", metavar="DIR", help="a directory holding the other version's "
                                              "cudasortkit package")
    v.add_argument("--algorithms", help="comma-separated plugin names (default: every GPU "
                                        "plugin that sorts whole arrays)")
    v.add_argument("--dtypes", default="uint32,float32")
    v.add_argument("--sizes", default="2^20,2^24")
    v.add_argument("--rounds", type=int, default=16, help="interleaved rounds (default 16)")
    v.add_argument("--calls", type=int, default=16, help="timed calls a round (default 16)")
    v.add_argument("--tolerance", type=float, default=0.02,
                   help="a cell is within when this over other is within it of 1 (default 0.02)")
    v.add_argument("--seed", type=int, default=7)
    v.set_defaults(func=main)
