"""GPU timing done one way everywhere (bench and tuner): CUDA events on the
legacy default stream around the work, warm-up first, median of repeats,
rotating among several input sets so caches don't flatter the result."""
from __future__ import annotations

import statistics
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


def rotated_rounds(names, rounds: int):
    """The order of each of `rounds` interleaved timing rounds: every name
    once a round, round r starting r places further along. In a fixed order
    the first contender always ran right after another cell's or round's
    work and measured slower for it (an auto row 3% behind the same plugin
    by name at 2^26-2^28 keys, which swapped with the order: session 15)."""
    names = list(names)
    for r in range(rounds):
        k = r % len(names) if names else 0
        yield names[k:] + names[:k]
