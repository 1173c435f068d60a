"""Shared test setup: the `gpu` marker skips without a usable GPU, every GPU
test runs with poisoned result buffers (cudasortkit.gpu.arrays.POISON_BYTE), and
the GPU tests come in two tiers.

Tiers. A test marked `slow` runs only when the -m expression names `slow`;
otherwise it is deselected at collection:

    python -m pytest -m gpu                  quick tier: every plugin x key dtype
                                             x operation, both orders, edge cases
    python -m pytest -m "gpu and slow"       slow tier: the exhaustive sweeps
    python -m pytest -m "gpu and (slow or not slow)"    both tiers in one run

each with `-n auto` (pytest-xdist) on a GPU machine, as the README says.

Plain `python -m pytest` (CI) deselects slow tests too; they are GPU tests,
which skip there anyway. A slow test named by node id is deselected as well
unless -m names slow: `python -m pytest -m slow tests/test_x.py::test_y`. A GPU test is quick unless it is marked slow: mark a
new test (or a parameter, with pytest.param(..., marks=pytest.mark.slow))
slow when it sweeps sizes, distributions or configurations, sorts 2^24 keys
or more, or tunes.

Compile warm-up. Most of a fresh GPU machine's test time is nvcc compiling
kernel variants, one after another. When a run selects many GPU
tests (WARMUP_MIN_TESTS), the session starts with one subprocess per CPU core
(at most 16); together they sort a few thousand keys with every GPU plugin, key
dtype and kind (sort, argsort, pairs with 4- and 8-byte values) through the
public API, so the compiled-kernel cache on disk (cudasortkit/build/cubins.py)
holds those variants before the tests need them. It uses no knowledge of
templates or defines, cannot change a
result (a cache miss only compiles again), and failures in it are reported,
never raised. CUDASORTKIT_TEST_WARMUP=0 turns it off, =1 forces it. Under
pytest-xdist (-n 8) it runs once per test run, not once per worker: the first
worker to take the lock warms the cache while the others wait, then they all
find its report (the controller prints it).
"""
import fcntl
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np
import pytest

# Tests choose algorithms explicitly or through auto's documented fallback: no
# lazy tuning (it would add seconds per new size), and never the user's cache.
# Tuner tests opt back in with monkeypatch.
os.environ.setdefault("CUDASORTKIT_AUTOTUNE", "0")
# A call builds the config it runs itself (no stand-in while it is built aside,
# cudasortkit/launch/built.py): what a call runs never depends on a build's
# timing. Tests of building aside opt back in with monkeypatch.
os.environ.setdefault("CUDASORTKIT_BUILD_ASIDE", "0")
if "CUDASORTKIT_CACHE_DIR" not in os.environ:  # (warm-up workers inherit the parent's)
    os.environ["CUDASORTKIT_CACHE_DIR"] = tempfile.mkdtemp(prefix="csk-test-cache-")

from cudasortkit.gpu import arrays
from cudasortkit.dtypes import numpy_dtype
from cudasortkit.gpu.device import gpu_available, unavailable_reason

#: Warm the compile cache when at least this many GPU tests are selected.
WARMUP_MIN_TESTS = 100
WARMUP_TIMEOUT_S = 600
# One folder per test run, made by the process that imports this first (the
# xdist controller, whose workers inherit it): the warm-up's lock and report.
os.environ.setdefault("CUDASORTKIT_TEST_RUN_DIR", tempfile.mkdtemp(prefix="csk-test-run-"))
WARMUP_REPORT = os.path.join(os.environ["CUDASORTKIT_TEST_RUN_DIR"], "warmup.json")


def _slow_selected(config) -> bool:
    return re.search(r"\bslow\b", config.getoption("markexpr") or "") is not None


def pytest_collection_modifyitems(config, items):
    if not _slow_selected(config):
        slow = [item for item in items if item.get_closest_marker("slow") is not None]
        if slow:
            items[:] = [item for item in items if item.get_closest_marker("slow") is None]
            config.hook.pytest_deselected(items=slow)
    if gpu_available():
        return
    skip = pytest.mark.skip(reason=f"no GPU: {unavailable_reason()}")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _poison_results(request, monkeypatch):
    if "gpu" in request.keywords:
        monkeypatch.setattr(arrays, "POISON_BYTE", 0xA5)


@pytest.fixture
def rng(request):
    """Fresh random data each run; the seed is in the test's output on
    failure, and CSK_TEST_SEED=<seed> gives a run that seed again (to
    reproduce a failure: run the one test with it)."""
    seed = os.environ.get("CSK_TEST_SEED")
    seed = int(seed) if seed else int(np.random.SeedSequence().entropy % (1 << 63))
    print(f"rng seed {seed} for {request.node.nodeid}")
    return np.random.default_rng(seed)


# ------------------------------------------------------------ compile warm-up

def warmup_units():
    """[algorithm, dtype, kinds] for every registered GPU plugin and key
    dtype; kinds: "sort", "argsort", "pairs4" and "pairs8" (sort_by_key with
    4- or 8-byte values, stable plugins only: sort_by_key is stable)."""
    from cudasortkit.sdk import registry
    from helpers import sorts_one_array

    units = []
    for name, plugin in sorted(registry.plugins().items()):
        if not sorts_one_array(plugin):  # (row-only plugins compile in their own tests)
            continue
        kinds = ["sort"] + (["argsort"] if plugin.pairs else [])
        if plugin.pairs and plugin.stable:
            kinds += ["pairs4", "pairs8"]
        units += [[name, dtype, kinds] for dtype in plugin.dtypes]
    return units


def warmup_worker(units):
    """Run in a subprocess: one small sort of each kind of each unit through
    the public API, compiling whatever the plugin's run() asks for. Prints a
    JSON list of what failed, with the errors."""
    from pycuda import gpuarray

    import cudasortkit as csk
    from cudasortkit.sdk import registry
    from cudasortkit.gpu.device import get_device

    get_device()  # device arrays, as the tests use: a range probe runs on the GPU
    plugins = registry.plugins()
    failed = []
    n = 4099
    for name, dtype, kinds in units:
        # a small range of values: counting takes it in any integer dtype
        keys = gpuarray.to_gpu((np.arange(n) % 100).astype(numpy_dtype(dtype)))
        for kind in kinds:
            try:
                if kind == "sort":
                    csk.sort(keys, algorithm=name)
                elif kind == "argsort":
                    csk.argsort(keys, algorithm=name, stable=plugins[name].stable)
                else:
                    values = gpuarray.to_gpu(np.arange(n, dtype=np.int32 if kind == "pairs4" else np.int64))
                    csk.sort_by_key(keys, values, algorithm=name)
            except Exception as exc:  # reported, never raised: the tests say what is wrong
                failed.append([name, dtype, kind, f"{type(exc).__name__}: {exc}"[:200]])
    print(json.dumps(failed))


@pytest.fixture(scope="session", autouse=True)
def _compile_warmup(request):
    """Session-wide, so it runs before any fixture makes a context or compiles.
    Once per run: xdist workers share WARMUP_REPORT's lock, and whoever finds
    the report written has nothing left to do."""
    setting = os.environ.get("CUDASORTKIT_TEST_WARMUP", "")
    if setting == "0" or not gpu_available():
        return
    selected = sum(1 for item in request.session.items if "gpu" in item.keywords)
    if setting != "1" and selected < WARMUP_MIN_TESTS:
        return
    with open(WARMUP_REPORT + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not os.path.exists(WARMUP_REPORT):
            report = _warm_compile_cache()
            with open(WARMUP_REPORT, "w") as out:
                json.dump(report, out)


def _warm_compile_cache() -> dict:
    units = sorted(warmup_units(), key=lambda unit: -len(unit[2]))  # dealt out, biggest first
    workers = max(1, min(os.cpu_count() or 1, 16, len(units)))
    start = time.perf_counter()
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); import conftest; "
            "conftest.warmup_worker(json.loads(sys.argv[2]))")
    here = os.path.dirname(os.path.abspath(__file__))
    procs = [subprocess.Popen([sys.executable, "-c", code, here, json.dumps(units[i::workers])],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(workers)]
    failed, problems = [], []
    for proc in procs:
        try:
            left = WARMUP_TIMEOUT_S - (time.perf_counter() - start)
            out, err = proc.communicate(timeout=max(1.0, left))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            problems.append(f"worker {proc.pid} ran past {WARMUP_TIMEOUT_S} s and was stopped")
            continue
        try:
            failed += json.loads(out.strip().splitlines()[-1])
        except (ValueError, IndexError):
            problems.append(f"worker exited with {proc.returncode}: {err.strip()[-300:]}")
    return {"sorts": sum(len(unit[2]) for unit in units), "workers": workers,
            "seconds": time.perf_counter() - start, "failed": failed, "problems": problems}


def pytest_terminal_summary(terminalreporter):
    if not os.path.exists(WARMUP_REPORT):
        return
    with open(WARMUP_REPORT) as report_file:
        report = json.load(report_file)
    failed = report["failed"]
    terminalreporter.write_line(
        f"compile warm-up: {report['sorts']} plugin x dtype x kind sorts in {report['seconds']:.1f} s "
        f"({report['workers']} processes), {len(failed)} failed")
    for name, dtype, kind, error in failed[:10]:
        terminalreporter.write_line(f"  warm-up {name} {dtype} {kind}: {error}")
    for problem in report["problems"]:
        terminalreporter.write_line(f"  warm-up: {problem}")
