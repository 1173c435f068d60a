"""bench versions (cudasortkit/cli/bench_versions.py) without a GPU: two
versions of one package side by side in one process, each call's imports
resolved in its own version; the command's refusal without a GPU."""
import subprocess
import sys
import textwrap

import pytest

from cudasortkit.cli.bench_versions import Version

PACKAGE = "csk_versions_probe"


def _write_version(root, who):
    """A package that says which version it is, directly and through a
    submodule it imports only when called."""
    pkg = root / PACKAGE
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(textwrap.dedent(f"""
        WHO = {who!r}

        def lazily():
            from . import late
            return late.WHO
        """))
    (pkg / "late.py").write_text(f"WHO = {who!r}\n")
    return str(root)


@pytest.fixture
def two_versions(tmp_path, monkeypatch):
    this_dir = _write_version(tmp_path / "this", "this")
    other_dir = _write_version(tmp_path / "other", "other")
    monkeypatch.syspath_prepend(this_dir)
    __import__(PACKAGE)
    yield Version("other", other_dir, PACKAGE), Version("this", None, PACKAGE)
    for name in [k for k in sys.modules if k == PACKAGE or k.startswith(PACKAGE + ".")]:
        del sys.modules[name]


def test_each_version_imports_its_own_modules(two_versions):
    other, this = two_versions
    path_before = list(sys.path)
    assert other.root.WHO == "other" and this.root.WHO == "this"
    assert sys.modules[PACKAGE] is this.root  # the process's own, outside active()
    with other.active():
        assert sys.modules[PACKAGE] is other.root
        assert other.root.lazily() == "other"  # a call's own import: its version's module
    assert sys.modules[PACKAGE] is this.root and sys.path == path_before
    assert f"{PACKAGE}.late" not in sys.modules  # the other's late import stays with it
    assert this.root.lazily() == "this"
    with other.active():
        assert sys.modules[f"{PACKAGE}.late"].WHO == "other"
    assert sys.modules[f"{PACKAGE}.late"].WHO == "this"


def test_a_directory_without_the_package_is_refused(tmp_path, two_versions):
    with pytest.raises(SystemExit, match="holds no"):
        Version("other", str(tmp_path / "empty"), PACKAGE)
    assert sys.modules[PACKAGE].WHO == "this"


def test_the_command_needs_a_gpu(tmp_path):
    from cudasortkit.gpu.device import gpu_available

    if gpu_available():
        pytest.skip("a GPU is here")
    done = subprocess.run([sys.executable, "-m", "cudasortkit", "bench", "versions", str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "bench versions needs a GPU" in done.stderr, done.stderr
