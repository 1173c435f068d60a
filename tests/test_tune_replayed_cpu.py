"""CPU tests of how the tuner times a config (tuning/replayed.py and
Case.runners): the way a repeated call runs it, a replayable plugin's
launch plan replayed on buffers the tuner owns, settled before it counts;
the general path for what a prepared call does not serve."""
import types

import pytest

from cudasortkit.gpu.streams import LEGACY
from cudasortkit.sdk import registry
from cudasortkit.tuning import replayed, tuner


class Buf(int):
    def free(self):
        self.state.freed.append(int(self))


class State:
    ordinal = 0
    stream = None

    def __init__(self, room=1 << 40):
        self.taken, self.freed, self.room, self.next = [], [], room, 0x100000

    def allocate(self, nbytes, who=None):
        if nbytes > self.room:
            raise MemoryError(f"{who}: out of GPU memory allocating {nbytes:,} bytes")
        self.room -= nbytes
        buf = Buf(self.next)
        buf.state = self
        self.next += 1 << 20
        self.taken.append((int(buf), nbytes))
        return buf


class Plan:
    temporaries = (4096, 512)

    def __init__(self):
        self.runs = []

    def run_on(self, job, buffers, temporaries, stream=None):
        self.runs.append((buffers, temporaries, stream, job.config))


def _case(kind="sort", n=1000, inputs=3, value_bytes=None, state=None):
    return types.SimpleNamespace(
        state=state or State(), kind=kind, n=n, dtype="float32", segments=None,
        value_bytes={"sort": 0, "argsort": 8, "pairs": 4}[kind] if value_bytes is None
        else value_bytes,
        keys=[types.SimpleNamespace(gpudata=0xA000 + i) for i in range(inputs)])


@pytest.fixture
def plan(monkeypatch):
    plan, asked = Plan(), []

    def recorded(*args, **kwargs):
        asked.append((args, kwargs))
        return plan

    monkeypatch.setattr(replayed.launchplan, "recorded", recorded)
    plan.asked = asked
    return plan


def test_a_sort_replays_its_plan_on_owned_buffers_on_the_legacy_stream(plan):
    plugin = registry.plugins()["onesweep"]
    config = plugin.default_config("float32")
    case = _case()
    call = replayed.replayed_call(case, plugin, config)
    (args, kwargs), = plan.asked
    assert args[1:] == (plugin, "float32", 1000, 0, config, False)
    assert kwargs == {"has_values_in": False, "has_values_out": False, "rows": None}
    call(2)
    call(0)
    (keys_out, _), t1, t2 = case.state.taken
    assert (t1[1], t2[1]) == Plan.temporaries and keys_out and _ == 4000
    assert plan.runs == [((0xA002, keys_out, 0, 0), (t1[0], t2[0]), LEGACY, config),
                         ((0xA000, keys_out, 0, 0), (t1[0], t2[0]), LEGACY, config)]
    call.free()
    assert sorted(case.state.freed) == sorted(b for b, _ in case.state.taken)


def test_an_argsort_fills_its_indices_each_run_where_the_plugin_does_not_make_them(plan,
                                                                                   monkeypatch):
    fills = []
    monkeypatch.setattr(replayed, "iota64", lambda state, ptr, n, index_bytes: fills.append(
        (ptr, n, index_bytes)))
    plugin = registry.plugins()["merge_sort"]
    assert not plugin.makes_indices
    case = _case("argsort")
    call = replayed.replayed_call(case, plugin, plugin.default_config("float32"))
    assert plan.asked[0][1]["has_values_in"] and plan.asked[0][1]["has_values_out"]
    call(1)
    call(1)
    (keys_out, kb), (values_out, vb), (values_in, ib) = case.state.taken[:3]
    assert (kb, vb, ib) == (4000, 8000, 8000)
    assert fills == [(values_in, 1000, 8)] * 2
    assert plan.runs[0][0] == (0xA001, keys_out, values_in, values_out)


def test_pairs_replay_their_plan_reading_the_case_values(plan):
    """A key-value case replays as a prepared sort_by_key call does: the
    case's values in, the sorted values into a buffer of their width."""
    plugin = registry.plugins()["onesweep"]
    config = plugin.default_config("float32", 4)
    case = _case("pairs")
    case.values = types.SimpleNamespace(gpudata=0xB000)
    call = replayed.replayed_call(case, plugin, config)
    (args, kwargs), = plan.asked
    assert args[1:] == (plugin, "float32", 1000, 4, config, False)
    assert kwargs == {"has_values_in": True, "has_values_out": True, "rows": None}
    call(1)
    (keys_out, kb), (values_out, vb), *_ = case.state.taken
    assert (kb, vb) == (4000, 4000)
    assert plan.runs[0][0] == (0xA001, keys_out, 0xB000, values_out)


def test_what_a_prepared_call_does_not_serve_takes_the_general_path(plan, monkeypatch):
    plugin = registry.plugins()["onesweep"]
    config = plugin.default_config("float32")
    rows = _case("pairs")
    rows.segments = object()  # uniform rows of pairs: no prepared call
    assert replayed.replayed_call(rows, plugin, config) is None
    assert replayed.replayed_call(_case(n=1), plugin, config) is None
    monkeypatch.setattr(replayed.launchplan, "recorded", lambda *a, **k: None)  # not replayable
    assert replayed.replayed_call(_case(), plugin, config) is None


class _Case:
    """Case.runners on a stand-in: run() is the general path."""

    runners = tuner.Case.runners

    def __init__(self, state=None, inputs=3):
        self.state, self.keys, self.general, self.result = state or State(), [0] * inputs, [], None

    def run(self, plugin, config, i=0):
        self.general.append((plugin.name, i))


def _contenders():
    plugins = registry.plugins()
    return {name: (plugins[name], plugins[name].default_config("float32"))
            for name in ("onesweep", "radix")}


def test_runners_settle_every_input_and_free_the_replayed_buffers(monkeypatch):
    made = []

    class Call:
        def __init__(self, name):
            self.name, self.runs, self.freed = name, [], False
            made.append(self)

        def __call__(self, i):
            self.runs.append(i)

        def free(self):
            self.freed = True

    monkeypatch.setattr(tuner, "replayed_call",
                        lambda case, plugin, config: Call(plugin.name)
                        if plugin.name == "onesweep" else None)
    case = _Case()
    with case.runners(_contenders()) as runs:
        (call,) = made
        # each input's graph captured before any timing counts
        assert call.runs == [0, 1, 2] * replayed.SETTLE_RUNS
        assert [i for name, i in case.general if name == "radix"] == \
            [0] + [0, 1, 2] * replayed.SETTLE_RUNS   # recorded, then settled
        assert runs["onesweep"] is call and not call.freed
        runs["radix"](1)
        assert case.general[-1] == ("radix", 1)
    assert call.freed


def test_runners_short_of_memory_time_every_contender_through_the_general_path(monkeypatch):
    calls = []

    def replayed_call(case, plugin, config):
        if calls:
            raise MemoryError("out of GPU memory")
        calls.append(types.SimpleNamespace(freed=False, free=lambda: calls.append("freed")))
        return calls[0]

    monkeypatch.setattr(tuner, "replayed_call", replayed_call)
    case = _Case()
    with case.runners(_contenders()) as runs:
        assert "freed" in calls
        runs["onesweep"](2)
        assert case.general[-1] == ("onesweep", 2)


def test_a_replayed_call_short_of_memory_gives_back_what_it_took(plan):
    plugin = registry.plugins()["onesweep"]
    state = State(room=4000 + 4096 + 100)  # the result and one temporary, not the second
    with pytest.raises(MemoryError):
        replayed.replayed_call(_case(state=state), plugin, plugin.default_config("float32"))
    assert len(state.taken) == 2 and sorted(state.freed) == sorted(b for b, _ in state.taken)
