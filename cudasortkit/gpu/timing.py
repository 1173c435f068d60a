"""GPU timing done one way everywhere (bench and tuner): CUDA events on the
legacy default stream around the work, warm-up first, median of repeats,
rotating among several input sets so caches don't flatter the result."""
from __future__ import annotations

import contextlib
import ctypes
import os
import statistics
import time
from typing import Callable


def time_gpu(run: Callable[[int], object], *, inputs: int = 1, warmup: int = 2,
             repeats: int = 10, min_time_s: float = 0.0, max_repeats: int | None = None) -> dict:
    """Time run(i) for i cycling over range(inputs); returns ms statistics.
    At least `repeats` runs, more until `min_time_s` of GPU time is summed,
    at most `max_repeats` (default 10 x repeats).

    Events are recorded on the legacy default stream, which orders with
    cudasortkit's own (blocking) stream and with CuPy's and PyTorch's
    default streams, so any library's work in run() is inside the window.
    """
    from .device import get_device

    state = get_device()
    cuda = state.cuda
    for i in range(warmup):
        run(i % inputs)
    cuda.Context.synchronize()
    limit = 10 * repeats if max_repeats is None else max(repeats, max_repeats)
    times = []
    start, end = cuda.Event(), cuda.Event()
    total = 0.0
    k = 0
    while k < repeats or total < min_time_s * 1e3:
        start.record()
        run(k % inputs)
        end.record()
        end.synchronize()
        ms = end.time_since(start)
        times.append(ms)
        total += ms
        k += 1
        if k >= limit:
            break
    return {"median_ms": statistics.median(times), "min_ms": min(times),
            "max_ms": max(times), "repeats": len(times), "times": times}


#: Interleaved timing rounds of a comparison (rotated_rounds). Each round
#: times a contender for at least MIN_ROUND_S of GPU time, in at most
#: MAX_ROUND_REPEATS calls: a call of a few tens of microseconds needs
#: hundreds of samples for a median that holds from run to run.
ROUNDS = 3
MIN_ROUND_S, MAX_ROUND_REPEATS = 0.01, 300


def rotated_rounds(names, rounds: int):
    """The order of each of `rounds` interleaved timing rounds: every name
    once a round, round r starting with the name r places along, through
    the list forwards in even rounds and backwards in odd ones. So no name
    always runs first (in a fixed order the first contender always ran
    right after another cell's or round's work and measured slower for it:
    an auto row 3% behind the same plugin by name at 2^26-2^28 keys, which
    swapped with the order), and none always runs right after
    the same other one (rotation alone keeps every name's predecessor:
    auto always ran after CUB's one-shot sorter, which allocates and frees
    its temporary storage each call)."""
    names = list(names)
    m = len(names)
    for r in range(rounds):
        step = 1 if r % 2 == 0 else -1
        yield [names[(r + step * i) % m] for i in range(m)]


#: The CPU probe's fixed work: a pure-Python loop of this many additions.
PROBE_ADDITIONS = 200_000


def cpu_probe_ms(tries: int = 3) -> float:
    """How long PROBE_ADDITIONS pure-Python additions take on this thread
    now (ms, best of `tries`): the speed the CPU gives host-bound work at
    this moment. A call of 10-25 us is mostly host time, and the CPUs of
    the virtual machines that host the H100s change speed for minutes at a
    time with no steal or interrupt time to show for it: the probe took
    7.2-7.7 ms in some minutes and 11.6-13.5 ms in others, one process, one
    pinned CPU, and `csk.sort` of 1,024 uint32 keys 13.0-14.0 against
    18.8-20.5 us a call, cuda.compute's prepared sorter 20.8-21.8 against
    23.1-24.2 (H100, docs/benchmarks.md). So per-call rows
    carry the probe from before and after their cell."""
    best = float("inf")
    for _ in range(tries):
        t = time.perf_counter()
        total = 0
        for i in range(PROBE_ADDITIONS):
            total += i
        best = min(best, time.perf_counter() - t)
    return best * 1e3


@contextlib.contextmanager
def on_one_cpu():
    """Keep the calling thread on one CPU (the one it runs on now) inside
    the block; yields that CPU's number, or None where the platform cannot
    pin threads (no os.sched_setaffinity) or this thread may not be moved.

    Per-call wall clock is timed pinned. A call of 10-25 us moves with
    where the scheduler puts the thread between calls: in four unpinned
    processes on one H100 host, `csk.sort` of 1,024 uint32 keys took 12.2,
    14.4, 17.6 and 19.9 us a call, cuda.compute's prepared sorter 19.8-24.0,
    while ten processes pinned to any one of its 16 CPUs took 12.2-14.0 and
    19.8-21.7 (docs/benchmarks.md). Unpinned, one run's ratios said
    more about that run's scheduling than about the calls. Pinned, long
    bench processes still differed. Every
    contender of a cell is timed inside the same block; threads started
    inside it inherit the one CPU."""
    setaffinity = getattr(os, "sched_setaffinity", None)
    if setaffinity is None:
        yield None
        return
    before = os.sched_getaffinity(0)
    cpu = _current_cpu(before)
    try:
        setaffinity(0, {cpu})
    except OSError:  # a CPU set the process may not narrow (containers, cgroups)
        yield None
        return
    try:
        yield cpu
    finally:
        setaffinity(0, before)


def _current_cpu(allowed) -> int:
    """The CPU this thread runs on now (glibc's sched_getcpu), else the
    lowest it may run on."""
    try:
        cpu = ctypes.CDLL(None, use_errno=True).sched_getcpu()
    except (OSError, AttributeError):
        cpu = -1
    return cpu if cpu in allowed else min(allowed)
