"""Where a sweep's time goes, phase by phase: `python -m cudasortkit.tune`
prints it at the end, so that one run on a GPU says what to shorten.

Phases (wall seconds, each with what it counts):

- wait: cells waiting for the child processes that compile their kernels
  (tuning/prebuild.py; their modules and nvcc seconds are counted apart);
- check: configs run once and compared with NumPy before any is timed, in
  parallel threads; their first runs build the kernels the children did
  not (the modules nvcc compiled here, and the seconds nvcc ran summed over
  the threads, come from build/cubins.py's counters, as do the cubins read
  from disk);
- time: configs timed, one at a time;
- confirm: a config that beat the default re-timed against it (races);
- compare: the plugins' best configs of a cell timed against each other;
- host: host-array costs (NumPy and the GPU path, wall clock);
- inputs: random inputs made and uploaded, NumPy's sorted answers;
- other: the rest (planning, saving, the process's own start is not in it).
"""
from __future__ import annotations

import contextlib
import threading
import time

from ..build import cubins

PHASES = ("wait", "check", "time", "confirm", "compare", "host", "inputs")


class Phases:
    """Seconds and counts per phase, from its creation on."""

    def __init__(self):
        self.start = time.monotonic()
        self.seconds = dict.fromkeys(PHASES, 0.0)
        self.counts = dict.fromkeys(PHASES, 0)
        self._compiles = cubins.counters()
        self._lock = threading.Lock()
        self.prebuild = None

    @contextlib.contextmanager
    def timed(self, phase: str, count: int = 0):
        """Count the block's wall seconds (and `count` items) to `phase`."""
        t0 = time.monotonic()
        try:
            yield
        finally:
            self.add(phase, time.monotonic() - t0, count)

    def add(self, phase: str, seconds: float, count: int = 0) -> None:
        with self._lock:
            self.seconds[phase] = self.seconds.get(phase, 0.0) + seconds
            self.counts[phase] = self.counts.get(phase, 0) + count

    def note_prebuild(self, builder) -> None:
        """What the child processes compiling ahead did (tuning/prebuild.Prebuild)."""
        self.prebuild = {"builds": builder.builds, "compiled": builder.compiled,
                         "compile_s": round(builder.compile_s, 3), "failed": len(builder.failed),
                         "first_failure": builder.failed[0] if builder.failed else None}

    def summary(self) -> dict:
        """{"total_s", "phases": {phase: {"s", "count"}}, "other_s",
        "compiled", "compile_s", "read", "read_s"} since creation."""
        total = time.monotonic() - self.start
        now = cubins.counters()
        with self._lock:
            phases = {p: {"s": round(self.seconds[p], 3), "count": self.counts[p]}
                      for p in self.seconds}
        out = {"total_s": round(total, 3), "phases": phases,
               "other_s": round(max(0.0, total - sum(self.seconds.values())), 3)}
        for key in ("compiled", "compile_s", "read", "read_s"):
            out[key] = now[key] - self._compiles[key]
        out["compile_s"], out["read_s"] = round(out["compile_s"], 3), round(out["read_s"], 3)
        out["prebuild"] = self.prebuild
        return out


UNITS = {"wait": "cells", "check": "configs", "time": "configs", "confirm": "races", "compare": "cells",
         "host": "sizes", "inputs": "sets"}


def lines(summary: dict) -> list:
    """The summary as the lines tune prints."""
    phases = summary["phases"]
    out = [f"where the {summary['total_s']:.1f} s went:"]
    for phase in PHASES:
        p = phases.get(phase)
        if p is None:
            continue
        text = f"  {phase:8} {p['s']:7.1f} s  {p['count']:>5} {UNITS[phase]}"
        if phase == "check":
            text += (f"; {summary['compiled']} modules compiled (nvcc {summary['compile_s']:.1f} s "
                     f"summed over threads), {summary['read']} read from disk")
        if phase == "wait":
            pre = summary.get("prebuild")
            if not pre:
                continue
            text += (f" for child processes: {pre['builds']} builds, {pre['compiled']} modules "
                     f"compiled (nvcc {pre['compile_s']:.1f} s summed over processes)")
            if pre["failed"]:
                text += f", {pre['failed']} failed (first: {pre['first_failure']})"
        out.append(text)
    out.append(f"  {'other':8} {summary['other_s']:7.1f} s")
    return out


class NoPhases:
    """Phases that count nothing (a Tuner used outside a sweep)."""

    @contextlib.contextmanager
    def timed(self, phase: str, count: int = 0):
        yield

    def add(self, phase: str, seconds: float, count: int = 0) -> None:
        pass
