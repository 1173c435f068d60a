"""Defects a new user hits (issue 13, section 4), CPU only: the CLI without a
GPU, broken plugins, corrupt tuning caches and explain's arguments."""
import json
import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import cudasortkit as csk
from cudasortkit import cli, device, registry, select
from cudasortkit.errors import PluginError
from cudasortkit.plugin import Request, SortPlugin, Tunable
from cudasortkit.tuning import cache, policy, runtime, tuner

INFO = {"name": "Fake GPU 9000", "compute_capability": "9.0", "sm_count": 132, "driver": "12.8",
        "nvcc": "Build cuda_12.8", "cudasortkit": "0.1.0"}
NO_PYCUDA = "pycuda is not installed (No module named 'pycuda'); install cudasortkit[cuda]"


@pytest.fixture(autouse=True)
def _fresh_state():
    """Plugins these tests register or break, and warnings given once, are
    forgotten afterwards."""
    cache._warned.clear()
    yield
    cache._warned.clear()
    registry.refresh()
    runtime.reset()


@pytest.fixture
def no_gpu(monkeypatch):
    monkeypatch.setattr(device, "gpu_available", lambda: False)
    monkeypatch.setattr(device, "unavailable_reason", lambda: NO_PYCUDA)


# ------------------------------------------------------------------ 4.2 bench
def test_bench_without_gpu_says_what_is_missing_in_one_line(no_gpu):
    with pytest.raises(SystemExit) as exc:
        cli.main(["bench"])
    message = str(exc.value.code)
    assert message == f"bench needs a GPU: {NO_PYCUDA}"


@pytest.mark.skipif(device.gpu_available(), reason="there is a GPU here")
def test_bench_command_without_gpu_exits_with_one_line_and_no_traceback():
    done = subprocess.run([sys.executable, "-m", "cudasortkit", "bench"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [f"bench needs a GPU: {device.unavailable_reason()}"]


# ------------------------------------------------------------------- 4.3 info
def test_info_prints_the_cache_dir_the_tuner_uses(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(cache.ENV_DIR, str(tmp_path / "tuning"))
    assert cli.main(["info"]) == 0
    assert f"cache dir: {tmp_path / 'tuning'}" in capsys.readouterr().out.splitlines()


# ------------------------------------------------------------ 4.5 plugins
class Raising(SortPlugin):
    """A CPU plugin whose unsupported() fails for every request."""

    name = "raising"
    dtypes = ("int32",)
    device = "cpu"

    def unsupported(self, request):
        raise RuntimeError("boom\nsecond line")

    def run(self, job):
        raise AssertionError("never chosen")


def test_a_plugin_whose_unsupported_raises_is_disabled_and_skipped(capsys):
    registry.register(Raising)
    a = np.array([3.0, 1.0, 2.0])  # float64: a dtype it never declared
    assert np.array_equal(csk.sort(a, descending=True), [3.0, 2.0, 1.0])
    b = np.array([5, 4, 6], np.int32)
    assert np.array_equal(csk.sort(b, descending=True), [6, 5, 4])
    row = {r["name"]: r for r in csk.algorithms()}["raising"]
    assert row["status"] == "error" and row["error"] == "unsupported raised RuntimeError: boom"
    assert cli.main(["list"]) == 0
    line = next(l for l in capsys.readouterr().out.splitlines() if l.startswith("raising"))
    assert "ERROR" in line and "unsupported raised RuntimeError: boom" in line
    with pytest.raises(ValueError, match="'raising' is disabled: unsupported raised RuntimeError"):
        csk.sort(b, algorithm="raising")


def test_a_plugin_found_broken_by_name_is_refused_naming_it():
    registry.register(Raising)
    with pytest.raises(ValueError, match="algorithm 'raising' is disabled: unsupported raised"):
        csk.argsort(np.arange(4, dtype=np.int32), algorithm="raising")
    assert not registry.entries()["raising"].ok


@pytest.fixture
def exiting_plugins(tmp_path, monkeypatch):
    """Entry points whose module calls sys.exit on import, and whose class
    exits or raises when constructed."""
    (tmp_path / "exits_on_import.py").write_text("import sys\nsys.exit(3)\n")
    (tmp_path / "exits_later.py").write_text(textwrap.dedent("""
        import sys
        from cudasortkit import SortPlugin

        class ExitsWhenMade(SortPlugin):
            name = "exits_made"
            dtypes = ("int32",)
            device = "cpu"
            def __init__(self):
                sys.exit("no thanks")
            def run(self, job):
                pass

        class FailsWhenMade(ExitsWhenMade):
            name = "fails_made"
            def __init__(self):
                raise OSError("no config file")
    """))
    info = tmp_path / "exitplugins-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: exitplugins\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(textwrap.dedent("""
        [cudasortkit.algorithms]
        exits_import = exits_on_import:Plugin
        exits_made = exits_later:ExitsWhenMade
        fails_made = exits_later:FailsWhenMade
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    registry.refresh()
    yield
    monkeypatch.undo()
    sys.modules.pop("exits_later", None)


def test_sys_exit_in_a_plugin_never_escapes_discovery(exiting_plugins):
    entries = registry.entries()
    assert entries["exits_import"].error == "import raised SystemExit: 3"
    assert entries["exits_made"].error == "construction raised SystemExit: no thanks"
    assert entries["fails_made"].error == "construction raised OSError: no config file"
    assert entries["numpy"].ok
    assert np.array_equal(csk.sort(np.array([2, 1], np.int32), descending=True), [2, 1])
    with pytest.raises(ValueError, match="'exits_import' failed to load: import raised SystemExit"):
        csk.sort(np.array([2, 1]), algorithm="exits_import")


class Declared(SortPlugin):
    """A CPU plugin whose declarations fail on demand (set `failing`)."""

    name = "declared"
    dtypes = ("float64",)
    device = "cpu"
    tunables = {"block_size": Tunable(128, (128, 256))}
    failing = {}

    def _maybe_fail(self, method):
        if method in self.failing:
            raise self.failing[method]

    def default_config(self, dtype=None, value_bytes=0):
        self._maybe_fail("default_config")
        return super().default_config(dtype, value_bytes)

    def config_space(self):
        self._maybe_fail("config_space")
        return super().config_space()

    def valid_config(self, config, dtype, value_bytes):
        self._maybe_fail("valid_config")
        return True

    def run(self, job):
        raise AssertionError("never run here")


def test_guarded_marks_the_plugin_and_names_it_in_one_line():
    registry.register(Declared)
    plugin = registry.plugins()["declared"]
    with pytest.raises(PluginError) as exc:
        with registry.guarded(plugin, "run"):
            raise ValueError("bad config\n  at line 2")
    assert isinstance(exc.value, RuntimeError) and exc.value.plugin == "declared"
    assert exc.value.reason == "run raised ValueError: bad config"
    assert "'declared'" in str(exc.value) and isinstance(exc.value.__cause__, ValueError)
    assert registry.entries()["declared"].error == "run raised ValueError: bad config"
    assert "declared" not in registry.plugins()


def test_guarded_turns_sys_exit_into_plugin_error():
    registry.register(Declared)
    plugin = registry.plugins()["declared"]
    with pytest.raises(PluginError, match="default_config raised SystemExit: 2"):
        with registry.guarded(plugin, "default_config"):
            sys.exit(2)


def test_guarded_lets_interrupts_expected_errors_and_plugin_errors_pass():
    registry.register(Declared)
    plugin = registry.plugins()["declared"]
    with pytest.raises(KeyboardInterrupt):
        with registry.guarded(plugin, "run"):
            raise KeyboardInterrupt
    with pytest.raises(MemoryError):
        with registry.guarded(plugin, "run", expected=(MemoryError,)):
            raise MemoryError("out of device memory")
    other = PluginError("numpy", "run raised ValueError: x")
    with pytest.raises(PluginError) as exc:
        with registry.guarded(plugin, "run"):
            raise other
    assert exc.value is other
    assert registry.entries()["declared"].ok  # none of these was its fault
    assert registry.call(plugin, "default_config", "float64") == {"block_size": 128}


@pytest.mark.parametrize("method", ["default_config", "config_space", "valid_config"])
def test_the_tuner_isolates_plugin_declarations(monkeypatch, method):
    registry.register(Declared)
    plugin = registry.plugins()["declared"]
    monkeypatch.setattr(Declared, "failing", {method: SystemExit(f"{method} exits")})
    with pytest.raises(PluginError, match=f"{method} raised SystemExit"):
        tuner.configs_quick(plugin, "float64", 0)
    assert registry.entries()["declared"].error.startswith(f"{method} raised SystemExit")


class FlakyGPU(SortPlugin):
    """A GPU plugin with measurements, whose valid_config() fails."""

    name = "flaky_gpu"
    dtypes = ("float32",)
    tunables = {"block_size": Tunable(128, (128, 256))}
    templates = ("bitonic.cu",)

    def valid_config(self, config, dtype, value_bytes):
        raise ZeroDivisionError("division by zero")

    def run(self, job):
        raise AssertionError("never run here")


@pytest.fixture
def measured_flaky(tmp_path, monkeypatch):
    """The tuner's hooks over a table where only flaky_gpu is measured, as
    if on a GPU (nothing runs: selection only)."""
    registry.register(FlakyGPU)
    store = cache.Store(str(tmp_path), INFO)
    store.data["plugins"]["flaky_gpu"] = {"hash": "h", "results": {"sort": {"float32": {
        "20": {"ms": 0.1, "config": {"block_size": 256}, "default_ms": 0.2}}}}}
    ctx = runtime.Context(state=None, store=store)
    monkeypatch.setattr(runtime, "context", lambda state=None: ctx)
    monkeypatch.setattr(cache, "plugin_hash", lambda plugin: "h")
    monkeypatch.setattr(select, "gpu_available", lambda: True)
    monkeypatch.setattr(select, "policy", runtime.auto_policy)
    monkeypatch.setattr(select, "configure", runtime.configure)
    monkeypatch.setenv(runtime.ENV_AUTOTUNE, "0")
    runtime.reset()


def test_auto_answers_the_call_that_finds_a_plugin_broken(measured_flaky):
    request = Request("sort", "float32", 1 << 20)
    plugin, _ = select.choose(request, "auto")
    assert plugin.name != "flaky_gpu" and plugin.device == "gpu"
    assert registry.entries()["flaky_gpu"].error == \
        "valid_config raised ZeroDivisionError: division by zero"
    assert select.choose(request, "auto")[0] is plugin


def test_by_name_a_plugin_broken_while_configuring_is_refused(measured_flaky):
    request = Request("sort", "float32", 1 << 20)
    with pytest.raises(ValueError, match="'flaky_gpu' is disabled: valid_config raised"):
        select.choose(request, "flaky_gpu")
    assert select.choose(request, "auto")[0].name != "flaky_gpu"


# -------------------------------------------------------------- 4.7 explain
def test_explain_names_the_valid_kinds():
    a = np.arange(10, dtype=np.float32)
    with pytest.raises(ValueError, match="kind must be one of 'sort', 'argsort', 'pairs', got 'bogus'"):
        csk.explain(a, kind="bogus")
    with pytest.raises(ValueError, match="kind='pairs' needs values=.*'sort' or 'argsort'"):
        csk.explain(a, kind="pairs")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert csk.explain(a, kind="pairs", values=np.arange(10)).name
