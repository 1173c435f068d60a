"""Defects a new user could hit, CPU only: the CLI without a
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
from helpers import write_dist_info
from cudasortkit.cli import main as cli
from cudasortkit.gpu import device
from cudasortkit.sdk import registry
from cudasortkit.dispatch import select
from cudasortkit.gpu.device import DeviceLimits
from cudasortkit.errors import PluginError
from cudasortkit.sdk.plugin import Request, SortPlugin, Tunable
from cudasortkit.tuning import cache, policy, runtime, tuner
from cudasortkit.tuning.measured import MeasuredPolicy

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
    write_dist_info(tmp_path, "exitplugins", "0.1", {"cudasortkit.algorithms": {
        "exits_import": "exits_on_import:Plugin", "exits_made": "exits_later:ExitsWhenMade",
        "fails_made": "exits_later:FailsWhenMade"}})
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

    def valid_config(self, config, dtype, value_bytes, limits):
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
        tuner.configs_quick(plugin, "float64", 0, DeviceLimits.sm90())
    assert registry.entries()["declared"].error.startswith(f"{method} raised SystemExit")


class FlakyGPU(SortPlugin):
    """A GPU plugin with measurements, whose valid_config() fails."""

    name = "flaky_gpu"
    dtypes = ("float32",)
    tunables = {"block_size": Tunable(128, (128, 256))}
    templates = ("bitonic.cu",)

    def valid_config(self, config, dtype, value_bytes, limits):
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
    monkeypatch.setenv(runtime.ENV_AUTOTUNE, "0")
    runtime.reset()
    return select.Selector(MeasuredPolicy())


def test_auto_answers_the_call_that_finds_a_plugin_broken(measured_flaky):
    request = Request("sort", "float32", 1 << 20)
    plugin, _ = measured_flaky.choose(request, "auto")
    assert plugin.name != "flaky_gpu" and plugin.device == "gpu"
    assert registry.entries()["flaky_gpu"].error == \
        "valid_config raised ZeroDivisionError: division by zero"
    assert measured_flaky.choose(request, "auto")[0] is plugin


def test_by_name_a_plugin_broken_while_configuring_is_refused(measured_flaky):
    request = Request("sort", "float32", 1 << 20)
    with pytest.raises(ValueError, match="'flaky_gpu' is disabled: valid_config raised"):
        measured_flaky.choose(request, "flaky_gpu")
    assert measured_flaky.choose(request, "auto")[0].name != "flaky_gpu"


# --------------------------------------------------------- 4.6 tuning cache
def _write(store_path, content):
    mode = "wb" if isinstance(content, bytes) else "w"
    with open(store_path, mode) as f:
        f.write(content if isinstance(content, (bytes, str)) else json.dumps(content))


def _table(**plugins):
    return {"schema": cache.SCHEMA, "device": INFO, "host": {},
            "plugins": {name: {"hash": "h", "results": {"sort": {"uint32": {"20": e}}}}
                        for name, e in plugins.items()}}


GOOD = {"ms": 0.1, "config": {"block_size": 256}, "default_ms": 0.2}
CORRUPT = {
    "non-utf8": b"\xff\xfe{\"schema\": 2}\x80",
    "bad-json": '{"schema": 2, "plugins": {',
    "deep-json": "[" * 100000 + "]" * 100000,
    "device-list": dict(_table(a=GOOD), device=[1]),
    "plugins-list": dict(_table(), plugins=[]),
    "host-entry-no-time": dict(_table(), host={"sort": {"uint32": {"12": {"via": "a"}}}}),
    "hash-number": {"schema": cache.SCHEMA, "plugins": {"a": {"hash": 7, "results": {}}}},
    "results-list": {"schema": cache.SCHEMA, "plugins": {"a": {"hash": "h", "results": []}}},
    "bucket-word": {"schema": cache.SCHEMA, "plugins": {"a": {"hash": "h", "results": {
        "sort": {"uint32": {"big": GOOD}}}}}},
    "entry-empty": _table(a={}),
    "entry-list": _table(a=[0.1]),
    "entry-no-config": _table(a={"ms": 0.1}),
    "entry-ms-text": _table(a=dict(GOOD, ms="fast")),
    "entry-ms-nan": _table(a=dict(GOOD, ms=float("nan"))),
    "entry-ms-inf": _table(a=dict(GOOD, ms=float("inf"))),
    "entry-ms-zero": _table(a=dict(GOOD, ms=0)),
    "entry-ms-negative": _table(a=dict(GOOD, ms=-0.5)),
    "entry-default-ms-zero": _table(a=dict(GOOD, default_ms=0.0)),
    "entry-default-ms-negative": _table(a=dict(GOOD, default_ms=-1)),
    "entry-sweep-ms-inf": _table(a=dict(GOOD, sweep_ms=float("inf"))),
    "host-extra-negative": dict(_table(), host={"sort": {"uint32": {"12": {"extra_ms": -0.1}}}}),
    "host-extra-zero": dict(_table(), host={"sort": {"uint32": {"12": {"extra_ms": 0}}}}),
    "entry-config-list": _table(a=dict(GOOD, config=[256])),
    "entry-config-nested": _table(a=dict(GOOD, config={"block_size": {"x": 1}})),
    "entry-failed-number": _table(a={"failed": 1}),
}


@pytest.mark.parametrize("content", CORRUPT.values(), ids=CORRUPT.keys())
def test_any_corrupt_cache_file_is_set_aside_with_one_warning(tmp_path, content):
    path = cache.Store(str(tmp_path), INFO).path
    _write(path, content)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        store = cache.Store(str(tmp_path), INFO)
        cache.Store(str(tmp_path), INFO)
    assert store.data["plugins"] == {} and store.data["host"] == {}
    assert len(caught) == 1
    assert "is corrupt" in str(caught[0].message) and path in str(caught[0].message)
    assert not os.path.exists(path) and any(".corrupt-" in p for p in os.listdir(tmp_path))
    store.put("a", "sort", "uint32", 12, GOOD)  # and rebuilt
    assert store.save() and cache.load_any(path)["plugins"]["a"]["results"]["sort"]["uint32"]["12"]


class Tiled(SortPlugin):
    """Declares two tunables; its valid_config reads both (KeyError if missing)."""

    name = "tiled"
    dtypes = ("uint32",)
    tunables = {"block_size": Tunable(128, (128, 256)), "tile": Tunable(4, (2, 4))}
    templates = ("bitonic.cu",)

    def valid_config(self, config, dtype, value_bytes, limits):
        return config["block_size"] * config["tile"] <= 1024

    def run(self, job):
        raise AssertionError("never run here")


@pytest.mark.parametrize("config", [{}, {"block_size": 256}, {"block_size": 256, "tile": 4, "x": 1},
                                    {"block_size": "256", "tile": 4}, {"block_size": 0, "tile": 4}],
                         ids=["empty", "partial", "unknown", "wrong-type", "undeclared-value"])
def test_a_cached_config_that_does_not_fit_the_plugin_is_ignored_with_one_warning(config):
    plugin = Tiled()
    table = _table(tiled={"ms": 0.1, "config": config, "default_ms": 0.2})
    request = Request("sort", "uint32", 1 << 20)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            d = policy.decide(table, request, {"tiled": plugin})
    assert d.name == "tiled" and d.config is None and "default used" in d.estimates[0].note
    assert len(caught) == 1 and "does not fit its tunables" in str(caught[0].message)
    assert registry.entries().get("tiled") is None  # the plugin is not blamed


def test_tune_show_reads_a_partial_config_without_failing(tmp_path, capsys):
    from cudasortkit.cli import tune

    path = tmp_path / "c.json"
    path.write_text(json.dumps(_table(bitonic={"ms": 0.1, "config": {}, "default_ms": 0.2})))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert tune.main(["--show", "-v", "--cache-file", str(path)]) == 0
    assert "bitonic" in capsys.readouterr().out
    assert registry.entries()["bitonic"].ok


@pytest.mark.parametrize("content", [CORRUPT["non-utf8"], CORRUPT["entry-empty"]],
                         ids=["non-utf8", "entry-empty"])
def test_tune_show_says_corrupt_with_the_path(tmp_path, monkeypatch, content):
    from cudasortkit.cli import tune

    path = str(tmp_path / "fake-gpu-sm90-0123456789ab.json")
    _write(path, content)
    with pytest.raises(SystemExit) as exc:
        tune.main(["--show", "--cache-file", path])
    assert str(exc.value.code).startswith(f"{path}: corrupt tuning cache (")
    if device.gpu_available():
        return  # without --cache-file, --show reads this device's cache
    monkeypatch.setenv(cache.ENV_DIR, str(tmp_path))
    with pytest.raises(SystemExit) as exc:
        tune.main(["--show"])
    assert str(exc.value.code).startswith(f"{path}: corrupt tuning cache (")
    assert "no tuning cache" not in str(exc.value.code)
    assert os.path.exists(path)  # --show reads; it moves nothing


@pytest.mark.parametrize("ms", [0, -0.05, float("inf"), float("nan")], ids=["zero", "negative", "inf", "nan"])
def test_a_time_that_is_not_positive_and_finite_is_corrupt_and_never_selected(tmp_path, ms):
    """Such an entry would win selection (or poison estimates): the whole
    file is corrupt, set aside on load and named corrupt by tune --show."""
    from cudasortkit.cli import tune

    table = _table(bad=dict(GOOD, ms=ms), good=dict(GOOD, ms=0.3))
    text = json.dumps(table)  # NaN and Infinity as Python's json writes them
    with pytest.raises(cache.CorruptCache, match="positive"):
        cache.parse(text.encode())
    path = str(tmp_path / "fake-gpu-sm90-0123456789ab.json")
    _write(path, text)
    with pytest.raises(SystemExit) as exc:
        tune.main(["--show", "--cache-file", path])
    assert str(exc.value.code).startswith(f"{path}: corrupt tuning cache (")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes (POSIX)")
def test_tune_show_skips_a_fifo_named_json_with_a_message_instead_of_hanging(tmp_path, monkeypatch):
    """A FIFO's open() waits for a writer: --show must not open it that way.
    Run in a child process with a timeout, so a regression fails, not hangs."""
    os.mkfifo(tmp_path / "a-fifo-sm90-0123456789ab.json")
    good = tmp_path / "fake-gpu-sm90-0123456789ab.json"
    good.write_text(json.dumps(_table(bitonic=GOOD)))
    os.mkdir(tmp_path / "folder-sm90-0123456789ab.json")
    code = ("import sys; from cudasortkit.gpu import device; from cudasortkit.cli import tune; device.gpu_available = lambda: False; "
            "sys.exit(tune.main(['--show']))")
    env = dict(os.environ, **{cache.ENV_DIR: str(tmp_path)})
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env=env, cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert done.returncode == 0, done.stderr
    assert "bitonic" in done.stdout  # the real cache is still shown
    fifo_line = next(l for l in done.stderr.splitlines() if "a-fifo-sm90" in l)
    assert "not a regular file" in fifo_line and "FIFO" in fifo_line and "skipped" in fifo_line
    folder_line = next(l for l in done.stderr.splitlines() if "folder-sm90" in l)
    assert "not a regular file" in folder_line and "folder" in folder_line
    assert "Traceback" not in done.stderr


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes (POSIX)")
def test_the_store_neither_hangs_on_nor_replaces_a_fifo_at_its_path(tmp_path):
    """The device's own cache file being a FIFO: read nothing, warn once,
    keep results in memory (the FIFO stays). In a child process with a
    timeout, so a regression fails, not hangs."""
    code = textwrap.dedent(f"""
        import os, stat, sys, warnings
        from cudasortkit.tuning import cache
        INFO = {INFO!r}
        GOOD = {GOOD!r}
        path = cache.Store({str(tmp_path)!r}, INFO).path
        os.mkfifo(path)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            store = cache.Store({str(tmp_path)!r}, INFO)
            store.put("a", "sort", "uint32", 12, GOOD)
            assert store.save() is False
        assert store.data["plugins"]["a"]["results"]["sort"]["uint32"]["12"] == GOOD
        assert any("not a regular file" in str(w.message) for w in caught), [str(w.message) for w in caught]
        assert stat.S_ISFIFO(os.stat(path).st_mode)
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert done.returncode == 0 and "ok" in done.stdout, done.stderr


def test_tune_show_says_a_cache_path_that_is_a_file_is_not_a_folder(tmp_path, monkeypatch):
    from cudasortkit.cli import tune

    not_a_folder = tmp_path / "cache"
    not_a_folder.write_text("I am a file")
    monkeypatch.setenv(cache.ENV_DIR, str(not_a_folder))
    monkeypatch.setattr(device, "gpu_available", lambda: False)
    with pytest.raises(SystemExit) as exc:
        tune.main(["--show"])
    message = str(exc.value.code)
    assert "not a folder" in message and str(not_a_folder) in message
    assert "no tuning cache" not in message


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


class RunRaises(SortPlugin):
    """A CPU plugin whose run() has a bug (and one whose default_config has)."""

    name = "runraises"
    dtypes = ("int64",)
    device = "cpu"
    stable = True

    def run(self, job):
        raise AttributeError("'NoneType' object has no attribute 'shape'")


class DefaultsRaise(RunRaises):
    name = "defaultsraise"

    def default_config(self, dtype=None, value_bytes=0):
        raise KeyError("block_size")


@pytest.mark.parametrize("cls, what", [(RunRaises, "run raised AttributeError"),
                                       (DefaultsRaise, "default_config raised KeyError")])
def test_a_plugin_whose_run_fails_is_disabled_and_named(cls, what):
    registry.register(cls)
    a = np.array([3, 1, 2])
    with pytest.raises(PluginError, match=f"'{cls.name}'.*{what}"):
        csk.sort(a, algorithm=cls.name)
    row = next(r for r in csk.algorithms() if r["name"] == cls.name)
    assert row["status"] == "error" and what in row["error"]
    with pytest.raises(ValueError, match=f"{cls.name}.*disabled"):
        csk.sort(a, algorithm=cls.name)
    assert csk.sort(a, algorithm="numpy").tolist() == [1, 2, 3]
    assert a.tolist() == [3, 1, 2]


def test_a_plugin_written_before_valid_config_took_limits_keeps_working():
    from cudasortkit.sdk.plugin import config_is_valid

    class OldStyle(SortPlugin):
        name = "old_style"
        dtypes = ("int32",)
        device = "cpu"
        tunables = {"block_size": Tunable(128, (128, 4096))}

        def valid_config(self, config, dtype, value_bytes):
            return config["block_size"] <= 1024

        def run(self, job):
            pass

    limits = DeviceLimits.sm90()
    assert config_is_valid(OldStyle(), {"block_size": 128}, "int32", 0, limits)
    assert not config_is_valid(OldStyle(), {"block_size": 4096}, "int32", 0, limits)
    from cudasortkit import testing

    testing.check_declarations(OldStyle)
