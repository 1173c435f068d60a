"""CPU tests of the tuning cache and the measured selection (no GPU needed):
the policy works on plain tables, so synthetic measurements drive it."""
import json
import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

from cudasortkit.dispatch import select
from cudasortkit.sdk.plugin import Request, SortPlugin, Tunable
from cudasortkit.tuning import cache, measured, policy, runtime
from cudasortkit.tuning.measured import MeasuredPolicy

INFO = {"name": "Fake GPU 9000", "compute_capability": "9.0", "sm_count": 132, "driver": "12.8",
        "nvcc": "Build cuda_12.8", "cudasortkit": "0.1.0"}


@pytest.fixture(autouse=True)
def _fresh_warnings():
    cache._warned.clear()
    yield
    cache._warned.clear()


def entry(ms, config=None, default_ms=None):
    return {"ms": ms, "config": config or {"block_size": 256}, "default_ms": default_ms or ms}


# ------------------------------------------------------------------- cache
def test_round_trip(tmp_path):
    store = cache.Store(str(tmp_path), INFO, {"alpha": "h1"})
    store.put("alpha", "sort", "uint32", 20, entry(1.5, {"block_size": 512}, 2.0))
    store.put_host("sort", "uint32", 10, {"extra_ms": 0.05, "via": "alpha"})
    assert store.save()
    data = json.loads(open(store.path).read())
    assert data["schema"] == cache.SCHEMA and data["device"] == INFO
    assert data["plugins"]["alpha"]["hash"] == "h1"
    again = cache.Store(str(tmp_path), INFO, {"alpha": "h1"})
    got = again.data["plugins"]["alpha"]["results"]["sort"]["uint32"]["20"]
    assert got["ms"] == 1.5 and got["config"] == {"block_size": 512}
    assert again.data["host"]["sort"]["uint32"]["10"]["extra_ms"] == 0.05
    assert os.path.basename(store.path).startswith("fake-gpu-9000-sm90-")
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]


def test_device_key_changes_with_driver_and_version():
    keys = {cache.device_key(INFO), cache.device_key(dict(INFO, driver="13.0")),
            cache.device_key(dict(INFO, cudasortkit="0.2.0")), cache.device_key(dict(INFO, nvcc="x"))}
    assert len(keys) == 4


def test_corrupt_file_is_reported_once_set_aside_and_rebuilt(tmp_path):
    path = cache.Store(str(tmp_path), INFO).path
    for text in ("{not json", json.dumps({"schema": 999}), json.dumps([1, 2])):
        with open(path, "w") as f:
            f.write(text)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            store = cache.Store(str(tmp_path), INFO)
        assert store.data["plugins"] == {}
        assert not os.path.exists(path)
        assert len([p for p in os.listdir(tmp_path) if ".corrupt-" in p]) >= 1
        store.put("alpha", "sort", "uint32", 12, entry(0.1))
        assert store.save()
        assert cache.load_any(path)["plugins"]["alpha"]["results"]["sort"]["uint32"]["12"]["ms"] == 0.1
        os.remove(path)
        yield_warnings = [w for w in caught if "unreadable" in str(w.message)]
        assert len(yield_warnings) <= 1
    # reported once per file, however often it is found corrupt
    assert sum("corrupt:" in k for k in cache._warned) == 1


def test_truncated_file_never_crashes(tmp_path):
    store = cache.Store(str(tmp_path), INFO)
    store.put("alpha", "sort", "uint32", 12, entry(0.1))
    store.save()
    text = open(store.path).read()
    with open(store.path, "w") as f:
        f.write(text[: len(text) // 2])
    with pytest.warns(RuntimeWarning, match="unreadable"):
        again = cache.Store(str(tmp_path), INFO)
    assert again.data["plugins"] == {}


WRITER = textwrap.dedent("""
    import sys
    from cudasortkit.tuning import cache
    directory, who, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    info = {info!r}
    store = cache.Store(directory, info, {{"alpha": "h", "beta": "h"}})
    for i in range(count):
        store.put(who, "sort", "uint32", 10 + i, {{"ms": float(i + 1), "config": {{"block_size": 128}}}})
        store.put_host("sort", who, i, {{"extra_ms": 1.0}})
        assert store.save()
""").format(info=INFO)


def test_two_concurrent_writer_processes_lose_nothing(tmp_path):
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    procs = [subprocess.Popen([sys.executable, str(script), str(tmp_path), who, "40"])
             for who in ("alpha", "beta")]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    data = cache.load_any(cache.Store(str(tmp_path), INFO).path)
    for who in ("alpha", "beta"):
        assert len(data["plugins"][who]["results"]["sort"]["uint32"]) == 40
        assert len(data["host"]["sort"][who]) == 40
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp") or ".corrupt-" in p]


def test_stale_plugin_hash_drops_results_so_they_retune(tmp_path):
    store = cache.Store(str(tmp_path), INFO, {"alpha": "old", "beta": "same"})
    store.put("alpha", "sort", "uint32", 20, entry(1.0))
    store.put("beta", "sort", "uint32", 20, entry(2.0))
    store.save()
    fresh = cache.Store(str(tmp_path), INFO, {"alpha": "new", "beta": "same"})
    assert not measured._measured(fresh.data, "alpha", "sort", "uint32", 20)  # to be measured again
    assert measured._measured(fresh.data, "beta", "sort", "uint32", 20)
    fresh.put("alpha", "sort", "uint32", 20, entry(0.5))
    fresh.save()
    data = cache.load_any(fresh.path)
    assert data["plugins"]["alpha"]["hash"] == "new"
    assert data["plugins"]["alpha"]["results"]["sort"]["uint32"]["20"]["ms"] == 0.5


def test_plugin_hash_follows_tunables_and_source():
    class A(SortPlugin):
        name = "hash_a"
        dtypes = ("uint32",)
        device = "cpu"
        tunables = {"x": Tunable(1, (1, 2))}

        def run(self, job):
            pass

    class B(A):
        tunables = {"x": Tunable(1, (1, 2, 4))}

    from cudasortkit.plugins.bitonic import BitonicSort

    hashes = {cache.plugin_hash(A()), cache.plugin_hash(B()), cache.plugin_hash(BitonicSort())}
    assert len(hashes) == 3
    assert cache.plugin_hash(BitonicSort()) == cache.plugin_hash(BitonicSort())


def test_read_only_cache_dir_works_in_memory_with_one_warning(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    directory = str(blocker / "cache")  # cannot be created
    store = cache.Store(directory, INFO)
    store.put("alpha", "sort", "uint32", 12, entry(0.1))
    with pytest.warns(RuntimeWarning, match="in memory"):
        assert store.save() is False
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        store.put("alpha", "sort", "uint32", 14, entry(0.2))
        assert store.save() is False  # no second warning
    assert measured._measured(store.data, "alpha", "sort", "uint32", 14)


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root ignores permissions")
def test_read_only_existing_dir_still_reads(tmp_path):
    store = cache.Store(str(tmp_path), INFO)
    store.put("alpha", "sort", "uint32", 12, entry(0.1))
    store.save()
    os.chmod(tmp_path, 0o500)
    try:
        again = cache.Store(str(tmp_path), INFO)
        assert measured._measured(again.data, "alpha", "sort", "uint32", 12)
        again.put("alpha", "sort", "uint32", 14, entry(0.2))
        with pytest.warns(RuntimeWarning, match="in memory"):
            assert again.save() is False
    finally:
        os.chmod(tmp_path, 0o700)


def test_cache_dir_env_override(tmp_path, monkeypatch):
    monkeypatch.setenv(cache.ENV_DIR, str(tmp_path / "x"))
    assert cache.cache_dir() == str(tmp_path / "x")
    monkeypatch.delenv(cache.ENV_DIR)
    assert "cudasortkit" in cache.cache_dir()


# ------------------------------------------------------------ selection
class Fake:
    host_sort_is_numpy = False

    def __init__(self, name, device="gpu", stable=False, max_block=1024, priority=100):
        self.name, self.device, self.stable, self.max_block = name, device, stable, max_block
        self.priority = priority

    def priority_for(self, n):
        return self.priority

    def priority_for_request(self, request):
        return self.priority

    def priority_for_segments(self, segments):
        return self.priority

    def valid_config(self, config, dtype, value_bytes, limits):
        return config.get("block_size", 0) <= self.max_block

    def unsupported(self, request):
        return None


def synthetic():
    """fast_small wins below ~2^16, big_radix above; numpy beats the GPU on host below ~2^14."""
    t = cache.empty(INFO)
    small = {10: 0.010, 12: 0.012, 14: 0.020, 16: 0.060, 18: 0.25, 20: 1.0, 22: 4.0, 24: 16.0}
    radix = {10: 0.030, 12: 0.031, 14: 0.033, 16: 0.040, 18: 0.08, 20: 0.2, 22: 0.7, 24: 2.6}
    cpu = {10: 0.008, 12: 0.03, 14: 0.13, 16: 0.6, 18: 2.6, 20: 11.0, 22: 48.0}
    extra = {10: 0.060, 12: 0.062, 14: 0.07, 16: 0.1, 18: 0.25, 20: 0.9, 22: 3.4}
    for name, table, cfg in (("fast_small", small, {"block_size": 128}),
                             ("big_radix", radix, {"block_size": 512})):
        t["plugins"][name] = {"hash": "h", "results": {"sort": {"uint32": {
            str(b): {"ms": ms, "config": dict(cfg, tile=b), "default_ms": ms * 1.1}
            for b, ms in table.items()}}}}
    t["plugins"]["big_radix"]["results"]["argsort"] = {"uint32": {"20": entry(0.5, {"block_size": 256})}}
    t["plugins"]["numpy"] = {"hash": "h", "results": {"sort": {"uint32": {
        str(b): {"ms": ms, "config": None} for b, ms in cpu.items()}}}}
    t["host"] = {"sort": {"uint32": {str(b): {"extra_ms": ms, "via": "big_radix"} for b, ms in extra.items()}}}
    return t


CANDS = {"fast_small": Fake("fast_small"), "big_radix": Fake("big_radix"), "numpy": Fake("numpy", "cpu")}


def pick(n, on_device=True, kind="sort", dtype="uint32", vb=0, cands=CANDS, table=None):
    req = Request(kind=kind, dtype=dtype, n=n, on_device=on_device, value_bytes=vb)
    return policy.decide(table or synthetic(), req, cands)


def test_measurements_within_the_tie_margin_leave_the_choice_to_the_declared_priority():
    """At a few thousand keys the measured calls are mostly fixed cost: a
    plugin measured 0.4% faster does not override a better declared
    priority, one measured clearly faster (5%) does."""
    t = cache.empty(INFO)
    for name, ms in (("declared_first", 0.0547), ("measured_first", 0.0545), ("clearly", 0.060)):
        t["plugins"][name] = {"hash": "h", "results": {"sort": {"uint32": {
            "10": {"ms": ms, "config": {"block_size": 128}}}}}}
    cands = {"declared_first": Fake("declared_first", priority=12),
             "measured_first": Fake("measured_first", priority=50),
             "clearly": Fake("clearly", priority=1)}
    assert pick(1000, cands=cands, table=t).name == "declared_first"
    t["plugins"]["measured_first"]["results"]["sort"]["uint32"]["10"]["ms"] = 0.0520
    assert pick(1000, cands=cands, table=t).name == "measured_first"


def test_buckets_and_interpolation():
    assert [policy.bucket_of(n) for n in (0, 1, 1000, 1024, 1500, 3000, 5000, 1 << 20, 1 << 40)] == \
        [10, 10, 10, 10, 10, 12, 12, 20, 32]
    pts = {10: 1.0, 12: 4.0}
    assert policy.interpolate(pts, 1 << 10) == 1.0
    assert policy.interpolate(pts, 1 << 11) == pytest.approx(2.0)  # log-log midpoint
    assert policy.interpolate(pts, 100) == 1.0
    assert policy.interpolate(pts, 1 << 13, "linear") == pytest.approx(8.0)
    assert policy.interpolate(pts, 1 << 13, "nlogn") == pytest.approx(8.0 * 13 / 12)
    assert policy.interpolate({}, 5) is None


def test_device_selection_follows_measurements_and_interpolates():
    assert pick(1 << 10).name == "fast_small"
    assert pick(1 << 14).name == "fast_small"
    assert pick(1 << 16).name == "big_radix"
    assert pick(1 << 24).name == "big_radix"
    assert pick(1 << 28).name == "big_radix"  # extrapolated
    # between buckets: 2^15 interpolates 0.020..0.060 vs 0.033..0.040
    d = pick(1 << 15)
    est = {e.name: e.ms for e in d.estimates}
    assert est["fast_small"] == pytest.approx((0.020 * 0.060) ** 0.5)
    assert d.name == ("fast_small" if est["fast_small"] < est["big_radix"] else "big_radix")
    assert "numpy" not in est  # device input: the CPU plugin is not a candidate


def test_config_comes_from_nearest_bucket():
    assert pick(1 << 20).config == {"block_size": 512, "tile": 20}
    assert pick(3 << 19).config["tile"] == 20   # log2 = 20.58 -> nearest 20
    assert pick(7 << 19).config["tile"] == 22   # log2 = 21.8 -> 22


def test_host_input_crossover_is_measured_not_fixed():
    assert pick(1000, on_device=False).name == "numpy"
    assert pick(1 << 12, on_device=False).name == "numpy"
    assert pick(1 << 16, on_device=False).name == "big_radix"
    assert pick(1 << 22, on_device=False).name == "big_radix"
    # a slower CPU moves the crossover down, with no code change
    t = synthetic()
    for e in t["plugins"]["numpy"]["results"]["sort"]["uint32"].values():
        e["ms"] *= 20
    assert pick(1 << 12, on_device=False, table=t).name != "numpy"
    d = pick(1 << 18, on_device=False)
    assert any("host overhead" in e.note for e in d.estimates)


def test_host_input_without_host_measurements_uses_documented_cutoff():
    t = synthetic()
    t["host"] = {}
    assert pick(1000, on_device=False, table=t).name == "numpy"
    assert pick(1 << 20, on_device=False, table=t).name == "big_radix"
    del t["plugins"]["numpy"]  # nothing measured on the host at all (first lazy call, 10M keys)
    assert pick(10_000_000, on_device=False, table=t).name == "big_radix"


def test_nothing_measured_returns_none_and_unmeasured_are_listed():
    assert pick(1 << 20, dtype="float64") is None
    cands = dict(CANDS, newcomer=Fake("newcomer"))
    d = pick(1 << 20, cands=cands)
    assert d.name == "big_radix" and d.unmeasured == ["newcomer"]
    assert "newcomer" in str(d)


def test_ops_map_and_borrow_similar_measurements():
    assert policy.op_of(Request("pairs", "uint32", 5, value_bytes=8)) == "pairs8"
    assert policy.op_of(Request("pairs", "uint32", 5, value_bytes=4)) == "pairs"
    assert policy.op_of(Request("argsort", "uint32", 5, value_bytes=4)) == "argsort"
    d = pick(1 << 20, kind="pairs", vb=4)
    assert d.name == "big_radix" and "argsort" in d.estimates[0].note
    d = pick(1 << 20, kind="pairs", vb=8)  # pairs8 unmeasured: argsort's stand in
    assert d.name == "big_radix" and "from argsort measurements" in d.estimates[0].note
    assert pick(1 << 20, kind="argsort", vb=8).config == {"block_size": 256}


def test_pairs_of_8_byte_values_are_measured_apart_and_read_first():
    """A table with pairs8 entries: 8-byte pairs read them (no note), while
    4-byte pairs still take them before argsort's."""
    t = synthetic()
    for name in list(t["plugins"]):
        results = t["plugins"][name]["results"]
        if "argsort" in results:
            results["pairs8"] = {dt: {b: dict(e, ms=e["ms"] * 2) for b, e in by.items()}
                                 for dt, by in results["argsort"].items()}
    d = pick(1 << 20, kind="pairs", vb=8, table=t)
    assert d.estimates[0].note == ""
    assert "from pairs8 measurements" in pick(1 << 20, kind="pairs", vb=4, table=t).estimates[0].note
    assert policy.OP_SHAPE["pairs8"] == ("pairs", 8) and "pairs8" in policy.OPS


def test_rows_are_chosen_by_row_length_from_their_own_measurements():
    """Uniform rows read the op@rows entries (by row length, at 2^22 keys in
    all, scaled to the request's size); ragged segments have no estimate."""
    from cudasortkit.sdk.segments import Segments

    t = synthetic()
    short = {1: 0.05, 4: 0.06, 7: 0.08, 10: 0.4, 12: 0.9}  # wins short rows
    long = {4: 0.3, 7: 0.3, 10: 0.32, 12: 0.35, 17: 0.5}  # wins long rows
    for name, table in (("rows_like", short), ("radix_like", long)):
        t["plugins"][name] = {"hash": "h", "results": {"sort" + policy.ROWS: {"float32": {
            str(b): {"ms": ms, "config": {"block_size": 256}} for b, ms in table.items()}}}}
    cands = {"rows_like": Fake("rows_like"), "radix_like": Fake("radix_like")}

    def rows(count, length):
        return Request("sort", "float32", count * length, segments=Segments.rows(count, length))

    assert policy.decide(t, rows(1 << 20, 4), cands).name == "rows_like"
    assert policy.decide(t, rows(1 << 10, 1 << 12), cands).name == "radix_like"
    d = policy.decide(t, rows(1 << 9, 1 << 12), cands)  # 2^21 keys: half the measured time
    assert {e.name: e.ms for e in d.estimates}["radix_like"] == pytest.approx(0.35 / 2)
    assert "rows of 4,096" in d.reason
    d = policy.decide(t, rows(4, 1 << 20), cands)  # past the longest row measured: its log more
    assert {e.name: e.ms for e in d.estimates}["radix_like"] == pytest.approx(0.5 * 20 / 17)
    ragged = Request("sort", "float32", 10, segments=Segments.ragged(
        np.array([0, 3, 10]), np.array([0, 3, 10]), np.array([3, 7])))
    assert policy.decide(t, ragged, cands) is None
    assert policy.decide(t, Request("sort", "float32", 1 << 20), cands) is None  # 1-D: not rows


def test_invalid_tuned_config_falls_back_to_default():
    cands = {"big_radix": Fake("big_radix", max_block=256)}
    d = pick(1 << 20, cands=cands)
    assert d.name == "big_radix" and d.config is None


def test_failed_entries_are_ignored():
    t = synthetic()
    t["plugins"]["fast_small"]["results"]["sort"]["uint32"]["10"] = {"failed": "wrong result"}
    d = pick(1 << 10, table=t)
    assert {e.name: e.ms for e in d.estimates}["fast_small"] == pytest.approx(0.012)


# ------------------------------------------------ measured policy (no GPU)
@pytest.fixture
def fake_context(tmp_path, monkeypatch):
    store = cache.Store(str(tmp_path), INFO)
    store.data = synthetic()
    ctx = runtime.Context(state=None, store=store)
    monkeypatch.setattr(runtime, "context", lambda state=None: ctx)
    monkeypatch.setattr(cache, "plugin_hash", lambda p: "h")
    monkeypatch.setenv(runtime.ENV_AUTOTUNE, "0")
    yield ctx


def test_measured_policy_and_by_name_configure_use_the_table(fake_context):
    mp = MeasuredPolicy()
    choice = mp.choose(Request("sort", "uint32", 1 << 20), CANDS)
    assert choice.plugin.name == "big_radix" and choice.config["block_size"] == 512
    assert mp.choose(Request("sort", "uint32", 1000, on_device=False), CANDS).plugin.name == "numpy"
    assert mp.configure(Request("sort", "uint32", 1 << 10), CANDS["big_radix"]) == \
        {"block_size": 512, "tile": 10}
    assert mp.configure(Request("sort", "uint32", 1 << 10), CANDS["numpy"]) is None
    unmeasured = mp.choose(Request("sort", "float64", 1 << 10), CANDS)  # the declarations decide
    assert unmeasured.config is None and "nothing measured" in unmeasured.reason


def test_a_preferred_plugin_is_not_passed_over_for_lack_of_a_measurement(fake_context):
    cands = dict(CANDS, counting_like=Fake("counting_like", priority=1))
    choice = MeasuredPolicy().choose(Request("sort", "uint32", 1 << 20), cands)
    assert choice.plugin.name == "counting_like" and "not measured" in choice.reason


def _measured_to(table, name, buckets, cfg):
    table["plugins"][name] = {"hash": "h", "results": {"sort": {"uint32": {
        str(b): {"ms": ms, "config": dict(cfg, tile=b)} for b, ms in buckets.items()}}}}


def test_extrapolated_estimates_do_not_overrule_the_declarations(fake_context):
    """A bench with a fresh cache measured counting (uint16) and
    onesweep (32-bit keys) only below 2^24/2^26; linear extrapolation kept
    the smaller size's order and auto ran a slower plugin there. The plugin
    the declarations prefer keeps the call until it is measured at the size."""
    cands = dict(CANDS, counting_like=Fake("counting_like", priority=1))
    # measured 2^20..2^24, slower than big_radix there (its fixed cost)
    _measured_to(fake_context.table, "counting_like", {20: 0.5, 22: 1.0, 24: 3.0}, {"block_size": 256})
    mp = MeasuredPolicy()
    at24 = mp.choose(Request("sort", "uint32", 1 << 24), cands)  # measured here: the table decides
    assert at24.plugin.name == "big_radix"
    at22 = mp.choose(Request("sort", "uint32", 3 << 21), cands)  # between measured sizes: too
    assert at22.plugin.name == "big_radix"
    at26 = mp.choose(Request("sort", "uint32", 1 << 26), cands)  # beyond: the declarations
    assert at26.plugin.name == "counting_like" and "not measured at this size" in at26.reason
    assert at26.config == {"block_size": 256, "tile": 24}  # its nearest measured config
    assert policy.measured_at(fake_context.table, "counting_like", Request("sort", "uint32", 1 << 24))
    assert not policy.measured_at(fake_context.table, "counting_like", Request("sort", "uint32", 1 << 18))


def test_auto_and_by_name_run_a_plugin_with_one_config(fake_context):
    """auto's config for the plugin it picks is the one a call naming that
    plugin gets (the bench's named rows), at every size, measured or not."""
    cands = dict(CANDS, counting_like=Fake("counting_like", priority=1))
    _measured_to(fake_context.table, "counting_like", {20: 0.5, 22: 1.0, 24: 3.0}, {"block_size": 256})
    mp = MeasuredPolicy()
    for b in range(10, 30):
        req = Request("sort", "uint32", 1 << b)
        choice = mp.choose(req, cands)
        assert choice.config == mp.configure(req, choice.plugin), b


def test_the_learner_measures_only_from_credit(fake_context, monkeypatch):
    """First-run measurement costs at most SHARE of the calls' estimated time."""
    spent = []

    def fake_measure(ctx, plugin, shape):
        op, dtype, b, rows = shape
        spent.append((plugin.name, op, dtype, b))
        ctx.attempted.add((plugin.name, op, dtype, b))
        return measured.FIRST_MEASURE_MS

    monkeypatch.setattr(measured.Learner, "_measure", staticmethod(fake_measure))
    monkeypatch.setattr(measured, "HOST_NS_PER_KEY", 0.0)  # (its own test below)
    mp = MeasuredPolicy()
    req = Request("sort", "uint32", 1 << 26)  # nothing measured at 2^26
    mp.choose(req, CANDS)
    assert not spent  # autotune off
    monkeypatch.setenv(runtime.ENV_AUTOTUNE, "1")
    calls = 0
    while not spent:
        mp.choose(req, CANDS)
        calls += 1
    per_call = policy.decide(fake_context.table, req, CANDS).ms  # what each sort is estimated to cost
    assert measured.SHARE * calls * per_call >= measured.FIRST_MEASURE_MS * 0.999
    assert measured.SHARE * (calls - 1) * per_call < measured.FIRST_MEASURE_MS
    assert spent[0][1:] == ("sort", "uint32", 26)
    mp.choose(Request("sort", "uint32", 1 << 20), CANDS)  # measured: nothing to do
    assert len(spent) == 1


def test_the_learner_counts_down_to_each_missing_plugin(fake_context, monkeypatch):
    """After one measurement the next missing plugin of the shape is paid
    for by further calls (its kernels compiled: the cheaper estimate), and
    the observer is one object per shape, shared by every call of it."""
    spent = []

    def fake_measure(ctx, plugin, shape):
        op, dtype, b, rows = shape
        spent.append(plugin.name)
        ctx.attempted.add((plugin.name, op, dtype, b))
        return measured.FIRST_MEASURE_MS  # as estimated: nothing left over

    monkeypatch.setattr(measured.Learner, "_measure", staticmethod(fake_measure))
    monkeypatch.setattr(measured, "HOST_NS_PER_KEY", 0.0)  # (its own test below)
    monkeypatch.setenv(runtime.ENV_AUTOTUNE, "1")
    learner = measured.Learner()
    req = Request("sort", "uint32", 1 << 26)
    observe = learner.observer(req, CANDS, 10.0)
    assert learner.observer(Request("sort", "uint32", 1 << 26, stable=True), CANDS, 10.0) is observe
    calls = 0
    while len(spent) < 2:
        observe()
        calls += 1
        assert calls < 10_000
    first = measured.FIRST_MEASURE_MS / (measured.SHARE * 10.0)
    assert spent == ["big_radix", "fast_small"] and calls == first * 2  # neither compiled before
    for _ in range(1000):
        observe()  # nothing left to measure: calls only count
    assert len(spent) == 2 and learner.observer(req, CANDS, 10.0) is None


def test_the_learner_counts_the_host_work_of_a_measurement(monkeypatch):
    """A measurement makes its inputs and NumPy's answer on the host: 2^26
    keys took seconds, which the 10% budget must cover too, not only the
    compile and the GPU runs."""
    learner = measured.Learner()
    shape = ("sort", "uint32", 26, False)
    first = learner._cost("big_radix", shape, 1.0)
    assert first == pytest.approx(measured.FIRST_MEASURE_MS + 100e-9 * (1 << 26) * 1e3)
    learner._compiled.add(("big_radix", "sort", "uint32"))
    again = learner._cost("big_radix", shape, 1.0)
    assert again == pytest.approx(measured.MEASURE_RUNS + measured.MEASURE_OVERHEAD_MS
                                  + 100e-9 * (1 << 26) * 1e3)
    small = learner._cost("big_radix", ("sort", "uint32", 10, False), 1.0)
    assert small < measured.MEASURE_RUNS + measured.MEASURE_OVERHEAD_MS + 1


def test_the_learner_measures_rows_by_row_length(fake_context, monkeypatch):
    """Uniform rows missing a measurement at their row length are learned
    like one array's sizes, under op@rows at the row's bucket; ragged
    segments and rows too long for two rows in 2^22 keys are not."""
    from cudasortkit.sdk.segments import Segments

    spent = []

    def fake_measure(ctx, plugin, shape):
        spent.append((plugin.name, shape))
        op, dtype, b, rows = shape
        ctx.attempted.add((plugin.name, op + policy.ROWS, dtype, b))
        return measured.FIRST_MEASURE_MS

    monkeypatch.setattr(measured.Learner, "_measure", staticmethod(fake_measure))
    monkeypatch.setenv(runtime.ENV_AUTOTUNE, "1")
    learner = measured.Learner()
    cands = {"rows_like": Fake("rows_like")}
    req = Request("argsort", "float32", 1000 * 1000, value_bytes=8,
                  segments=Segments.rows(1000, 1000))
    observe = learner.observer(req, cands, 0.05)
    assert observe is not None
    while not spent:
        observe()
    assert spent == [("rows_like", ("argsort", "float32", 10, True))]
    assert learner.observer(req, cands, 0.05) is None  # attempted: nothing left
    long_rows = Request("sort", "float32", 1 << 23, segments=Segments.rows(2, 1 << 22))
    assert learner.observer(long_rows, cands, 1.0) is None
    ragged = Request("sort", "float32", 10, segments=Segments.ragged(
        np.array([0, 3, 10]), np.array([0, 3, 10]), np.array([3, 7])))
    assert learner.observer(ragged, cands, 1.0) is None


def test_cpu_only_still_sorts_and_explains():
    import cudasortkit as csk

    a = np.random.default_rng(1).integers(0, 100, 10_000).astype(np.int32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert np.array_equal(csk.sort(a), np.sort(a))
        assert "the GPU is not asked" in csk.explain(a[:1000]).reason  # (tiny host arrays)
        if not select.gpu_available():
            assert "no GPU" in csk.explain(a).reason


NO_GPU = "pycuda is not installed (No module named 'pycuda'); install cudasortkit[cuda]"


@pytest.fixture
def no_gpu(monkeypatch):
    """This machine as one without a GPU, whatever it has."""
    from cudasortkit.gpu import device

    for module in (device, select):
        monkeypatch.setattr(module, "gpu_available", lambda: False)
        monkeypatch.setattr(module, "unavailable_reason", lambda: NO_GPU)
    monkeypatch.setattr(select, "_warned_cpu", True)  # (the sorting-on-the-CPU warning)


def test_explain_reports_on_a_machine_without_a_gpu(no_gpu):
    """docs/tuning.md's explain() examples give reports there, not errors:
    auto names the CPU plugin and the GPU plugins that would serve the
    request with a GPU, and why there is none; a GPU plugin asked for by
    name that could serve it is reported as not runnable here."""
    import cudasortkit as csk

    a = np.random.default_rng(0).standard_normal(1 << 20).astype(np.float32)
    d = csk.explain(a)
    assert d.name == "numpy" and "no GPU here" in d.reason and NO_GPU in d.reason
    for name in ("radix", "onesweep", "merge_sort", "bitonic"):
        assert name in d.reason
    assert "counting" not in d.reason  # floats: it could not serve them with a GPU either
    assert str(d).startswith("auto -> numpy")
    assert csk.explain(a, kind="argsort", stable=True).name == "numpy"
    d = csk.explain(a, algorithm="merge_sort")
    assert d.name is None and d.config is None
    assert "merge_sort needs a GPU" in d.reason and NO_GPU in d.reason
    assert "sort(algorithm='merge_sort') raises ValueError here" in d.reason
    assert "auto sorts it with numpy" in d.reason
    assert str(d).startswith("merge_sort -> (cannot run here): merge_sort needs a GPU")
    assert csk.explain(a, algorithm="numpy").name == "numpy"
    # what no plugin could serve, GPU or not, is still refused as sort() refuses it
    with pytest.raises(ValueError, match="no rows or segments"):
        csk.explain(np.zeros((100, 5000), np.float32), axis=1, algorithm="radix")
    with pytest.raises(ValueError, match="unknown algorithm"):
        csk.explain(a, algorithm="nope")
    # and the sort itself still refuses the GPU plugin by name, saying why
    with pytest.raises(ValueError, match="merge_sort needs a GPU"):
        csk.sort(a, algorithm="merge_sort")


def test_importing_cudasortkit_does_not_import_pycuda_or_tuner():
    code = ("import sys, cudasortkit; assert 'pycuda' not in sys.modules; "
            "assert 'cudasortkit.tuning.tuner' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


# ----------------------------------------------------------------- CLI
def test_show_and_parse_sizes_without_gpu(tmp_path, capsys):
    from cudasortkit.cli import tune

    assert tune.parse_sizes("2^10:2^16") == [10, 12, 14, 16]
    assert tune.parse_sizes("2^12,65536,1000") == [10, 12, 16]
    assert tune.parse_rows("2^1,2,16,100") == [1, 4, 7] and tune.parse_rows("none") == []
    path = tmp_path / "c.json"
    path.write_text(json.dumps(synthetic()))
    assert tune.main(["--show", "--cache-file", str(path), "-v"]) == 0
    out = capsys.readouterr().out
    assert "Fake GPU 9000" in out and "big_radix" in out and "fast_small" in out
    line = next(l for l in out.splitlines() if l.startswith("sort    uint32         1024"))
    assert "fast_small" in line and line.rstrip().endswith("numpy")


def test_show_lists_rows_with_what_auto_picks():
    from cudasortkit.tuning import report

    t = synthetic()
    for name, table in (("rows_like", {1: 0.05, 10: 0.4}), ("radix_like", {10: 0.32, 17: 0.5})):
        t["plugins"][name] = {"hash": "h", "results": {"sort" + policy.ROWS: {"float32": {
            str(b): {"ms": ms, "config": {"block_size": 256}} for b, ms in table.items()}}}}
    out = report.show(t, "x")
    assert "rows: 4,194,304 keys in all" in out
    line = next(l for l in out.splitlines() if l.startswith("sort@rows") and " 1024 " in l)
    assert "0.3200" in line and "0.4000" in line and line.split()[-2] == "radix_like"
    line = next(l for l in out.splitlines() if l.startswith("sort@rows") and " 2 " in l)
    assert line.split()[-2] == "rows_like"


def test_plot_from_cache_file(tmp_path):
    pytest.importorskip("matplotlib")
    from cudasortkit.cli import tune

    path = tmp_path / "c.json"
    path.write_text(json.dumps(synthetic()))
    png = tmp_path / "p.png"
    assert tune.main(["--plot", str(png), "--cache-file", str(path)]) == 0
    assert png.stat().st_size > 1000


# ------------------------------------------------------------------ docs
DOCS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "tuning.md")


def _json_examples(path):
    """The ```json blocks of a Markdown file, in order."""
    import re

    with open(path, encoding="utf-8") as f:
        text = f.read()
    return re.findall(r"^[ \t]*```json[ \t]*\n(.*?)^[ \t]*```", text, re.S | re.M)


def test_the_cache_examples_in_docs_tuning_md_load_as_caches(tmp_path, capsys):
    """Every JSON example of docs/tuning.md is a cache the loader accepts,
    and tune --show reads it (as a user would check one)."""
    from cudasortkit.cli import tune

    examples = _json_examples(DOCS)
    assert examples, "docs/tuning.md has no ```json example"
    for i, text in enumerate(examples):
        data = cache.parse(text.encode())
        assert data["schema"] == cache.SCHEMA and data["plugins"]
        path = tmp_path / f"example{i}.json"
        path.write_text(text)
        assert tune.main(["--show", "-v", "--cache-file", str(path)]) == 0
        out = capsys.readouterr()
        assert "corrupt" not in out.out + out.err
        for name in data["plugins"]:
            assert name in out.out


def test_an_extrapolated_estimate_does_not_beat_one_measured_at_the_size():
    """A plugin measured only up to 2^20 (an older or partial sweep, or the
    learner part way) is extrapolated linearly to 2^24; where another is
    measured at 2^24, the measured one wins, and explain says why."""
    t = synthetic()
    _measured_to(t, "partial", {16: 0.03, 18: 0.06, 20: 0.12}, {"block_size": 64})
    cands = dict(CANDS, partial=Fake("partial"))
    d = pick(1 << 24, cands=cands, table=t)  # partial ~1.9 ms extrapolated, big_radix 2.6 measured
    est = {e.name: e for e in d.estimates}
    assert est["partial"].ms < est["big_radix"].ms
    assert d.name == "big_radix" and "extrapolated" in est["partial"].note
    assert pick(1 << 20, cands=cands, table=t).name == "partial"  # measured there: it wins
    t2 = synthetic()
    _measured_to(t2, "partial", {16: 0.03}, {"block_size": 64})
    del t2["plugins"]["big_radix"], t2["plugins"]["fast_small"]
    assert pick(1 << 24, cands=cands, table=t2).name == "partial"  # nothing measured there
