"""Launch plans: a replayable plugin's run(), recorded once per shape, replayed.

A plugin's run() spends tens of microseconds of Python (geometry, kernel
lookups, temporaries, argument lists) before its first launch, and on a small
or repeated sort that is time the GPU sits idle. A plugin that declares
`replayable` (cudasortkit.sdk.plugin.SortPlugin) promises that run() issues the
same work for the same shape whatever the data and addresses. So the first
run of a shape is recorded: every temporary (its size), memset, copy and
launch, with each pointer stored as (slot, offset). Later runs of the shape
allocate the same temporaries and issue the recorded operations with the new
buffers' addresses, their parameters packed once per set of buffers.

Slots: 0 keys_in, 1 keys_out, 2 values_in, 3 values_out (n keys / n values
each), then the job's temporaries in allocation order. A pointer 0 stays 0. A
pointer in no slot (a buffer the plugin keeps itself, say) marks the shape
unreplayable, so it is not recorded again; one in two slots (the caller's
arrays overlap) only keeps this call from being recorded.
"""
from __future__ import annotations

import threading
from contextlib import contextmanager
from dataclasses import dataclass

from ..gpu import caches
from .graphs import PlanGraphs

#: key -> LaunchPlan or Unreplayable; cleared with every other context cache
#: (gpu.caches.clear_all), since plans hold prepared functions.
_plans: dict = {}
_MAX_PLANS = 4096
_replayable: dict = {}  # plugin class -> replayable(plugin class)


#: Counts forget()s: what holds a plan (cudasortkit/calls/sort_prepared.py) checks it.
generation = 0
#: Replays of every plan that had no graph of their buffers to launch (they
#: issued their operations one at a time, or captured them): a repeated
#: call that lands here costs microseconds more than a graph launch.
#: `bench --peers` reports them per per-call cell (issued_replays).
_issued = 0
_issued_lock = threading.Lock()
#: In a plan's CUDA graph, a launch right after another launch is captured
#: overlapping it where its kernel allows (kernels/include/overlap.cuh): its
#: launch starts as the grid before ends, not after. On an H100 it moved
#: onesweep's device time against CUB's by 1-5% (2.6% on average) at
#: 2^16-2^24 keys, about the spread between two processes
#: (docs/algorithms/onesweep.md). Launches outside graphs do not
#: overlap.
OVERLAP_IN_GRAPHS = True


def forget() -> None:
    global generation
    _plans.clear()
    generation += 1


caches.register(forget)


def plan_key(plugin, job) -> tuple:
    """Everything a replayable run() may depend on; plugin.run too, so a
    run() patched in (tests do) records its own plan. A caller's key_range
    promise too: a plugin that checks it (counting) refuses to record such
    a run, and a plan of a run without one must not serve it."""
    request = job.request
    return _key(job.state.ordinal, plugin, job.dtype, job.n, job.value_bytes, job.config,
                job.descending, job.values_in != 0, job.values_out != 0, rows_of(request),
                None if request is None else request.key_range)


def rows_of(request):
    """The part of a request besides the job's fields that a replayable run()
    may read: for uniform rows (a segmented request), its kind and the rows'
    count and length; None for a 1-D request. Ragged segments are never
    recorded (their lengths are data), so they have no such key."""
    if request is None or request.segments is None:
        return None
    return rows_key(request.kind, request.segments)


def rows_key(kind: str, segments) -> tuple:
    """rows_of's key of uniform rows `segments` sorted as `kind`."""
    return (kind, segments.count, segments.row_len)


def select_key(plugin, job) -> tuple:
    """The plan key of a selection job (cudasortkit/sdk/select_job.py):
    its request (op, rows, row length, k, kth, largest, sorted) stands for
    the shape."""
    return (job.state.ordinal, type(plugin), plugin.run, job.dtype, job.request,
            tuple(job.config.items()))


def plan_for(key):
    """The LaunchPlan recorded under `key` (plan_key's or select_key's), or None."""
    plan = _plans.get(key)
    return plan if type(plan) is LaunchPlan else None


def _key(ordinal, plugin, dtype, n, value_bytes, config, descending, has_values_in,
         has_values_out, rows, key_range=None) -> tuple:
    return (ordinal, type(plugin), plugin.run, dtype, n, value_bytes, tuple(config.items()),
            descending, not has_values_in, not has_values_out, rows, key_range)


def recorded(ordinal, plugin, dtype, n, value_bytes, config, descending, *, has_values_in,
             has_values_out, rows=None):
    """The LaunchPlan recorded for a job of these fields (config as the job
    holds it: the defaults filled in; `rows` as rows_of(request); no
    key_range), or None."""
    return plan_for(_key(ordinal, plugin, dtype, n, value_bytes, config, descending,
                         has_values_in, has_values_out, rows))


def graphs_held() -> int:
    """CUDA graphs the recorded plans hold (cudasortkit/launch/graphs.py)."""
    return sum(len(plan.graphs) for plan in list(_plans.values()) if type(plan) is LaunchPlan)


def replayable(plugin_cls) -> bool:
    """plugin_cls.replayable, if said no higher up the class tree than the
    run() it vouches for: a subclass that overrides run() is replayed only if
    it says replayable itself."""
    verdict = _replayable.get(plugin_cls)
    if verdict is None:
        mro = plugin_cls.__mro__
        said = next(i for i, cls in enumerate(mro) if "replayable" in vars(cls))
        runs = next(i for i, cls in enumerate(mro) if "run" in vars(cls))
        verdict = _replayable[plugin_cls] = bool(plugin_cls.replayable) and said <= runs
    return verdict


def run(plugin, job, key=None):
    """plugin.run(job), or the recorded plan of the job's shape if it has
    one; what run() returned (None from a plan: the core refuses anything
    else, launch/run.py's run_job). `key`: the shape's plan key where it is
    not plan_key's (a selection job's select_key)."""
    request = job.request
    if not replayable(type(plugin)) or (request is not None and request.segments is not None
                                        and not request.segments.uniform):
        return plugin.run(job)
    if key is None:
        key = plan_key(plugin, job)
    plan = _plans.get(key)
    if plan is None:
        return _record(plugin, job, key)
    if type(plan) is LaunchPlan:
        plan.replay(job)
        return None
    return plugin.run(job)


@contextmanager
def recording(job, recorder=None):
    """A Recorder (`recorder`, else a new one) of the job's work in the
    with-block: job.recorder while it runs; its outcome() is the
    LaunchPlan, or Unreplayable and why."""
    recorder = job.recorder = Recorder(job) if recorder is None else recorder
    try:
        yield recorder
    finally:
        job.recorder = None


def _record(plugin, job, key):
    with recording(job) as recorder:
        returned = plugin.run(job)
    outcome = recorder.outcome()
    # Only a run() that returns None, as the contract says, is ever replayed:
    # run_job refuses one that hands something back.
    if outcome is not None and returned is None:
        if len(_plans) >= _MAX_PLANS:
            _plans.clear()
        _plans[key] = outcome
    return returned


@dataclass(frozen=True)
class Unreplayable:
    """A shape whose run() cannot be replayed, and why (for whoever debugs it)."""

    reason: str


class _Launch:
    __slots__ = ("kernel", "grid", "block", "args", "shared", "pointers")

    def __init__(self, kernel, grid, block, args, shared, pointers):
        self.kernel, self.grid, self.block, self.shared = kernel, grid, block, shared
        self.args, self.pointers = args, pointers  # pointers: (arg index, slot, offset)

    def resolve(self, bases) -> bytes:
        """The packed parameters for these buffers."""
        args = self.args
        if self.pointers:
            args = list(args)
            for index, slot, offset in self.pointers:
                args[index] = bases[slot] + offset
        return self.kernel.pack(args)

    def issue(self, job, packed, overlap: bool = False) -> None:
        job.issue_packed(self.kernel, self.grid, self.block, packed, self.shared, overlap)


class _Memset32:
    __slots__ = ("dst", "value", "count")

    def __init__(self, dst, value, count):
        self.dst, self.value, self.count = dst, value, count  # dst: (slot, offset)

    def resolve(self, bases):
        slot, offset = self.dst
        return bases[slot] + offset

    def issue(self, job, dst, overlap: bool = False) -> None:
        job.memset32(dst, self.value, self.count)


class _Copy:
    __slots__ = ("dst", "src", "nbytes")

    def __init__(self, dst, src, nbytes):
        self.dst, self.src, self.nbytes = dst, src, nbytes  # dst, src: (slot, offset)

    def resolve(self, bases):
        (dslot, doffset), (sslot, soffset) = self.dst, self.src
        return bases[dslot] + doffset, bases[sslot] + soffset

    def issue(self, job, addresses, overlap: bool = False) -> None:
        dst, src = addresses
        job.copy(dst, src, self.nbytes)


class LaunchPlan:
    """The temporaries (sizes, in allocation order) and operations of one run()."""

    def __init__(self, temporaries: tuple, ops: tuple):
        self.temporaries = temporaries
        self.ops = ops
        #: Per op: whether it is a launch right after another launch, which a
        #: graph may start before that one ends (OVERLAP_IN_GRAPHS).
        self._follows_launch = tuple(isinstance(op, _Launch) and i > 0
                                     and isinstance(ops[i - 1], _Launch)
                                     for i, op in enumerate(ops))
        self._resolved = (None, ())  # (slot addresses, each op's arguments) of the last replay
        #: The plan's CUDA graphs, by buffer addresses (cudasortkit/launch/graphs.py).
        self.graphs = PlanGraphs()

    def run_on(self, job, buffers: tuple, temporaries: tuple | None,
               stream: int | None = None) -> None:
        """Run the plan as a repeated call does, on `buffers` (keys_in,
        keys_out, values_in, values_out): the graph of these buffers and
        `temporaries` (addresses the caller owns) where one was captured,
        launched on the CUstream handle `stream` (None: the job's; `job`
        only names plugin and config if the launch fails, so a caller owning
        its temporaries needs no Job per call); else a replay on `job`
        rebound to the buffers, which captures where due (temporaries None:
        taken from the pool and freed after). `job` is a template Job of
        the plan's shape (Job.rebound), so no Job is built per call."""
        if temporaries is not None and self.graphs.launch((*buffers, *temporaries), job, stream):
            return
        bound = job.rebound(*buffers)
        try:
            self.replay(bound, temporaries)
        finally:
            bound.finish()

    def replay(self, job, temporaries: tuple | None = None) -> None:
        """Issue the recorded work for `job`'s buffers, as one graph launch
        when these buffers were replayed before; temporaries come from
        job.alloc, so job.finish() frees them as after a plain run(), or
        are `temporaries` (addresses of self.temporaries' sizes, in order)
        that the caller owns and uses on the job's stream only."""
        if temporaries is None:
            temporaries = tuple(int(job.alloc(nbytes)) for nbytes in self.temporaries)
        bases = (job.keys_in, job.keys_out, job.values_in, job.values_out, *temporaries)
        if self.graphs.launch(bases, job):
            return
        _count_issued()
        last_bases, arguments = self._resolved
        if bases != last_bases:  # else the same buffers again (pools hand them back): reuse
            arguments = tuple(op.resolve(bases) for op in self.ops)
            self._resolved = (bases, arguments)

        def issue(overlap=False):
            for op, resolved, follows in zip(self.ops, arguments, self._follows_launch):
                op.issue(job, resolved, overlap and follows)

        if not (job.graphable and self.graphs.wants(bases)
                and self.graphs.capture(bases, job, lambda: issue(OVERLAP_IN_GRAPHS))):
            issue()


def _count_issued() -> None:
    global _issued
    with _issued_lock:
        _issued += 1


def issued_replays() -> int:
    """How many replays so far, of every plan, had no graph of their
    buffers to launch (see _issued)."""
    return _issued


class Recorder:
    """Builds a LaunchPlan from what a Job issues (Job calls it while recording)."""

    def __init__(self, job):
        self._slots = list(zip((job.keys_in, job.keys_out, job.values_in, job.values_out),
                               job.slot_bytes()))
        self._temporaries = []
        self._ops = []
        self._unreplayable = None  # reason
        self._ambiguous = False

    # -------------------------------------------------------- from the Job
    def temporary(self, nbytes: int, ptr: int) -> None:
        self._temporaries.append(nbytes)
        self._slots.append((ptr, max(nbytes, 1)))  # the pool hands out at least a byte

    def launch(self, kernel, grid, block, args, shared) -> None:
        """A launch whose arguments match kernel.signature (Job.launch checks
        the count); its "P" arguments are the pointers to place."""
        pointers = []
        for index, (letter, value) in enumerate(zip(kernel.signature, args)):
            if letter == "P" and value:
                where = self._place(value, f"argument {index} of kernel {kernel.name!r}")
                if where is None:
                    return
                pointers.append((index,) + where)
        self._ops.append(_Launch(kernel, grid, block, tuple(args), shared, tuple(pointers)))

    def memset32(self, dst: int, value: int, count: int) -> None:
        where = self._place(dst, "a memset32 destination")
        if where is not None:
            self._ops.append(_Memset32(where, value, count))

    def refuse(self, reason: str) -> None:
        """The run did something a replay cannot repeat (a read to the host,
        work issued outside the job): no plan for this shape."""
        self._refuse(reason)

    def copy(self, dst: int, src: int, nbytes: int) -> None:
        to = self._place(dst, "a copy destination")
        source = self._place(src, "a copy source")
        if to is not None and source is not None:
            self._ops.append(_Copy(to, source, nbytes))

    # -------------------------------------------------------------- result
    def outcome(self):
        """The LaunchPlan, Unreplayable(reason), or None: this call could not
        tell (two slots held a pointer), so the next one records again."""
        if self._unreplayable is not None:
            return Unreplayable(self._unreplayable)
        if self._ambiguous:
            return None
        return LaunchPlan(tuple(self._temporaries), tuple(self._ops))

    def _place(self, ptr, what: str):
        """(slot, offset) of a pointer, or None (recorded as why)."""
        try:
            ptr = int(ptr)
        except (TypeError, ValueError):
            return self._refuse(f"{what} is not a pointer: {ptr!r}")
        found = None
        for slot, (base, size) in enumerate(self._slots):
            if base and base <= ptr < base + size:
                if found is not None:
                    self._ambiguous = True
                    return None
                found = (slot, ptr - base)
        if found is None:
            return self._refuse(f"{what} ({ptr:#x}) lies in no buffer of the job")
        return found

    def _refuse(self, reason: str) -> None:
        if self._unreplayable is None:
            self._unreplayable = reason
        return None
