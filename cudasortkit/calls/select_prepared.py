"""Prepared selection calls: a repeated device topk of one exact shape, made
again without the general path (calls/select.py), as calls/sort_prepared.py
does for sorts.

The general path spends about a hundred microseconds of Python per topk
(checks, Rows, Operand, the choice, the job, the plugin's run()). When a
plain call (no out= or stream=) of a C-contiguous CuPy or PyTorch array
along its last axis ran a replayable selection plugin whose work was
recorded as a launch plan (launch/plans.py, under select_key), the next
call of the same (array type, dtype, shape, k, axis, largest, sorted,
algorithm) only takes the input's address, allocates the two results in
the caller's library on the caller's current stream, and replays the plan.
A prepared call holds the stamps of what made its decision (the registry's
generation, the measured tables' generation, the launch plans'
generation); when any moves, or the array is not ready for it (another
device current, not contiguous), the call takes the general path.
"""
from __future__ import annotations

from ..dtypes import INDEX_DTYPE, is_bfloat16
from ..gpu.arrays import c_strides
from ..launch import plans as launchplan
from ..launch.outputs import poison
from ..sdk import registry
from ..sdk.select_job import SelectJob
from ..tuning import runtime
from .sort_prepared import adapter_for

#: Prepared selection calls kept at most (dropped all together past it).
MAX_CALLS = 1024


def stamps() -> tuple:
    """What a prepared selection's or search's decision stands on: plugins
    (registry), measurements (tuning tables) and recorded plans (kernels)."""
    return registry.generation, runtime.generation(), launchplan.generation


class PreparedSelect:
    """One exact call shape's selection: its launch plan and result shape."""

    __slots__ = ("adapter", "state", "plan", "job", "shape", "dtype", "values_bytes",
                 "index_bytes", "stamps", "strides", "make_values", "make_indices")

    def __init__(self, adapter, state, plan, job, shape: tuple, dtype, count: int,
                 strides: tuple):
        """`shape`: the result's; `strides`: the input's C-contiguous strides
        (bytes), for adapter.ready."""
        self.adapter, self.state, self.plan = adapter, state, plan
        self.job, self.shape, self.dtype = job, shape, dtype
        self.strides = strides
        self.values_bytes, self.index_bytes = count * dtype.itemsize, count * 8
        self.stamps = stamps()
        self.make_values = adapter.maker(shape, dtype)  # make(a): a new result (adapter.maker)
        self.make_indices = adapter.maker(shape, INDEX_DTYPE)

    def __call__(self, a) -> tuple:
        """(values, int64 indices) of the recorded shape, the caller's kind."""
        state = self.state.activate()
        adapter = self.adapter
        caller = adapter.stream(a)
        joins = state.joiner.join_caller(caller)
        try:
            values, indices = self.make_values(a), self.make_indices(a)
            values_out, indices_out = adapter.pointer(values), adapter.pointer(indices)
            poison(state, values_out, self.values_bytes, indices_out, self.index_bytes)
            job = self.job.rebound(adapter.pointer(a), values_out, 0, indices_out)
            try:
                self.plan.replay(job)
            finally:
                job.finish()
        finally:
            if joins:
                state.joiner.signal((caller,))
        return values, indices


class PreparedSelects:
    """The prepared selection calls, by exact call shape."""

    def __init__(self):
        self._calls: dict = {}
        self._types: set = set()  # array types some call was prepared for

    def find(self, a, call_key: tuple):
        """The prepared call for `a` and call_key (op, k, axis, largest,
        sorted, algorithm: exact types, checked by the caller), or None."""
        if type(a) not in self._types:
            return None
        call = self._calls.get((type(a), a.dtype, a.shape) + call_key)
        if (call is None or call.stamps != stamps()
                or not call.adapter.ready(a, call.state.ordinal, call.strides)):
            return None
        return call

    def note(self, a, call_key: tuple, keys, plugin, job, shape: tuple, count: int) -> None:
        """After the general path ran `job` of `plugin` for a plain call of
        `a` (its rows in place, along its last axis): prepare the call if
        its work was recorded."""
        adapter = adapter_for(keys.library)
        if adapter is None or is_bfloat16(keys.dtype) or keys.is_copy:
            return
        plan = launchplan.plan_for(launchplan.select_key(plugin, job))
        if plan is None:
            return
        template = SelectJob(plugin, job.state, job.request, keys_in=0, keys_out=0,
                             indices_out=0, config=job.config)
        if len(self._calls) >= MAX_CALLS:
            self._calls.clear()
        self._types.add(type(a))
        self._calls[(type(a), a.dtype, a.shape) + call_key] = PreparedSelect(
            adapter, job.state, plan, template, shape, keys.dtype, count,
            c_strides(tuple(a.shape), keys.dtype.itemsize))
