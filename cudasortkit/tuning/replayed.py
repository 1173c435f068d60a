"""A config timed the way a user's repeated call runs it.

A repeated sort, argsort or sort_by_key of CuPy or PyTorch keys is a prepared call
(cudasortkit/calls/sort_prepared.py): its plugin's recorded launch plan
replayed on temporaries the call keeps, one CUDA graph launch a call once
the graph of its buffers is captured. The general path (execute.run_plugin)
adds tens of microseconds of Python before the GPU starts, more for some
plugins than for others, and its first runs of a set of buffers record and
capture. Timed through it, a sweep at 2^14 keys took radix (0.05 ms as a
repeated call) over onesweep (0.036 ms): docs/tuning.md.

So a Case times a replayable plugin's config through `ReplayedCall`: the
plan its checking run recorded, replayed on buffers owned here (result,
argsort's indices and keys, the plan's temporaries), with argsort's index
fill where the plugin does not make its indices, as the prepared call
issues it; key-value pairs read the case's values. What a prepared call
adds besides (reading the array, its result's allocation) is the same for
every plugin, so it is left out. Uniform rows of pairs (which a prepared
call does not serve), plugins that cannot be replayed and shapes whose
plan was not recorded are timed through the general path, as their
callers run them.
"""
from __future__ import annotations

from ..build.corekernels import iota64
from ..dtypes import itemsize
from ..gpu.streams import LEGACY
from ..launch import plans as launchplan
from ..sdk.job import Job

#: Runs of one set of buffers before its timings count: the first replay of
#: a set issues the operations, the second captures its graph, later ones
#: launch it (cudasortkit/launch/graphs.py).
SETTLE_RUNS = 3
#: The kinds a prepared call serves (pairs of one 1-D array only).
PREPARED_KINDS = ("sort", "argsort", "pairs")


class ReplayedCall:
    """run(i): `config` of `plugin` on the case's input i, replayed from its
    launch plan as a prepared call replays it; `free()` gives the buffers
    back. Build it with `replayed_call`, which says when there is none."""

    def __init__(self, case, plugin, config, plan):
        state = case.state
        self.case, self.plan, self.state = case, plan, state
        self.index_bytes = case.value_bytes
        self.iota = case.kind == "argsort" and not plugin.makes_indices
        self._bufs = []
        n = max(case.n, 1)
        try:
            keys_out = self._allocate(n * itemsize(case.dtype), "sorted keys")
            values_in = values_out = 0
            if case.kind == "argsort":
                values_out = self._allocate(n * self.index_bytes, "argsort indices")
                if self.iota:
                    values_in = self._allocate(n * self.index_bytes, "argsort's input indices")
            elif case.kind == "pairs":
                values_in = int(case.values.gpudata)
                values_out = self._allocate(n * case.value_bytes, "sorted values")
            self.temporaries = tuple(self._allocate(size, "temporaries")
                                     for size in plan.temporaries)
        except BaseException:  # out of memory part way: give back what was taken
            self.free()
            raise
        self.outputs = (keys_out, values_in, values_out)
        self.job = Job(plugin, state, dtype=case.dtype, n=case.n, keys_in=0, keys_out=0,
                       value_bytes=case.value_bytes, descending=False, config=config)

    def _allocate(self, nbytes: int, what: str) -> int:
        buf = self.state.allocate(max(nbytes, 1), f"tuner's replayed call: {what}")
        self._bufs.append(buf)
        return int(buf)

    def __call__(self, i: int) -> None:
        keys_out, values_in, values_out = self.outputs
        if self.iota:
            iota64(self.state, values_in, self.case.n, index_bytes=self.index_bytes)
        self.plan.run_on(self.job, (int(self.case.keys[i].gpudata), keys_out, values_in,
                                    values_out), self.temporaries, LEGACY)

    def free(self) -> None:
        for buf in self._bufs:
            buf.free()
        self._bufs.clear()


def replayed_call(case, plugin, config) -> ReplayedCall | None:
    """The ReplayedCall of `config` on `case`, or None where a repeated
    call would take the general path: a kind the prepared calls do not
    serve, fewer than two keys, or no launch plan recorded for the shape
    (a plugin that is not replayable, or a shape not run yet)."""
    if (case.kind not in PREPARED_KINDS or case.n < 2
            or (case.kind == "pairs" and case.segments is not None)):
        return None
    plan = launchplan.recorded(case.state.ordinal, plugin, case.dtype, case.n, case.value_bytes,
                               config, False,
                               has_values_in=(case.kind == "pairs" or case.kind == "argsort"
                                              and not plugin.makes_indices),
                               has_values_out=case.kind != "sort",
                               rows=None if case.segments is None else
                               launchplan.rows_key(case.kind, case.segments))
    return None if plan is None else ReplayedCall(case, plugin, config, plan)
