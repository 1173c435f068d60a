"""Prepared searches: a repeated device searchsorted of one exact call shape,
made again without the general path (calls/search.py).

The general path reads both arrays' interfaces, checks the arguments,
builds a query, asks every search plugin whether it serves it and what it
would cost, runs the chosen one's run() and wraps the result: tens of
microseconds of Python, where the peers' whole call of 2^10 queries takes
11-25 us. When a plain call (no sorter, no stream=) of CuPy or CUDA PyTorch
arrays ran a replayable search plugin (SearchPlugin.replayable), its
launches were recorded (cudasortkit/launch/plans.py: slots a, result, v,
sorter); the next call of the same (array types, dtypes, shapes, side,
algorithm) takes the arrays' addresses, allocates the result in the caller's
library on its current stream (or takes the one made ahead, as a prepared
sort does: calls/sort_kept.py) and replays the launches, as one CUDA graph
launch once the same buffers come back.

A prepared search holds its decision's stamps (the registry's generation,
the measured tables' generation, the launch plans' generation): when any
of them moves, the call takes the general path, which decides and records
again. Anything unusual (another device current, a non-contiguous array,
arrays of two libraries, a host v) takes the general path.
"""
from __future__ import annotations

from ..dtypes import INDEX_DTYPE
from ..gpu.arrays import c_strides
from ..gpu.streams import LEGACY
from ..launch import plans as launchplan
from ..launch.outputs import poison
from .select_prepared import stamps
from .sort_kept import kept_for
from .sort_prepared import adapter_for

#: Prepared searches kept at most (dropped all together past it).
MAX_CALLS = 1024


class PreparedSearch:
    """One exact call shape's search: its device, plugin, launch plan and
    the template job a replay is rebound from."""

    __slots__ = ("adapter", "state", "plugin", "plan", "job", "a_strides", "v_strides",
                 "out_bytes", "stamps", "kept", "make_result")

    def __init__(self, adapter, state, plugin, plan, job, a_shape, v_shape, itemsize: int,
                 out_count: int):
        self.adapter, self.state, self.plugin, self.plan = adapter, state, plugin, plan
        #: Each call's Job is this one rebound to the call's buffers (Job.rebound).
        self.job = job
        self.a_strides = c_strides(a_shape, itemsize)
        self.v_strides = c_strides(v_shape, itemsize)
        self.out_bytes = out_count * INDEX_DTYPE.itemsize
        self.stamps = stamps()
        self.kept = kept_for(state, plan, adapter, v_shape, INDEX_DTYPE, self.out_bytes)
        #: make_result(v): a new int64 array of v's shape (adapter.maker).
        self.make_result = adapter.maker(v_shape, INDEX_DTYPE)

    def ready(self, a, v) -> bool:
        """Whether a and v are contiguous on this call's device, which is
        current (read once for both)."""
        adapter, ordinal = self.adapter, self.state.ordinal
        return (adapter.placed(a, ordinal, self.a_strides)
                and adapter.ready(v, ordinal, self.v_strides))

    def __call__(self, a, v):
        """The int64 insertion points of v in a, in the caller's library,
        ordered in the caller's current stream."""
        state = self.state.activate()
        adapter, kept = self.adapter, self.kept
        caller = adapter.stream(v)
        joins = state.joiner.join_caller(caller)
        try:
            result = kept.made_ahead(caller)
            if result is None:
                result = state.allocating(self.make_result, v)
            out = adapter.pointer(result)
            poison(state, out, self.out_bytes)
            # On the legacy default stream itself where that is the caller's
            # (a graph there; a replay issues on ours, ordered with it).
            self.plan.run_on(self.job, (adapter.pointer(a), out, adapter.pointer(v), 0),
                             kept.used(), LEGACY if caller == LEGACY else None)
        finally:
            if joins:
                state.joiner.signal((caller,))
        if kept.ahead is not None:  # the GPU works meanwhile
            kept.hand_out(caller, result)
            kept.make_ahead(caller, self.make_result, v)
        return result


class PreparedSearches:
    """The prepared searches of this process, by exact call shape."""

    def __init__(self):
        self._calls: dict = {}
        self._types: set = set()  # array types some prepared search was made for

    @staticmethod
    def key(a, v, side, algorithm) -> tuple:
        return type(a), type(v), a.dtype, v.dtype, a.shape, v.shape, side, algorithm

    def find(self, a, v, side, algorithm):
        """The prepared search of this exact call, or None (take the general path)."""
        if type(a) not in self._types:
            return None
        try:
            call = self._calls.get(self.key(a, v, side, algorithm))
        except (AttributeError, TypeError):  # v a number, a list; an unhashable side
            return None
        if call is None or call.stamps != stamps() or not call.ready(a, v):
            return None
        return call

    def note(self, a, v, side, algorithm, keys, queries, state, plugin, job, plan) -> None:
        """After the general path ran `plugin` on a plain call (no sorter,
        no stream=) recording `plan` (a LaunchPlan, else nothing to note):
        prepare the call's shape. `keys`, `queries`: a's and v's flat
        Operands (both on the device, of one library and dtype, no copies)."""
        if type(plan) is not launchplan.LaunchPlan:
            return
        adapter = adapter_for(keys.library)
        if (adapter is None or queries.library != keys.library or keys.is_copy
                or queries.is_copy or keys.interface_stream not in (None, keys.current_stream())
                or queries.interface_stream not in (None, queries.current_stream())):
            return
        if len(self._calls) >= MAX_CALLS:
            self._calls.clear()
        self._types.add(type(a))
        self._calls[self.key(a, v, side, algorithm)] = PreparedSearch(
            adapter, state, plugin, plan, job.rebound(0, 0), tuple(a.shape), tuple(v.shape),
            keys.dtype.itemsize, queries.n)

    def forget(self) -> None:
        self._calls.clear()
