"""The plugin contract a third party writes against (issue 26, section 2):
cudasortkit.testing.check_plugin on every built-in plugin and on the example
plugin (examples/csk_ranksort, imported from its folder, not installed)."""
import os
import shutil
import sys
from importlib import metadata

import numpy as np
import pytest

import cudasortkit as csk
from cudasortkit import device, registry, render, testing
from cudasortkit.execute import HostJob
from cudasortkit.job import Job
from cudasortkit.plugin import Request
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
    covered = {(t, d, vb, tuple(sorted(c.items()))) for t, d, vb, c in variants(cls())}
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
    from cudasortkit import SortPlugin, Tunable

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


@pytest.mark.gpu
@pytest.mark.parametrize("name", [n for n in PLUGINS if n != "numpy"])
def test_check_plugin_conformance_on_the_gpu(name, plugin_class):
    """On a GPU, check_plugin also sorts, argsorts and sorts pairs with each
    plugin against NumPy's order (templates are compiled by the tests above)."""
    testing.check_plugin(plugin_class(name), compile=False)


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
