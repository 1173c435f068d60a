"""cudasortkit installed the way a user installs it: a wheel built from this
checkout, installed (not editable) into a fresh venv, used from a folder
outside the checkout.

An editable install, or running from the checkout, imports the source tree
and so cannot notice a package or a kernel source missing from the wheel;
this test can. It needs PyPI (build isolation fetches setuptools, the venv
fetches numpy and platformdirs; pip's cache makes repeats fast) and fails,
never skips, when anything of the install fails.
"""
import configparser
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

CHECKOUT = Path(__file__).resolve().parents[1]
#: What the build needs from the checkout is copied first: building in the
#: checkout itself would reuse its build/ folder, whose stale files from an
#: earlier build could hide a package missing from setup.cfg.
_IGNORED = shutil.ignore_patterns(".git", "*.egg-info", ".venv*", "__pycache__", ".pytest_cache",
                                  ".hypothesis", ".gpu", "tests", "docs", "examples", ".ci")


def IGNORED(folder, names):
    """What the copy leaves out; build/ and dist/ only at the top (the
    package has a build/ subpackage of its own)."""
    top = {"build", "dist"} if Path(folder) == CHECKOUT else set()
    return set(_IGNORED(folder, names)) | (top & set(names))
PACKAGE_FILES = ("*.py", "*.cu", "*.cuh")
#: The checkout's folders that make the installed package: (folder, package).
PACKAGE_FOLDERS = (("cudasortkit", "cudasortkit"), ("kernels", "cudasortkit.kernels"),
                   ("plugins", "cudasortkit.plugins"))

#: Run by the installed interpreter: imports a built-in plugin, renders its
#: kernel from the installed cudasortkit.kernels and compiles it with nvcc
#: for sm_90 (where nvcc is installed; else says so).
COMPILE_FROM_INSTALL = """
import os, shutil, subprocess, sys, tempfile
import cudasortkit.kernels, cudasortkit.plugins.radix as radix
from cudasortkit.build.compiler import NVCC_OPTIONS
from cudasortkit.build.template import KernelTemplate
plugin = radix.RadixSort()
template = KernelTemplate(plugin.templates[0], plugin.template_package)
assert os.path.dirname(template.path) == os.path.dirname(cudasortkit.kernels.__file__), template.path
nvcc = shutil.which("nvcc")
if nvcc is None:
    print("compiled-skipped: no nvcc")
    sys.exit(0)
with tempfile.TemporaryDirectory() as tmp:
    src = os.path.join(tmp, "k.cu")
    open(src, "w").write(template.render("uint32", 0, plugin.default_config()))
    cmd = [nvcc, "--cubin", "-arch=sm_90", *NVCC_OPTIONS, "-o", os.path.join(tmp, "k.cubin"), src]
    for d in template.include_dirs:
        cmd += ["-I", d]
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
print("compiled", radix.__file__, cudasortkit.kernels.__file__)
"""


def _run(args, cwd, what, timeout=300):
    """Run a command; its failure fails the test with everything it printed."""
    # pip's own settings (index, certificates) stay, as for the user's install;
    # what would put another Python's packages on sys.path goes.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    proc = subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)
    if proc.returncode != 0:
        pytest.fail(f"{what} failed (exit {proc.returncode}): {' '.join(map(str, args))}\n"
                    f"--- stdout\n{proc.stdout[-6000:]}\n--- stderr\n{proc.stderr[-6000:]}")
    return proc.stdout


def _entry_point_names() -> list:
    cfg = configparser.ConfigParser()
    cfg.read(CHECKOUT / "setup.cfg")
    names = []
    for group in ("cudasortkit.algorithms", "cudasortkit.selection", "cudasortkit.search",
                  "cudasortkit.multikey"):  # list shows every kind
        text = cfg["options.entry_points"].get(group, "")
        names += [line.split("=")[0].strip() for line in text.strip().splitlines()]
    return names


def _install(root):
    """(venv's python, venv's bin folder, wheel path, a folder outside the checkout)."""
    source, wheels, venv, work = root / "src", root / "wheels", root / "venv", root / "work"
    shutil.copytree(CHECKOUT, source, ignore=IGNORED)
    work.mkdir()
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", wheels, source], work,
         "building the wheel")
    (wheel,) = wheels.glob("cudasortkit-*.whl")
    _run([sys.executable, "-m", "venv", venv], work, "creating the venv")
    bindir = venv / "bin"
    python = bindir / "python"
    _run([python, "-m", "pip", "install", "-q", wheel], work, "installing the wheel")
    return python, bindir, wheel, work


def test_wheel_installs_and_works_outside_the_checkout(tmp_path):
    # One test, not several sharing a fixture: under pytest-xdist each
    # worker would build and install its own copy.
    python, bindir, wheel, work = _install(tmp_path)

    # -I: neither the cwd nor PYTHON* variables reach sys.path, so only the
    # venv's copy can be imported (the check below says so too).
    where = _run([python, "-I", "-c", "import cudasortkit, cudasortkit.tuning; print(cudasortkit.__file__)"],
                 work, "import cudasortkit")
    assert Path(where.strip()).is_relative_to(python.parent.parent), where
    assert not Path(where.strip()).is_relative_to(CHECKOUT), where

    names = _entry_point_names()
    assert "numpy" in names and len(names) >= 2
    for listing in (_run([python, "-I", "-m", "cudasortkit", "list"], work, "python -m cudasortkit list"),
                    _run([bindir / "cudasortkit", "list"], work, "the cudasortkit console script")):
        status = {line.split()[0]: line.split(None, 1)[1] for line in listing.splitlines()
                  if line.strip() and not line.startswith(" ")}
        assert sorted(status) == sorted(names), listing
        for name in names:
            assert status[name].startswith("ok"), listing

    code = ("import numpy as np, cudasortkit as csk\n"
            "a = np.random.default_rng(1).integers(-1000, 1000, 5000).astype(np.int32)\n"
            "assert np.array_equal(csk.sort(a), np.sort(a))\n"
            "assert np.array_equal(a[csk.argsort(a, stable=True)], np.sort(a))\n"
            "f = np.array([3.5, np.nan, -1.0, 2.0], dtype=np.float32)\n"
            "assert np.array_equal(csk.sort(f), np.sort(f), equal_nan=True)\n"
            "print('sorted')\n")
    assert _run([python, "-I", "-c", code], work, "sorting a NumPy array").strip() == "sorted"

    # The top-level plugins/ and kernels/ install as cudasortkit.plugins and
    # cudasortkit.kernels, and a kernel compiles from the installed sources.
    assert _run([python, "-I", "-c", COMPILE_FROM_INSTALL], work,
                "compiling a kernel from the installed package").split()[0] == "compiled"

    # Every module and kernel source of the package is in the wheel (the GPU
    # plugins compile theirs at run time, which no CPU check above does).
    wanted = {"/".join((*package.split("."), p.relative_to(CHECKOUT / folder).as_posix()))
              for folder, package in PACKAGE_FOLDERS for pattern in PACKAGE_FILES
              for p in (CHECKOUT / folder).rglob(pattern) if "__pycache__" not in p.parts}
    with zipfile.ZipFile(wheel) as zf:
        missing = sorted(wanted - set(zf.namelist()))
    assert missing == [], f"missing from {wheel.name}: {missing}"


def test_the_checkout_install_maps_plugins_and_kernels():
    """The install this suite runs under (README: pip install -e) imports the
    top-level plugins/ and kernels/ as cudasortkit.plugins and
    cudasortkit.kernels, and compiles a kernel from them."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    done = subprocess.run([sys.executable, "-I", "-c", COMPILE_FROM_INSTALL], cwd=CHECKOUT.parent,
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    word, *paths = done.stdout.split()
    assert word in ("compiled", "compiled-skipped:"), done.stdout
    if word == "compiled":
        assert Path(paths[0]) == CHECKOUT / "plugins" / "radix.py", paths
        assert Path(paths[1]) == CHECKOUT / "kernels" / "__init__.py", paths


@pytest.mark.parametrize("folder", [".venv", ".venv-3.12", ".venv-ci"])
def test_a_venv_made_in_the_checkout_is_ignored(folder):
    """The README's set-up run inside the checkout (python3 -m venv .venv)
    leaves no untracked folder: git ignores .venv/ and .venv*/ at any depth."""
    if shutil.which("git") is None or not (CHECKOUT / ".git").exists():
        pytest.skip("not a git checkout")
    for path in (f"{folder}/bin/python", f"examples/{folder}/bin/python"):
        done = subprocess.run(["git", "check-ignore", "-q", "--no-index", path], cwd=CHECKOUT)
        assert done.returncode == 0, f"{path} is not ignored by .gitignore"
