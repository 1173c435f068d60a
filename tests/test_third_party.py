"""A third-party plugin package (examples/csk_ranksort), installed into a
private site directory (see install_example), is discovered through its entry
point, listed, selectable by name, compiles with nvcc and sorts correctly on
the GPU; broken plugins are listed with their errors and never break the
others."""
import configparser
import glob
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import cudasortkit as csk
from cudasortkit.sdk import registry
from helpers import (assert_keys_equal, assert_valid_argsort, make_keys, reference_sort,
                     write_dist_info)

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "examples", "csk_ranksort")


def _add_path(monkeypatch, path):
    monkeypatch.syspath_prepend(path)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([path, os.environ.get("PYTHONPATH", "")]))
    registry.refresh()


def install_example(src, site):
    """Install the setuptools project at `src` into the directory `site` as
    pip would lay it out, without building anything: each package's modules
    and package data, and a NAME-VERSION.dist-info with METADATA and
    entry_points.txt. Returns `site`.

    Why not `pip install --target`: pip must then build a wheel, and in a
    fresh `python -m venv` (its old setuptools, no `wheel` package, no build
    isolation without network) that fails with "invalid command
    'bdist_wheel'". What these tests need is what importlib.metadata reads
    to discover an entry point: a dist-info directory on sys.path naming the
    distribution and its entry points, beside the importable package. All of
    it is read from the example's setup.cfg (metadata name and version,
    options.packages, options.package_data, options.entry_points), so the
    example stays the one source of truth, and a template missing from its
    package_data is missing here too, as it would be from a real install."""
    cfg = configparser.ConfigParser(interpolation=None)
    cfg.optionxform = str  # entry point groups and names are case-sensitive
    assert cfg.read(os.path.join(src, "setup.cfg")), f"no setup.cfg in {src}"
    name, version = cfg["metadata"]["name"], cfg["metadata"]["version"]
    data = dict(cfg.items("options.package_data")) if cfg.has_section("options.package_data") else {}
    for package in cfg["options"]["packages"].split():
        rel = package.replace(".", os.sep)
        patterns = ["*.py"] + (data.get(package, "") + " " + data.get("*", "")).replace(",", " ").split()
        os.makedirs(os.path.join(site, rel))
        for pattern in patterns:
            for path in glob.glob(os.path.join(src, rel, pattern)):
                shutil.copy(path, os.path.join(site, rel))
    points = {}
    for group, lines in cfg.items("options.entry_points"):
        pairs = (line.split("=", 1) for line in lines.strip().splitlines())
        points[group] = {ep.strip(): target.strip() for ep, target in pairs}
    write_dist_info(site, name, version, points)
    return site


@pytest.fixture(scope="module")
def ranksort_site(tmp_path_factory):
    """The example plugin package, installed into a private site directory
    by install_example (no pip, no build tools, no network): the tests then
    put that directory on sys.path and PYTHONPATH, as an installed package
    would be."""
    return install_example(EXAMPLE, str(tmp_path_factory.mktemp("site")))


@pytest.fixture
def with_ranksort(ranksort_site, monkeypatch):
    _add_path(monkeypatch, ranksort_site)
    yield
    monkeypatch.undo()
    registry.refresh()


@pytest.fixture
def with_broken_plugins(tmp_path, monkeypatch):
    """Entry points that fail to import, load a non-plugin, or clash by name."""
    (tmp_path / "badplugins.py").write_text(textwrap.dedent("""
        from cudasortkit import SortPlugin, Tunable

        class NotAPlugin:
            name = "notaplugin"

        class NoDtypes(SortPlugin):
            name = "nodtypes"
            def run(self, job):
                pass

        class Clash(SortPlugin):
            name = "numpy"
            dtypes = ("int32",)
            device = "cpu"
            def run(self, job):
                pass
    """))
    write_dist_info(tmp_path, "badplugins", "0.1", {"cudasortkit.algorithms": {
        "missing": "no_such_module:Plugin", "notaplugin": "badplugins:NotAPlugin",
        "nodtypes": "badplugins:NoDtypes", "numpy": "badplugins:Clash"}})
    _add_path(monkeypatch, str(tmp_path))
    yield
    monkeypatch.undo()
    registry.refresh()


def test_third_party_plugin_is_discovered_and_listed(with_ranksort):
    rows = {r["name"]: r for r in csk.algorithms()}
    assert rows["ranksort"]["status"] == "ok", rows["ranksort"]["error"]
    assert rows["ranksort"]["distribution"] == "csk-ranksort"
    assert rows["ranksort"]["stable"] and rows["ranksort"]["pairs"]
    listing = subprocess.run([sys.executable, "-m", "cudasortkit", "list"], capture_output=True,
                             text=True, check=True).stdout
    assert "ranksort" in listing and "example third-party plugin" in listing


def test_third_party_declines_large_requests(with_ranksort):
    with pytest.raises(ValueError, match="at most 65536 keys"):
        csk.sort(np.zeros(100_000, np.float32), algorithm="ranksort")


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not found")
def test_third_party_template_compiles(with_ranksort):
    from concurrent.futures import ThreadPoolExecutor

    from test_kernels_compile import compile_one, variants

    plugin = registry.plugins()["ranksort"]
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:  # nvcc runs as a subprocess
        results = list(pool.map(lambda v: compile_one(plugin, *v), variants(plugin)))
    for rc, msg in results:
        assert rc == 0, msg


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["int8", "float32"] + [  # quick tier: a 1-byte and a float dtype
    pytest.param(d, marks=pytest.mark.slow) for d in ("uint16", "int32", "float64", "uint64")])
def test_third_party_sorts_on_gpu(with_ranksort, dtype, rng):
    cupy = pytest.importorskip("cupy")
    for n in (0, 1, 2, 3, 255, 257, 4099, 65536):
        for dist in ("uniform", "few_unique", "special"):
            a = make_keys(dist, dtype, n, rng)
            for descending in (False, True):
                got = csk.sort(cupy.asarray(a), algorithm="ranksort", descending=descending)
                assert_keys_equal(got, reference_sort(a, descending))
                order = csk.argsort(cupy.asarray(a), algorithm="ranksort", stable=True,
                                    descending=descending)
                assert_valid_argsort(order, a, descending, stable=True)


def test_broken_plugins_are_listed_and_skipped(with_broken_plugins, rng):
    entries = registry.entries()
    assert "ModuleNotFoundError" in entries["missing"].error
    assert "not a subclass" in entries["notaplugin"].error
    assert "declares no key dtypes" in entries["nodtypes"].error
    assert "registered twice" in entries["numpy@badplugins"].error
    assert entries["numpy"].ok and entries["numpy"].distribution == "cudasortkit"
    assert entries["bitonic"].ok
    listing = subprocess.run([sys.executable, "-m", "cudasortkit", "list"], capture_output=True,
                             text=True, check=True).stdout
    assert any(line.split()[:2] == ["missing", "ERROR"] and "no_such_module" in line
               for line in listing.splitlines())
    with pytest.raises(ValueError, match="failed to load"):
        csk.sort(np.arange(5), algorithm="missing")
    a = rng.random(1000)
    assert np.array_equal(csk.sort(a), np.sort(a))  # the rest still work


def test_the_shipped_checks_pass_for_the_cpu_plugin_and_ranksort_declarations(with_ranksort):
    """cudasortkit.testing is what a third-party plugin runs in its own tests."""
    from cudasortkit import testing
    from cudasortkit.plugins.numpy_sort import NumpySort

    testing.check_plugin(NumpySort)  # conformance runs on the CPU
    ranksort = type(registry.plugins()["ranksort"])
    testing.check_declarations(ranksort)


def test_the_shipped_checks_catch_a_wrong_plugin():
    from cudasortkit import testing
    from cudasortkit.plugins.numpy_sort import NumpySort

    class Reversed(NumpySort):
        name = "reversed_numpy"

        def run(self, job):
            keys, values = super().run(job)
            return keys[::-1], (values[::-1] if values is not None else None)

    with pytest.raises(AssertionError, match="reversed_numpy.*differs"):
        testing.check_conformance(Reversed, sizes=(5,), dtypes=("int32",))


@pytest.mark.gpu
def test_the_shipped_checks_pass_for_ranksort_on_the_gpu(with_ranksort):
    from cudasortkit import testing

    testing.check_conformance(type(registry.plugins()["ranksort"]), dtypes=("int32", "float32"))
