"""CPU tests of measured choice for the non-sort plugin kinds (selection,
multikey, search; cudasortkit/tuning/kinds.py): the chooser over synthetic
tables, the tuning cache's "kinds" section, and `tune --kinds` (grid, plan,
sweep loop and command line) with the GPU's part faked."""
import json

import numpy as np
import pytest

import cudasortkit as csk
from cudasortkit.calls import multikey
from cudasortkit.cli import tune, tune_kinds
from cudasortkit.dispatch import selection as choosing
from cudasortkit.gpu import device
from cudasortkit.sdk import registry
from cudasortkit.sdk.multikey import MultikeyJob
from cudasortkit.sdk.selection import SelectRequest
from cudasortkit.tuning import cache, kinds, runtime
from cudasortkit.tuning.kinds import MULTIKEY, SEARCH, SELECTION, Pick, decide
from helpers import fake_device

INFO = {"name": "Fake GPU 9000", "compute_capability": "9.0", "sm_count": 132, "driver": "12.8",
        "nvcc": "Build cuda_12.8", "cudasortkit": "0.1.0"}
TOPK = ("topk", "float32", 0, 20, 4)  # top-16 of one row of 2^20 float32 keys
KEY = "topk,float32,0,20,4"


def section(**times):
    """kinds[group] with one measurement per plugin at KEY (hash "h")."""
    return {name: {"hash": "h", "results": {KEY: ms}} for name, ms in times.items()}


CANDIDATES = {"radix_select": object(), "sort_select": object()}


# ------------------------------------------------------------- the chooser
def test_the_measured_winner_is_taken_and_explained():
    pick = decide(section(radix_select=0.41, sort_select=0.62), SELECTION, TOPK, CANDIDATES,
                  "sort_select", "lowest declared priority")
    assert pick.name == "radix_select" and pick.at == TOPK
    assert pick.measured == {"radix_select": 0.41, "sort_select": 0.62}
    assert pick.reason == ("measured here: radix_select 0.41 ms, sort_select 0.62 ms at "
                           "topk float32 rows 2^0 row_len 2^20 k 2^4")


def test_nothing_measured_keeps_the_declared_choice():
    pick = decide({}, SELECTION, TOPK, CANDIDATES, "sort_select", "lowest declared priority (500)")
    assert pick.name == "sort_select" and pick.measured == {}
    assert pick.reason.startswith("nothing measured here to use (nothing measured for topk float32")
    assert pick.reason.endswith("declared: lowest declared priority (500)")
    other_dtype = decide(section(radix_select=0.41), SELECTION, ("topk", "int32", 0, 20, 4),
                         CANDIDATES, "sort_select", "declared")
    assert other_dtype.name == "sort_select"


def test_a_measured_plugin_that_cannot_serve_the_request_is_skipped():
    table = section(warp_select=0.1, radix_select=0.41, sort_select=0.62)
    pick = decide(table, SELECTION, TOPK, CANDIDATES, "sort_select", "declared")
    assert pick.name == "radix_select" and "warp_select" not in pick.reason


def test_nearest_measured_shape_within_range_is_used():
    table = {"radix_select": {"hash": "h", "results": {KEY: 0.41, "topk,float32,0,20,14": 2.0}},
             "sort_select": {"hash": "h", "results": {KEY: 0.62, "topk,float32,0,20,14": 1.0}}}
    near_small = decide(table, SELECTION, ("topk", "float32", 0, 20, 6), CANDIDATES, "sort_select", "d")
    assert near_small.name == "radix_select" and near_small.at == TOPK
    assert "(nearest measured to topk float32 rows 2^0 row_len 2^20 k 2^6)" in near_small.reason
    near_large = decide(table, SELECTION, ("topk", "float32", 0, 20, 12), CANDIDATES, "radix_select", "d")
    assert near_large.name == "sort_select"
    # k 2^9 is within the measured range, but 5 log2 units from either: declared
    far = decide(table, SELECTION, ("topk", "float32", 0, 20, 9), CANDIDATES, "radix_select", "d")
    assert far.name == "radix_select" and "within a factor of 16" in far.reason


def test_never_extrapolates_past_the_measured_range():
    table = section(radix_select=0.41, sort_select=0.62)
    pick = decide(table, SELECTION, ("topk", "float32", 0, 22, 4), CANDIDATES, "sort_select", "d")
    assert pick.name == "sort_select"
    assert "row_len 2^22 is outside the measured 2^20..2^20" in pick.reason


def test_the_declared_plugin_stands_until_measured_there():
    pick = decide(section(radix_select=0.41), SELECTION, TOPK,
                  {**CANDIDATES, "tree": object()}, "tree", "lowest declared estimate")
    assert pick.name == "tree"
    assert pick.reason.startswith("tree is preferred by declaration and not measured at topk")


def test_results_of_a_changed_plugin_are_not_used():
    table = section(radix_select=0.41, sort_select=0.62)
    pick = decide(table, SELECTION, TOPK, CANDIDATES, "sort_select", "d",
                  hashes={"radix_select": "new", "sort_select": "h"})
    assert pick.name == "sort_select" and "radix_select changed since measured" in pick.reason


def test_shapes_of_the_three_kinds():
    req = SelectRequest("topk", "float32", 4096, 32000, 50)
    assert SELECTION.shape_of(req) == ("topk", "float32", 12, 15, 6)
    assert SELECTION.parse(SELECTION.key(SELECTION.shape_of(req))) == ("topk", "float32", 12, 15, 6)
    job = MultikeyJob([_DeviceKey("int32"), _DeviceKey("float32")], (False, False), 1 << 20)
    assert MULTIKEY.shape_of(job) == ("2", "64", 20, "device")
    from cudasortkit.sdk.search import SearchQuery

    q = SearchQuery("float32", 1 << 24, 1 << 10, 1, False, sorter=5)
    assert SEARCH.shape_of(q) == ("float32", 24, 10, 0, "1")
    assert SEARCH.parse("float32,24,x,0,1") is None and SEARCH.parse("a,b") is None


def test_one_candidate_or_no_gpu_needs_no_table(monkeypatch):
    assert kinds.choose(SELECTION, TOPK, {"a": object()}, "a", "why") == Pick("a", "why")
    monkeypatch.setattr(device, "gpu_available", lambda: False)
    pick = kinds.choose(SELECTION, TOPK, CANDIDATES, "sort_select", "why")
    assert pick.name == "sort_select" and pick.reason == "nothing measured (no GPU here); declared: why"


# ------------------------------------------------------------------ cache
def test_kinds_round_trip_through_the_cache_file(tmp_path):
    store = cache.Store(str(tmp_path), INFO)
    store.put_kind(SELECTION.group, "radix_select", "h1", KEY, 0.41)
    store.put_kind(SEARCH.group, "merge", "h2", "float32,20,20,0,0", 1.5)
    assert store.save()
    data = json.loads(open(store.path).read())
    assert data["kinds"][SELECTION.group]["radix_select"] == {"hash": "h1", "results": {KEY: 0.41}}
    # another process adds a plugin; one measured again under a new hash replaces its block
    other = cache.Store(str(tmp_path), INFO)
    other.put_kind(SELECTION.group, "sort_select", "h3", KEY, 0.62)
    other.put_kind(SEARCH.group, "merge", "h9", "float32,24,24,0,0", 9.0)
    assert other.save()
    again = cache.Store(str(tmp_path), INFO).data["kinds"]
    assert again[SELECTION.group]["radix_select"]["results"] == {KEY: 0.41}
    assert again[SELECTION.group]["sort_select"]["results"] == {KEY: 0.62}
    assert again[SEARCH.group]["merge"] == {"hash": "h9", "results": {"float32,24,24,0,0": 9.0}}


@pytest.mark.parametrize("kinds_section", [[], {"g": []}, {"g": {"p": {"hash": 3}}},
                                           {"g": {"p": {"hash": "h", "results": {"k": -1}}}},
                                           {"g": {"p": {"hash": "h", "results": {"k": "fast"}}}}])
def test_a_malformed_kinds_section_is_corrupt(kinds_section):
    with pytest.raises(cache.CorruptCache, match="kinds"):
        cache.validate({**cache.empty(INFO), "kinds": kinds_section})


def test_files_without_a_kinds_section_still_load():
    data = cache.empty(INFO)
    del data["kinds"]
    assert cache.validate(data)["kinds"] == {}


# --------------------------------------------------- the kinds' auto, faked GPU
class _DeviceKey:
    on_device = True

    def __init__(self, dtype):
        self.dtype = np.dtype(dtype)


@pytest.fixture
def fake_gpu(tmp_path, monkeypatch):
    fake_device(tmp_path, monkeypatch, choosing)
    yield runtime
    runtime.reset()


def _measure(kind, shape, **times):
    ctx = runtime.context()
    for group_plugins in [registry.plugins(kind.group)]:
        for name, ms in times.items():
            ctx.store.put_kind(kind.group, name, cache.kind_hash(group_plugins[name]),
                               kind.key(shape), ms)
    ctx.changed()


def test_selection_auto_follows_the_measurements(fake_gpu):
    a = np.zeros(1 << 20, np.float32)  # a host array past the cutoff: the GPU pool
    declared = csk.explain(a, kind="topk", k=16)
    assert "nothing measured here to use" in declared.reason
    slower = "sort_select" if declared.name != "sort_select" else "radix_select"
    _measure(SELECTION, TOPK, **{declared.name: 0.9, slower: 0.3})
    d = csk.explain(a, kind="topk", k=16)
    assert d.name == slower
    assert f"measured here: {slower} 0.3 ms, {declared.name} 0.9 ms at topk float32" in d.reason


def test_search_auto_follows_the_measurements(fake_gpu):
    a, v = np.zeros(1 << 24, np.float32), np.zeros(1 << 24, np.float32)
    assert csk.explain_searchsorted(a, v).plugin == "tree"  # declared
    _measure(SEARCH, ("float32", 24, 24, 0, "0"), merge=2.0, binary=1.0, tree=3.0)
    d = csk.explain_searchsorted(a, v)
    assert d.plugin == "binary" and "measured here: binary 1 ms, merge 2 ms, tree 3 ms" in str(d)


def test_multikey_auto_follows_the_measurements(fake_gpu):
    job = MultikeyJob([_DeviceKey("int32"), _DeviceKey("float32")], (False, False), 1 << 20)
    plugin, why = multikey.choose_why(job)
    assert plugin.name == "packed" and "nothing measured" in why
    _measure(MULTIKEY, ("2", "64", 20, "device"), packed=2.0, passes=1.0)
    plugin, why = multikey.choose_why(job)
    assert plugin.name == "passes" and why.startswith("measured here: passes 1 ms, packed 2 ms")
    assert multikey.choose(job, "packed").name == "packed"  # by name: as asked


# ------------------------------------------------------------------ the sweep
def test_the_quick_grid_holds_the_issue_shapes():
    cells = tune_kinds.grid(quick=True)
    select = [c.shape for c in cells if c.kind is SELECTION]
    assert select == [("topk", "float32", 0, 20, 4), ("topk", "float32", 0, 20, 14),
                      ("topk", "float32", 0, 23, 10), ("topk", "float32", 12, 15, 6),
                      ("topk", "float32", 16, 10, 3), ("topk", "float32", 0, 24, 20)]
    search = {c.shape for c in cells if c.kind is SEARCH}
    assert search == {("float32", n, m, 0, "0") for n in (10, 16, 20, 24) for m in (10, 16, 20, 24)}
    mk = [c.shape for c in cells if c.kind is MULTIKEY]
    assert mk == [("2", "64", 20, "device"), ("2", "64", 24, "device"), ("3", "96", 20, "device"),
                  ("3", "96", 24, "device"), ("2", "64", 20, "host")]
    assert len(tune_kinds.grid(quick=False)) > len(cells)
    assert {c.kind for c in tune_kinds.grid(True, ["search"])} == {SEARCH}


def test_the_plan_takes_every_plugin_of_each_kind_or_those_named():
    cells = tune_kinds.grid(quick=True)
    plugins = {g: registry.plugins(g) for g in kinds.KINDS}
    work = tune_kinds.plan(cells, plugins)
    assert len(work) == len(cells)
    by_kind = {c.kind.what: names for c, names in work}
    assert set(by_kind["selection"]) == set(plugins[SELECTION.group])
    assert set(by_kind["search"]) >= {"binary", "merge"}
    assert by_kind["multikey"] == ["numpy_lexsort", "packed", "passes"]
    only = tune_kinds.plan(cells, plugins, {"merge"})
    assert {c.kind for c, _ in only} == {SEARCH} and all(n == ["merge"] for _, n in only)
    # --quick: CPU plugins only where the inputs hold at most 2^24 keys
    quick = {c.label: names for c, names in tune_kinds.plan(cells, plugins, None, 1 << 24)}
    assert "numpy_select" not in quick["topk 4096 x 32,000 float32 k=50"]
    assert "radix_select" in quick["topk 4096 x 32,000 float32 k=50"]
    assert "numpy_select" in quick["topk 1 x 16,777,216 float32 k=1,048,576"]
    assert "numpy_lexsort" in quick["lexsort of 2 keys (int32,float32) x 1,048,576 on the host"]


class FakeCase:
    """Right for every plugin but "wrong"; "nope" does not serve the shape."""

    def __init__(self, rng):
        self.freed = False

    def run(self, name):
        if name == "nope":
            raise ValueError("nope cannot serve it: too long\nmore")
        if name == "boom":
            raise RuntimeError("crashed")
        return name

    def wrong(self, result):
        return "values differ" if result == "wrong" else None

    def free(self):
        self.freed = True


def _fake_cells():
    return [tune_kinds.Cell(SELECTION, TOPK, "topk 1 x 2^20 k=16", FakeCase),
            tune_kinds.Cell(SEARCH, ("float32", 20, 20, 0, "0"), "search 2^20", FakeCase)]


def test_the_sweep_checks_before_timing_skips_and_reports():
    times = {"fast": 0.1, "slow": 0.5}
    timed, stored = [], []

    def time_ms(fn, repeats):
        name = fn()
        timed.append(name)
        return times[name]

    work = [(c, ["boom", "fast", "nope", "slow", "wrong"]) for c in _fake_cells()]
    out = tune_kinds.sweep(work, lambda k, n, s, ms: stored.append((k.what, n, s, ms)),
                           time_ms=time_ms, log=lambda m: None)
    assert timed == ["fast", "slow"] * 2  # never the wrong, failing or declining ones
    assert out["entries"] == 4 and len(stored) == 4
    assert ("selection", "fast", TOPK, 0.1) in stored
    assert out["skipped"][0] == ("topk 1 x 2^20 k=16", "nope", "nope cannot serve it: too long")
    assert [w[1:] for w in out["wrong"]] == [("wrong", "values differ")] * 2
    assert [f[1] for f in out["failed"]] == ["boom", "boom"]
    assert out["best"][(SELECTION.group, KEY)] == "fast"


def test_cli_parses_kinds():
    args = tune.build_parser().parse_args(["--kinds", "--quick"])
    assert args.kinds == "all" and args.quick
    assert tune.build_parser().parse_args(["--kinds", "selection,search"]).kinds == "selection,search"
    assert tune.build_parser().parse_args([]).kinds is None


def test_cli_sweep_stores_into_the_cache_and_auto_uses_it(fake_gpu, monkeypatch, capsys):
    calls = []
    names = {"radix_select": 0.2, "sort_select": 0.7, "binary": 0.5, "merge": 0.25, "tree": 0.4}

    class Case(FakeCase):
        def run(self, name):
            return name if name in names else super().run("nope")

    cells = [tune_kinds.Cell(c.kind, c.shape, c.label, Case) for c in _fake_cells()]
    monkeypatch.setattr(tune_kinds, "grid", lambda quick, which=None: calls.append((quick, which))
                        or cells)
    repeats = {}

    def fake_ms(fn, n):
        name = fn()
        repeats[name] = n
        return names[name]

    monkeypatch.setattr(tune_kinds, "_gpu_ms", fake_ms)
    names["numpy_select"] = 5.0
    assert tune.main(["--kinds", "selection,search", "--quick"]) == 0
    assert calls == [(True, ["selection", "search"])]
    out = capsys.readouterr().out
    assert "done in" in out and "6 entries" in out and "cache:" in out
    assert repeats == {"radix_select": 3, "sort_select": 3, "numpy_select": 1, "binary": 3,
                       "merge": 3, "tree": 3}
    assert "CPU plugins up to 16,777,216 keys" in out
    runtime.reset()  # a new process reading the file
    table = runtime.context().table["kinds"]
    assert table[SELECTION.group]["radix_select"]["results"] == {KEY: 0.2}
    assert csk.explain(np.zeros(1 << 20, np.float32), kind="topk", k=16).name == "radix_select"
    assert csk.explain_searchsorted(np.zeros(1 << 20, np.float32),
                                    np.zeros(1 << 20, np.float32)).plugin == "merge"
    with pytest.raises(SystemExit, match="unknown plugin kinds"):
        tune.main(["--kinds", "sorting"])


def test_the_real_cases_check_against_numpy(monkeypatch):
    """The sweep's cases with a NumPy stand-in for CuPy (host arrays: the
    CPU plugin runs, a GPU plugin asked by name declines with ValueError)."""
    import sys
    import types

    fake = types.SimpleNamespace(asarray=np.asarray, asnumpy=np.asarray,
                                 take_along_axis=np.take_along_axis)
    monkeypatch.setitem(sys.modules, "cupy", fake)
    monkeypatch.setattr(device, "gpu_available", lambda: False)
    monkeypatch.setattr(choosing, "gpu_available", lambda: False)
    rng = np.random.default_rng(0)
    cells = [tune_kinds._select_cell("topk", 1, 5000, 16), tune_kinds._select_cell("topk", 64, 300, 5),
             tune_kinds._select_cell("partition", 1, 5001, None),
             tune_kinds._search_cell(1000, 300), tune_kinds._search_cell(1000, 300, "int64", sorter=True),
             tune_kinds._search_cell(100, 30, rows=8),
             tune_kinds._multikey_cell(("int32", "float32", "int32"), 4000, device=False)]
    names = {SELECTION.group: ["numpy_select", "radix_select"], SEARCH.group: ["binary"],
             MULTIKEY.group: ["numpy_lexsort", "packed"]}
    timed = []
    out = tune_kinds.sweep([(c, names[c.kind.group]) for c in cells], lambda *a: timed.append(a[1:3]),
                           time_ms=lambda fn, repeats: 1.0, log=lambda m: None, rng=rng)
    assert out["wrong"] == [] and out["failed"] == []
    # (host arrays: NumPy searches them, a search plugin named for them declines)
    assert [t[0] for t in timed] == ["numpy_select"] * 3 + ["numpy_lexsort"]
    assert {s[1] for s in out["skipped"]} == {"radix_select", "packed", "binary"}
    # a wrong answer is seen: the reference of another draw
    case = cells[0].setup(np.random.default_rng(5))
    other = cells[0].setup(np.random.default_rng(6))
    assert case.wrong(other.run("numpy_select")) == "values differ from NumPy's top-k"
    search = cells[3].setup(rng)
    assert search.wrong(np.zeros(300, np.int64)) == "insertion points differ from numpy.searchsorted"


def test_show_lists_the_kinds_measurements():
    from cudasortkit.tuning.report import show

    table = cache.empty(INFO)
    table["kinds"] = {SELECTION.group: section(radix_select=0.41, sort_select=0.62)}
    text = show(table, "x.json")
    assert "selection (tune --kinds; ms, fastest first)" in text
    assert "topk float32 rows 2^0 row_len 2^20 k 2^4" in text
    assert "radix_select 0.4100, sort_select 0.6200" in text
