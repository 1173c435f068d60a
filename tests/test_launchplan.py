"""Launch plans without a GPU: a stub state and stub kernels log what would
reach the driver, so a replay can be compared with a plain run()."""
import struct

import numpy as np

import pytest

from cudasortkit.gpu import caches, device, libcuda

from cudasortkit.build import compiler
from cudasortkit.launch import graphs
from cudasortkit.launch import plans as launchplan
from cudasortkit.gpu.device import DeviceLimits
from cudasortkit.errors import KernelError
from cudasortkit.sdk.job import Job
from cudasortkit.build import template
from cudasortkit.build.template import Kernel
from cudasortkit.sdk.plugin import SortPlugin, Tunable
from test_libcuda_cpu import FakeLib

#: What reached the stub driver: ("launch", kernel, grid, block, args, shared),
#: ("memset32", dst, value, count) or ("copy", dst, src, nbytes).
ISSUED = []
FOREIGN_BUFFER = 0xDEAD0000  # a pointer the fake plugins keep for themselves


class StubError(Exception):
    pass


class StubCuda:
    Error = StubError

    @staticmethod
    def memset_d32_async(dst, value, count, stream):
        ISSUED.append(("memset32", dst, value, count))

    @staticmethod
    def memcpy_dtod_async(dst, src, nbytes, stream):
        ISSUED.append(("copy", dst, src, nbytes))


class StubStream:
    def __init__(self):
        self.syncs = 0

    def synchronize(self):
        self.syncs += 1


class StubBuffer:
    def __init__(self, ptr):
        self.ptr, self.freed = ptr, False

    def __int__(self):
        return self.ptr

    def free(self):
        self.freed = True


class StubState:
    """The part of DeviceState a Job uses; the pool hands out addresses from `base`."""

    def __init__(self, base):
        self.ordinal, self.cuda, self.stream = 0, StubCuda, StubStream()
        self.limits = DeviceLimits.sm90()
        self.next, self.buffers = base, []

    def allocate(self, nbytes, who=""):
        buf = StubBuffer(self.next)
        self.next += -(-max(nbytes, 1) // 256) * 256 + 512  # a gap between buffers
        self.buffers.append(buf)
        return buf


class StubFunction:
    """Records launches with their arguments unpacked (by the signature the
    kernel was given: stub_kernel sets it)."""

    def __init__(self, name, signature=""):
        self.name, self.fail, self.signature = name, False, signature

    def _launch_kernel(self, grid, block, packed, shared_size, stream):
        if self.fail:
            raise StubError("launch failed (stub)")
        args = struct.unpack(self.signature, packed)
        ISSUED.append(("launch", self.name, grid, block, args, shared_size))


def stub_kernel(name, signature):
    return Kernel(StubFunction(name, signature), name, "stub.cu", signature=signature)


class FakeSort(SortPlugin):
    """Issues one of everything: carved temporaries, a memset, pointers with
    offsets, scalars, a copy; `foreign` passes a pointer of its own."""

    name = "fake_replay"
    dtypes = ("uint32",)
    pairs = True
    replayable = True
    tunables = {"block_size": Tunable(128, (64, 128))}
    templates = ("stub.cu",)
    scatter = stub_kernel("scatter", "PPPqQPPPi")
    finish = stub_kernel("finish", "PPq")

    def __init__(self, foreign=False):
        self.runs, self.foreign = 0, foreign

    def run(self, job):
        self.runs += 1
        n, block = job.n, job.config["block_size"]
        at = job.alloc_parts([("hist", 1000), ("keys", n * job.key_bytes)])
        spare = job.alloc(64)
        job.memset32(at["hist"], 0, 250)
        job.launch(self.scatter, job.blocks(n, block), block, job.keys_in, job.keys_out + 8,
                   at["keys"], n, job.desc_mask, at["hist"] + 40, job.values_in, job.values_out,
                   7, shared=1024)
        job.launch(self.finish, 0, block, job.keys_out, at["keys"], n)  # empty grid: nothing
        job.launch(self.finish, (2, 3), (block, 1, 1), int(spare),
                   FOREIGN_BUFFER if self.foreign else 0, n)
        job.copy(job.keys_out, at["keys"], n * job.key_bytes)


@pytest.fixture(autouse=True)
def _fresh():
    launchplan.forget()
    ISSUED.clear()
    yield
    launchplan.forget()


def run_job(plugin, base=0x100000, *, n=1000, keys_in=0x10000000, keys_out=0x20000000,
            values_in=0, values_out=0, value_bytes=0, descending=False, config=None,
            replay=True, request=None):
    """Run `plugin` as the API does (through launchplan unless replay=False);
    returns what was issued and the state."""
    ISSUED.clear()
    state = StubState(base)
    job = Job(plugin, state, dtype="uint32", n=n, keys_in=keys_in, keys_out=keys_out,
              values_in=values_in, values_out=values_out, value_bytes=value_bytes,
              descending=descending, config=config, request=request)
    try:
        launchplan.run(plugin, job) if replay else plugin.run(job)
    finally:
        job.finish()
    return list(ISSUED), state


def test_replay_issues_what_run_would_with_the_new_addresses():
    plugin = FakeSort()
    first, _ = run_job(plugin)
    assert plugin.runs == 1
    moved = dict(base=0x900000, keys_in=0x30000000, keys_out=0x40000000)
    replayed, state = run_job(plugin, **moved)
    assert plugin.runs == 1  # replayed: run() did not run
    direct, _ = run_job(FakeSort(), replay=False, **moved)
    assert replayed == direct and replayed != first
    assert all(buf.freed for buf in state.buffers)  # finish() frees replayed temporaries

    memset, scatter, finish, copy = replayed
    temp = state.buffers[0].ptr
    assert memset == ("memset32", temp, 0, 250)
    assert scatter[4] == (0x30000000, 0x40000000 + 8, temp + 1024, 1000, 0, temp + 40, 0, 0, 7)
    assert scatter[2:4] == ((8, 1), (128, 1, 1)) and scatter[5] == 1024
    assert finish[4] == (state.buffers[1].ptr, 0, 1000)
    assert copy == ("copy", 0x40000000, temp + 1024, 4000)


def test_values_slots_are_relocated():
    plugin = FakeSort()
    shape = dict(value_bytes=8, n=1000)
    run_job(plugin, values_in=0x50000000, values_out=0x60000000, **shape)
    moved = dict(values_in=0x70000000 + 16, values_out=0x80000000, **shape)
    replayed, _ = run_job(plugin, **moved)
    assert plugin.runs == 1
    assert replayed == run_job(FakeSort(), replay=False, **moved)[0]
    assert replayed[1][4][6:8] == (0x70000000 + 16, 0x80000000)


def test_pointer_outside_every_buffer_disables_replay_for_the_shape():
    plugin = FakeSort(foreign=True)
    run_job(plugin)
    (plan,) = launchplan._plans.values()
    assert isinstance(plan, launchplan.Unreplayable) and "no buffer" in plan.reason
    again, _ = run_job(plugin, keys_in=0x30000000)
    assert plugin.runs == 2  # run() as usual, and not recorded again
    assert list(launchplan._plans.values()) == [plan]
    assert again[2][4][1] == FOREIGN_BUFFER


def test_overlapping_caller_buffers_are_not_recorded():
    plugin = FakeSort()
    run_job(plugin, value_bytes=4, values_in=0x10000000 + 400, values_out=0x60000000)
    assert launchplan._plans == {}  # keys_in and values_in overlap: which slot is a pointer in?
    run_job(plugin, value_bytes=4, values_in=0x50000000, values_out=0x60000000)
    run_job(plugin, value_bytes=4, values_in=0x51000000, values_out=0x60000000)
    assert plugin.runs == 2


PAIRS = dict(value_bytes=8, values_in=0x50000000, values_out=0x60000000)


@pytest.mark.parametrize("first, second", [
    ({}, dict(n=2000)),
    ({}, dict(config={"block_size": 64})),
    ({}, dict(descending=True)),
    ({}, PAIRS),
    (PAIRS, dict(PAIRS, values_in=0)),  # argsort by a plugin that makes its indices
])
def test_each_shape_gets_its_own_plan(first, second):
    plugin = FakeSort()
    run_job(plugin, **first)
    run_job(plugin, **first)
    assert plugin.runs == 1
    run_job(plugin, **second)
    assert plugin.runs == 2 and len(launchplan._plans) == 2
    replayed, _ = run_job(plugin, **second)
    assert plugin.runs == 2
    assert replayed == run_job(FakeSort(), replay=False, **second)[0]


def test_plugins_that_are_not_replayable_never_record():
    class Plain(FakeSort):
        replayable = False

    plugin = Plain()
    for _ in range(2):
        run_job(plugin)
    assert plugin.runs == 2 and launchplan._plans == {}


def test_clearing_context_caches_drops_plans():
    run_job(FakeSort())
    assert launchplan._plans
    caches.clear_all()
    assert launchplan._plans == {}


def test_replayed_launch_errors_read_as_in_a_plain_run(monkeypatch):
    plugin = FakeSort()
    run_job(plugin)
    monkeypatch.setattr(FakeSort.scatter.function, "fail", True)
    with pytest.raises(KernelError) as direct:
        run_job(FakeSort(), replay=False)
    with pytest.raises(KernelError) as replayed:
        run_job(plugin)
    assert plugin.runs == 1
    assert str(replayed.value) == str(direct.value)
    assert "'fake_replay'" in str(direct.value) and "'scatter'" in str(direct.value)
    assert "grid=(8, 1) block=(128, 1, 1) shared=1024" in str(direct.value)


def test_replay_syncs_after_every_launch_when_asked(monkeypatch):
    monkeypatch.setattr(template, "SYNC_EVERY_LAUNCH", True)
    plugin = FakeSort()
    run_job(plugin)
    _, direct = run_job(FakeSort(), replay=False)
    _, replayed = run_job(plugin)
    assert plugin.runs == 1
    assert replayed.stream.syncs == direct.stream.syncs == 3  # two launches, then finish()


def test_a_new_run_must_say_replayable_again():
    class Subclass(FakeSort):  # the same run(): still replayable
        pass

    class NewRun(FakeSort):
        def run(self, job):
            super().run(job)

    class NewRunSaysSo(NewRun):  # vouches for the run() it inherits
        replayable = True

    assert launchplan.replayable(Subclass) and launchplan.replayable(NewRunSaysSo)
    assert not launchplan.replayable(NewRun)
    plugin = NewRun()
    run_job(plugin)
    run_job(plugin)
    assert plugin.runs == 2 and launchplan._plans == {}


def test_a_patched_run_records_its_own_plan(monkeypatch):
    plugin = FakeSort()
    run_job(plugin)

    def run_then_fail(self, job):
        raise MemoryError("simulated")

    monkeypatch.setattr(FakeSort, "run", run_then_fail)
    with pytest.raises(MemoryError):
        run_job(plugin)


def test_replays_at_the_same_or_other_addresses_match_plain_runs():
    plugin = FakeSort()
    run_job(plugin)
    for addresses in (dict(), dict(), dict(base=0x900000), dict(keys_out=0x40000000), dict()):
        replayed, _ = run_job(plugin, **addresses)
        assert replayed == run_job(FakeSort(), replay=False, **addresses)[0]
    assert plugin.runs == 1


def test_a_launch_with_the_wrong_number_of_arguments_names_plugin_kernel_and_config():
    class Miscounted(FakeSort):
        replayable = True

        def run(self, job):
            job.launch(self.finish, 0, 64, job.keys_out, job.keys_in)  # finish takes PPq

    with pytest.raises(KernelError) as exc:
        run_job(Miscounted())
    text = str(exc.value)
    assert "plugin 'fake_replay'" in text and "kernel 'finish'" in text
    assert "block_size=128" in text and "2 arguments" in text and "takes 3 ('PPq')" in text
    assert ISSUED == [] and launchplan._plans == {}


def test_shared_memory_past_the_device_limit_is_opted_into_once():
    class Attributes:
        MAX_DYNAMIC_SHARED_SIZE_BYTES = "max dynamic shared"

    class Function(StubFunction):
        def __init__(self, name, signature):
            super().__init__(name, signature)
            self.attributes = []

        def set_attribute(self, attribute, value):
            self.attributes.append((attribute, value))

    class Big(FakeSort):
        kernel = Kernel(Function("big", "PPq"), "big", "stub.cu", "PPq", static_shared=1024)

        def run(self, job):
            for shared in (40 * 1024, 60 * 1024, 50 * 1024, 100 * 1024):
                job.launch(self.kernel, 1, 64, job.keys_in, job.keys_out, job.n, shared=shared)

    StubCuda.function_attribute = Attributes
    try:
        run_job(Big(), replay=False)
    finally:
        del StubCuda.function_attribute
    # 47 KiB are allowed as is (48 KiB less the static 1 KiB); then opt in as needed
    assert Big.kernel.function.attributes == [("max dynamic shared", 60 * 1024),
                                              ("max dynamic shared", 100 * 1024)]


class FakeRows(FakeSort):
    """A replayable segmented plugin whose launch depends on the rows."""

    name = "fake_rows"
    segmented = True
    replayable = True

    def run(self, job):
        self.runs += 1
        rows = job.request.segments
        job.launch(self.finish, rows.count, 128, job.keys_in, job.keys_out, rows.row_len)


def test_rows_of_one_size_get_a_plan_each_and_ragged_segments_none():
    from cudasortkit.sdk.plugin import Request
    from cudasortkit.sdk.segments import Segments

    def rows(count, length):
        return Request("sort", "uint32", count * length, segments=Segments.rows(count, length))

    plugin = FakeRows()
    for count, length in ((1000, 1000), (500, 2000), (1000, 1000), (500, 2000)):
        issued, _ = run_job(plugin, n=count * length, request=rows(count, length))
        assert issued[0][2] == (count, 1) and issued[0][4][2] == length
    assert plugin.runs == 2  # the repeats replayed their own shape's plan
    ragged = Request("sort", "uint32", 10, segments=Segments.ragged(
        np.array([0, 3, 10]), np.array([0, 3, 10]), np.array([3, 7])))
    for _ in range(2):
        run_job(plugin, n=10, request=ragged)
    assert plugin.runs == 4 and len(launchplan._plans) == 2  # never recorded


class StubGraphDriver(FakeLib):
    """libcuda's graph calls: captures and graph launches go to ISSUED
    (error names and strings: FakeLib's)."""

    def __init__(self, fail_instantiate=False):
        super().__init__()
        self.fail_instantiate, self.made = fail_instantiate, 0

    def cuStreamBeginCapture_v2(self, stream, mode):
        ISSUED.append(("begin capture", stream))
        return 0

    def cuStreamEndCapture(self, stream, graph):
        graph._obj.value = 0x6000
        ISSUED.append(("end capture", stream))
        return 0

    def cuGraphInstantiateWithFlags(self, instance, graph, flags):
        if self.fail_instantiate:
            return 999
        self.made += 1
        instance._obj.value = 0x7000 + self.made
        return 0

    def cuGraphLaunch(self, instance, stream):
        ISSUED.append(("graph", instance, stream))
        return 0

    def cuGraphDestroy(self, graph):
        return 0

    def cuGraphExecDestroy(self, instance):
        return 0


class StubCaptureStream(StubStream):
    handle = 0xCAB


@pytest.fixture
def graph_driver(monkeypatch):
    driver = StubGraphDriver()
    monkeypatch.setattr(libcuda, "_driver", libcuda.Driver(driver))
    monkeypatch.setattr(StubCuda, "Stream", lambda flags=0: StubCaptureStream(), raising=False)
    monkeypatch.setattr(StubStream, "handle", 0x5, raising=False)
    graphs._capture_streams.clear()
    yield driver
    graphs._capture_streams.clear()


def test_the_same_buffers_replayed_again_are_captured_once_then_launched_as_a_graph(graph_driver):
    plugin = FakeSort()
    recorded, _ = run_job(plugin)
    replayed, _ = run_job(plugin)  # addresses seen once: issued one by one
    assert replayed == recorded
    captured, _ = run_job(plugin)
    assert captured[0] == ("begin capture", 0xCAB) and captured[-2] == ("end capture", 0xCAB)
    assert captured[1:-2] == recorded and captured[-1] == ("graph", 0x7001, 0x5)
    for _ in range(2):
        assert run_job(plugin)[0] == [("graph", 0x7001, 0x5)]
    other, _ = run_job(plugin, keys_out=0x40000000)  # new addresses: one by one again
    assert other == run_job(FakeSort(), replay=False, keys_out=0x40000000)[0]
    assert plugin.runs == 1 and launchplan.graphs_held() == 1


def test_a_failed_capture_turns_graphs_off_and_issues_one_by_one(graph_driver):
    graph_driver.fail_instantiate = True
    plugin = FakeSort()
    recorded, _ = run_job(plugin)
    run_job(plugin)
    failed, _ = run_job(plugin)
    assert failed[-len(recorded):] == recorded and ("graph", 0x7001, 0x5) not in failed
    assert run_job(plugin)[0] == recorded
    assert launchplan.graphs_held() == 0


def test_no_graphs_while_every_launch_waits(graph_driver, monkeypatch):
    monkeypatch.setattr(template, "SYNC_EVERY_LAUNCH", True)
    plugin = FakeSort()
    recorded, _ = run_job(plugin)
    for _ in range(3):
        assert run_job(plugin)[0] == recorded
    assert launchplan.graphs_held() == 0


def test_a_plan_whose_buffers_keep_changing_stops_capturing_until_its_graphs_pay(graph_driver):
    """Past CAPTURES_BEFORE_CHECK captures, one more for every
    LAUNCHES_PER_CAPTURE graph launches: new buffers every call stop being
    captured after a few, and launches of the graphs held let capturing
    go on (it never turns off for good)."""
    plugin = FakeSort()
    recorded, _ = run_job(plugin)

    def new_buffers(i):
        out = 0x40000000 + i * 0x1000000
        run_job(plugin, keys_out=out)
        issued, _ = run_job(plugin, keys_out=out)  # seen twice: captured if paid for
        return issued[0][0] == "begin capture"

    # each capture launches its graph once: c captures pay for c // 4 more
    captured = [new_buffers(i) for i in range(3 * graphs.CAPTURES_BEFORE_CHECK)]
    extra = graphs.CAPTURES_BEFORE_CHECK // (graphs.LAUNCHES_PER_CAPTURE - 1)
    assert sum(captured) == graphs.CAPTURES_BEFORE_CHECK + extra
    assert not any(captured[graphs.CAPTURES_BEFORE_CHECK + extra:])
    plan = launchplan.recorded(0, plugin, "uint32", 1000, 0, {"block_size": 128}, False,
                               has_values_in=False, has_values_out=False)
    assert plan.graphs.off is None
    last = 0x40000000 + (graphs.CAPTURES_BEFORE_CHECK + extra - 1) * 0x1000000
    for _ in range(graphs.LAUNCHES_PER_CAPTURE):  # a held graph launched again pays for one
        assert run_job(plugin, keys_out=last)[0][0][0] == "graph"
    assert new_buffers(100)
    assert not new_buffers(101)


def test_a_failing_graph_launch_names_plugin_and_config(graph_driver, monkeypatch):
    plugin = FakeSort()
    for _ in range(3):
        run_job(plugin)
    monkeypatch.setattr(graph_driver, "cuGraphLaunch", lambda instance, stream: 700)
    monkeypatch.setattr(libcuda, "_driver", libcuda.Driver(graph_driver))  # binds it anew
    with pytest.raises(KernelError) as exc:
        run_job(plugin)
    assert str(exc.value) == ("plugin 'fake_replay', keys uint32, config block_size=128: launching "
                              "the graph of its recorded operations failed: cuGraphLaunch failed "
                              "with CUDA error 700 (CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory "
                              "access was encountered)")


class FakeCalling(FakeSort):
    """Issues a launch, then a sort through the core (launch.run.run_job, as
    a selection plugin's job.sort_rows does) on two of its temporaries,
    then a launch again."""

    name = "fake_calling"
    replayable = True

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def run(self, job):
        from cudasortkit.launch.run import run_job as core_run_job
        from cudasortkit.sdk.plugin import RUN_ERRORS, Request

        self.runs += 1
        at = job.alloc_parts([("words", 4096), ("sorted", 4096)])
        job.launch(self.finish, 1, 32, job.keys_in, at["words"], job.n)
        request = Request.from_fields(kind="sort", dtype="uint32", n=1000, stable=True,
                                      descending=False, value_bytes=0, on_device=True,
                                      key_range=None, options={}, segments=None,
                                      range_probe=None)
        core_run_job(self.inner, self.inner.default_config(), request, job.state, 1000,
                     at["words"], at["sorted"], 0, 0, RUN_ERRORS, job.recorder)
        job.launch(self.finish, 1, 32, at["sorted"], job.keys_out, job.n)


def test_a_sort_through_the_core_joins_the_recorded_plan_and_its_graph(graph_driver):
    """The inner sort's work (its temporaries, memset, launches, copy) is
    recorded into the outer plan: a replay issues it with the new buffers'
    addresses and runs neither plugin; the same buffers again are one graph."""
    inner = FakeSort()
    plugin = FakeCalling(inner)
    first, _ = run_job(plugin)
    assert plugin.runs == inner.runs == 1
    moved = dict(base=0x900000, keys_in=0x30000000, keys_out=0x40000000)
    replayed, state = run_job(plugin, **moved)
    direct, _ = run_job(FakeCalling(FakeSort()), replay=False, **moved)
    assert replayed == direct and plugin.runs == inner.runs == 1
    assert [op[0] for op in replayed] == ["launch", "memset32", "launch", "launch", "copy",
                                          "launch"]
    assert all(buf.freed for buf in state.buffers)
    run_job(plugin, **moved)  # the same buffers again: captured as one graph
    assert run_job(plugin, **moved)[0] == [("graph", 0x7001, 0x5)]


class Unreplayable(FakeSort):
    name = "fake_unreplayable"
    replayable = False

    def run(self, job):
        FakeSort.run(self, job)


def test_a_sort_through_an_unreplayable_plugin_keeps_the_plan_from_being_kept():
    plugin = FakeCalling(Unreplayable())
    run_job(plugin)
    run_job(plugin)
    assert plugin.runs == 2


class OverlappingSort(FakeSort):
    """FakeSort whose kernels may overlap the grid before them (as if marked
    CSK_OVERLAPPED and loaded through the driver)."""

    name = "fake_overlap"
    scatter = Kernel(StubFunction("scatter", "PPPqQPPPi"), "scatter", "stub.cu",
                     signature="PPPqQPPPi", overlap_function=0xA1)
    finish = Kernel(StubFunction("finish", "PPq"), "finish", "stub.cu", signature="PPq",
                    overlap_function=0xA2)


@pytest.mark.parametrize("on", [True, False])
def test_a_graph_overlaps_only_a_launch_that_follows_a_launch(graph_driver, monkeypatch, on):
    """Captured into a graph, a launch right after another launch goes
    through libcuda.launch_overlapped (OVERLAP_IN_GRAPHS); the first launch
    (after a memset), the memset and the copy are issued as before, and so
    is everything outside a capture or with overlap off."""
    overlapped = []

    def launch_overlapped(function, grid, block, shared, stream, packed):
        overlapped.append((function, grid, block, stream))
        ISSUED.append(("overlapped", function))

    monkeypatch.setattr(libcuda, "launch_overlapped", launch_overlapped)
    monkeypatch.setattr(launchplan, "OVERLAP_IN_GRAPHS", on)
    plugin = OverlappingSort()
    recorded, _ = run_job(plugin)
    assert run_job(plugin)[0] == recorded and overlapped == []  # replayed one by one
    captured, _ = run_job(plugin)
    assert captured[0] == ("begin capture", 0xCAB)
    kinds = [op[0] for op in captured[1:-2]]
    assert kinds == (["memset32", "launch", "overlapped", "copy"] if on
                     else ["memset32", "launch", "launch", "copy"])
    assert overlapped == ([(0xA2, (2, 3), (128, 1, 1), 0xCAB)] if on else [])


def test_a_key_range_promise_is_part_of_the_shape():
    """A plan recorded without a key_range never serves a call that promises
    one (a plugin that checks promises must see it), nor the reverse; a run
    that refuses its recording (counting waiting on its check) leaves the
    shape without a promise replayable."""
    from cudasortkit.sdk.plugin import Request

    class Refusing(FakeSort):
        replayable = True

        def run(self, job):
            promised = job.request is not None and job.request.key_range is not None
            if promised and job.recorder is not None:
                job.recorder.refuse("waits for its promise's check")
            super().run(job)

    plugin = Refusing()
    promise = Request("sort", "uint32", 1000, key_range=(0, 10))
    plain = Request("sort", "uint32", 1000)
    for request in (plain, plain, promise, promise, plain):
        run_job(plugin, request=request)
    assert plugin.runs == 3  # plain: recorded, replayed twice; the promise: run each time
    kinds = {type(p).__name__ for p in launchplan._plans.values()}
    assert kinds == {"LaunchPlan", "Unreplayable"}
