"""Host (Python) time of a plan's repeat call, without a GPU: the real
Plan.__call__, PreparedCalls.holds and PreparedCall.__call__ (sorts and
sort_by_key) over stand-ins
for CuPy (its attributes, allocation and stream query), the device state
(pool allocation) and the launch plan (its replay allocates the recorded
temporaries; the graph launch itself is left out). Absolute numbers are
this machine's and the stand-ins' (CuPy's attributes are Cython, faster);
compare before and after a change on one machine.
`python tests/plan_call_cpu.py [calls]`"""
import sys
import types

import numpy as np

from cupy_standin import host_us, install  # noqa: E402  (tests/: next to this script)
from helpers import joiner_standin  # noqa: E402

ndarray = install()

from cudasortkit import api  # noqa: E402
from cudasortkit.calls import sort_prepared as prep  # noqa: E402
from cudasortkit.calls.sort_plan import Plan  # noqa: E402
from cudasortkit.dispatch.select import _Memo  # noqa: E402
from cudasortkit.launch.plans import LaunchPlan  # noqa: E402


class _Buf(int):
    def free(self):
        pass


class _State:
    ordinal = 0
    total_memory = 80 << 30

    def __init__(self):
        self.stream = types.SimpleNamespace(handle=7)
        self.joiner = joiner_standin()

    def activate(self):
        return self

    def allocate(self, nbytes, who=None):
        return _Buf(0x900000)

    def allocating(self, make, *args):  # DeviceState.allocating, no out-of-memory here
        return make(*args)


class _Graphs:
    @staticmethod
    def launch(buffers, job, stream=None):  # as PlanGraphs.launch, the driver call left out
        return True


class _LaunchPlan:
    temporaries = (4096, 256)
    graphs = _Graphs()
    run_on = LaunchPlan.run_on  # the real repeated-call path over the stand-ins here

    def replay(self, job, temporaries=None):  # as LaunchPlan.replay, graph launch left out
        if temporaries is None:
            temporaries = tuple(int(job.alloc(nbytes)) for nbytes in self.temporaries)
        return (job.keys_in, job.keys_out, job.values_in, job.values_out, *temporaries)


def main(calls=20000):
    n = 1 << 10
    a, out = ndarray((n,), "float32"), ndarray((n,), "float32")
    calls_ = api.prepared
    plugin = api.registry.plugins()["onesweep"]
    memo = _Memo(plugin, None)
    call = prep.PreparedCall(prep.adapter_for("cupy"), _State(), plugin, {"block_size": 256}, _LaunchPlan(),
                             "sort", np.dtype("float32"), "float32", (n,), n, 0, False, memo,
                             calls_.stamps())
    p = Plan(a, "sort", axis=-1, descending=False, stable=None, algorithm="auto",
             index_dtype=np.int64, values_like=None, prepared=calls_)
    p.why_general, p._call = None, call  # as after its first (general) call on a GPU
    # csk.sort(a) finds the same call, as after its first (general) call on a GPU
    calls_._types.add(ndarray)
    calls_._calls[("sort", ndarray, a.dtype, a.shape, False, False, "auto",
                   prep.INDEX_DTYPE)] = call
    # sort_by_key of int64 values, prepared the same way
    v = ndarray((n,), "int64")
    pairs = prep.PreparedCall(prep.adapter_for("cupy"), _State(), plugin, {"block_size": 256},
                              _LaunchPlan(), "pairs", np.dtype("float32"), "float32", (n,), n, 8,
                              False, memo, calls_.stamps(), values_dtype=v.dtype)
    calls_._calls[("pairs", ndarray, a.dtype, a.shape, False, True, "auto", v.dtype)] = pairs
    cases = {"PreparedCall(a)": lambda: call(a), "plan(a)": lambda: p(a),
             "plan(a, out=)": lambda: p(a, out=out), "csk.sort(a)": lambda: api.sort(a),
             "PreparedCall(k, v)": lambda: pairs(a, values=v),
             "csk.sort_by_key": lambda: api.sort_by_key(a, v)}
    for name, fn in cases.items():
        fn()
        print(f"{name:18} {host_us(fn, calls):6.2f} us per call (host only, stand-ins)")
    assert p._call is call, "the plan left its prepared call"
    assert calls_.find("sort", a, False, False, "auto") is call, "csk.sort left its prepared call"
    assert calls_.find_pairs(a, v, False, "auto") is pairs, "sort_by_key left its prepared call"
    keys, values = api.sort_by_key(a, v)
    assert keys.dtype == a.dtype and values.dtype == v.dtype and values.shape == v.shape


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20000)
