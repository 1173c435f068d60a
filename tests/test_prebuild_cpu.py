"""Building a sweep's kernels without a device (cudasortkit/tuning/prebuild.py),
on the CPU: every replayable built-in plugin's run() on a state that only
compiles asks for its kernels (rendered, handed to the compiler: a stand-in
here that records the sources) and launches nothing, at every shape and
config of `tune --quick`; and the sweep waits for a cell's builds before
checking it, and measures host costs after the last cell."""
import pytest

from cudasortkit.build import cubins
from cudasortkit.build import template as build_template
from cudasortkit.cli import tune
from cudasortkit.launch.plans import replayable
from cudasortkit.sdk import registry
from cudasortkit.tuning import prebuild, runtime
from helpers import FakeState


@pytest.fixture
def recorded_compiles(tmp_path, monkeypatch):
    """cubins' compiler replaced: records each source, returns no cubin."""
    monkeypatch.setenv("CUDASORTKIT_KERNEL_CACHE_DIR", str(tmp_path / "kernels"))
    cubins.forget()
    sources = []

    def compile_(source, include_dirs, options, arch):
        assert arch == "sm_90"
        sources.append(source)
        return b"\x7fELF stand-in"

    monkeypatch.setattr(cubins, "_compile", compile_)
    monkeypatch.setattr(build_template, "_kernels", {})
    yield sources
    cubins.forget()


def quick_plan():
    plugins = {n: p for n, p in registry.plugins().items() if p.device == "gpu"}
    buckets, rows = tune.parse_sizes(tune.QUICK["sizes"]), tune.parse_rows(tune.QUICK["rows"])
    work = runtime.plan(plugins, ["uint32", "float32"], buckets, ["sort"], limits=FakeState.limits)
    return work + runtime.plan({n: p for n, p in plugins.items() if p.segmented},
                               ["uint32", "float32"], rows, ["sort"], limits=FakeState.limits,
                               rows=True)


def test_every_quick_config_of_a_replayable_plugin_builds_without_a_device(recorded_compiles,
                                                                          monkeypatch):
    launched = []
    monkeypatch.setattr(build_template.UnloadedKernel, "launch_packed",
                        lambda self, *a, **k: launched.append(self.name))
    built = 0
    for cell in quick_plan().cells:
        _, n, row_len = cell.shape
        for name, (plugin, _, configs) in cell.work.items():
            if not replayable(type(plugin)):
                continue
            for config in configs:
                task = (name, cell.op, cell.dtype, n, row_len, dict(config), FakeState.limits,
                        "sm_90", (9, 0))
                compiled, seconds, error = prebuild.build(task)
                assert error is None, (name, cell.dtype, n, row_len, config, error)
                built += 1
    assert built > 100 and recorded_compiles
    assert launched, "its launches reached the unloaded kernels (and did nothing)"
    assert all("#define CSK_KEY_BYTES 4" in s or "#define CSK_KEY_BYTES 8" in s
               for s in recorded_compiles)


def test_a_build_that_fails_says_why(recorded_compiles):
    task = ("onesweep", "sort", "float32", 1 << 20, None, {"block_size": 3}, FakeState.limits,
            "sm_90", (9, 0))
    compiled, seconds, error = prebuild.build(task)
    assert error is not None and compiled == 0


class FakeBuilder:
    """Prebuild's stand-in: records the cells waited for."""

    def __init__(self):
        self.waited, self.closed = [], False
        self.builds, self.compiled, self.compile_s, self.failed = 3, 2, 1.5, []

    def wait(self, cell):
        self.waited.append(cell)

    def close(self):
        self.closed = True


@pytest.fixture
def fake_sweep(tmp_path, monkeypatch):
    import sys
    import types

    import test_tune_quick_cpu as quick
    from cudasortkit.gpu import timing
    from cudasortkit.tuning import tuner
    from helpers import fake_device

    fake_device(tmp_path, monkeypatch)
    monkeypatch.setattr(tuner, "Case", quick.FakeCase)
    monkeypatch.setattr(tuner, "Inputs", quick.FakeInputs)
    monkeypatch.setattr(timing, "time_gpu", quick.fake_time_gpu)
    monkeypatch.setitem(sys.modules, "tqdm", types.SimpleNamespace(tqdm=quick.FakeBar))
    quick.fake_time_gpu.calls = 0
    quick.FakeBar.bars, quick.FakeCase.made, quick.FakeCase.events = [], [], []
    builder = FakeBuilder()
    monkeypatch.setattr(prebuild, "start", lambda state, work: builder)
    events = []
    monkeypatch.setattr(runtime, "_host_part",
                        lambda ctx, cell, todo, numpy_plugin: events.append(("host", cell.b))
                        or "| host: stand-in")
    original = tuner.Tuner.tune_cell

    def tune_cell(self, case, todo, progress=None):
        assert builder.waited and builder.waited[-1].dtype == case.dtype
        events.append(("cell", case.n))
        return original(self, case, todo, progress)

    monkeypatch.setattr(tuner.Tuner, "tune_cell", tune_cell)
    runtime.reset()
    yield builder, events
    runtime.reset()


def test_each_cell_waits_for_its_builds_and_host_costs_come_last(fake_sweep, capsys):
    builder, events = fake_sweep
    assert tune.main(["--quick", "--rows", "none", "--plugins", "bitonic,radix"]) == 0
    assert builder.closed
    cells = [e for e in events if e[0] == "cell"]
    assert len(builder.waited) == len(cells) == 16
    first_host = next(i for i, e in enumerate(events) if e[0] == "host")
    assert all(e[0] == "host" for e in events[first_host:])  # after every cell
    assert len(events) - first_host == 14  # 2^10..2^22, two dtypes
    out = capsys.readouterr().out
    assert "for child processes: 3 builds, 2 modules compiled (nvcc 1.5 s summed over processes)" \
        in out


@pytest.mark.nvcc
def test_child_processes_compile_a_plan_into_the_kernel_cache(tmp_path, monkeypatch):
    """The real thing, without a GPU: spawned children build one cell's
    kernels with nvcc into the kernel cache, which this process then reads
    without compiling."""
    import shutil

    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not found")
    monkeypatch.setenv("CUDASORTKIT_KERNEL_CACHE_DIR", str(tmp_path / "kernels"))
    cubins.forget()
    plugins = {"bitonic": registry.plugins()["bitonic"]}
    work = runtime.plan(plugins, ["uint32"], [10], ["sort"], strategy="default",
                        limits=FakeState.limits)
    state = type("State", (FakeState,), {"arch": "sm_90"})()
    builder = prebuild.start(state, work, workers=2)
    assert builder is not None
    try:
        builder.wait(work.cells[0])
    finally:
        builder.close()
    assert builder.failed == [] and builder.builds == 1 and builder.compiled >= 1
    task = ("bitonic", "sort", "uint32", 1 << 10, None, work.cells[0].work["bitonic"][2][0],
            FakeState.limits, "sm_90", (9, 0))
    monkeypatch.setattr(build_template, "_kernels", {})
    monkeypatch.setattr(cubins, "_compile", lambda *a: pytest.fail("compiled again"))
    assert prebuild.build(task) == (0, 0.0, None)  # every cubin on disk already
    cubins.forget()
