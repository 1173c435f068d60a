"""A sweep's kernels compiled in child processes while the GPU measures.

`tune --quick` builds a few hundred kernel modules (nvcc: 0.5-2 s each, all
CPUs busy for half a minute on a fresh machine) and spends about as long
on the GPU (checking, timing, comparing). Checking a config compiles its
kernels on its first run, so without this the GPU waits for every compile
of the sweep before the first cell is timed. Here child processes compile
the sweep's kernels cell by cell, in the order the sweep measures them,
while this process checks and times the cells whose kernels are built: a
cell's checks then only load cubins from the disk cache (build/cubins.py).

A child builds a config's kernels by running the plugin's own run() on a
state that `compiles_only` (CompileOnlyState): every kernel it asks for is
rendered and compiled to the disk cache, nothing is loaded or launched,
and allocations are addresses that point nowhere. So it builds exactly the
kernels the plugin's run() asks for at that size, with nothing to keep in
step with plugin code. Only plugins that declare `replayable` are built
this way: they promise that run() issues the same work whatever the data
and never reads device memory back, so a run on nothing is safe. The
others (and any kernel a child missed) compile on their first run here, as
before.

Children run with the lowest CPU priority (nice 19) and off the CPU core
this process started the sweep on (both of its hardware threads), one
child per other CPU: this process's timing, whose calls are mostly host
time at small sizes, keeps a core of its own.
Timings of host arrays (wall clock: NumPy on the CPU) wait until the
children are done. Where child processes cannot be started, the sweep
compiles as before (every cell checked ahead, in threads).
"""
from __future__ import annotations

import os
import threading

#: Child processes at most (each runs one nvcc at a time).
MAX_WORKERS = 16


class _Fake(int):
    """An address that points nowhere (CompileOnlyState.allocate)."""

    def free(self):
        pass


class _Stream:
    handle = 0

    @staticmethod
    def synchronize():
        pass


class _NoCuda:
    """The driver calls a Job makes besides launches, doing nothing."""

    @staticmethod
    def memcpy_dtod_async(*args, **kwargs):
        pass

    @staticmethod
    def memset_d32_async(*args, **kwargs):
        pass

    @staticmethod
    def memset_d8_async(*args, **kwargs):
        pass


class CompileOnlyState:
    """A device state for building kernels without a device: the device's
    limits and architecture, kernels compiled and not loaded
    (build/template.UnloadedKernel), allocations that point nowhere."""

    compiles_only = True
    ordinal = -1  # (the kernel cache's key: never a real device's)

    def __init__(self, limits, arch: str, compute_capability):
        self.limits, self.arch = limits, arch
        self.compute_capability = tuple(compute_capability)
        self.sm_count = limits.sm_count
        self.stream = _Stream()
        self.cuda = _NoCuda()
        self._next = 1 << 40

    def activate(self):
        return self

    def allocate(self, nbytes: int, who=None) -> _Fake:
        address = self._next
        self._next += max(256, -(-int(nbytes) // 256) * 256)
        return _Fake(address)

    def free_memory(self) -> int:
        return 1 << 50


def build(task) -> tuple:
    """Build the kernels of one (plugin, config) at one shape in this
    process: task = (plugin name, op, dtype, n, row length or None, config,
    limits, arch, compute capability). Returns (modules compiled, nvcc
    seconds, error text or None)."""
    from ..build import cubins
    from ..sdk import registry
    from ..sdk.job import Job
    from ..sdk.plugin import Request
    from ..sdk.segments import Segments
    from .policy import OP_SHAPE

    name, op, dtype, n, row_len, config, limits, arch, cc = task
    before = cubins.counters()
    error = None
    try:
        plugin = registry.plugins()[name]
        kind, vb = OP_SHAPE[op]
        segments = None if row_len is None else Segments.rows(n // row_len, row_len)
        request = Request(kind=kind, dtype=dtype, n=n, value_bytes=vb, segments=segments)
        state = CompileOnlyState(limits, arch, cc)
        keys_in, keys_out = state.allocate(n * 8), state.allocate(n * 8)
        values_in = values_out = 0
        if vb:
            values_in, values_out = state.allocate(n * vb), state.allocate(n * vb)
        job = Job(plugin, state, dtype=dtype, n=n, keys_in=keys_in, keys_out=keys_out,
                  values_in=values_in if (kind == "pairs" or not plugin.makes_indices) else 0,
                  values_out=values_out, value_bytes=vb, config=config, request=request)
        try:
            plugin.run(job)
        finally:
            job.release()
    except Exception as exc:  # this process checks and compiles it on its first run
        error = f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
    after = cubins.counters()
    return after["compiled"] - before["compiled"], after["compile_s"] - before["compile_s"], error


def _lowest_priority(cpus=None):
    """A child's start: the lowest CPU priority, on `cpus` (None: any)."""
    try:
        os.nice(19)
    except (AttributeError, OSError):
        pass
    if cpus:
        try:
            os.sched_setaffinity(0, cpus)
        except (AttributeError, OSError):
            pass


def _cpus() -> set:
    """The CPUs this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return set(os.sched_getaffinity(0))
    return set(range(os.cpu_count() or 1))


def _this_core() -> set:
    """The CPU the calling thread runs on and its hardware-thread siblings
    (Linux: /proc and /sys); empty where that cannot be read."""
    try:
        with open("/proc/thread-self/stat") as f:
            cpu = int(f.read().rsplit(")", 1)[1].split()[36])  # field 39: the CPU last run on
    except (OSError, ValueError, IndexError):
        return set()
    core = {cpu}
    try:
        with open(f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list") as f:
            for part in f.read().strip().split(","):
                lo, _, hi = part.partition("-")
                core.update(range(int(lo), int(hi or lo) + 1))
    except (OSError, ValueError):
        pass
    return core


class Prebuild:
    """The child processes building a plan's kernels, cell by cell, and
    what they did: `wait(cell)` returns once every build of the cell is
    done; `compiled`, `compile_s`, `failed` add up the children's counts."""

    def __init__(self, executor, futures: dict):
        self._executor, self._futures = executor, futures  # id(cell) -> [Future]
        self.compiled, self.compile_s, self.builds, self.failed = 0, 0.0, 0, []
        self._lock = threading.Lock()
        for futures_of_cell in futures.values():
            for future in futures_of_cell:
                future.add_done_callback(self._count)

    def _count(self, future) -> None:
        try:
            compiled, seconds, error = future.result()
        except BaseException as exc:  # a child died: that cell compiles here
            compiled, seconds, error = 0, 0.0, f"{type(exc).__name__}: {exc}"
        with self._lock:
            self.builds += 1
            self.compiled += compiled
            self.compile_s += seconds
            if error is not None:
                self.failed.append(error)

    def wait(self, cell) -> None:
        from concurrent.futures import wait

        wait(self._futures.get(id(cell), ()))

    def close(self) -> None:
        """Stop: builds not started are dropped, the children end."""
        for futures_of_cell in self._futures.values():
            for future in futures_of_cell:
                future.cancel()
        self._executor.shutdown(wait=True, cancel_futures=True)


def start(state, work, workers: int | None = None):
    """Start building `work`'s kernels (runtime.Plan: its cells in order) in
    child processes; None where that cannot be done here (no architecture
    to compile for, no nvcc, child processes refused): the sweep then
    compiles as it checks. Each (plugin, config, shape) is built once."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from ..build import cubins
    from ..launch.plans import replayable

    arch = getattr(state, "arch", None)
    if not isinstance(arch, str) or cubins.nvcc()[0] is None:
        return None
    tasks, seen = {}, set()
    for cell in work.cells:
        top, n, row_len = cell.shape
        for name, (plugin, _, configs) in sorted(cell.work.items()):
            if not replayable(type(plugin)):
                continue
            for config in configs:
                key = (name, cell.op, cell.dtype, n, row_len, tuple(sorted(config.items())))
                if key not in seen:
                    seen.add(key)
                    tasks.setdefault(id(cell), []).append(
                        (name, cell.op, cell.dtype, n, row_len, dict(config), state.limits, arch,
                         tuple(state.compute_capability)))
    if not tasks:
        return None
    cpus = _cpus()
    others = cpus - _this_core()
    if others:  # (a machine of one core: the children share it, at the lowest priority)
        cpus = others
    if workers is None:
        workers = max(1, min(MAX_WORKERS, len(cpus)))
    try:
        executor = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                                       initializer=_lowest_priority, initargs=(cpus,))
        futures = {cell: [executor.submit(build, task) for task in cell_tasks]
                   for cell, cell_tasks in tasks.items()}
    except Exception:  # (no child processes here: the sweep compiles as it checks)
        return None
    return Prebuild(executor, futures)
