"""Host (Python) time of csk.unique of CuPy arrays, without a GPU: the real
public call over select_call_cpu.py's stand-ins for CuPy and the device
(each kernel's real signature, the driver launch a no-op, the result's
length read back as 0). Plain unique of a repeated shape sorts through a
prepared call; with flags, the (keys, positions) sort and the inverse's
sort run too. Absolute numbers are this machine's and the stand-ins';
compare before and after a change on one machine. First, a repeated plain
call of int32 keys through its prepared unique (calls/unique_prepared.py:
the prepared sort, then the one pass), beside the prepared sort alone.
`python tests/unique_call_cpu.py [calls] [--profile]`
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import select_call_cpu as standins  # noqa: E402  (installs the CuPy stand-in first)
from cupy_standin import host_us, print_profile  # noqa: E402

import cudasortkit as csk  # noqa: E402
import cudasortkit.api  # noqa: E402,F401  (every module the call imports)

#: (dtype, keys, flags) of the cases timed.
CASES = (("int32", 1 << 20, {}), ("float64", 1 << 20, {}),
         ("int32", 1 << 20, {"return_inverse": True, "return_counts": True}))


def install():
    """select_call_cpu's stand-ins, seen by every module that imported the
    device's gpu_available or get_device by name (the sort path's too)."""
    standins.install()
    state = standins.device.get_device()
    for name, module in list(sys.modules.items()):
        if name.startswith("cudasortkit"):
            if hasattr(module, "gpu_available"):
                module.gpu_available = lambda: True
            if hasattr(module, "get_device"):
                module.get_device = lambda ordinal=None: state


def main(calls=1000, profile=False):
    install()
    standins._State.total_memory = 80 << 30
    standins._State.allocating = lambda self, make, *args: make(*args)
    standins._State.read_back = lambda self, ptr, nbytes, then=None: then and then() or 0
    for dtype, n, flags in CASES:
        a = standins.ndarray((n,), dtype)
        fn = lambda: csk.unique(a, **flags)  # noqa: E731
        fn()
        label = "+".join(k[7:] for k in flags) or "plain"
        print(f"unique {dtype:7} {n:>10,} {label:15} {host_us(fn, calls):7.1f} us per call "
              f"(host only, stand-ins)")
        if profile:
            print_profile(fn, 30)


def prepared(calls=20000, profile=False):
    """The prepared path over plan_call_cpu.py's stand-ins for a prepared
    sort's state and launch plan (as after a first call on a GPU)."""
    import numpy as np

    import plan_call_cpu as plans
    from cudasortkit import api
    from cudasortkit.calls import sort_prepared, unique as uniques, unique_prepared
    from cudasortkit.dispatch.select import _Memo

    class State(plans._State):
        cuda = standins._Cuda

        def read_back(self, ptr, nbytes, then=None):
            return 1 << 18  # u: a quarter of the keys (the values are copied)

    class Kernel:  # the launch's own checks and driver call left out
        def check(self, *args):
            pass

        def pack(self, args):
            return b""

        def launch_packed(self, *args, **kwargs):
            pass

    n, dtype = 1 << 20, np.dtype("int32")
    a, state = standins.ndarray((n,), dtype), State()
    adapter = sort_prepared.adapter_for("cupy")
    plugin = api.registry.plugins()["onesweep"]
    sort = sort_prepared.PreparedCall(adapter, state, plugin, {"block_size": 256},
                                      plans._LaunchPlan(), "sort", dtype, "int32", (n,), n, 0,
                                      False, _Memo(plugin, None), api.prepared.stamps())
    api.prepared._types.add(type(a))
    api.prepared._calls[("sort", type(a), dtype, (n,), False, False, "auto",
                         sort_prepared.INDEX_DTYPE)] = sort
    job = uniques.unique_job(state, dtype, n)
    kernels = uniques.UniqueKernels(Kernel(), None, None, None, None)  # the one pass
    call = unique_prepared.PreparedUnique(sort, state, adapter, job, kernels, dtype, n)
    unique_prepared._calls[unique_prepared._key(a, call.flags, True)] = call
    unique_prepared._types.add(type(a))
    assert unique_prepared.find(api.prepared, a) is call
    for name, fn in (("sort", lambda: csk.sort(a)), ("unique", lambda: csk.unique(a))):
        fn()
        print(f"{name:6} int32 {n:>10,} plain, prepared {host_us(fn, calls):7.1f} us per call "
              f"(host only, stand-ins)")
    if profile:
        print_profile(lambda: csk.unique(a), 30)
    unique_prepared._calls.clear()  # main() times the general path
    api.prepared.forget()


if __name__ == "__main__":
    args = [x for x in sys.argv[1:] if not x.startswith("--")]
    install()
    prepared(20 * int(args[0]) if args else 20000, "--profile" in sys.argv)
    main(int(args[0]) if args else 1000, "--profile" in sys.argv)
