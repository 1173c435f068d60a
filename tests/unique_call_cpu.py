"""Host (Python) time of csk.unique of CuPy arrays, without a GPU: the real
public call over select_call_cpu.py's stand-ins for CuPy and the device
(each kernel's real signature, the driver launch a no-op, the result's
length read back as 0). Plain unique of a repeated shape sorts through a
prepared call; with flags, the (keys, positions) sort and the inverse's
sort run too. Absolute numbers are this machine's and the stand-ins';
compare before and after a change on one machine.
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


if __name__ == "__main__":
    args = [x for x in sys.argv[1:] if not x.startswith("--")]
    main(int(args[0]) if args else 1000, "--profile" in sys.argv)
