"""gpu/libcuda.py, the one ctypes binding to the CUDA driver, over a
stand-in library: every failing call is told in one format (the call, the
status, cuGetErrorName and cuGetErrorString), and the modules that call the
driver (streams, host transfers, graphs) go through it."""
import types

import pytest

from cudasortkit.gpu import libcuda, streams
from cudasortkit.host import transfer


class FakeLib:
    """libcuda's functions as plain callables; `calls` logs them."""

    def __init__(self, fail=()):
        self.calls, self.fail = [], dict(fail)

    def _call(self, name, *args):
        self.calls.append((name,) + args)
        return self.fail.get(name, 0)

    def cuGetErrorName(self, status, text):
        if status != 700:
            return 1  # CUDA_ERROR_INVALID_VALUE: a status this driver does not know
        text._obj.value = b"CUDA_ERROR_ILLEGAL_ADDRESS"
        return 0

    def cuGetErrorString(self, status, text):
        if status != 700:
            return 1
        text._obj.value = b"an illegal memory access was encountered"
        return 0

    def cuEventCreate(self, event, flags):
        event._obj.value = 0xE0
        return self._call("cuEventCreate", flags)

    def cuEventRecord(self, event, stream):
        return self._call("cuEventRecord", event.value, stream)

    def cuStreamWaitEvent(self, stream, event, flags):
        return self._call("cuStreamWaitEvent", stream, event.value)

    def cuCtxGetCurrent(self, context):
        return self._call("cuCtxGetCurrent")


@pytest.fixture
def lib(monkeypatch):
    fake = FakeLib()
    monkeypatch.setattr(libcuda, "_driver", libcuda.Driver(fake))
    return fake


def test_a_failing_call_names_the_call_and_the_cuda_error(lib):
    driver = libcuda.driver()
    driver.check(0, "cuEventRecord")
    with pytest.raises(libcuda.CudaError) as info:
        driver.check(700, "cuEventRecord on the caller's stream")
    assert str(info.value) == ("cudasortkit: cuEventRecord on the caller's stream failed with CUDA "
                               "error 700 (CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access "
                               "was encountered)")
    assert info.value.status == 700 and isinstance(info.value, RuntimeError)
    with pytest.raises(libcuda.CudaError, match=r"^cudasortkit: cuGraphLaunch failed with CUDA "
                                                r"error 12345$"):
        driver.check(12345, "cuGraphLaunch")  # the driver has no name for it


def test_only_declared_functions_and_missing_ones_are_named(lib):
    driver = libcuda.driver()
    with pytest.raises(AttributeError, match="declares no driver function 'cuMemAlloc'"):
        driver.cuMemAlloc
    with pytest.raises(AttributeError, match="no cuGraphLaunch .driver too old"):
        driver.cuGraphLaunch
    assert set(libcuda.SIGNATURES) >= {"cuEventCreate", "cuMemHostRegister_v2", "cuGraphLaunch"}


def test_stream_joins_go_through_libcuda(lib):
    joiner = streams.Joiner(types.SimpleNamespace(stream=types.SimpleNamespace(handle=0x5)))
    joiner.wait_for([0x9, streams.LEGACY])
    joiner.signal([0x9])
    assert lib.calls == [("cuEventCreate", 0x2), ("cuEventRecord", 0xE0, 0x9),
                         ("cuStreamWaitEvent", 0x5, 0xE0), ("cuEventRecord", 0xE0, 0x5),
                         ("cuStreamWaitEvent", 0x9, 0xE0)]
    lib.fail["cuStreamWaitEvent"] = 700
    with pytest.raises(RuntimeError, match="cuStreamWaitEvent on the caller's stream failed with "
                                           "CUDA error 700 .CUDA_ERROR_ILLEGAL_ADDRESS"):
        joiner.signal([0x9])


def test_host_transfers_tell_driver_failures_the_same_way(lib):
    lib.fail["cuCtxGetCurrent"] = 700
    with pytest.raises(RuntimeError, match="^cudasortkit: cuCtxGetCurrent failed with CUDA error "
                                           "700 .CUDA_ERROR_ILLEGAL_ADDRESS"):
        transfer._current_context(transfer._host_register())


def test_no_driver_library_is_told_as_before(monkeypatch):
    monkeypatch.setattr(libcuda, "_driver", None)

    def cannot_load(name):
        raise OSError(f"{name}: cannot open shared object file")

    monkeypatch.setattr(libcuda.ctypes, "CDLL", cannot_load)
    with pytest.raises(OSError):
        libcuda.driver()
    with pytest.raises(RuntimeError, match="registered host transfers need the CUDA driver"):
        transfer._host_register()
    assert libcuda._driver is None  # tried again next time


def test_an_overlapped_launch_passes_geometry_stream_attribute_and_parameters(monkeypatch):
    """launch_overlapped: one cuLaunchKernelEx with the grid and block padded
    to three dimensions, the shared bytes and stream, one attribute
    (programmatic stream serialization, 6, on), no kernelParams, and the
    packed parameters as CU_LAUNCH_PARAM_BUFFER_POINTER / _SIZE / END; a
    failure raises CudaError naming the call."""
    import ctypes

    seen = []

    class Lib(FakeLib):
        def cuLaunchKernelEx(self, config, function, params, extra):
            c = ctypes.cast(config, ctypes.POINTER(libcuda._LaunchConfig)).contents
            attr = c.attrs[0]
            words = ctypes.cast(extra, ctypes.POINTER(ctypes.c_void_p * 5)).contents
            size = ctypes.c_size_t.from_address(words[3]).value
            seen.append((function, tuple(c.grid), tuple(c.block), c.shared, c.stream,
                         c.num_attrs, attr.id, attr.value, params,
                         words[0], ctypes.string_at(words[1], size), words[2], words[4]))
            return self.fail.get("cuLaunchKernelEx", 0)

    fake = Lib()
    monkeypatch.setattr(libcuda, "_driver", libcuda.Driver(fake))
    libcuda.launch_overlapped(0xF00, (7,), (256, 2), 4096, 0x5EED, b"\x01\x02\x03\x04")
    assert seen == [(0xF00, (7, 1, 1), (256, 2, 1), 4096, 0x5EED, 1, 6, 1, None,
                     1, b"\x01\x02\x03\x04", 2, None)]
    assert ctypes.sizeof(libcuda._LaunchAttribute) == 72 and ctypes.sizeof(libcuda._LaunchConfig) == 56
    fake.fail["cuLaunchKernelEx"] = 700
    with pytest.raises(libcuda.CudaError, match="cuLaunchKernelEx failed with CUDA error 700"):
        libcuda.launch_overlapped(0xF00, (1,), (32,), 0, 0, b"\x00" * 8)


@pytest.mark.parametrize("init, count, problem", [
    (0, 2, None), (0, 0, "the CUDA driver sees no device"),
    (100, 2, "the CUDA driver could not start (CUresult 100)")])
def test_the_driver_probe_asks_the_one_binding(monkeypatch, init, count, problem):
    """library_problem (`info`'s driver line): cuInit, then cuDeviceGetCount,
    through the same Driver as every other call."""
    class Probe:
        def cuInit(self, flags):
            return init

        def cuDeviceGetCount(self, out):
            out._obj.value = count
            return 0

    monkeypatch.setattr(libcuda, "_driver", libcuda.Driver(Probe()))
    assert libcuda.library_problem() == problem
