"""Host (Python) time of csk.searchsorted of CuPy arrays, without a GPU:
the real public call over select_call_cpu.py's stand-ins for CuPy and the
device (each kernel's real signature, the driver launch a no-op). A repeat
call is a prepared search (calls/search_prepared.py) replaying its
recorded launch as a CUDA graph; here the graph launch is the no-op
(PlanGraphs.launch answers True for buffers replayed before, as after a
capture on a GPU), so the time is the prepared path's own. The first
call's general path is timed too (the prepared searches forgotten before
each call, so it runs, records and prepares again). Absolute numbers are this
machine's and the stand-ins' (CuPy's attributes are Cython, faster);
compare before and after a change on one machine.
`python tests/search_call_cpu.py [calls] [--profile]`; with --check, the
replayed launches are compared with the general path's instead (check()).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import select_call_cpu as standins  # noqa: E402  (installs the CuPy stand-in first)
from cupy_standin import host_us, print_profile  # noqa: E402

import numpy as np  # noqa: E402
import cudasortkit as csk  # noqa: E402
from cudasortkit import api  # noqa: E402
from cudasortkit.launch.graphs import PlanGraphs  # noqa: E402

#: (keys, queries) of the cases timed.
CASES = ((1 << 20, 1 << 10), (1 << 10, 1 << 10), (1 << 24, 1 << 16))


def _stand_in_graphs():
    """PlanGraphs.launch: True for buffers a replay issued before (a graph
    captured on a GPU), without a driver call."""
    seen = set()

    def launch(self, key, job, stream=None):
        if (id(self), key) in seen:
            return True
        seen.add((id(self), key))
        return False

    PlanGraphs.launch = launch


def main(calls=2000, profile=False):
    standins.install()
    standins._State.total_memory = 80 << 30  # what kept buffers budget against
    standins._State.allocating = lambda self, make, *args: make(*args)
    _stand_in_graphs()
    ndarray = standins.ndarray
    for n, m in CASES:
        a, v = ndarray((n,), "float32"), ndarray((m,), "float32")
        fn = lambda: csk.searchsorted(a, v)  # noqa: E731
        fn()
        assert api.searches.find(a, v, "left", "auto") is not None, "not prepared"
        plugin = csk.explain_searchsorted(a, v).plugin
        print(f"searchsorted {m:>9,} into {n:>10,} ({plugin:6}) prepared "
              f"{host_us(fn, calls):6.1f} us per call (host only, stand-ins)")
        if profile:
            print_profile(fn, 20)
    a, v = ndarray((1 << 20,), "float32"), ndarray((1 << 10,), "float32")

    def general():
        api.searches.forget()  # so the general path runs (and prepares the call again)
        return csk.searchsorted(a, v)

    print(f"searchsorted     1,024 into  1,048,576 general path       "
          f"{host_us(general, calls):6.1f} us per call (host only, stand-ins)")
    if profile:
        print_profile(general, 20)


def check():
    """The prepared path replays what the general path launched: for each
    case (each plugin auto takes, and every one by name), the first call's
    launches (general path, recorded) and a second call's on other arrays
    of the shape (prepared: replayed) are the same kernels, grids and
    arguments, each pointer moved to the second call's arrays and result.
    Changed measurements or plugins send the call back to the general path;
    another dtype or shape is not served. Exits non-zero on a mismatch."""
    import struct

    from cudasortkit.build import template
    from cudasortkit.tuning import runtime

    standins.install()
    standins._State.total_memory = 80 << 30
    standins._State.allocating = lambda self, make, *args: make(*args)
    ndarray = standins.ndarray
    launched = []
    issue = template.Kernel.launch_packed

    def record(self, state, stream, grid, block, packed, shared, *args, **kwargs):
        launched.append((self.name, grid, block, struct.unpack(self.signature, packed)))
        return issue(self, state, stream, grid, block, packed, shared, *args, **kwargs)

    template.Kernel.launch_packed = record
    from cudasortkit.calls.search_prepared import PreparedSearches

    general = []  # the general path's runs (each notes its call)
    note = PreparedSearches.note
    PreparedSearches.note = lambda self, *args: general.append(1) or note(self, *args)
    cases = [(n, m, side, algorithm) for n, m in CASES + ((5000, 1), (1 << 24, 1 << 24))
             for side in ("left", "right") for algorithm in ("auto", "binary", "tree", "kary")]
    for n, m, side, algorithm in cases:
        calls = []
        del general[:]
        for _ in range(2):
            a, v = ndarray((n,), "float32"), ndarray((m,), "float32")
            del launched[:]
            out = csk.searchsorted(a, v, side, algorithm=algorithm)
            pointers = {a.data.ptr: "a", v.data.ptr: "v", out.data.ptr: "out"}
            calls.append([(name, grid, block, tuple(pointers.get(x, x) for x in args))
                          for name, grid, block, args in launched])
            assert type(out) is ndarray and out.shape == (m,) and out.dtype == "int64"
        assert api.searches.find(a, v, side, algorithm) is not None, (n, m, side, algorithm)
        assert len(general) == 1, (n, m, side, algorithm, "the repeat was not prepared")
        assert calls[0] == calls[1] and calls[0], (n, m, side, algorithm, calls)
    a, v = ndarray((1 << 20,), "float32"), ndarray((1 << 10,), "float32")
    csk.searchsorted(a, v)
    assert api.searches.find(a, v, "left", "auto") is not None
    runtime.reset()  # new measurements: decided again
    assert api.searches.find(a, v, "left", "auto") is None
    csk.searchsorted(a, v)
    assert api.searches.find(a, v, "left", "auto") is not None
    assert api.searches.find(a, ndarray((1 << 10,), "int32"), "left", "auto") is None
    assert api.searches.find(a, ndarray((1 << 11,), "float32"), "left", "auto") is None
    assert api.searches.find(a, v, "right", "auto") is None
    assert api.searches.find(a, 1.5, "left", "auto") is None
    # A prepared search keeps the general path's rules: host arrays of a
    # prepared shape with a plugin named still raise, a non-str name too.
    csk.searchsorted(a, v, algorithm="kary")
    assert api.searches.find(a, v, "left", "kary") is not None
    host_a, host_v = np.zeros(1 << 20, np.float32), np.zeros(1 << 10, np.float32)
    for algorithm, error in (("kary", ValueError), (None, TypeError)):
        try:
            csk.searchsorted(host_a, host_v, algorithm=algorithm)
        except error:
            pass
        else:
            raise AssertionError(f"algorithm={algorithm!r} of host arrays did not raise")
    try:
        csk.searchsorted(a, v, algorithm=None)
    except TypeError:
        pass
    else:
        raise AssertionError("algorithm=None of a prepared shape did not raise")
    print(f"checked {len(cases)} prepared searches against their general path")


if __name__ == "__main__":
    args = [x for x in sys.argv[1:] if not x.startswith("--")]
    if "--check" in sys.argv:
        check()
    else:
        main(int(args[0]) if args else 2000, "--profile" in sys.argv)
