"""cudasortkit.plan without a GPU: argument checks, mismatched calls, and the
choice between replaying a prepared call and the general path (stubs)."""
import numpy as np
import pytest

import cudasortkit as csk
from cudasortkit.calls.sort_plan import Plan
from cudasortkit.launch.plans import LaunchPlan as RealLaunchPlan
from cudasortkit.calls import sort_kept as kept
from helpers import joiner_standin


class Device:
    """A device array by __cuda_array_interface__ only (never dereferenced)."""

    def __init__(self, shape, typestr="<f4", strides=None, ptr=0x1000):
        self.__cuda_array_interface__ = {"shape": tuple(shape), "typestr": typestr,
                                         "data": (ptr, False), "version": 3, "strides": strides}


def test_plan_is_public():
    assert "plan" in csk.__all__ and csk.plan is not None


def test_host_arrays_are_refused_naming_device_kinds():
    with pytest.raises(TypeError, match="CuPy arrays, CUDA torch.Tensors"):
        csk.plan(like=np.zeros(4, np.float32))


@pytest.mark.parametrize("kw, error, match", [
    ({"op": "merge"}, ValueError, "op must be one of"),
    ({"op": "sort_by_key"}, ValueError, "values_like"),
    ({"values_like": Device((8,))}, ValueError, "values_like= is for op='sort_by_key'"),
    ({"descending": 1}, TypeError, "descending"),
    ({"axis": 1}, Exception, "out of bounds"),
    ({"op": "argsort", "index_dtype": np.int16}, TypeError, "index_dtype"),
    ({"op": "sort_by_key", "values_like": Device((8,)), "stable": False}, ValueError, "stable"),
    ({"op": "sort_by_key", "values_like": Device((9,))}, ValueError, "shape"),
    ({"algorithm": "nosuch"}, ValueError, "nosuch"),
])
def test_arguments_are_checked_when_the_plan_is_made(kw, error, match):
    with pytest.raises(error, match=match):
        csk.plan(like=Device((8,)), **kw)


def test_non_contiguous_like_is_refused():
    with pytest.raises(ValueError, match="C-contiguous"):
        csk.plan(like=Device((8,), strides=(8,)))


@pytest.mark.parametrize("bad, error, match", [
    (Device((7,)), ValueError, "shape \\(8,\\), got \\(7,\\)"),
    (Device((8,), "<u4"), TypeError, "dtype float32, got uint32"),
    (Device((8,), strides=(8,)), ValueError, "C-contiguous"),
    (np.zeros(8, np.float32), TypeError, "numpy.ndarray"),
])
def test_mismatched_inputs_are_refused(bad, error, match):
    p = csk.plan(like=Device((8,)))
    with pytest.raises(error, match=match):
        p(bad)


def test_mismatched_out_and_values_are_refused():
    p = csk.plan(like=Device((8,)), op="argsort")
    with pytest.raises(TypeError, match="dtype int64, got float32"):
        p(Device((8,)), out=Device((8,), ptr=0x9000))
    q = csk.plan(like=Device((8,)), op="sort_by_key", values_like=Device((8,), "<i8"))
    with pytest.raises(TypeError, match="dtype int64, got int32"):
        q(Device((8,)), Device((8,), "<i4"))
    with pytest.raises(TypeError, match="p\\(keys, values\\)"):
        q(Device((8,)))
    with pytest.raises(TypeError, match="p\\(a\\)"):
        p(Device((8,)), Device((8,)))


def test_explain_and_repr_say_why_the_general_path_runs():
    p = csk.plan(like=Device((8,)))
    assert "general path" in p.explain() and "replays cover CuPy and PyTorch" in repr(p)
    q = csk.plan(like=Device((8,)), op="sort_by_key", values_like=Device((8,), "<i4"))
    assert "replays cover CuPy and PyTorch" in q.explain()  # 1-D pairs replay, but not these
    r = csk.plan(like=Device((2, 4)), op="sort_by_key", values_like=Device((2, 4), "<i4"))
    assert "sort_by_key of N-D arrays runs the general path" in r.explain()


# ------------------------------------------------ replay or general path (stubs)
class Call:
    def __init__(self):
        self.calls, self.addresses = [], []

    def __call__(self, a, out=None, keys_in=None, out_at=None):
        self.calls.append((a, out))
        self.addresses.append((keys_in, out_at))  # as the plan read them, where it did
        return ("keys", "indices")


class Selector:
    def explain(self, request, algorithm):
        return Decision()


class Prepared:
    """What a plan uses of PreparedCalls: find and holds (`holding` says
    whether the prepared call still stands), run (the general path, which
    records its arguments in `ran`) and the selector."""

    def __init__(self):
        self.call, self.holding, self.found, self.ran = Call(), True, 0, []
        self.selector = Selector()

    def run(self, kind, keys, values, descending, stable, algorithm, out=None, values_out=None,
            **kw):
        self.ran.append({"kind": kind, "out": out, "descending": descending, "stable": stable,
                         "algorithm": algorithm, **kw})
        return "general", None

    def find(self, kind, a, descending, stable, algorithm, index_dtype):
        self.found += 1
        return self.call

    def find_pairs(self, keys, values, descending, algorithm):
        self.found += 1
        return self.call

    def holds(self, call, a, checked=False):
        return self.holding


class Decision:
    name = "radix"

    def __str__(self):
        return "auto -> radix"


def _replaying_plan(monkeypatch):
    """A plan of a 1-D array that would replay (its why_general forced None:
    stub arrays are no CuPy or torch arrays)."""
    monkeypatch.setattr(Plan, "_why_general", lambda self, last, shape, dtype: None)
    prepared = Prepared()
    p = Plan(Device((8,)), "sort", axis=-1, descending=False, stable=None, algorithm="auto",
             index_dtype=np.int64, values_like=None, prepared=prepared)
    return p, prepared


def test_first_call_takes_the_general_path_then_replays(monkeypatch):
    p, prepared = _replaying_plan(monkeypatch)
    ran = prepared.ran
    assert "from its second call" in p.explain()
    a = Device((8,))
    assert p(a) == "general"
    assert ran == [{"kind": "sort", "out": None, "descending": False, "stable": False,
                    "algorithm": "auto", "caller": a, "index_dtype": np.dtype(np.int64)}]
    assert prepared.found == 1
    assert p(a) == "keys" and p(a) == "keys"
    assert len(ran) == 1 and prepared.call.calls == [(a, None), (a, None)]
    assert "replays one prepared launch plan" in repr(p)
    prepared.holding = False  # the decision moved: the general path again, and prepare anew
    assert p(a) == "general" and len(ran) == 2 and prepared.found == 2


class PairCall(Call):
    def __call__(self, a, out=None, keys_in=None, out_at=None, values=None):
        self.calls.append((a, values))
        return ("keys", "values")


def test_a_sort_by_key_plan_replays_from_its_second_call(monkeypatch):
    """A 1-D sort_by_key plan: the general path once (the keys as `caller`,
    so that it prepares the call), then the prepared pair call with the
    values; with out= the general path; a decision that moved: the general
    path, which prepares anew."""
    monkeypatch.setattr(Plan, "_why_general", lambda self, last, shape, dtype: None)
    prepared = Prepared()
    prepared.call = PairCall()
    p = Plan(Device((8,)), "sort_by_key", axis=-1, descending=False, stable=None,
             algorithm="auto", index_dtype=np.int64, values_like=Device((8,), "<i8"),
             prepared=prepared)
    a, v = Device((8,)), Device((8,), "<i8", ptr=0x9000)
    assert p(a, v) == ("general", None)
    assert prepared.ran[-1]["caller"] is a and prepared.found == 1
    assert p(a, v) == ("keys", "values") and prepared.call.calls == [(a, v)]
    with pytest.raises(TypeError, match="p\\(keys, values\\)"):
        p(a)  # never the keys-only replay
    k_out, v_out = Device((8,), ptr=0xa000), Device((8,), "<i8", ptr=0xb000)
    assert p(a, v, out=k_out, values_out=v_out) == ("general", None) and len(prepared.ran) == 2
    prepared.holding = False
    assert p(a, v) == ("general", None) and prepared.found == 2 and len(prepared.ran) == 3


def test_out_apart_from_the_input_is_replayed_into_and_in_place_takes_the_general_path(
        monkeypatch):
    p, prepared = _replaying_plan(monkeypatch)
    ran = prepared.ran
    a, b = Device((8,)), Device((8,), ptr=0x9000)
    p._call = prepared.call
    assert p(a, out=b) == "keys" and prepared.call.calls == [(a, b)]
    assert p(a, out=a) == "general" and ran[-1]["out"] is a  # in place: the general path's rule


class _CupyLike:
    """Enough of a CuPy array for a plan (module "cupy"); counts reads of
    its __cuda_array_interface__ (CuPy builds that dict on each read)."""

    reads = flag_reads = 0

    def __init__(self, ptr, n=8, dtype="float32"):
        self.shape, self.dtype, self.size = (n,), np.dtype(dtype), n
        self.itemsize = self.dtype.itemsize
        self.strides = (self.itemsize,)
        self.data = type("Mem", (), {"ptr": ptr, "device_id": 0})()
        self._flags = type("Flags", (), {"c_contiguous": True})()

    @property
    def flags(self):
        _CupyLike.flag_reads += 1
        return self._flags

    def reshape(self, *shape):
        return self

    def __setitem__(self, key, value):  # the general path's copy into out
        pass

    @property
    def __cuda_array_interface__(self):
        _CupyLike.reads += 1
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.data.ptr, False),
                "version": 3, "strides": None}


_CupyLike.__module__ = "cupy"


def test_out_of_cupy_arrays_is_told_apart_by_address_without_the_array_interface(monkeypatch):
    """A replayed p(a, out=b) of CuPy arrays compares two addresses (both are
    C-contiguous of the plan's shape), reads no __cuda_array_interface__
    (CuPy builds it per read: microseconds a call), and tells the prepared
    calls the input's signature is checked."""
    import sys
    import types

    fake = types.ModuleType("cupy")
    fake.ascontiguousarray = lambda a: a
    monkeypatch.setitem(sys.modules, "cupy", fake)
    monkeypatch.setattr(Plan, "_why_general", lambda self, last, shape, dtype: None)
    prepared = Prepared()
    checked = []
    prepared.holds = lambda call, a, **kw: checked.append(kw) or True
    a = _CupyLike(0x1000)
    p = Plan(a, "sort", axis=-1, descending=False, stable=None, algorithm="auto",
             index_dtype=np.int64, values_like=None, prepared=prepared)
    p._call = prepared.call
    before = _CupyLike.reads
    apart = _CupyLike(0x1000 + 8 * 4)  # right after a's 8 float32 keys
    assert p(a, out=apart) == "keys" and prepared.call.calls == [(a, apart)]
    assert prepared.call.addresses == [(0x1000, 0x1000 + 8 * 4)]  # read once, handed down
    assert _CupyLike.reads == before and checked == [{"checked": True}]
    assert p(a, out=_CupyLike(0x1000 + 4)) == "general"  # overlaps a: the general path
    q = Plan(a, "argsort", axis=-1, descending=False, stable=None, algorithm="auto",
             index_dtype=np.int64, values_like=None, prepared=prepared)
    q._call = prepared.call
    indices = _CupyLike(0x1000 - 8 * 8, dtype="int64")  # 8 int64 indices end where a starts
    assert q(a, out=indices) == "indices"
    ran = len(prepared.ran)
    q(a, out=_CupyLike(0x1000 - 8 * 8 + 8, dtype="int64"))  # its last index overlaps a
    assert len(prepared.ran) == ran + 1


def test_a_cupy_plan_checks_c_strides_before_flags(monkeypatch):
    """A CuPy plan's call reads the arrays' strides, not a.flags (CuPy builds
    that object per read); an array whose strides are not the C ones but
    whose flags say C-contiguous (a length-1 axis, say) is still taken, and
    one that is not C-contiguous is refused."""
    import sys
    import types

    fake = types.ModuleType("cupy")
    fake.ascontiguousarray = lambda a: a
    monkeypatch.setitem(sys.modules, "cupy", fake)
    monkeypatch.setattr(Plan, "_why_general", lambda self, last, shape, dtype: None)
    prepared = Prepared()
    prepared.holds = lambda call, a, **kw: True
    a = _CupyLike(0x1000)
    p = Plan(a, "sort", axis=-1, descending=False, stable=None, algorithm="auto",
             index_dtype=np.int64, values_like=None, prepared=prepared)
    p._call = prepared.call
    before = _CupyLike.flag_reads
    assert p(a, out=_CupyLike(0x2000)) == "keys"
    assert _CupyLike.flag_reads == before
    odd = _CupyLike(0x3000)
    odd.strides = (16,)  # flags still say C-contiguous: taken
    assert p(odd, out=_CupyLike(0x2000)) == "keys" and _CupyLike.flag_reads == before + 1
    odd._flags = type("Flags", (), {"c_contiguous": False})()
    with pytest.raises(ValueError, match="C-contiguous"):
        p(odd)


def test_a_rebound_job_is_the_job_made_for_those_buffers():
    """A prepared call's per-call Job (Job.rebound) has exactly the fields
    Job() gives for the call's buffers, and temporaries of its own."""
    import types

    from cudasortkit.sdk import registry
    from cudasortkit.sdk.job import Job

    plugin = registry.plugins()["onesweep"]
    state = types.SimpleNamespace(stream=object())
    config = plugin.default_config("uint32", 4)
    kw = dict(dtype="uint32", n=1000, value_bytes=4, descending=True, config=config)
    template = Job(plugin, state, keys_in=0, keys_out=0, **kw)
    job = template.rebound(16, 32, 48, 64)
    assert vars(job).keys() == vars(template).keys()
    fresh = Job(plugin, state, keys_in=16, keys_out=32, values_in=48, values_out=64, **kw)
    assert {k: v for k, v in vars(job).items() if k != "_temporaries"} == \
        {k: v for k, v in vars(fresh).items() if k != "_temporaries"}
    assert job._temporaries == [] and job._temporaries is not template._temporaries


class _Pool:
    """A device state's stand-in for prepared calls: counts the blocks its
    pool hands out and takes back."""

    ordinal = 0
    stream = None
    total_memory = 80 << 30

    def __init__(self):
        import types

        self.taken = self.freed = 0
        self.joiner = joiner_standin()

    def activate(self):
        return self

    def free_unused(self):
        from cudasortkit.gpu import caches

        self.freed_unused = getattr(self, "freed_unused", 0) + 1
        caches.release_kept()

    def allocating(self, make, *args):
        from cudasortkit.gpu.device import DeviceState

        return DeviceState.allocating(self, make, *args)

    def allocate(self, nbytes, who=None):
        pool = self
        self.taken += 1

        class Buf(int):
            def free(self):
                pool.freed += 1

        return Buf(0x100000 * self.taken)


class _LegacyCaller:
    """The adapter of a caller on the legacy default stream."""

    @staticmethod
    def stream(a):
        from cudasortkit.gpu.streams import LEGACY

        return LEGACY

    pointer = staticmethod(lambda a: 0x42)
    maker = staticmethod(lambda shape, dtype: lambda a: np.empty(shape, dtype))


class _Graphs:
    """A launch plan's PlanGraphs: records each launch (its buffers and
    stream) and has a graph for the buffers in `captured` (None: any)."""

    def __init__(self, captured=None):
        self.captured, self.launched, self.streams = captured, [], []

    def launch(self, bases, job, stream=None):
        self.launched.append(bases)
        self.streams.append(stream)
        return self.captured is None or bases in self.captured


class _PlanWithoutGraph:
    """A launch plan of these temporaries with no graph yet: replay() takes
    the temporaries from the job's pool when the call keeps none."""

    def __init__(self, temporaries):
        self.temporaries, self.seen = temporaries, []
        self.graphs = _Graphs(captured=set())

    run_on = RealLaunchPlan.run_on  # the repeated call's path, on this fake's graphs and replay

    def replay(self, job, temporaries=None):
        if temporaries is None:
            temporaries = tuple(int(job.alloc(nb)) for nb in self.temporaries)
        self.seen.append(temporaries)


def _prepared_sort(state, plan):
    from cudasortkit.calls import sort_prepared as prep
    from cudasortkit.dispatch.select import _Memo
    from cudasortkit.sdk import registry

    plugin = registry.plugins()["onesweep"]
    return prep.PreparedCall(_LegacyCaller, state, plugin, plugin.default_config("float32"), plan,
                             "sort", np.dtype("float32"), "float32", (8,), 8, 0, False,
                             _Memo(plugin, None), ())


def test_a_prepared_call_keeps_small_temporaries_and_takes_big_ones_each_call():
    """Small temporaries are taken from the pool once and kept (the same
    addresses every call: no pool traffic, one graph); bigger ones than
    OWN_TEMPORARIES_SHARE of the device's memory come from the pool on each
    call and go back."""
    from cudasortkit.gpu import caches

    caches.clear_all()  # no call keeps anything
    state = _Pool()
    plan = _PlanWithoutGraph((4096, 256))
    small = _prepared_sort(state, plan)
    for _ in range(3):
        small(np.zeros(8, np.float32))
    assert plan.seen[0] == plan.seen[1] == plan.seen[2] and len(plan.seen[0]) == 2
    assert (state.taken, state.freed) == (2, 0)  # taken once, kept
    big = _prepared_sort(state, _PlanWithoutGraph((int(state.total_memory * kept.OWN_TEMPORARIES_SHARE) + 1,)))
    big(np.zeros(8, np.float32))
    big(np.zeros(8, np.float32))
    assert (state.taken, state.freed) == (4, 2)  # one a call, back to the pool after it
    caches.clear_all()  # (before a context goes, at exit): kept temporaries go back
    assert (state.taken, state.freed) == (4, 4) and small.kept.temporaries is None
    small(np.zeros(8, np.float32))  # and the next call takes a set anew
    assert (state.taken, state.freed) == (6, 4)


def test_a_prepared_call_with_a_graph_launches_it_without_a_job_of_its_own(monkeypatch):
    """Owned temporaries and buffers a replay had before: the call launches
    their graph (PlanGraphs.launch) and makes no Job; buffers without
    a graph, or temporaries taken per call, go through replay() with one."""
    import types

    from cudasortkit.calls import sort_prepared as prep
    from cudasortkit.dispatch.select import _Memo
    from cudasortkit.gpu.streams import LEGACY
    from cudasortkit.sdk import registry
    from cudasortkit.sdk.job import Job

    class Buf(int):
        def free(self):
            pass

    class State:
        ordinal = 0
        stream = None
        total_memory = 80 << 30
        joiner = joiner_standin()

        def activate(self):
            return self

        def allocate(self, nbytes, who=None):
            return Buf(0x500000)

        def allocating(self, make, *args):
            return make(*args)

    class Adapter:
        stream = staticmethod(lambda a: LEGACY)
        pointer = staticmethod(lambda a: 0x42)
        maker = staticmethod(lambda shape, dtype: lambda a: np.empty(shape, dtype))

    class LaunchPlan:
        temporaries = (256,)
        graphs = _Graphs(captured={(0x42, 0x42, 0, 0, 0x500000)})  # the buffers of its graph
        replayed = []

        run_on = RealLaunchPlan.run_on

        def replay(self, job, temporaries=None):
            self.replayed.append((job.keys_in, temporaries))

    rebound = []
    real = Job.rebound
    monkeypatch.setattr(Job, "rebound", lambda self, *a: rebound.append(a) or real(self, *a))
    plugin = registry.plugins()["onesweep"]
    plan = LaunchPlan()
    call = prep.PreparedCall(Adapter, State(), plugin, plugin.default_config("float32"), plan, "sort",
                             np.dtype("float32"), "float32", (8,), 8, 0, False, _Memo(plugin, None), ())
    call(np.zeros(8, np.float32))
    assert plan.graphs.launched == [(0x42, 0x42, 0, 0, 0x500000)]
    assert plan.replayed == [] and rebound == []
    # The caller's stream is the legacy default stream: the graph goes there
    # itself (ordered with our blocking stream both ways), not into ours.
    assert plan.graphs.streams == [LEGACY]
    monkeypatch.setattr(Adapter, "pointer", staticmethod(lambda a: 0x43))   # buffers without a graph
    call(np.zeros(8, np.float32))
    assert plan.replayed == [(0x43, (0x500000,))] and len(rebound) == 1


def test_a_prepared_call_on_another_stream_launches_its_graph_on_ours_joined_to_it():
    """A caller's stream other than the legacy default one (a CuPy or torch
    stream) is joined to ours with events, and the graph runs on ours
    (stream=None), where every call's owned temporaries are ordered."""
    import types

    from cudasortkit.calls import sort_prepared as prep
    from cudasortkit.dispatch.select import _Memo
    from cudasortkit.sdk import registry

    class Buf(int):
        def free(self):
            pass

    joins = []

    class State:
        ordinal = 0
        stream = None
        total_memory = 80 << 30
        joiner = joiner_standin(wait_for=lambda h: joins.append(("wait", h)),
                                 signal=lambda h: joins.append(("signal", h)))

        def activate(self):
            return self

        def allocate(self, nbytes, who=None):
            return Buf(0x500000)

        def allocating(self, make, *args):
            return make(*args)

    class Adapter:
        stream = staticmethod(lambda a: 0x9000)
        pointer = staticmethod(lambda a: 0x42)
        maker = staticmethod(lambda shape, dtype: lambda a: np.empty(shape, dtype))

    class LaunchPlan:
        temporaries = (256,)
        graphs = _Graphs()

        run_on = RealLaunchPlan.run_on

    plugin = registry.plugins()["onesweep"]
    plan = LaunchPlan()
    call = prep.PreparedCall(Adapter, State(), plugin, plugin.default_config("float32"), plan, "sort",
                             np.dtype("float32"), "float32", (8,), 8, 0, False, _Memo(plugin, None), ())
    call(np.zeros(8, np.float32))
    assert plan.graphs.streams == [None] and joins == [("wait", (0x9000,)), ("signal", (0x9000,))]


def test_prepared_calls_keep_at_most_owned_total_share(monkeypatch):
    """Past OWNED_TOTAL_SHARE of the device's memory kept by all prepared
    calls, the call used least recently gives its temporaries back (and
    takes them again on its next call), so the calls in use keep theirs; a
    call whose temporaries alone exceed the share takes them from the pool
    on each call; a call dropped (its decision moved) keeps nothing any more."""
    import gc

    from cudasortkit.gpu import caches

    caches.clear_all()  # no call keeps anything
    state = _Pool()
    monkeypatch.setattr(kept, "OWNED_TOTAL_SHARE", 10000 / state.total_memory)
    calls = [_prepared_sort(state, _PlanWithoutGraph((4096,))) for _ in range(3)]
    for c in calls[:2]:
        for _ in range(2):
            c(np.zeros(8, np.float32))
    first = calls[0].plan.seen
    assert first[0] == first[1] and calls[0].kept.temporaries is not None   # kept: 8192 <= 10000
    assert calls[1].kept.temporaries is not None and (state.taken, state.freed) == (2, 0)
    calls[0](np.zeros(8, np.float32))  # calls[1] is now the least recently used
    calls[2](np.zeros(8, np.float32))  # 12288 > 10000: calls[1] gives its set back
    assert calls[1].kept.temporaries is None and calls[1].kept.owns
    assert calls[0].kept.temporaries is not None and calls[2].kept.temporaries is not None
    assert (state.taken, state.freed) == (3, 1)
    calls[1](np.zeros(8, np.float32))  # takes a set again; calls[0] gives its back
    assert calls[1].kept.temporaries is not None and calls[0].kept.temporaries is None
    assert (state.taken, state.freed) == (4, 2)
    huge = _prepared_sort(state, _PlanWithoutGraph((20000,)))
    huge(np.zeros(8, np.float32))  # alone past the share: from the pool, nobody gives back
    assert huge.kept.temporaries is None and not huge.kept.owns and calls[1].kept.temporaries is not None
    del calls[:], first
    gc.collect()
    again = _prepared_sort(state, _PlanWithoutGraph((4096,)))
    again(np.zeros(8, np.float32))
    assert again.kept.temporaries is not None
    caches.clear_all()


def test_prepared_calls_of_one_launch_plan_share_what_they_keep(monkeypatch):
    """Two prepared calls of one launch plan and result (auto's and one
    naming the plugin, say) keep one set of temporaries between them: with
    room in OWNED_TOTAL_SHARE for one set, alternating calls take it once
    and never from each other; a call of another plan keeps its own."""
    from cudasortkit.gpu import caches

    caches.clear_all()
    state = _Pool()
    monkeypatch.setattr(kept, "OWNED_TOTAL_SHARE", 5000 / state.total_memory)
    plan = _PlanWithoutGraph((4096,))
    auto, by_name = _prepared_sort(state, plan), _prepared_sort(state, plan)
    assert auto.kept is by_name.kept
    for _ in range(3):
        auto(np.zeros(8, np.float32))
        by_name(np.zeros(8, np.float32))
    assert len(set(plan.seen)) == 1 and (state.taken, state.freed) == (1, 0)
    other = _prepared_sort(state, _PlanWithoutGraph((4096,)))
    assert other.kept is not auto.kept
    other(np.zeros(8, np.float32))   # no room for two sets: the shared one goes back
    assert auto.kept.temporaries is None and (state.taken, state.freed) == (2, 1)
    caches.clear_all()


def test_holds_for_a_plan_reads_only_the_current_device():
    """PreparedCalls.holds(checked=True) (a plan checked the array's layout
    and device already) asks the adapter only for the current device."""
    import types

    from cudasortkit import api
    from cudasortkit.dispatch.select import _Memo

    class Adapter:
        device = 0

        @staticmethod
        def ready(a, ordinal, strides):
            raise AssertionError("the plan checked the array already")

        @classmethod
        def current(cls, ordinal):
            return cls.device == ordinal

    calls = api.prepared
    call = types.SimpleNamespace(stamps=calls.stamps(), adapter=Adapter,
                                 state=types.SimpleNamespace(ordinal=0), memo=_Memo(None, None))
    assert calls.holds(call, object(), checked=True)
    Adapter.device = 1  # another device current: the general path
    assert not calls.holds(call, object(), checked=True)


def test_a_plan_binds_a_decision_the_key_range_made():
    """A plain repeat call probes the keys' range again after PROBE_REUSE
    uses of a decision the range made; a plan's call (checked=True) bound
    its plugin, which serves any keys of the shape, and never spends them."""
    import types

    from cudasortkit import api
    from cudasortkit.dispatch.select import _Memo

    class Adapter:
        @staticmethod
        def ready(a, ordinal, strides):
            return True

        @staticmethod
        def current(ordinal):
            return True

    calls = api.prepared
    memo = _Memo(None, None, uses=2)
    call = types.SimpleNamespace(stamps=calls.stamps(), adapter=Adapter, strides=(4,),
                                 state=types.SimpleNamespace(ordinal=0), memo=memo)
    assert all(calls.holds(call, object(), checked=True) for _ in range(10))
    assert memo.uses == 2
    assert calls.holds(call, object()) and calls.holds(call, object())
    assert not calls.holds(call, object())  # the plain call's probe is due


def test_a_shape_decided_again_the_same_way_keeps_its_prepared_call(monkeypatch):
    """When the general path decides a prepared shape again (a decision the
    keys' range made is made again every PROBE_REUSE calls) and lands on the
    same plugin, config and launch plan, the prepared call stays: its kept
    temporaries, and so the graphs captured on them, serve on. Another
    config makes a new call."""
    import types

    from cudasortkit.calls import sort_prepared as prep
    from cudasortkit.dispatch.select import _Memo
    from cudasortkit.sdk import registry

    plugin = registry.plugins()["onesweep"]
    config = plugin.default_config("uint32")
    plan = _PlanWithoutGraph((256,))
    monkeypatch.setattr(prep.launchplan, "recorded", lambda *a, **kw: plan)
    monkeypatch.setitem(prep._adapters, "cupy", _LegacyCaller)  # no CuPy here
    memos = iter([_Memo(plugin, None, uses=64) for _ in range(3)])
    selector = types.SimpleNamespace(settled=lambda request, algorithm: next(memos),
                                     policy=types.SimpleNamespace(generation=0), epoch=0)
    calls = prep.PreparedCalls(selector, execute=None)
    state = _Pool()
    a = np.zeros(8, np.uint32)
    keys = types.SimpleNamespace(library="cupy", n=8, is_copy=False, dtype=a.dtype,
                                 interface_stream=None, current_stream=lambda: None)
    request = types.SimpleNamespace(segments=None, dtype="uint32", value_bytes=0, n=8,
                                     descending=False)
    note = lambda cfg: calls.note("sort", a, keys, False, False, "auto", request, plugin, cfg,
                                  state)
    key = ("sort", np.ndarray, a.dtype, a.shape, False, False, "auto", prep.INDEX_DTYPE)
    note(config)
    first = calls._calls[key]
    first.kept.temporaries = (0x100,)  # as after its first call
    note(dict(config))
    assert calls._calls[key] is first and first.kept.temporaries == (0x100,)
    assert first.memo.uses == 64 and first.stamps == calls.stamps()
    note(dict(config, warp_match=1 - config.get("warp_match", 0)))
    assert calls._calls[key] is not first


def test_kept_temporaries_go_back_to_the_pool_when_memory_runs_short():
    """Temporaries a prepared call keeps are memory held for speed: running
    out of memory (DeviceState.free_unused, and a failed allocation, call
    caches.release_kept) gives them back, and the call takes a set anew."""
    from cudasortkit.gpu import caches

    caches.clear_all()
    state = _Pool()
    call = _prepared_sort(state, _PlanWithoutGraph((4096, 256)))
    call(np.zeros(8, np.float32))
    assert call.kept.temporaries is not None and (state.taken, state.freed) == (2, 0)
    caches.release_kept()
    assert call.kept.temporaries is None and (state.taken, state.freed) == (2, 2)
    call(np.zeros(8, np.float32))
    assert call.kept.temporaries is not None and (state.taken, state.freed) == (4, 2)
    caches.clear_all()


class _StreamCaller:
    """An adapter whose caller's stream is `current[0]`, and whose arrays,
    made by `empty`, are counted (and fail with MemoryError while `fail`)."""

    def __init__(self):
        self.current, self.made, self.fail, self.fail_once = [0x9000], [], [], False

    def stream(self, a):
        return self.current[0]

    pointer = staticmethod(lambda a: 0x42)

    def maker(self, shape, dtype):
        return lambda a: self.empty(shape, dtype)

    def empty(self, shape, dtype):
        if self.fail:
            raise MemoryError("out of memory allocating 32 bytes")
        if self.fail_once:
            self.fail_once = False
            raise MemoryError("out of memory allocating 32 bytes (once)")
        self.made.append(np.empty(shape, dtype))
        return self.made[-1]


def _ahead_call(adapter, n=8, kind="sort"):
    import types

    from cudasortkit.calls import sort_prepared as prep
    from cudasortkit.dispatch.select import _Memo
    from cudasortkit.sdk import registry

    state = _Pool()
    state.joiner = joiner_standin()
    plugin = registry.plugins()["onesweep"]
    return prep.PreparedCall(adapter, state, plugin, plugin.default_config("float32"),
                             _PlanWithoutGraph((64,)), kind, np.dtype("float32"), "float32",
                             (n,), n, 0, False, _Memo(plugin, None), ())


def test_a_small_prepared_call_makes_its_next_result_ahead():
    """After launching its work, a call makes the next call's result array
    (AHEAD_RESULT_BYTES); the next call on the same stream returns it, and
    every call still returns an array of its own."""
    adapter = _StreamCaller()
    call = _ahead_call(adapter)
    first, _ = call(np.zeros(8, np.float32))
    assert len(adapter.made) == 2 and first is adapter.made[0]   # its own, then the next one's
    second, _ = call(np.zeros(8, np.float32))
    assert second is adapter.made[1] and len(adapter.made) == 3
    third, _ = call(np.zeros(8, np.float32))
    assert third is adapter.made[2] and len({id(first), id(second), id(third)}) == 3
    argsort = _ahead_call(adapter, kind="argsort")
    _, indices = argsort(np.zeros(8, np.float32))
    _, again = argsort(np.zeros(8, np.float32))
    assert again is adapter.made[-2] and again.dtype == np.int64 and again is not indices


def test_a_result_made_ahead_serves_only_its_stream_and_not_out_or_big_calls(monkeypatch):
    from cudasortkit.gpu import caches

    adapter = _StreamCaller()
    call = _ahead_call(adapter)
    call(np.zeros(8, np.float32))                      # made ahead for stream 0x9000
    adapter.current[0] = 0xA000
    other, _ = call(np.zeros(8, np.float32))
    assert other is adapter.made[2]                    # made now, on 0xA000: not 0x9000's
    out = np.empty(8, np.float32)
    got, _ = call(np.zeros(8, np.float32), out=out)
    assert got is out and len(adapter.made) == 4       # out=: nothing made ahead
    n = kept.AHEAD_RESULT_BYTES // 4 + 1
    # A big result is made ahead only with the temporaries (64 bytes) in
    # OWN_TEMPORARIES_SHARE; here the share holds the temporaries alone.
    monkeypatch.setattr(kept, "OWN_TEMPORARIES_SHARE", 4 * n / _Pool.total_memory)
    big = _ahead_call(adapter, n=n)
    big(np.zeros(n, np.float32))
    big(np.zeros(n, np.float32))
    assert len(adapter.made) == 6 and big.kept.ahead is None and big.kept.owns  # one each call, none ahead
    caches.clear_all()


def test_a_big_result_is_made_ahead_with_the_kept_temporaries_and_counts_with_them(monkeypatch):
    """A result past AHEAD_RESULT_BYTES is made ahead where the call keeps its
    temporaries and they and the result fit OWN_TEMPORARIES_SHARE; it counts
    towards OWNED_TOTAL_SHARE, and where that has room for the temporaries
    alone, the call keeps them and makes no result ahead."""
    from cudasortkit.gpu import caches

    caches.clear_all()
    adapter = _StreamCaller()
    n = kept.AHEAD_RESULT_BYTES // 4 + 1
    big = _ahead_call(adapter, n=n)
    first, _ = big(np.zeros(n, np.float32))
    assert len(adapter.made) == 2 and first is adapter.made[0] and big.kept.nbytes == 64 + 4 * n
    second, _ = big(np.zeros(n, np.float32))
    assert second is adapter.made[1] and len(adapter.made) == 3 and big.kept.temporaries is not None
    caches.clear_all()
    monkeypatch.setattr(kept, "OWNED_TOTAL_SHARE", (64 + 4 * n - 1) / _Pool.total_memory)
    tight = _ahead_call(adapter, n=n)
    made = len(adapter.made)
    tight(np.zeros(n, np.float32))
    tight(np.zeros(n, np.float32))
    assert tight.kept.temporaries is not None and tight.kept.ahead is None and tight.kept.nbytes == 64
    assert len(adapter.made) == made + 2   # one each call, none ahead
    caches.clear_all()


def test_results_made_ahead_go_when_memory_runs_short_and_out_of_memory_makes_none():
    from cudasortkit.gpu import caches

    adapter = _StreamCaller()
    call = _ahead_call(adapter)
    call(np.zeros(8, np.float32))
    assert len(call.kept.ahead) == 1
    caches.release_kept()
    assert call.kept.ahead == []
    got, _ = call(np.zeros(8, np.float32))             # made now, and the next one ahead
    assert got is adapter.made[2] and len(call.kept.ahead) == 1
    call.kept.ahead.clear()
    adapter.fail.append(1)
    with pytest.raises(MemoryError):
        call(np.zeros(8, np.float32))                  # its own result: the error stands
    adapter.fail.clear()
    call(np.zeros(8, np.float32))
    adapter.fail.append(1)
    got, _ = call(np.zeros(8, np.float32))             # made ahead before; the next one fails
    assert got is adapter.made[-1] and call.kept.ahead == []
    caches.clear_all()


class _Result:
    """A CuPy array's stand-in for taking results back: its memory pointer
    (`data`) holds its memory (`data.mem`), and it takes weak references."""

    __slots__ = ("shape", "dtype", "data", "__weakref__")

    def __init__(self, shape, dtype):
        import types

        self.shape, self.dtype = shape, np.dtype(dtype)
        self.data = types.SimpleNamespace(mem=object())


class _TakingBack(_StreamCaller):
    """An adapter that says who holds its arrays, as CuPy's does; `made`
    holds their ids (a reference, or a weak one, would keep any from being
    taken back)."""

    def __init__(self):
        from cudasortkit.calls import sort_prepared as prep

        super().__init__()
        self.holders = prep._CupyKeys.holders
        self.alone = kept.sole_holders(self.holders, lambda: _Result((1,), np.uint8))

    def empty(self, shape, dtype):
        array = _Result(shape, dtype)
        self.made.append(id(array))
        return array


def _sort_dropping(call, times):
    """The ids of the results of `times` calls whose caller drops each."""
    return [id(call(np.zeros(8, np.float32))[0]) for _ in range(times)]


def test_results_their_caller_dropped_are_taken_back_as_the_results_made_ahead():
    """Where the adapter says who holds its arrays, the result a call makes
    ahead for the next one is a result handed out before that nothing else
    holds: a loop dropping each result alternates between two arrays and
    makes none after its first call."""
    adapter = _TakingBack()
    call = _ahead_call(adapter)
    ids = _sort_dropping(call, 6)
    assert len(adapter.made) == 2                      # the first result, and one made ahead
    assert ids == adapter.made * 3 and len(call.kept.ahead) == 1
    argsort = _ahead_call(adapter, kind="argsort")
    ids = [id(argsort(np.zeros(8, np.float32))[1]) for _ in range(4)]
    assert ids[2:] == ids[:2] and len(adapter.made) == 4


def test_out_of_memory_reading_a_dropped_results_holders_takes_none_back():
    """The adapter's `alone` is read off a new array; out of memory making
    it, it is None and its calls keep no result to take back (the call that
    prepared the adapter keeps its own result)."""
    from cudasortkit.calls import sort_prepared as prep

    def fail():
        raise MemoryError("out of memory allocating 512 bytes")

    assert kept.sole_holders(prep._CupyKeys.holders, fail) is None
    adapter = _TakingBack()
    adapter.alone = None
    assert _ahead_call(adapter).kept.returned is None
    with pytest.raises(ValueError):
        kept.sole_holders(prep._CupyKeys.holders, lambda: int("x"))


def test_a_loop_assigning_each_result_cycles_through_three_arrays():
    """`r = sort(x)` in a loop holds the last result while the next call
    runs, and has just dropped the one before (RETURNED_KEPT): the loop
    cycles through three arrays and makes none after its start; a big
    result is never kept to take back."""
    adapter = _TakingBack()
    call = _ahead_call(adapter)
    ids = []
    r = None
    for _ in range(9):
        r, _ = call(np.zeros(8, np.float32))
        ids.append(id(r))
    assert len(adapter.made) == 3 and ids == adapter.made * 3
    n = kept.AHEAD_RESULT_BYTES // 4 + 1
    big = _ahead_call(adapter, n=n)
    big(np.zeros(n, np.float32))
    assert big.kept.returned is None


@pytest.mark.parametrize("holder", ["array", "pointer", "memory", "weakref", "reshaped"])
def test_a_result_something_still_holds_is_not_taken_back(holder):
    """A result is taken back only when nothing holds it, its memory pointer
    or its memory (a view's pointer shares it), no weak reference watches
    it, and its shape is still the call's."""
    import weakref

    adapter = _TakingBack()
    call = _ahead_call(adapter)
    first, _ = call(np.zeros(8, np.float32))
    held = {"array": lambda r: r, "pointer": lambda r: r.data, "memory": lambda r: r.data.mem,
            "weakref": weakref.ref, "reshaped": lambda r: setattr(r, "shape", (2, 4))}[holder](first)
    first_id = id(first)
    del first
    second, _ = call(np.zeros(8, np.float32))
    assert id(second) != first_id and id(second) == adapter.made[1]   # the one made ahead
    assert held is not None or holder == "reshaped"
    del second
    for _ in range(2):   # the others taken back; no longer the newest kept, it is let go
        call(np.zeros(8, np.float32))
    assert holder != "weakref" or held() is None


def test_a_result_is_taken_back_only_on_its_stream_and_never_for_out_or_without_holders():
    from cudasortkit.gpu import caches

    adapter = _TakingBack()
    call = _ahead_call(adapter)
    call(np.zeros(8, np.float32))                          # made, and one made ahead
    adapter.current[0] = 0xA000
    call(np.zeros(8, np.float32))
    assert len(adapter.made) == 4                          # not 0x9000's: made, and one ahead
    out = _Result((8,), np.float32)
    got, _ = call(np.zeros(8, np.float32), out=out)
    assert got is out and call.kept.returned != [(0xA000, out)]
    plain = _ahead_call(_StreamCaller())                   # says nothing of holders
    _sort_dropping(plain, 3)
    assert plain.kept.returned is None and len(plain.kept.ahead) == 1
    caches.release_kept()                                  # memory short: the kept result goes
    assert call.kept.returned == [] and call.kept.ahead == []
    caches.clear_all()


def test_a_prepared_call_out_of_memory_for_its_result_frees_unused_memory_and_tries_again():
    """The prepared call's own result goes through DeviceState.allocating,
    as the general path's results do: out of memory once, the unused memory
    goes back (kept temporaries and results made ahead too) and the second
    try's array is the result; out of memory twice, the error stands."""
    from cudasortkit.gpu import caches

    adapter = _StreamCaller()
    call = _ahead_call(adapter)
    call(np.zeros(8, np.float32))
    call.kept.ahead.clear()
    adapter.fail_once = True
    got, _ = call(np.zeros(8, np.float32))
    assert call.state.freed_unused == 1 and got is adapter.made[2]  # made[1]: made ahead, dropped
    call.kept.ahead.clear()
    adapter.fail.append(1)
    with pytest.raises(MemoryError):
        call(np.zeros(8, np.float32))
    assert call.state.freed_unused == 2
    caches.clear_all()


def test_the_stand_in_run_of_the_repeated_call_path_works():
    """tests/plan_call_cpu.py: PreparedCall, plan(a), plan(a, out=),
    csk.sort and csk.sort_by_key of stand-in CuPy arrays through
    LaunchPlan.run_on, each still
    on its prepared call afterwards (the tool times the host path; a change
    to the path's seams must keep it running)."""
    import os
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run([sys.executable, os.path.join(root, "tests", "plan_call_cpu.py"), "50"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("us per call") == 6, out.stdout
