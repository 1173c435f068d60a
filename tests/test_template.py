"""KernelTemplate without a GPU: nvcc and pycuda's module are stubbed, so what
is checked is the path from Job.kernel / the core's primitives to
prepare(): the letters read from the prototype, memoising per context, the
kernel's attributes, and errors naming the plugin whose job asked."""
import os
import struct
import sys

import pytest

from cudasortkit.gpu import caches

from cudasortkit.build import compiler
from cudasortkit.sdk import registry
from cudasortkit.build import template
from cudasortkit.build.corekernels import UTIL, iota64
from cudasortkit.gpu.device import DeviceLimits
from cudasortkit.errors import KernelError, KernelSignatureError, describe
from cudasortkit.sdk.job import Job
from cudasortkit.sdk.plugin import SortPlugin, Tunable
from cudasortkit.sdk.scan import DeviceScan
from cudasortkit.build.template import Kernel, KernelTemplate


class StubError(Exception):
    pass


class FunctionAttribute:
    NUM_REGS, SHARED_SIZE_BYTES, MAX_DYNAMIC_SHARED_SIZE_BYTES = "regs", "static", "dynamic"


class StubCuda:
    Error = StubError
    function_attribute = FunctionAttribute

    @staticmethod
    def memset_d32_async(*args):
        pass


class StubStream:
    handle = 0x5EED

    def synchronize(self):
        pass


class StubBuffer(int):
    def free(self):
        pass


class StubState:
    def __init__(self, ordinal=7):
        self.ordinal, self.cuda, self.stream = ordinal, StubCuda, StubStream()
        self.limits = DeviceLimits.sm90()
        self.compute_capability = (8, 0)  # no overlapped launches (OVERLAP_FROM) unless a test says
        self.next = 0x1000

    def allocate(self, nbytes, who=""):
        self.next += max(int(nbytes), 1) + 256
        return StubBuffer(self.next)


class StubFunction:
    def __init__(self, name, signature):
        self.name, self.signature, self.launches = name, signature, []

    def get_attribute(self, attribute):
        return {"regs": 40, "static": 2048}[attribute]

    def _launch_kernel(self, grid, block, packed, shared_size, stream):
        self.launches.append((grid, block, struct.unpack(self.signature, packed), shared_size))


@pytest.fixture
def nvcc(monkeypatch):
    """compile_module and prepared_function stubbed: records what they got."""
    seen = {"compiled": [], "prepared": []}

    def compile_module(state, source, include_dirs, where):
        seen["compiled"].append((source, tuple(include_dirs), where))
        return object()

    def prepared_function(module, name, signature):
        seen["prepared"].append((name, signature))
        return StubFunction(name, signature)

    monkeypatch.setattr(template, "compile_module", compile_module)
    monkeypatch.setattr(template, "prepared_function", prepared_function)
    caches.clear_all()
    yield seen
    caches.clear_all()


def test_job_kernel_prepares_with_the_letters_of_the_prototype(nvcc):
    radix = registry.plugins()["radix"]
    job = Job(radix, StubState(), dtype="uint64", n=10, keys_in=0, keys_out=0, value_bytes=8)
    kernel = job.kernel("radix.cu", "radix_downsweep", defines={"offset_bytes": 4})
    assert nvcc["prepared"] == [("radix_downsweep", "PPPPPPqiQPP")]
    assert kernel.signature == "PPPPPPqiQPP" and kernel.template == "radix.cu"
    assert kernel.registers == 40 and kernel.static_shared == 2048
    assert kernel.shared_allowed == 48 * 1024 - 2048
    source, include_dirs, where = nvcc["compiled"][0]
    assert "#define OFFSET_BYTES 4" in source and "#define CSK_KEY_BYTES 8" in source
    assert "plugin 'radix'" in where and "kernel 'radix_downsweep'" in where
    # memoised: the same kernel again compiles nothing
    assert job.kernel("radix.cu", "radix_downsweep", defines={"offset_bytes": 4}) is kernel
    assert len(nvcc["compiled"]) == 1
    # another context compiles its own
    other = Job(radix, StubState(ordinal=8), dtype="uint64", n=10, keys_in=0, keys_out=0,
                value_bytes=8)
    assert other.kernel("radix.cu", "radix_downsweep", defines={"offset_bytes": 4}) is not kernel


def test_job_kernel_and_kernel_template_share_one_cache_entry(nvcc):
    radix = registry.plugins()["radix"]
    state = StubState()
    job = Job(radix, state, dtype="uint64", n=10, keys_in=0, keys_out=0, value_bytes=8)
    kernel = job.kernel("radix.cu", "radix_downsweep", defines={"offset_bytes": 4})
    held = KernelTemplate("radix.cu", type(radix).template_package, {"offset_bytes": 4})
    assert held.kernel(state, "uint64", 8, job.config, "radix_downsweep", owner="radix") is kernel
    assert len(template._kernels) == 1 and len(nvcc["prepared"]) == 1
    caches.clear_all()
    assert template._kernels == {}


def test_templates_are_equal_by_file_package_and_defines():
    a = KernelTemplate("scan.cu", defines={"x": 1, "y": 2})
    assert a == KernelTemplate("scan.cu", "cudasortkit.kernels", {"y": 2, "x": 1})
    assert a != KernelTemplate("scan.cu", defines={"x": 1})
    assert len({a, KernelTemplate("scan.cu", defines={"y": 2, "x": 1})}) == 1
    with pytest.raises(TypeError):
        a.defines["x"] = 3  # part of its identity


def test_core_scan_compiles_its_own_template_and_names_the_job_plugin(nvcc):
    counting = registry.plugins()["counting"]
    job = Job(counting, StubState(), dtype="int32", n=5000, keys_in=0, keys_out=0)
    scan = DeviceScan(job, 5000, count_bytes=8)
    assert nvcc["prepared"] == [("csk_scan_tiles", "PPPqi"), ("csk_scan_add", "PPq")]
    source, include_dirs, where = nvcc["compiled"][0]
    assert "#define SCAN_COUNT_BYTES 8" in source and "plugin 'counting'" in where
    scan(0x10000, 0x20000)
    tiles = scan._tiles.function.launches
    assert tiles and tiles[0][2][3:] == (5000, 0)  # n, exclusive
    scan._tiles.function._launch_kernel = _raise
    with pytest.raises(KernelError, match="plugin 'counting', kernel 'csk_scan_tiles'"):
        scan(0x10000, 0x20000)


@pytest.mark.parametrize("n", [1, 2047, 2048, 2049, 2048 * 2048, 2048 * 2048 + 1])
@pytest.mark.parametrize("count_bytes", [4, 8])
def test_scan_buffer_a_caller_owns_is_the_size_and_total_it_would_allocate(nvcc, n, count_bytes):
    """DeviceScan.buffer_bytes and total_offset say what the scan would
    allocate and where its total lies, so that a caller allocating the
    buffer itself (buffer=, before a graph capture) gets the same scan."""
    counting = registry.plugins()["counting"]
    job = Job(counting, StubState(), dtype="int32", n=n, keys_in=0, keys_out=0)
    sizes = []
    job.alloc = lambda nbytes: sizes.append(nbytes) or 0x100000
    own = DeviceScan(job, n, count_bytes)
    assert sizes == [DeviceScan.buffer_bytes(n, count_bytes)]
    assert own.total_ptr - 0x100000 == DeviceScan.total_offset(n, count_bytes)
    given = DeviceScan(job, n, count_bytes, buffer=0x900000)
    assert len(sizes) == 1 and given.total_ptr - 0x900000 == DeviceScan.total_offset(n, count_bytes)


def _raise(*args, **kwargs):
    raise StubError("launch failed (stub)")


def test_core_iota_launches_without_a_job(nvcc):
    state = StubState()
    iota64(state, 0x5000, 1000)
    kernel = UTIL.kernel(state, "uint32", 0, {"block_size": 256}, "csk_iota")
    assert kernel.signature == "Pqqi" and kernel.function.launches == [
        ((4, 1), (256, 1, 1), (0x5000, 1000, 0, 8), 0)]
    kernel.function._launch_kernel = _raise
    with pytest.raises(KernelError, match="plugin 'core', kernel 'csk_iota'"):
        iota64(state, 0x5000, 1000)


def test_core_and_job_launch_errors_read_alike(nvcc):
    """One launch path (Kernel.launch_packed) names every failed launch the
    same way: who, kernel, keys, config, then the geometry and the cause."""
    state = StubState()
    iota64(state, 0x5000, 1000)
    kernel = UTIL.kernel(state, "uint32", 0, {"block_size": 256}, "csk_iota")
    kernel.function._launch_kernel = _raise
    with pytest.raises(KernelError) as core:
        iota64(state, 0x5000, 1000)
    assert str(core.value) == ("plugin 'core', kernel 'csk_iota': launch grid=(4, 1) "
                               "block=(256, 1, 1) shared=0 failed: launch failed (stub)")
    counting = registry.plugins()["counting"]
    job = Job(counting, state, dtype="int32", n=1000, keys_in=0, keys_out=0)
    with pytest.raises(KernelError) as planned:
        job.launch(kernel, 4, 256, 0x5000, 1000, 0, 8)
    assert str(planned.value) == (describe("counting", "csk_iota", "int32", job.config)
                                  + ": launch grid=(4, 1) block=(256, 1, 1) shared=0 failed: "
                                  "launch failed (stub)")


def test_one_iota_kernel_serves_argsort_int32_and_the_host_pipeline(nvcc):
    """argsort's int64 and int32 indices and the host pipeline's chunk
    indices (start + i) all launch util.cu's one csk_iota; each caller keeps
    its grid (the core's at most 65535 blocks, the pipeline's 16 per SM)."""
    from cudasortkit.host import kernels as host_kernels

    state = StubState()
    iota64(state, 0x5000, 1000, index_bytes=4)
    host_kernels.iota64_from(state, 0x6000, 10 ** 6, 7 * 10 ** 6)
    host_kernels.iota64_from(state, 0x6000, 0, 5)  # nothing to fill: no launch
    kernel = UTIL.kernel(state, "uint32", 0, {"block_size": 256}, "csk_iota")
    sms = state.limits.sm_count
    assert kernel.function.launches == [
        ((4, 1), (256, 1, 1), (0x5000, 1000, 0, 4), 0),
        ((min(3907, 16 * sms), 1), (256, 1, 1), (0x6000, 10 ** 6, 7 * 10 ** 6, 8), 0)]
    assert [name for name, _ in nvcc["prepared"]] == ["csk_iota"]
    source = UTIL.render("uint32", 0, {"block_size": 256})
    hostpipe = host_kernels.HOSTPIPE.render("uint32", 0, host_kernels.CONFIG)
    assert source.count("__global__ void csk_iota") == 1 and "void csk_iota" not in hostpipe


def test_an_unknown_parameter_type_names_plugin_kernel_and_parameter(tmp_path, monkeypatch, nvcc):
    package = tmp_path / "csk_badtypes"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "bad.cu").write_text('extern "C" __global__ void scale(float* x, float2 by) {}\n')
    monkeypatch.syspath_prepend(str(tmp_path))

    class Bad(SortPlugin):
        name = "badtypes"
        dtypes = ("float32",)
        tunables = {"block_size": Tunable(128)}
        templates = ("bad.cu",)
        template_package = "csk_badtypes"

        def run(self, job):
            job.kernel("bad.cu", "scale")

    try:
        job = Job(Bad(), StubState(), dtype="float32", n=4, keys_in=0, keys_out=0,
                  config={"block_size": 128})
        with pytest.raises(KernelSignatureError) as exc:
            Bad().run(job)
    finally:
        sys.modules.pop("csk_badtypes", None)
    text = str(exc.value)
    assert "plugin 'badtypes'" in text and "kernel 'scale'" in text and "block_size=128" in text
    assert "parameter 2" in text and "float2" in text
    assert nvcc["compiled"] == []  # refused before nvcc runs


# Layout: kernels/ holds the *.cu entry points, kernels/include/ the shared
# device code, which is on every template's include path.
SHARED_HEADERS = {"keys.cuh", "merge.cuh", "onesweep.cuh", "passplan.cuh", "peers.cuh",
                  "scan.cuh"}


def test_shared_headers_live_in_kernels_include_on_every_include_path():
    import glob
    import os

    from cudasortkit.build import render

    include = os.path.join(render.KERNEL_DIR, "include")
    assert glob.glob(os.path.join(render.KERNEL_DIR, "*.cuh")) == []
    assert SHARED_HEADERS <= {os.path.basename(p) for p in glob.glob(os.path.join(include, "*.cuh"))}
    for package in ("cudasortkit.kernels", "cudasortkit.plugins"):  # core's, a plugin's
        dirs = render.include_dirs(package)
        assert dirs[0] == render.template_dir(package) and include in dirs
        for header in SHARED_HEADERS:
            assert any(os.path.isfile(os.path.join(d, header)) for d in dirs), (package, header)


def test_plugin_hash_covers_the_shared_headers(tmp_path, monkeypatch):
    import shutil

    from cudasortkit.build import render
    from cudasortkit.plugins.bitonic import BitonicSort
    from cudasortkit.tuning import cache

    copy = tmp_path / "include"
    shutil.copytree(os.path.join(render.KERNEL_DIR, "include"), copy)
    monkeypatch.setattr(render, "KERNEL_INCLUDE_DIR", str(copy))
    before = cache.plugin_hash(type("HashedBitonic1", (BitonicSort,), {})())
    with open(copy / "keys.cuh", "a") as f:
        f.write("// changed\n")
    assert cache.plugin_hash(type("HashedBitonic2", (BitonicSort,), {})()) != before


# The segmented kernels share include/segments.cuh (segment search, value
# writes) and take their value modes from Python through the prelude.
SEGMENT_KERNELS = ("rows.cu", "block_radix.cu", "segmented.cu", "hostpipe.cu")


def test_value_modes_are_defined_once_in_python_and_reach_every_kernel_as_macros():
    import re

    from cudasortkit.build import render
    from cudasortkit.sdk import segmented

    assert (segmented.MODE_KEYS, segmented.MODE_LOCAL, segmented.MODE_GLOBAL,
            segmented.MODE_PAIRS) == tuple(render.VALUE_MODES[f"CSK_MODE_{m}"]
                                           for m in ("KEYS", "LOCAL", "GLOBAL", "PAIRS"))
    for name in ("rows.cu", "block_radix.cu", "segmented.cu"):
        source = KernelTemplate(name).render("uint32", 8, {"block_size": 256})
        for macro, value in render.VALUE_MODES.items():
            assert f"#define {macro} {value}\n" in source, (name, macro)
        with open(KernelTemplate(name).path, encoding="utf-8") as f:
            body = f.read()
        assert not re.search(r"#define \w*MODE\w* \d", body), name  # no numbers of their own
        assert not re.search(r"mode == \d", body), name


def test_segmented_kernels_share_segments_cuh_for_search_and_value_writes():
    from cudasortkit.build import render

    with open(os.path.join(render.KERNEL_INCLUDE_DIR, "segments.cuh"), encoding="utf-8") as f:
        header = f.read()
    assert "csk_count_at_most" in header and "csk_segment_of" in header
    assert "csk_write_value" in header
    for name in SEGMENT_KERNELS:
        with open(KernelTemplate(name).path, encoding="utf-8") as f:
            body = f.read()
        assert '#include "segments.cuh"' in body, name
        # the binary search and the per-mode value stores live in segments.cuh only
        assert "(lo + hi) >> 1" not in body, name
        assert "values_out[" not in body, name


@pytest.fixture
def driver_functions(monkeypatch):
    """build.compiler.driver_function stubbed: the kernels loaded through
    the driver, by name, each a fake handle."""
    loaded = {}

    def driver_function(state, source, include_dirs, name):
        return loaded.setdefault(name, 0xF000 + len(loaded))

    monkeypatch.setattr(template, "driver_function", driver_function)
    return loaded


def test_kernels_marked_overlapped_get_a_driver_function_from_sm90_on(nvcc, driver_functions):
    """A kernel whose prototype carries CSK_OVERLAPPED is loaded through the
    driver on a device of OVERLAP_FROM or newer; unmarked kernels, and every
    kernel on an older device, are not."""
    onesweep = registry.plugins()["onesweep"]
    config = onesweep.default_config("uint32")
    old = StubState()
    job = Job(onesweep, old, dtype="uint32", n=1 << 20, keys_in=0, keys_out=0, config=config)
    assert job.kernel("onesweep.cu", "onesweep_pass").overlap_function is None
    assert driver_functions == {}
    hopper = StubState(ordinal=9)
    hopper.compute_capability = (9, 0)
    job = Job(onesweep, hopper, dtype="uint32", n=1 << 20, keys_in=0, keys_out=0, config=config)
    assert job.kernel("onesweep.cu", "onesweep_pass").overlap_function == driver_functions["onesweep_pass"]
    assert job.kernel("onesweep.cu", "onesweep_histogram").overlap_function is not None
    scan = DeviceScan(job, 5000, count_bytes=8)  # the core's scan kernels carry no mark
    assert set(driver_functions) == {"onesweep_pass", "onesweep_histogram"}
    del scan


def test_an_overlapped_launch_goes_through_the_driver_with_the_packed_parameters(monkeypatch):
    """launch_packed(overlap=True) of a kernel with a driver function calls
    libcuda.launch_overlapped (handle, geometry, the stream's handle, the
    same packed bytes); without overlap, or without a driver function, the
    launch is pycuda's as always."""
    calls = []
    monkeypatch.setattr(template.libcuda, "launch_overlapped",
                        lambda *args: calls.append(args))
    function = StubFunction("k", "PqI")
    kernel = Kernel(function, "k", "t.cu", "PqI", overlap_function=0xBEEF)
    state, packed = StubState(), kernel.pack((0x10, 5, 7))
    kernel.launch_packed(state, state.stream, (3,), (128,), packed, 0, overlap=True)
    assert calls == [(0xBEEF, (3,), (128,), 0, state.stream.handle, packed)]
    assert function.launches == []
    kernel.launch_packed(state, state.stream, (3,), (128,), packed, 0)
    plain = Kernel(function, "k", "t.cu", "PqI")
    plain.launch_packed(state, state.stream, (3,), (128,), packed, 0, overlap=True)
    assert len(calls) == 1 and len(function.launches) == 2
