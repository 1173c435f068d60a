"""The plugin contract a third party writes against (docs/plugins.md):
cudasortkit.testing.check_plugin on every built-in plugin and on the example
plugin (examples/csk_ranksort, imported from its folder, not installed)."""
import os
import shutil
import sys
from importlib import metadata

import numpy as np
import pytest

import cudasortkit as csk
from cudasortkit import SortPlugin, Tunable, testing
from cudasortkit.gpu import device
from cudasortkit.sdk import registry
from cudasortkit.build import render
from cudasortkit.errors import PluginError
from cudasortkit.sdk.job import HostJob
from cudasortkit.sdk.job import Job
from cudasortkit.sdk.plugin import Request
from cudasortkit.plugins.numpy_sort import NumpySort

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "examples", "csk_ranksort")
NVCC = shutil.which("nvcc")
#: Every plugin cudasortkit registers through its entry points, and the example.
BUILT_IN = sorted(ep.name for ep in metadata.entry_points(group=registry.GROUP)
                  if getattr(ep.dist, "name", None) == "cudasortkit")
PLUGINS = BUILT_IN + ["ranksort"]


def _forget_example():
    """No csk_ranksort module or template folder outlives a test: the tests
    of the installed example (test_third_party.py) import their own."""
    for module in [m for m in sys.modules if m == "csk_ranksort" or m.startswith("csk_ranksort.")]:
        del sys.modules[module]
    render.template_dir.cache_clear()


@pytest.fixture
def plugin_class(monkeypatch):
    """name -> the plugin class: a built-in one loaded from its entry point,
    the example imported from examples/csk_ranksort."""
    def load(name):
        if name == "ranksort":
            _forget_example()
            monkeypatch.syspath_prepend(EXAMPLE)
            from csk_ranksort import RankSort

            return RankSort
        (ep,) = [ep for ep in metadata.entry_points(group=registry.GROUP)
                 if ep.name == name and getattr(ep.dist, "name", None) == "cudasortkit"]
        return ep.load()

    yield load
    _forget_example()


@pytest.fixture
def no_gpu(monkeypatch):
    monkeypatch.setattr(device, "gpu_available", lambda: False)


def test_every_builtin_plugin_is_checked():
    assert len(BUILT_IN) >= 10 and {"numpy", "onesweep", "rows"} <= set(BUILT_IN)


@pytest.mark.parametrize("name", PLUGINS)
def test_check_plugin_declarations_and_renderings(name, plugin_class, no_gpu):
    """check_plugin without a GPU and without compiling: declarations, every
    template rendered for every dtype and payload; the CPU plugin's
    conformance (a GPU plugin's needs a GPU: the test below)."""
    cls = plugin_class(name)
    testing.check_plugin(cls, compile=False)
    if cls.device == "gpu":
        assert len(testing.renderings(cls)) >= len(cls.templates) * len(cls.dtypes)


@pytest.mark.nvcc
@pytest.mark.skipif(NVCC is None, reason="nvcc not found")
@pytest.mark.parametrize("name", PLUGINS)
def test_check_plugin_compiles_every_rendering(name, plugin_class, no_gpu, monkeypatch):
    """check_plugin with nvcc: every rendering compiles for sm_90. Renderings
    that tests/test_kernels_compile.py compiles already (its variants(): for
    sm_75 and sm_90, the built-ins in test_templates_compile and the example
    in test_third_party.py) are not compiled again here; the rest (4-byte
    payloads at most dtypes) go through check_plugin's own nvcc call."""
    from test_kernels_compile import variants

    cls = plugin_class(name)
    covered = {(t, d, vb, tuple(sorted(c.items()))) for t, d, vb, c, _ in variants(cls())}
    compile_rendering, compiled = testing.compile_rendering, []

    def compile_uncovered(nvcc, template, dtype, vb, config, arch):
        if (template.file, dtype, vb, tuple(sorted(config.items()))) in covered:
            return None
        compiled.append((template.file, dtype, vb))
        return compile_rendering(nvcc, template, dtype, vb, config, arch)

    monkeypatch.setattr(testing, "compile_rendering", compile_uncovered)
    testing.check_plugin(cls)
    if cls.device == "gpu" and cls.pairs:
        assert compiled, "every rendering was covered elsewhere: nothing of check_plugin's ran"


@pytest.mark.nvcc
@pytest.mark.skipif(NVCC is None, reason="nvcc not found")
def test_check_templates_names_a_rendering_that_does_not_compile(tmp_path, monkeypatch):
    (tmp_path / "bad_kernels").mkdir()
    (tmp_path / "bad_kernels" / "__init__.py").write_text("")
    (tmp_path / "bad_kernels" / "bad.cu").write_text(
        '#include "keys.cuh"\n#if CSK_VALUE_BYTES == 4\n#error no 4-byte payloads\n#endif\n')
    monkeypatch.syspath_prepend(str(tmp_path))

    class Bad(SortPlugin):
        name = "bad"
        dtypes = ("int32",)
        pairs = True
        tunables = {"block_size": Tunable(128)}
        templates = ("bad.cu",)
        template_package = "bad_kernels"

        def run(self, job):
            pass

    try:
        with pytest.raises(AssertionError,
                           match=r"bad: bad.cu for int32, 4-byte values, config \{'block_size': 128\} "
                                 r"does not compile for sm_90:\n.*no 4-byte payloads"):
            testing.check_templates(Bad)
    finally:
        render.template_dir.cache_clear()


def _gpu_conformance_cases():
    """(plugin, key dtype) for every built-in GPU plugin, so xdist's workers
    share a plugin's compiles; the example in one case of all its dtypes."""
    plugins = registry.plugins()
    return [(name, dtype) for name in BUILT_IN if plugins[name].device == "gpu"
            for dtype in plugins[name].dtypes] + [("ranksort", None)]


@pytest.mark.gpu
@pytest.mark.parametrize("name,dtype", _gpu_conformance_cases())
def test_check_plugin_conformance_on_the_gpu(name, dtype, plugin_class):
    """On a GPU, check_plugin also sorts, argsorts and sorts pairs with each
    plugin against NumPy's order (templates are compiled by the tests above):
    here its conformance part, one key dtype at a time."""
    testing.check_conformance(plugin_class(name), dtypes=[dtype] if dtype else None)


# ------------------------------------------------ what a CPU plugin's run() gets
#: What a HostJob and a GPU Job both say, by the same names.
SHARED = ("n", "dtype", "value_bytes", "kind", "descending", "stable", "config", "segments",
          "request")


@pytest.fixture
def fresh_registry():
    """Plugins a test registers, or takes out of service, are forgotten afterwards."""
    yield
    registry.refresh()


class Recording(NumpySort):
    """The CPU plugin, keeping every job it is given."""

    name = "recording"
    host_sort_is_numpy = False  # always through run()
    jobs = []

    def run(self, job):
        self.jobs.append(job)
        return super().run(job)


def test_a_host_job_has_the_names_of_a_gpu_job():
    from test_launchplan import StubState

    request = Request("pairs", "int32", 6, stable=True, descending=True, value_bytes=8)
    keys, values = np.arange(6, dtype=np.int32), np.zeros(6)
    host = HostJob(request, keys, values, {"block_size": 128})
    gpu = Job(Recording(), StubState(0x1000), dtype="int32", n=6, keys_in=0x100, keys_out=0x200,
              values_in=0x300, values_out=0x400, value_bytes=8, descending=True,
              config={"block_size": 128}, request=request)
    assert {name: getattr(host, name) for name in SHARED} == \
        {name: getattr(gpu, name) for name in SHARED}
    assert host.keys is keys and host.values is values
    bare = Job(Recording(), StubState(0x1000), dtype="int32", n=6, keys_in=0x100, keys_out=0x200)
    assert (bare.kind, bare.stable, bare.segments) == ("sort", False, None)


def test_a_cpu_plugin_gets_the_request_under_the_jobs_names(fresh_registry):
    registry.register(Recording)
    Recording.jobs.clear()
    keys = np.array([3, 1, 2, 1, 0, 5], np.int32)
    values = np.arange(6, dtype=np.float64)
    csk.sort(keys, algorithm="recording", descending=True)
    csk.argsort(keys, algorithm="recording", stable=True, index_dtype=np.int32)
    csk.sort_by_key(keys, values, algorithm="recording")
    csk.sort(keys.reshape(2, 3), algorithm="recording")
    sort, argsort, pairs, rows = Recording.jobs
    fields = [tuple(getattr(job, name) for name in
                    ("kind", "n", "dtype", "value_bytes", "descending", "stable"))
              for job in Recording.jobs]
    assert fields == [("sort", 6, "int32", 0, True, False), ("argsort", 6, "int32", 4, False, True),
                      ("pairs", 6, "int32", 8, False, True), ("sort", 6, "int32", 0, False, False)]
    assert all(job.config == {} and job.request.n == job.n for job in Recording.jobs)
    assert np.array_equal(sort.keys, keys) and sort.values is None and argsort.values is None
    assert np.array_equal(pairs.values, values)
    assert sort.segments is None and (rows.segments.count, rows.segments.max_len) == (2, 3)


# ------------------------------------------------- a plugin's results, checked
class Wrong(NumpySort):
    """The CPU plugin, first choice of auto, whose results `mangle` spoils."""

    name = "wrong"
    host_sort_is_numpy = False
    priority = 1
    mangle = staticmethod(lambda job, result: result)

    def run(self, job):
        return self.mangle(job, super().run(job))


#: kind -> (how run()'s result is spoilt, what the reason says)
WRONG_RESULTS = {
    "one key": ("sort", lambda job, r: (r[0][:1], r[1]),
                r"run returned keys of shape \(1,\) for 6 keys"),
    "keys widened": ("sort", lambda job, r: (r[0].astype(np.int64), r[1]),
                     "run returned keys of dtype int64 for int32 keys"),
    "keys as rows": ("sort", lambda job, r: (r[0].reshape(2, 3), r[1]),
                     r"run returned keys of shape \(2, 3\) for 6 keys"),
    "keys as a list": ("sort", lambda job, r: (list(r[0]), r[1]),
                       "run returned keys as list, not a NumPy array"),
    "keys alone": ("sort", lambda job, r: r[0], "run returned ndarray, not a .keys, values. pair"),
    "a triple": ("sort", lambda job, r: (*r, None), "run returned tuple, not a .keys, values. pair"),
    "indices as floats": ("argsort", lambda job, r: (r[0], r[1].astype(np.float64)),
                          "run returned argsort indices of dtype float64, not an integer dtype"),
    "no indices": ("argsort", lambda job, r: (r[0], None),
                   "run returned argsort indices as NoneType, not a NumPy array"),
    "values short": ("pairs", lambda job, r: (r[0], r[1][:-1]),
                     r"run returned values of shape \(5,\) for 6 keys"),
    "values narrowed": ("pairs", lambda job, r: (r[0], r[1].astype(np.float32)),
                        "run returned values of dtype float32 for float64 values"),
}
KEYS = np.array([3, 1, 2, 1, 0, 5], np.int32)
VALUES = np.arange(6, dtype=np.float64)


def _call(kind, algorithm, out=None, values_out=None):
    if kind == "sort":
        return csk.sort(KEYS, algorithm=algorithm, out=out), None
    if kind == "argsort":
        return None, csk.argsort(KEYS, algorithm=algorithm, stable=True)
    return csk.sort_by_key(KEYS, VALUES, algorithm=algorithm, out=out, values_out=values_out)


@pytest.mark.parametrize("case", sorted(WRONG_RESULTS))
def test_a_wrong_result_disables_the_plugin_and_leaves_out_untouched(case, fresh_registry,
                                                                      monkeypatch):
    kind, mangle, reason = WRONG_RESULTS[case]
    monkeypatch.setattr(Wrong, "mangle", staticmethod(mangle))
    registry.register(Wrong)
    out, values_out = np.full(6, -7, np.int32), np.full(6, -7.0)
    with pytest.raises(PluginError, match=f"plugin 'wrong' failed and is disabled: {reason}"):
        _call(kind, "wrong", out=out if kind != "argsort" else None,
              values_out=values_out if kind == "pairs" else None)
    assert (out == -7).all() and (values_out == -7.0).all(), "out= was written"
    entry = registry.entries()["wrong"]
    assert not entry.ok and entry.error.startswith("run returned")
    with pytest.raises(ValueError, match="'wrong' is disabled: run returned"):
        _call(kind, "wrong")


def test_an_in_place_sort_with_a_wrong_result_leaves_the_array_as_it_was(fresh_registry,
                                                                          monkeypatch):
    monkeypatch.setattr(Wrong, "mangle", staticmethod(lambda job, r: (r[0], r[1][:1])))
    registry.register(Wrong)
    keys, values = KEYS.copy(), VALUES.copy()
    with pytest.raises(PluginError, match=r"run returned values of shape \(1,\) for 6 keys"):
        csk.sort_by_key(keys, values, algorithm="wrong", out=keys, values_out=values)
    assert np.array_equal(keys, KEYS) and np.array_equal(values, VALUES)


@pytest.mark.parametrize("case", sorted(WRONG_RESULTS))
def test_auto_chooses_again_when_a_result_is_wrong(case, fresh_registry, monkeypatch):
    kind, mangle, _ = WRONG_RESULTS[case]
    monkeypatch.setattr(Wrong, "mangle", staticmethod(mangle))
    registry.register(Wrong)
    want = np.argsort(KEYS, kind="stable")
    keys, values = _call(kind, "auto")
    if kind != "argsort":
        assert np.array_equal(keys, KEYS[want]) and keys.dtype == KEYS.dtype
    if kind == "argsort":
        assert np.array_equal(values, want)
    elif kind == "pairs":
        assert np.array_equal(values, VALUES[want]) and values.dtype == VALUES.dtype
    assert not registry.entries()["wrong"].ok, "auto did not try the wrong plugin first"


def test_results_the_contract_allows_are_accepted(fresh_registry, monkeypatch):
    """int32 (or any integer) argsort indices are converted; the part of the
    pair a kind does not use is not looked at."""
    monkeypatch.setattr(Wrong, "mangle", staticmethod(
        lambda job, r: (None, r[1].astype(np.int32)) if job.kind == "argsort" else (r[0], "unused")
        if job.kind == "sort" else r))
    registry.register(Wrong)
    want = np.argsort(KEYS, kind="stable")
    got = csk.argsort(KEYS, algorithm="wrong", stable=True)
    assert got.dtype == np.int64 and np.array_equal(got, want)
    assert np.array_equal(csk.sort(KEYS, algorithm="wrong"), KEYS[want])
    assert registry.entries()["wrong"].ok


class ReturnsArrays(SortPlugin):
    """A GPU plugin whose run() hands back arrays instead of writing the job's outputs."""

    name = "returns_arrays"
    dtypes = ("uint32",)
    tunables = {"block_size": Tunable(128)}
    templates = ("bitonic.cu",)

    def run(self, job):
        return np.zeros(job.n, np.uint32), None


class ReturnsArraysReplayable(ReturnsArrays):
    name = "returns_arrays_replayable"
    replayable = True


@pytest.mark.parametrize("cls", [ReturnsArrays, ReturnsArraysReplayable])
def test_a_gpu_plugin_that_returns_a_result_is_disabled(cls, fresh_registry):
    """A GPU plugin writes job.keys_out and returns None; what it returns
    instead never reaches the caller, and its run is never replayed."""
    from test_launchplan import StubState

    from cudasortkit.launch import run as devicesort
    from cudasortkit.launch import plans as launchplan

    registry.register(cls)
    plugin = registry.plugins()[cls.name]
    launchplan.forget()
    with pytest.raises(PluginError, match=f"'{cls.name}'.*run returned tuple; a GPU plugin "
                                          r"writes job.keys_out \(and job.values_out\)"):
        devicesort.run_job(plugin, None, Request("sort", "uint32", 100), StubState(0x1000), 100,
                           0x100, 0x200, 0, 0, ())
    assert not registry.entries()[cls.name].ok
    assert not launchplan._plans, "a run that returned something was recorded for replay"


@pytest.mark.gpu
def test_auto_chooses_again_when_a_gpu_plugin_returns_a_result(fresh_registry, rng):
    from helpers import to_device, to_numpy

    from cudasortkit.plugins.bitonic import BitonicSort

    class SortsAndReturns(BitonicSort):
        name = "sorts_and_returns"
        priority = 0  # auto's first choice for device keys
        replayable = False

        def run(self, job):
            super().run(job)
            return job.keys_out

    registry.register(SortsAndReturns)
    a = rng.integers(0, 1000, 5000).astype(np.int32)
    assert np.array_equal(to_numpy(csk.sort(to_device(a))), np.sort(a))
    assert registry.entries()["sorts_and_returns"].error.startswith("run returned int")
