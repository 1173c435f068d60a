"""A stand-in `cupy` module for timing cudasortkit's host (Python) path on a
machine without a GPU (tests/plan_call_cpu.py, tests/select_call_cpu.py):
arrays with the attributes and __cuda_array_interface__ cudasortkit reads,
cheap allocation, the current device and stream. `install()` registers it
as sys.modules["cupy"] before cudasortkit is imported."""
import math
import sys
import time
import types

import numpy as np

_next = [0x10000]


class _Mem:
    """A memory pointer: its address, device and memory (`mem`, which CuPy's
    pointers hold and calls/sort_prepared.py reads the holders of)."""

    __slots__ = ("ptr", "device_id", "mem")

    def __init__(self, ptr):
        self.ptr, self.device_id, self.mem = ptr, 0, object()


class _Flags:
    c_contiguous = True


class ndarray:
    def __init__(self, shape, dtype, ptr=None):
        # kept cheap (CuPy's own allocation is not what the scripts measure)
        self.shape = shape if isinstance(shape, tuple) else (shape,)
        self.dtype = dtype if isinstance(dtype, np.dtype) else np.dtype(dtype)
        self.size = math.prod(self.shape)
        self.itemsize = self.dtype.itemsize
        if ptr is None:  # arrays apart, as a real allocator's are (launch plans place pointers)
            ptr = _next[0]
            _next[0] += max(1 << 20, -(-self.size * self.itemsize // 4096) * 4096)
        self.data, self.flags = _Mem(ptr), _Flags()

    @property
    def strides(self):  # C-contiguous, as every stand-in array is
        strides, step = [], self.itemsize
        for dim in reversed(self.shape):
            strides.append(step)
            step *= dim
        return tuple(reversed(strides))

    def reshape(self, *shape):
        shape = shape[0] if len(shape) == 1 and isinstance(shape[0], tuple) else shape
        if shape == (-1,):
            shape = (self.size,)
        return ndarray(tuple(shape), self.dtype, self.data.ptr)

    def __getitem__(self, key):  # a 1-D array's leading slice [:count]: a view
        assert len(self.shape) == 1 and key.start is None and key.step is None
        return ndarray((min(key.stop, self.size),), self.dtype, self.data.ptr)

    def copy(self):
        return ndarray(self.shape, self.dtype)

    @property
    def __cuda_array_interface__(self):
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.data.ptr, False),
                "version": 3, "strides": None}


ndarray.__module__ = "cupy"


class _Device:
    def __init__(self, ordinal=0):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def install():
    """Register the stand-in as `cupy` and return its ndarray class."""
    cupy = types.ModuleType("cupy")
    cupy.__path__ = []
    stream = types.SimpleNamespace(ptr=0)
    cupy.ndarray = ndarray
    cupy.ascontiguousarray = lambda a: a
    cupy.empty = ndarray
    cupy.cuda = types.SimpleNamespace(runtime=types.SimpleNamespace(getDevice=lambda: 0),
                                      get_current_stream=lambda device_id=-1: stream, Device=_Device)
    sys.modules["cupy"] = cupy
    return ndarray


def host_us(fn, calls: int, rounds: int = 7) -> float:
    """The host (CPU) time of one call of fn, in us: the best of `rounds`
    rounds of calls // rounds calls (CPU time: other processes on the
    machine count less)."""
    best = []
    for _ in range(rounds):
        t = time.process_time()
        for _ in range(calls // rounds):
            fn()
        best.append((time.process_time() - t) * 1e6 / (calls // rounds))
    return min(best)


def print_profile(fn, top: int, calls: int = 200) -> None:
    """cProfile of `calls` calls of fn: Python function calls per call, and
    the `top` entries by cumulative time."""
    import cProfile
    import pstats

    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        fn()
    prof.disable()
    stats = pstats.Stats(prof)
    print(f"  {stats.total_calls // calls} Python function calls per call")
    stats.sort_stats("cumulative").print_stats(top)
