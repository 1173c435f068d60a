"""GPU tests of the tuner: a quick sweep of two plugins on two dtypes, measured
selection picks the faster one, wrong configs are rejected, and first-run
measurement fills an empty cache. Every test uses its own temporary cache dir.
The sweeps and first-run measurement are the slow tier (-m "gpu and slow"): each
measures many configs; only the autotune-off test is in the quick tier."""
import numpy as np
import re

import pytest

import cudasortkit as csk
from cudasortkit import api
from cudasortkit.sdk import registry
from cudasortkit.dispatch import select
from cudasortkit.gpu.device import get_device
from cudasortkit.sdk.plugin import Request
from cudasortkit.plugins.bitonic import BitonicSort
from cudasortkit.tuning import cache, runtime
from cudasortkit.tuning.measured import MeasuredPolicy

pytestmark = pytest.mark.gpu


class BitonicTwice(BitonicSort):
    """The same sort done twice: a second plugin known to be about 2x slower."""

    name = "bitonic_twice"

    def run(self, job):
        super().run(job)
        super().run(job)


class BitonicBrokenIpt2(BitonicSort):
    """Sorts wrongly (copies its input) when items_per_thread == 2."""

    name = "bitonic_broken_ipt2"

    def run(self, job):
        if job.config["items_per_thread"] == 2:
            job.copy(job.keys_out, job.keys_in, job.n * job.key_bytes)
            return
        super().run(job)


@pytest.fixture
def tmp_cache(tmp_path, monkeypatch):
    monkeypatch.setenv(cache.ENV_DIR, str(tmp_path))
    monkeypatch.setenv(runtime.ENV_AUTOTUNE, "1")
    runtime.reset()
    yield tmp_path
    runtime.reset()


@pytest.fixture
def extra_plugins():
    for cls in (BitonicTwice, BitonicBrokenIpt2):
        registry.register(cls)
    yield {n: registry.plugins()[n] for n in ("bitonic", "bitonic_twice", "bitonic_broken_ipt2", "numpy")}
    for cls in (BitonicTwice, BitonicBrokenIpt2):
        registry.entries().pop(cls.name, None)
    runtime.reset()


def _gpu(a):
    from pycuda import gpuarray

    from cudasortkit.gpu.device import get_device

    get_device()
    return gpuarray.to_gpu(a)


@pytest.mark.slow
def test_quick_tune_two_plugins_two_dtypes_and_selection_picks_the_faster(tmp_cache, extra_plugins,
                                                                          monkeypatch):
    plugins = {n: extra_plugins[n] for n in ("bitonic", "bitonic_twice", "numpy")}
    dtypes, buckets = ["uint32", "float32"], [12, 16]
    summary = runtime.sweep(plugins, dtypes, buckets, ["sort"], strategy="quick", repeats=3,
                            host_max_bucket=12, log=print)
    assert summary["entries"] == 8 and summary["failed"] == 0 and summary["saved"]
    data = cache.load_any(summary["path"])
    assert data["device"]["name"] and data["schema"] == cache.SCHEMA
    for name in ("bitonic", "bitonic_twice"):
        p = plugins[name]
        for dt in dtypes:
            for b in buckets:
                e = data["plugins"][name]["results"]["sort"][dt][str(b)]
                assert e["ms"] > 0 and e["tried"] >= 5 and e["complete"]
                assert p.valid_config(e["config"], dt, 0, get_device().limits)
                assert e["ms"] <= e["default_ms"]  # the default is always among the tried
    for dt in dtypes:
        assert data["host"]["sort"][dt]["12"]["extra_ms"] > 0
        assert data["plugins"]["numpy"]["results"]["sort"][dt]["12"]["ms"] > 0
    monkeypatch.setenv(runtime.ENV_AUTOTUNE, "0")
    gpu_pair = {n: plugins[n] for n in ("bitonic", "bitonic_twice")}
    for dt in dtypes:
        for b in buckets:  # a measured size: the plugin that measured faster, with its config
            ms = {n: data["plugins"][n]["results"]["sort"][dt][str(b)]["ms"] for n in gpu_pair}
            choice = MeasuredPolicy().choose(Request("sort", dt, 1 << b), gpu_pair)
            plugin, config = choice.plugin, choice.config
            assert plugin.name == min(ms, key=ms.get), (dt, b, ms)
            assert config == data["plugins"][plugin.name]["results"]["sort"][dt][str(b)]["config"]
        for n in (3 << 13, 1 << 20):  # between and beyond buckets: interpolated, still valid
            choice = MeasuredPolicy().choose(Request("sort", dt, n), gpu_pair)
            plugin, config = choice.plugin, choice.config
            assert plugin.name in gpu_pair and plugin.valid_config(config, dt, 0, get_device().limits)
    # a plugin asked for by name runs its tuned config
    _, config = api.selector.choose(Request("sort", "uint32", 1 << 16), "bitonic")
    assert config == data["plugins"]["bitonic"]["results"]["sort"]["uint32"]["16"]["config"]
    # and sorts right with it
    rng = np.random.default_rng()
    a = rng.integers(0, 2**32, 1 << 16, dtype=np.uint32)
    assert np.array_equal(csk.sort(_gpu(a), algorithm="bitonic").get(), np.sort(a))
    d = csk.explain(_gpu(a), algorithm="bitonic")
    assert d.name == "bitonic" and d.config == config


@pytest.mark.slow
def test_rows_sweep_measures_the_segmented_plugins_and_auto_uses_it(tmp_cache, monkeypatch):
    """A rows sweep (tune --rows) writes op@rows entries by row length for
    the segmented plugins, each checked against NumPy before timing; auto
    and explain then choose rows from them."""
    from cudasortkit.tuning.policy import ROWS

    plugins = {n: p for n, p in registry.plugins().items() if p.segmented and p.device == "gpu"}
    summary = runtime.sweep(plugins, ["float32"], [3, 11], ["sort", "argsort"], strategy="default",
                            repeats=3, log=print, rows=True)
    assert summary["failed"] == 0 and summary["entries"] >= 2 * 2 * 2, summary
    data = cache.load_any(summary["path"])
    for op in ("sort", "argsort"):
        for b in ("3", "11"):
            times = {n: data["plugins"][n]["results"].get(op + ROWS, {}).get("float32", {}).get(b)
                     for n in plugins}
            measured = {n: e["ms"] for n, e in times.items() if e}
            assert len(measured) >= 2, (op, b, times)
    monkeypatch.setenv(runtime.ENV_AUTOTUNE, "0")
    cupy = pytest.importorskip("cupy")
    h = np.random.default_rng(2).standard_normal((1 << 11, 1 << 11)).astype(np.float32)
    d = csk.explain(cupy.asarray(h))
    assert "fastest measured" in d.reason and "rows of 2,048" in d.reason, str(d)
    np.testing.assert_array_equal(csk.sort(cupy.asarray(h)).get(), np.sort(h, axis=-1))


@pytest.mark.slow
def test_wrong_configs_are_rejected_never_cached(tmp_cache, extra_plugins):
    plugins = {"bitonic_broken_ipt2": extra_plugins["bitonic_broken_ipt2"]}
    summary = runtime.sweep(plugins, ["uint32"], [12], ["sort"], strategy="quick", repeats=2, log=print)
    assert summary["rejected"] >= 1
    e = cache.load_any(summary["path"])["plugins"]["bitonic_broken_ipt2"]["results"]["sort"]["uint32"]["12"]
    assert e["config"]["items_per_thread"] != 2
    assert any(r["config"]["items_per_thread"] == 2 and "wrong result" in r["reason"]
               for r in e["rejected"])


def test_autotune_off_writes_nothing_and_uses_defaults(tmp_cache, monkeypatch):
    monkeypatch.setenv(runtime.ENV_AUTOTUNE, "0")
    runtime.reset()
    a = np.random.default_rng().integers(-100, 100, 5000).astype(np.int32)
    assert np.array_equal(csk.sort(_gpu(a), algorithm="bitonic").get(), np.sort(a))
    assert api.selector.choose(Request("sort", "int32", 5000), "bitonic")[1] is None
    assert cache.cache_files(str(tmp_cache)) == []
    assert "default config" in csk.explain(_gpu(a), algorithm="bitonic").reason


@pytest.mark.slow
def test_first_run_measurement_fills_the_cache(tmp_cache, extra_plugins, monkeypatch):
    """With measurement made free (the credit rule is tested on the CPU),
    each auto call measures one missing plugin, and never one asked for by name."""
    from cudasortkit.tuning import measured

    monkeypatch.setattr(measured, "FIRST_MEASURE_MS", 0.0)
    monkeypatch.setattr(measured, "MEASURE_OVERHEAD_MS", 0.0)
    monkeypatch.setattr(measured, "MEASURE_RUNS", 0)
    monkeypatch.setattr(measured, "HOST_NS_PER_KEY", 0.0)
    rng = np.random.default_rng()
    a = rng.integers(0, 2**32, 5000, dtype=np.uint32)
    assert np.array_equal(csk.sort(_gpu(a), algorithm="bitonic").get(), np.sort(a))
    assert cache.cache_files(str(tmp_cache)) == []  # by name: cached configs only, no measuring
    gpu_names = [n for n, p in select.usable(Request("sort", "uint32", 5000)).items() if p.device == "gpu"]
    for _ in range(len(gpu_names) + 1):
        assert np.array_equal(csk.sort(_gpu(a)).get(), np.sort(a))
    files = cache.cache_files(str(tmp_cache))
    assert len(files) == 1
    results = cache.load_any(files[0])["plugins"]
    for name in gpu_names:
        e = results[name]["results"]["sort"]["uint32"]["12"]
        assert e["lazy"] and (e.get("ms", 0) > 0 or e.get("failed")), (name, e)
    # small host arrays stay on the CPU plugin and measure nothing
    h = rng.standard_normal(3000).astype(np.float32)
    for _ in range(len(gpu_names) + 1):
        assert np.array_equal(csk.sort(h), np.sort(h))
    data = cache.load_any(files[0])
    assert "float32" not in data["plugins"]["bitonic"]["results"]["sort"]
    print(csk.explain(h))
    assert csk.explain(h).name in registry.plugins()


def test_configs_are_checked_in_parallel_on_shared_inputs(tmp_cache, extra_plugins):
    """The sweep's checking: Cases take the first n keys of one dtype's
    shared Inputs, NumPy's answer is computed once per Case, and every
    (plugin, config) is checked once, in threads (compiling at once): right
    configs pass, a wrong one is rejected with its reason, on every size."""
    from cudasortkit.tuning.tuner import Case, Inputs, Tuner, configs_quick

    state = get_device()
    inputs = Inputs(state, "float32", 1 << 16)
    tuner = Tuner(state, repeats=2, workers=8)
    plugins = {n: extra_plugins[n] for n in ("bitonic", "bitonic_broken_ipt2")}
    cases = [Case(state, "sort", "float32", n, shared=inputs) for n in (1 << 12, 1 << 16)]
    try:
        for case in cases:
            assert int(case.keys[0].gpudata) == int(inputs.devices[0].gpudata)  # a view, not a copy
            np.testing.assert_array_equal(case.expected, np.sort(inputs.hosts[0][:case.n]))
        triples = [(case, p, c) for case in cases for p in plugins.values()
                   for c in configs_quick(p, "float32", 0, state.limits)]
        tuner.check_many(triples)
        for case, plugin, config in triples:
            reason = tuner.outcome(plugin, case, config)  # answered from case.verified
            if plugin.name == "bitonic_broken_ipt2" and config["items_per_thread"] == 2:
                assert reason and reason.startswith("wrong result: keys differ"), reason
            else:
                assert reason is None, (plugin.name, config, reason)
        assert len(cases[0].verified) == len({(p.name, tuple(sorted(c.items())))
                                              for case, p, c in triples if case is cases[0]})
        ms = tuner.measure(plugins["bitonic"], cases[1], configs_quick(plugins["bitonic"], "float32", 0,
                                                                          state.limits)[0])
        assert ms > 0
    finally:
        for case in cases:
            case.free()
        inputs.free()


@pytest.mark.slow
def test_tune_quick_says_what_it_did(tmp_cache):
    """`python -m cudasortkit.tune --quick` as a user runs it: one progress
    bar, every entry at its tunable variations (no "defaults only"), skips
    said once per plugin and reason. It prints the wall time and the
    output's length; how long it may take is a target measured by hand
    (docs/tuning.md), not asserted in a test."""
    import os
    import subprocess
    import sys
    import time

    env = dict(os.environ, **{cache.ENV_DIR: str(tmp_cache)})
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "cudasortkit.tune", "--quick"], capture_output=True,
                          text=True, env=env, timeout=600)
    wall = time.monotonic() - t0
    print(done.stdout)
    print(f"tune --quick: {wall:.1f} s wall, {len(done.stdout.splitlines())} lines on stdout, "
          f"{len(done.stderr)} characters on stderr")
    assert done.returncode == 0, done.stderr[-3000:]
    import importlib.util

    if importlib.util.find_spec("tqdm") is not None:
        # One bar: its count never goes back (a second bar would start again
        # at 0; the one bar may redraw 0% while its total is first set).
        counts = [int(n) for n in re.findall(r"tuning:\s+\d+%\|[^|]*\| (\d+)/\d+", done.stderr)]
        assert counts and counts == sorted(counts), done.stderr[-3000:]
    assert "defaults only" not in done.stdout and "default config only" not in done.stdout
    skips = [line for line in done.stdout.splitlines() if line.strip().startswith("skipped ")]
    assert len(skips) <= 10, skips
    assert "0 entries failed" in done.stdout
    data = cache.load_any(cache.cache_files(str(tmp_cache))[0])
    e = data["plugins"]["onesweep"]["results"]["sort"]["float32"]["20"]
    assert e["complete"] and e["strategy"] == "quick" and e["arbitrated"]


class BitonicWritesInput(BitonicSort):
    """Breaks the plugin contract: overwrites its input with the sorted keys."""

    name = "bitonic_writes_input"

    def run(self, job):
        super().run(job)
        job.copy(job.keys_in, job.keys_out, job.n * job.key_bytes)


def test_a_plugin_that_writes_its_shared_input_is_named_and_the_input_restored(tmp_cache):
    """A sweep's inputs are shared by every size and plugin of a dtype: one
    that writes its input is reported and the inputs uploaded again."""
    registry.register(BitonicWritesInput)
    try:
        plugin = registry.plugins()["bitonic_writes_input"]
        lines = []
        summary = runtime.sweep({plugin.name: plugin}, ["uint32"], [10, 12], ["sort"],
                                strategy="default", repeats=2, host_max_bucket=None, log=lines.append)
        assert summary["entries"] == 2, summary
        assert sum("wrote its input (restored)" in line for line in lines) == 2, lines
    finally:
        registry.entries().pop(BitonicWritesInput.name, None)
        runtime.reset()


def test_auto_on_an_empty_cache_picks_the_measured_winners(tmp_cache):
    """Cells where a first pick once lost, fresh cache: uint16 2^26 -> counting (2.56x CuPy
    where auto's pick ran 2.10x), uniform uint32/int32 2^24 -> onesweep
    (counting declines the spread keys)."""
    rng = np.random.default_rng(31)
    api.selector.forget()
    a = _gpu(rng.integers(0, 1 << 16, 1 << 26, dtype=np.uint16))
    assert csk.explain(a).name == "counting"
    for dtype in (np.uint32, np.int32):
        info = np.iinfo(dtype)
        b = _gpu(rng.integers(info.min, info.max, 1 << 24, dtype=dtype, endpoint=True))
        assert csk.explain(b).name == "onesweep", dtype


@pytest.mark.parametrize("name", ["onesweep", "merge_sort", "bitonic"])
@pytest.mark.parametrize("kind", ["sort", "argsort"])
@pytest.mark.parametrize("n", [2, 4099, 70_001])
def test_the_tuner_times_a_repeated_call_that_sorts(name, kind, n):
    """What the tuner times of a replayable plugin is its launch plan
    replayed as a prepared call replays it (tuning/replayed.py): that
    replay sorts each input into the buffers it owns, the graph of each
    input captured before any timing."""
    from cudasortkit.tuning.replayed import ReplayedCall
    from cudasortkit.tuning.tuner import Case

    state = get_device()
    plugin = registry.plugins()[name]
    config = registry.default_config(plugin, "float32", 8 if kind == "argsort" else 0, n)
    case = Case(state, kind, "float32", n, inputs=3)
    try:
        with case.runners({name: (plugin, config)}) as runs:
            run = runs[name]
            assert isinstance(run, ReplayedCall)
            for i in (2, 0, 1):
                keys_out, _, values_out = run.outputs
                poisoned = np.full(n, np.nan, np.float32)
                state.cuda.memcpy_htod(keys_out, poisoned)
                launches = run.plan.graphs.launches
                run(i)
                assert run.plan.graphs.launches == launches + 1  # its graph, captured when settling
                state.cuda.Context.synchronize()
                h = case.hosts[i]
                if kind == "sort":
                    got = np.empty(n, np.float32)
                    state.cuda.memcpy_dtoh(got, keys_out)
                    np.testing.assert_array_equal(got, np.sort(h))
                else:
                    got = np.empty(n, np.int64)
                    state.cuda.memcpy_dtoh(got, values_out)
                    np.testing.assert_array_equal(h[got], np.sort(h))
                    assert np.bincount(got, minlength=n).max() == 1
    finally:
        case.free()
