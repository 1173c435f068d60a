"""`python -m cudasortkit.tune --quick` on the CPU: the real planning, driver,
tuner logic, cache and output, with the GPU's part faked (a Case that sorts
nothing, a timer that answers at once). What it shows: one progress bar for
the whole sweep, skips said once per plugin and reason, every entry measured
at each tunable varied alone (no "defaults only"), and the plugins compared
per cell in one process."""
import contextlib
import itertools
import json
import re
import subprocess
import sys
import types

import pytest

from cudasortkit.sdk import registry
from cudasortkit.gpu import timing
from cudasortkit.cli import tune
from cudasortkit.tuning import cache, runtime, tuner
from cudasortkit.tuning.policy import ROWS
from helpers import FakeState, fake_device


class FakeInputs:
    made = []

    def __init__(self, state, dtype, n_max, count=3, rng=None):
        self.dtype, self.n_max, self.count = dtype, n_max, count
        FakeInputs.made.append((dtype, n_max))

    def serves(self, dtype, n, count):
        return dtype == self.dtype and n <= self.n_max and count <= self.count

    def free(self):
        pass


class FakeCase:
    """Sorts nothing; every config is right except those WRONG names."""

    WRONG = {("bitonic", ("items_per_thread", 2))}
    made = []
    events = []  # ("check" | "run", case, plugin name, config)

    def __init__(self, state, op, dtype, n, inputs=3, rng=None, row_len=None, shared=None):
        self.op, self.dtype, self.n, self.row_len = op, dtype, n, row_len
        self.kind, self.value_bytes = {"sort": ("sort", 0)}[op]
        self.keys = [None] * inputs
        self.verified = {}
        self.shared = shared is not None and shared.serves(dtype, n, inputs)
        FakeCase.made.append(self)

    run_bytes = 1 << 20

    def answer(self):
        pass

    def outcome(self, plugin, config):
        FakeCase.events.append(("check", self, plugin.name, tuple(sorted(config.items()))))
        if any(plugin.name == p and config.get(k) == v for p, (k, v) in self.WRONG):
            return "keys differ from numpy.sort at index 0"
        return None

    def run(self, plugin, config, i=0):
        FakeCase.events.append(("run", self, plugin.name, tuple(sorted(config.items()))))

    @contextlib.contextmanager
    def runners(self, contenders):
        yield {name: (lambda plg, cfg: lambda i: self.run(plg, cfg, i))(plugin, config)
               for name, (plugin, config) in contenders.items()}

    def intact(self):
        return True

    def free(self):
        pass


def fake_time_gpu(run, *, inputs=1, warmup=2, repeats=10, min_time_s=0.0, max_repeats=None):
    """A time that depends on the config only through run's closure: every
    run is instant; the 'time' is a fixed function of the call count."""
    for i in range(warmup + repeats):
        run(i % inputs)
    fake_time_gpu.calls += 1
    return {"median_ms": 0.1 + (fake_time_gpu.calls % 7) * 0.01, "min_ms": 0.1, "max_ms": 0.2,
            "repeats": repeats, "times": [0.1] * repeats}


class FakeBar:
    """tqdm's stand-in: records every bar made, its total, updates and writes."""

    bars = []

    def __init__(self, total=None, **kw):
        self.total, self.n, self.writes, self.closed = total, 0, [], False
        FakeBar.bars.append(self)

    def update(self, n=1):
        assert not self.closed
        self.n += n

    def refresh(self):
        pass

    def write(self, msg):
        self.writes.append(msg)

    def close(self):
        self.closed = True


@pytest.fixture
def fake_gpu(tmp_path, monkeypatch):
    state = fake_device(tmp_path, monkeypatch)
    monkeypatch.setattr(tuner, "Case", FakeCase)
    monkeypatch.setattr(tuner, "Inputs", FakeInputs)
    monkeypatch.setattr(timing, "time_gpu", fake_time_gpu)
    monkeypatch.setattr(tuner, "measure_host", lambda op, dtype, n, name, ms, rng=None: {
        "numpy_ms": 0.01 * n / 1024, "gpu_host_ms": ms + 0.05, "extra_ms": 0.05, "via": name, "n": n})
    monkeypatch.setitem(sys.modules, "tqdm", types.SimpleNamespace(tqdm=FakeBar))
    fake_time_gpu.calls = 0
    FakeBar.bars, FakeCase.made, FakeCase.events, FakeInputs.made = [], [], [], []
    runtime.reset()
    yield state
    runtime.reset()


def test_quick_sweep_one_bar_skips_once_every_variation_measured(fake_gpu, capsys):
    assert tune.main(["--quick"]) == 0
    out = capsys.readouterr()
    text = out.out + out.err

    # one progress bar, for the whole sweep, and it ends full
    assert len(FakeBar.bars) == 1
    bar = FakeBar.bars[0]
    assert bar.closed and bar.total > 0 and bar.n == bar.total
    # the per-cell lines went through the bar (printed above it), not print()
    assert any(line.startswith("sort    uint32   2^10") for line in bar.writes)
    assert not any(line.startswith("sort    ") for line in out.out.splitlines())

    # skips: one line per plugin and reason, said once, at the end
    skips = [line.strip() for line in out.out.splitlines() if line.strip().startswith("skipped ")]
    assert skips and len(skips) <= 10, skips
    keys = [(line.split()[1], re.sub(r"\d+", "#", line.split("): ", 1)[1])) for line in skips]
    assert len(keys) == len(set(keys)), skips
    br = [line for line in skips if line.startswith("skipped block_radix ")]
    # arrays longer than the one row it sorts (it measures 2^10 and 2^12); rows longer than it sorts
    assert len(br) == 2, br
    assert any("(12 entries)" in line and "sort uint32,float32 2^14..2^24" in line
               and "arrays of at most 4,096 keys" in line for line in br), br
    assert any(line.endswith("the longest here has 16384/131072/1048576") for line in br), br
    assert "skipped msd_local on sort uint32,float32 2^10..2^24 (16 entries): msd_local does not sort " \
        "uint32/float32 keys" in text

    # what --quick says it measures: no budget, no default-only entries
    assert "defaults only" not in text and "default config only" not in text and "budget" not in text
    assert "in this process" in text
    data = cache.load_any(cache.cache_files()[0])
    plugins = registry.plugins()
    limits = FakeState.limits
    measured = 0
    for name, block in data["plugins"].items():
        if name == "numpy":
            continue
        for op, by_dtype in block["results"].items():
            for dtype, by_bucket in by_dtype.items():
                for b, e in by_bucket.items():
                    quick = tuner.configs_quick(plugins[name], dtype, 0, limits)
                    rejected = e.get("rejected_count", 0)
                    assert e["strategy"] == "quick" and e["complete"], (name, op, dtype, b, e)
                    # every variation, and perhaps the winners combined
                    assert e["tried"] + rejected in (len(quick), len(quick) + 1), (name, dtype, b, e)
                    measured += 1
    # 4 one-array plugins x 2 dtypes x 8 sizes, the row plugins at their row lengths
    assert measured >= 4 * 2 * 8 + 2 * 8
    # the plugins were compared per cell in this process (several plugins there)
    e = data["plugins"]["radix"]["results"]["sort"]["float32"]["20"]
    assert e["arbitrated"] and e["sweep_ms"] > 0
    e = data["plugins"]["rows"]["results"]["sort" + ROWS]["uint32"]["4"]
    assert e["arbitrated"]
    # wrong configs were rejected, never chosen
    e = data["plugins"]["bitonic"]["results"]["sort"]["uint32"]["12"]
    assert e["rejected_count"] >= 1 and e["config"]["items_per_thread"] != 2
    # host costs once per size (up to 2^22), via one of the measured plugins
    assert set(data["host"]["sort"]["uint32"]) == {str(b) for b in range(10, 23, 2)}

    # inputs made once per dtype (the largest size), shared by every cell
    assert sorted(FakeInputs.made) == [("float32", 1 << 24), ("uint32", 1 << 24)]
    assert all(c.shared for c in FakeCase.made)
    done = re.search(r"done in [\d.]+ s: (\d+) entries, (\d+) configs rejected, (\d+) entries failed",
                     out.out)
    assert done and int(done.group(1)) == measured and int(done.group(3)) == 0


def test_quick_checks_every_config_of_a_cell_once_before_timing_any(fake_gpu):
    """All of a cell's configs (every plugin's) are checked before the first
    timed run there (the checks compile, in parallel threads), and each
    (plugin, config) once per case."""
    assert tune.main(["--quick", "--rows", "none", "--plugins", "bitonic,radix,merge_sort"]) == 0
    plugins = registry.plugins()
    for case in FakeCase.made:
        events = [e for e in FakeCase.events if e[1] is case]
        checks = [(e[2], e[3]) for e in events if e[0] == "check"]
        assert len(checks) == len(set(checks))
        first_run = next(i for i, e in enumerate(events) if e[0] == "run")
        before = {(e[2], e[3]) for e in events[:first_run] if e[0] == "check"}
        for name in ("bitonic", "radix", "merge_sort"):
            for config in tuner.configs_quick(plugins[name], case.dtype, 0, FakeState.limits):
                assert (name, tuple(sorted(config.items()))) in before, (name, config)
    # every dtype's cells up to 2^24 keys are checked in one batch, before any
    # is timed (so their kernels compile all at once, across all the CPUs)
    first_run = next(i for i, e in enumerate(FakeCase.events) if e[0] == "run")
    early = {id(e[1]) for e in FakeCase.events[:first_run] if e[0] == "check"}
    ahead = [c for c in FakeCase.made if c.n <= 1 << runtime.CHECK_AHEAD_MAX_BUCKET]
    assert runtime.CHECK_AHEAD_MAX_BUCKET == 24
    assert len(ahead) == 2 * 8 and all(id(c) in early for c in ahead)
    assert len(FakeCase.made) == len(ahead)  # (no cell was made twice)


def test_where_the_time_went_is_printed_per_phase(fake_gpu, capsys):
    assert tune.main(["--quick", "--rows", "none", "--plugins", "bitonic,radix"]) == 0
    out = capsys.readouterr().out
    lines = out[out.index("where the "):].splitlines()
    assert re.match(r"where the [\d.]+ s went:$", lines[0])
    lines = [lines[0]] + list(itertools.takewhile(lambda line: line.startswith("  "), lines[1:]))
    for phase, unit in (("check", "configs"), ("time", "configs"), ("confirm", "races"),
                        ("compare", "cells"), ("host", "sizes"), ("inputs", "sets")):
        line = next(line for line in lines if line.split()[0] == phase)
        assert re.match(rf"  {phase} +[\d.]+ s +\d+ {unit}", line), line
    check = next(line for line in lines if line.split()[0] == "check")
    assert re.search(r"\d+ modules compiled \(nvcc [\d.]+ s summed over threads\), \d+ read from disk",
                     check)
    counts = {line.split()[0]: int(line.split()[3]) for line in lines[1:] if "other" not in line}
    # every planned config checked once, and timed once unless rejected (the combinations too)
    rejected = int(re.search(r"(\d+) configs rejected", out).group(1))
    assert rejected > 0 and counts["check"] == counts["time"] + rejected
    assert counts["compare"] == 16 and counts["host"] == 14
    assert re.search(r"^  other +[\d.]+ s$", out, re.M)


def test_a_gpu_short_of_memory_checks_one_dtype_at_a_time(fake_gpu, monkeypatch):
    """Where the inputs of every dtype would take more than a quarter of the
    free memory, each dtype's cells are checked when its turn comes."""
    monkeypatch.setattr(type(fake_gpu), "free_memory", lambda self: 1 << 30)
    assert tune.main(["--quick", "--rows", "none", "--plugins", "bitonic"]) == 0
    first_run = next(i for i, e in enumerate(FakeCase.events) if e[0] == "run")
    early = {e[1].dtype for e in FakeCase.events[:first_run] if e[0] == "check"}
    assert early == {FakeCase.events[first_run][1].dtype}
    assert {c.dtype for c in FakeCase.made} == {"uint32", "float32"}


def test_a_budget_still_works_and_is_reported(fake_gpu, capsys, monkeypatch):
    """--budget (not set by --quick) still cuts later groups to defaults."""
    clock = iter(range(0, 10**6, 100))
    monkeypatch.setattr(runtime.time, "monotonic", lambda: float(next(clock)))
    assert tune.main(["--quick", "--budget", "1", "--rows", "none", "--plugins", "bitonic,radix"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"\d+ measured at their default config only \(budget\)", out)
    bar = FakeBar.bars[0]
    assert bar.n == bar.total


def test_skip_lines_say_each_plugin_and_reason_once():
    rows = [("seg", "sort@rows", "uint32", b, f"sorts rows of at most 4096 keys; this has {1 << b}")
            for b in (14, 17, 20)]
    assert runtime.skip_lines(rows) == [
        "skipped seg on sort@rows uint32 2^14, 2^17, 2^20 (3 entries): "
        "sorts rows of at most 4096 keys; this has 16384/131072/1048576"]
    skipped = rows + [("seg", "sort", dt, b, "sorts rows only") for dt in ("uint32", "float32")
                      for b in range(10, 25, 2)]
    skipped += [("counting", "sort", "uint32", 12, "needs a key range")]
    skipped += [("seg", "sort@rows", "float32", b, f"sorts rows of at most 4096 keys; this has {1 << b}")
                for b in (22, 24)]
    skipped += [("msd", "sort", dt, 12, f"msd does not sort {dt} keys") for dt in ("uint32", "float32")]
    assert runtime.skip_lines(skipped) == [
        "skipped seg on sort@rows uint32,float32 2^14..2^24 (5 entries): "
        "sorts rows of at most 4096 keys; this has ...",
        "skipped seg on sort uint32,float32 2^10..2^24 (16 entries): sorts rows only",
        "skipped counting on sort uint32 2^12 (1 entry): needs a key range",
        "skipped msd on sort uint32,float32 2^12 (2 entries): msd does not sort uint32/float32 keys",
    ]


def test_quick_plan_of_the_builtin_plugins_skips_in_few_lines():
    """The built-in plugins' quick plan (what the H100 run printed as about
    60-88 lines) says its skips in one line per plugin and reason."""
    plugins = {n: p for n, p in registry.plugins().items() if p.device == "gpu"}
    buckets, rows = tune.parse_sizes(tune.QUICK["sizes"]), tune.parse_rows(tune.QUICK["rows"])
    work = runtime.plan(plugins, ["uint32", "float32"], buckets, ["sort"], limits=FakeState.limits)
    work = work + runtime.plan({n: p for n, p in plugins.items() if p.segmented},
                               ["uint32", "float32"], rows, ["sort"], limits=FakeState.limits, rows=True)
    assert len(work.skipped) >= 60
    lines = runtime.skip_lines(work.skipped)
    assert len(lines) <= 10, lines
    assert len({line.split(" on ")[0] for line in lines}) <= len(plugins)
    # every cell is measured by every plugin that serves it, with all its
    # quick configs, starting from the default for the cell's size
    for cell in work.cells:
        _, n, _ = runtime.case_shape(cell.op, cell.b, cell.rows)
        for name, (plugin, strategy, configs) in cell.work.items():
            assert strategy == "quick"
            assert configs == tuner.configs_quick(plugin, cell.dtype, 0, FakeState.limits, n)


def test_isolated_children_feed_the_one_bar(fake_gpu, monkeypatch, capsys):
    """--isolate: each child's progress reaches the parent's one bar (its
    own bar is never drawn); a child that dies early leaves no gap."""
    real_popen = subprocess.Popen
    children = []

    def fake_child(argv, **kw):
        if "--child" not in argv:  # another command (nvcc --version, read once a process)
            return real_popen(argv, **kw)
        name = argv[argv.index("--plugins") + 1]
        children.append(name)
        mark = tune.MARK
        script = (f"print('sort    uint32   2^10  {name} 0.1 ms'); "
                  f"print({mark!r} + 'grow 1'); print({mark!r} + 'progress 3'); "
                  + ("import sys; sys.exit(3)" if name == "bitonic" else
                     f"print({mark!r} + 'summary ' + {json.dumps(json.dumps({'entries': 2, 'rejected': 0, 'failed': 0, 'defaults_only': 0, 'path': 'x', 'saved': True}))})"))
        return real_popen([sys.executable, "-c", script], **kw)

    monkeypatch.setattr(subprocess, "Popen", fake_child)
    assert tune.main(["--quick", "--isolate", "--rows", "none", "--plugins", "bitonic,radix"]) == 0
    out = capsys.readouterr().out
    assert children == ["bitonic", "radix"]
    assert len(FakeBar.bars) == 1
    bar = FakeBar.bars[0]
    assert bar.n == bar.total and bar.closed
    assert any("bitonic 0.1 ms" in w for w in bar.writes)
    assert "tuning failed for: bitonic (exit 3)" in " ".join(bar.writes)
    assert re.search(r"done in [\d.]+ s: 2 entries", out)


def test_quick_help_says_what_it_measures():
    parser = tune.build_parser()
    text = next(a.help for a in parser._actions if "--quick" in a.option_strings)
    assert "each tunable varied alone" in text and "every entry" in text and "in this process" in text
    assert "about a minute" not in text and "budget" not in text
    assert tune.QUICK["budget"] is None
