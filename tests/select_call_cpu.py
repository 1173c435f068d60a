"""Host (Python) time of csk.topk of a CuPy array and of a CUDA PyTorch
tensor, without a GPU: the real public call, selection choice, SelectJob
and plugin run() over stand-ins for CuPy (its attributes, allocation and
current stream) and for CUDA PyTorch (real CPU PyTorch whose tensors say
is_cuda, its CUDA stream functions Python fakes: tests/torch_standin.py;
skipped without torch),
the device state (pool allocation, memsets, the stream join) and the
kernels (each kernel's real signature from its template, so every
launch's argument count is still checked; the driver launch itself is a
no-op). The measured tables are those of an empty cache directory.
Absolute numbers are this machine's and the stand-ins' (CuPy's attributes
are Cython, faster); compare before and after a change on one machine.
`python tests/select_call_cpu.py [calls] [--profile]`"""
import os
import sys
import tempfile
import types


# this checkout's cudasortkit (and its entry points), not an installed one
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from cupy_standin import host_us, install, print_profile  # noqa: E402  (tests/: next to this script)
from helpers import joiner_standin  # noqa: E402

ndarray = install()
try:
    import torch_standin  # noqa: E402
except ImportError:  # no PyTorch here: CuPy only
    torch_standin = None
os.environ["CUDASORTKIT_CACHE_DIR"] = tempfile.mkdtemp(prefix="csk-select-call-")

import cudasortkit as csk  # noqa: E402
from cudasortkit.build import template  # noqa: E402
from cudasortkit.build.prototype import argument_letters  # noqa: E402
from cudasortkit.dispatch import request as dispatch_request  # noqa: E402
from cudasortkit.dispatch import selection as choosing  # noqa: E402
from cudasortkit.gpu import device  # noqa: E402
from cudasortkit.calls import select as select_calls  # noqa: E402


# ------------------------------------------------------ device stand-ins
class _Buf(int):
    def free(self):
        pass


class _Cuda:
    class Error(Exception):
        pass

    @staticmethod
    def memset_d32_async(*args):
        pass

    memset_d8_async = memcpy_dtod_async = memset_d32_async


class _State:
    ordinal = 0
    name = "Stand-in GPU"
    compute_capability = (9, 0)
    sm_count = 132
    limits = device.DeviceLimits.sm90()
    cuda = _Cuda

    def __init__(self):
        self.stream = types.SimpleNamespace(handle=7, synchronize=lambda: None)
        self.joiner = joiner_standin()

    def activate(self):
        return self

    def allocate(self, nbytes, who=None):
        # far above the arrays' stand-in addresses, as a pool's blocks are
        # apart from the caller's arrays (launch plans place pointers)
        return _Buf(1 << 44)


class _Function:
    @staticmethod
    def _launch_kernel(grid, block, packed, shared, stream):
        pass


def _make(self, state, dtype, value_bytes, config, name, owner):
    """A kernel with its template's real signature, never compiled."""
    source = self.render(dtype, value_bytes, config)
    return template.Kernel(_Function(), name, self.file,
                           argument_letters(source, name, self.include_dirs),
                           shared_allowed=state.limits.shared_per_block)


def install():
    state = _State()
    for module in (device, choosing):
        module.gpu_available = lambda: True
    for module in (device, dispatch_request, select_calls):
        module.get_device = lambda ordinal=None: state
    device.driver_version = lambda: "stand-in"
    template.KernelTemplate._make = _make


CASES = {"topk (1, 2^23) k=1000": ((1, 1 << 23), 1000),
         "topk (4096, 32000) k=50": ((4096, 32000), 50)}


def inputs():
    """(label, float32 array maker) per library: CuPy, then torch if here."""
    yield "cupy", lambda shape: ndarray(shape, "float32")
    if torch_standin is not None:
        torch = torch_standin.install()
        # never written or read (the launches are no-ops): pages never touched
        yield "torch", lambda shape: torch.empty(shape, dtype=torch.float32)


def main(calls=2000, profile=False):
    install()
    for library, make in inputs():
        for label, (shape, k) in CASES.items():
            run_case(f"{library:5} {label}", make(shape), k, calls, profile)


def run_case(label, a, k, calls, profile):
    fn = lambda: csk.topk(a, k)  # noqa: E731
    values, indices = fn()
    want = tuple(a.shape[:-1]) + (k,)
    assert type(values) is type(a) and tuple(values.shape) == tuple(indices.shape) == want
    assert csk.explain(a, kind="topk", k=k).name == "radix_select"
    # the first call recorded the work: repeats are prepared calls (no plugin run())
    from cudasortkit import api

    assert api.selections.prepared.find(a, ("topk", k, -1, True, True, "auto")) is not None, \
        f"{label}: a repeat call is not prepared"
    print(f"{label:32} {host_us(fn, calls):7.1f} us per call (host only, stand-ins)")
    if profile:
        print_profile(fn, 25)


if __name__ == "__main__":
    args = [x for x in sys.argv[1:] if not x.startswith("--")]
    main(int(args[0]) if args else 2000, "--profile" in sys.argv)
