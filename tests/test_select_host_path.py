"""The selection calls' host path (no GPU needed): auto's choice is made once
per request shape and made again when the registry, the measured tables or
the keys' device change; explain still says why; default configs and
kernels are looked up once; and the stand-in run of
tests/select_call_cpu.py goes through every launch of the GPU plugins."""
import importlib.util
import os
import subprocess
import sys

import numpy as np
import pytest

import cudasortkit as csk
from cudasortkit import api
from cudasortkit.calls.select import SelectCalls
from cudasortkit.dispatch import selection as choosing
from cudasortkit.gpu import caches, device
from cudasortkit.sdk import job as sdk_job
from cudasortkit.sdk import registry
from cudasortkit.sdk.select_job import SelectJob
from cudasortkit.sdk.selection import SelectPlugin, SelectRequest
from cudasortkit.tuning import cache, runtime
from cudasortkit.tuning.kinds import SELECTION
from helpers import fake_device

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GROUP = SelectPlugin.entry_point_group


@pytest.fixture
def counted(monkeypatch):
    """A fresh SelectCalls, and how often choose() and a plugin's
    default_config() ran."""
    seen = {"choose": 0, "default_config": 0}
    plain_choose = choosing.choose

    def choose(*args, **kwargs):
        seen["choose"] += 1
        return plain_choose(*args, **kwargs)

    monkeypatch.setattr(choosing, "choose", choose)
    numpy_select = type(registry.plugins(GROUP)["numpy_select"])
    plain_config = numpy_select.default_config

    def default_config(self, *args):
        seen["default_config"] += 1
        return plain_config(self, *args)

    monkeypatch.setattr(numpy_select, "default_config", default_config)
    return SelectCalls(api.selector), seen


def topk(calls, a, k):
    return calls.topk(a, k, -1, True, True, None, None, "auto")


def test_repeat_calls_choose_once_per_shape(counted):
    calls, seen = counted
    a = np.random.default_rng(1).random((3, 517)).astype(np.float32)
    for _ in range(3):
        values, indices = topk(calls, a, 7)
    assert seen == {"choose": 1, "default_config": 1}
    assert np.array_equal(values, -np.sort(-a, axis=-1)[:, :7])
    topk(calls, a, 8)  # another k: another shape
    calls.partition(a, 3, -1, "auto", None, False)
    calls.partition(a, 3, -1, "auto", None, False)
    assert seen == {"choose": 3, "default_config": 1}  # one config per plugin and dtype


class FirstSelect(SelectPlugin):
    """A CPU plugin auto prefers to numpy_select (lower priority); `fail`
    makes its run() raise."""

    name, dtypes, device, ops, priority = "first_select", ("float32",), "cpu", ("topk",), 1
    runs, fail = 0, False

    def run(self, job):
        type(self).runs += 1
        if self.fail:
            raise RuntimeError("first_select broke")
        order = np.argsort(-job.keys, axis=-1, kind="stable")[:, :job.k]
        return np.take_along_axis(job.keys, order, -1), order


def test_a_new_or_broken_plugin_is_never_answered_from_the_memo(counted):
    calls, seen = counted
    a = np.arange(40, dtype=np.float32).reshape(2, 20)
    topk(calls, a, 3)
    FirstSelect.runs, FirstSelect.fail = 0, False
    registry.register(FirstSelect)
    try:
        assert topk(calls, a, 3)[1].tolist() == [[19, 18, 17]] * 2
        assert FirstSelect.runs == 1 and seen["choose"] == 2
        FirstSelect.fail = True  # out of service: auto chooses numpy_select for this call
        assert topk(calls, a, 3)[1].tolist() == [[19, 18, 17]] * 2
        assert FirstSelect.runs == 2 and seen["choose"] == 3  # chosen again once, for this call
        assert "first_select broke" in registry.entries(GROUP)["first_select"].error
        topk(calls, a, 3)
        assert FirstSelect.runs == 2 and seen["choose"] == 3
    finally:
        registry.refresh()
    topk(calls, a, 3)
    assert seen["choose"] == 4


# ------------------------------------------------- measured tables, faked GPU
@pytest.fixture
def fake_gpu(tmp_path, monkeypatch):
    state = fake_device(tmp_path, monkeypatch, choosing)
    monkeypatch.setattr(device, "driver_version", lambda: "12.8")
    yield state
    runtime.reset()


TOPK = SelectRequest("topk", "float32", 1, 1 << 20, 16)


def measure(**times):
    ctx = runtime.context()
    plugins = registry.plugins(GROUP)
    for name, ms in times.items():
        ctx.store.put_kind(GROUP, name, cache.kind_hash(plugins[name]),
                           SELECTION.key(SELECTION.shape_of(TOPK)), ms)
    ctx.changed()


def test_changed_measurements_or_another_device_choose_again(fake_gpu, monkeypatch):
    made = []
    plain = choosing.choose
    monkeypatch.setattr(choosing, "choose", lambda *a: made.append(1) or plain(*a))
    contexts = []
    plain_context = runtime.context
    monkeypatch.setattr(runtime, "context", lambda *a: contexts.append(1) or plain_context(*a))
    choices = choosing.Choices(SELECTION.choose, runtime.generation)
    plugin, why = choices.choose(TOPK, "auto", 0)
    assert plugin.name == "radix_select" and "nothing measured here to use" in why
    assert choices.choose(TOPK, "auto", 0) == (plugin, why) and len(made) == 1
    choices.choose(TOPK, "auto", 1)  # the keys on another device
    assert len(made) == 2 and len(contexts) == 1  # tuning/kinds.py's memo read no table again
    measure(radix_select=0.9, sort_select=0.3)
    plugin, why = choices.choose(TOPK, "auto", 0)
    assert plugin.name == "sort_select" and why.startswith("measured here: sort_select 0.3 ms")
    assert len(made) == 3
    choices.choose(TOPK, "auto", 0)
    assert len(made) == 3
    # explain decides afresh and says why
    d = csk.explain(np.zeros(1 << 20, np.float32), kind="topk", k=16)
    assert d.name == "sort_select" and d.reason == f"{TOPK}: {why}"


# ------------------------------------------------------------------ kernels
class _Stream:
    handle = 7


def test_kernels_are_looked_up_once_per_settings_and_cleared_with_the_cache(monkeypatch):
    asked = []
    monkeypatch.setattr(sdk_job, "template_kernel",
                        lambda state, package, template, defines, dtype, value_bytes, config,
                        name, owner: asked.append((name, dict(config)["block_size"])) or name)
    plugin = registry.plugins(GROUP)["radix_select"]
    state = type("State", (), {"ordinal": 0, "stream": _Stream()})()
    config = plugin.default_config("float32")

    def job():
        return SelectJob(plugin, state, TOPK, keys_in=1, keys_out=2, indices_out=3,
                         config=config)

    names = ("rs_hist", "rs_count")
    assert job().kernels("radix_select.cu", names, value_bytes=0) == names
    assert job().kernels("radix_select.cu", names, value_bytes=0) == names
    assert asked == [("rs_hist", 256), ("rs_count", 256)]
    job().kernels("radix_select.cu", names, config=dict(config, block_size=512), value_bytes=0)
    assert len(asked) == 4 and asked[-1] == ("rs_count", 512)
    caches.clear_all()  # a context going away: nothing looked up before is kept
    job().kernels("radix_select.cu", names, value_bytes=0)
    assert len(asked) == 6


def test_the_stand_in_run_of_the_gpu_path_works():
    """tests/select_call_cpu.py: csk.topk of stand-in CuPy arrays (and CUDA
    torch tensors, where PyTorch is installed) through radix_select's run(),
    every launch checked against its kernel's signature (read from the
    template)."""
    out = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "select_call_cpu.py"), "14"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    libraries = 2 if importlib.util.find_spec("torch") else 1
    assert out.stdout.count("us per call") == 2 * libraries, out.stdout


def test_prepared_selection_stamps_move_with_the_measured_tables():
    """A prepared topk holds the measured tables' generation: new
    measurements (runtime.reset, a written table) send it back to the
    general path."""
    from cudasortkit.calls import select_prepared as prepared_select

    before = prepared_select.stamps()
    runtime.reset()
    assert prepared_select.stamps() != before
