"""bench's --variant: a registered copy of a plugin whose config the spec sets."""
from cudasortkit.cli import bench
from cudasortkit.sdk import registry


def test_variant_sets_config_beyond_listed_choices():
    try:
        name = bench.register_variant("onesweep:block_size=512,items_per_thread=64,radix_bits=11")
        assert name == "onesweep_bs512_ipt64_rb11"
        plugin = registry.plugins()[name]
        for value_bytes in (0, 8):  # onesweep's own keys-only default (20 a thread) yields too
            config = plugin.default_config("uint32", value_bytes)
            assert (config["block_size"], config["items_per_thread"], config["radix_bits"]) == (512, 64, 11)
        assert registry.plugins()["onesweep"].default_config("uint32", 0)["items_per_thread"] == 20
    finally:
        registry.refresh()  # forget the variant
    assert name not in registry.plugins()


# ------------------------------------------------------- --peers (no GPU)
import json
import os
import sys
import types

import numpy as np
import pytest

from cudasortkit.cli import bench_calls


class _FakeSorter:
    """cuda.compute's make_radix_sort result: sizes its temporaries, then sorts."""

    def __call__(self, *, temp_storage, d_in_keys, d_out_keys, d_in_values, d_out_values,
                 num_items):
        assert d_in_values is None and d_out_values is None
        if temp_storage is None:
            return 64
        assert temp_storage.nbytes >= 64
        d_out_keys[...] = np.sort(d_in_keys[:num_items])


def _fake_peer(wrong_oneshot=False):
    def radix_sort(*, d_in_keys, d_out_keys, num_items, order):
        d_out_keys[...] = d_in_keys if wrong_oneshot else np.sort(d_in_keys)
    return types.SimpleNamespace(make_radix_sort=lambda **kw: _FakeSorter(), radix_sort=radix_sort,
                                 SortOrder=types.SimpleNamespace(ASCENDING="asc"))


#: CuPy's calls the peers bench makes, on NumPy arrays.
_FAKE_CUPY = types.SimpleNamespace(asarray=np.asarray, empty_like=np.empty_like, empty=np.empty,
                                   uint8=np.uint8, sort=np.sort,
                                   cuda=types.SimpleNamespace(Device=lambda: types.SimpleNamespace(
                                       synchronize=lambda: None)))


class _FakeCsk:
    sort = staticmethod(np.sort)

    @staticmethod
    def plan(like):
        def p(x, out=None):
            if out is None:
                return np.sort(x)
            out[...] = np.sort(x)
            return out
        return p


def test_peers_flag_parses():
    assert bench.build_parser().parse_args(["--peers"]).peers is True
    assert bench.build_parser().parse_args([]).peers is False


def test_peers_not_installed_is_one_line_and_the_bench_runs(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "cuda.compute", None)  # import fails as if not installed
    cc, why = bench_calls.peer_module()
    assert cc is None and why
    from cudasortkit.gpu import device

    monkeypatch.setattr(device, "gpu_available", lambda: True)
    seen = {}

    def fake_case(op, dtype, n, names, **kw):
        seen["peers"] = kw.get("peers")
        return [{"op": op, "dtype": dtype, "n": n, "dist": "uniform", "algorithm": "onesweep",
                 "median_ms": 1.0, "gkeys_s": n / 1e6}]

    monkeypatch.setattr(bench, "bench_case", fake_case)
    monkeypatch.setattr(bench, "_cupy", lambda: _FAKE_CUPY)
    monkeypatch.setattr(bench_calls, "_libraries", lambda: (_FAKE_CUPY, None))
    monkeypatch.setattr(bench_calls, "PEER_SIZES", (10,))
    monkeypatch.setattr(bench_calls, "PEER_REPS", 5)
    assert bench.main(["--peers", "--algorithms", "onesweep", "--sizes", "2^10",
                       "--dtypes", "uint32"]) == 0
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if "cuda.compute" in line]
    assert len(lines) == 1 and "not installed" in lines[0]
    assert seen["peers"] is None and "onesweep" in out  # the rest of the bench ran
    assert "per call" in out and bench_calls.PREPARED not in out  # ours, CuPy; no CUB


def test_peers_latency_rows_table_and_json_with_a_fake_peer(tmp_path):
    rows = bench_calls.peers_latency(("uint32", "float32"), sizes=(10, 12), reps=6,
                                     libraries=(_FAKE_CUPY, None, _fake_peer()), csk=_FakeCsk)
    names = ["csk.sort", "csk.plan", "csk.plan(out=)", bench_calls.PREPARED, bench_calls.ONESHOT,
             "cupy.sort"]
    assert [r["algorithm"] for r in rows] == names * 4
    for r in rows:
        assert r["op"] == "call" and r["ok"] is True and r["us"] > 0 and "vs_cub" in r
        assert r["n"] in (1 << 10, 1 << 12) and r["dtype"] in ("uint32", "float32")
    assert all(r["vs_cub"] == 1.0 for r in rows if r["algorithm"] == bench_calls.PREPARED)
    text = bench_calls.format_peers(rows)
    assert "vs cub: csk.sort, csk.plan, csk.plan(out=)" in text.splitlines()[1]
    assert len(text.splitlines()) == 2 + 4 + 1  # title, head, one line per cell, the CPU probe
    assert all(len(r["cpu_probe_ms"]) == 2 and min(r["cpu_probe_ms"]) > 0 for r in rows)
    json.dumps(rows)  # the JSON rows (--json) are plain


def test_a_wrong_peer_result_is_reported_not_timed():
    rows = bench_calls.peers_latency(("uint32",), sizes=(10,), reps=3,
                                     libraries=(_FAKE_CUPY, None, _fake_peer(wrong_oneshot=True)),
                                     csk=_FakeCsk)
    bad = next(r for r in rows if r["algorithm"] == bench_calls.ONESHOT)
    assert bad["ok"] is False and bad["error"] == "wrong result" and "us" not in bad
    assert "wrong result" in bench_calls.format_peers(rows)


def test_device_peers_rows_and_vs_cub():
    runners = bench_calls.device_peers(_fake_peer(), _FAKE_CUPY)([np.array([3, 1, 2], np.uint32)] * 2)
    assert sorted(runners) == sorted([bench_calls.PREPARED, bench_calls.ONESHOT])
    assert runners[bench_calls.PREPARED](1).tolist() == [1, 2, 3]
    rows = [{"algorithm": "onesweep", "median_ms": 0.5}, {"algorithm": bench_calls.PREPARED,
                                                          "median_ms": 1.0}, {"algorithm": "x"}]
    bench_calls.add_vs_cub(rows)
    assert rows[0]["vs_cub"] == 2.0 and "vs_cub" not in rows[2]
    assert "vs cub" in bench.format_table([dict(r, op="sort", dtype="uint32", n=3, dist="u",
                                                gkeys_s=1.0) for r in rows[:2]])


def test_a_peer_that_refuses_a_dtype_fails_its_row_only():
    cc = _fake_peer()
    cc.make_radix_sort = lambda **kw: (_ for _ in ()).throw(TypeError("unsupported dtype"))
    runners = bench_calls.device_peers(cc, _FAKE_CUPY)([np.zeros(4, np.uint32)])
    with pytest.raises(RuntimeError, match="cuda.compute: TypeError"):
        runners[bench_calls.PREPARED](0)


def test_a_contender_that_cannot_be_made_fails_its_row_only():
    class NoPlan(_FakeCsk):
        @staticmethod
        def plan(like):
            raise ValueError("no plan for these keys")

    rows = bench_calls.peers_latency(("uint32",), sizes=(10,), reps=3,
                                     libraries=(_FAKE_CUPY, None, _fake_peer()), csk=NoPlan)
    bad = [r for r in rows if r["algorithm"].startswith("csk.plan")]
    assert len(bad) == 2 and all(r["ok"] is False and "no plan" in r["error"] for r in bad)
    assert all("us" in r for r in rows if not r["algorithm"].startswith("csk.plan"))


def test_rounds_rotate_so_no_contender_always_runs_first():
    from cudasortkit.gpu.timing import rotated_rounds

    orders = list(rotated_rounds(["auto", "onesweep", "cupy"], 4))
    assert orders == [["auto", "onesweep", "cupy"], ["onesweep", "auto", "cupy"],
                      ["cupy", "auto", "onesweep"], ["auto", "cupy", "onesweep"]]
    assert list(rotated_rounds([], 2)) == [[], []]


def test_rounds_give_each_contender_more_than_one_predecessor():
    """Rotation alone keeps who runs right before whom; reversing every
    other round gives each contender two neighbours before it."""
    from cudasortkit.gpu.timing import rotated_rounds

    names = ["auto", "onesweep", "radix", "cupy", "cub(prepared)", "cub(oneshot)"]
    orders = list(rotated_rounds(names, 5))
    assert all(sorted(order) == sorted(names) for order in orders)
    assert len({order[0] for order in orders}) == 5
    before = {name: {order[order.index(name) - 1] for order in orders if order[0] != name}
              for name in names}
    assert before["auto"] == {"cub(oneshot)", "onesweep"}
    assert all(len(b) == 2 for b in before.values())


def test_peers_latency_times_each_cell_in_rotated_rounds(monkeypatch):
    """Each cell's interleaved rounds come from timing.rotated_rounds over
    its timed contenders: every round starts with another one."""
    real, seen = bench_calls.rotated_rounds, []

    def spy(names, rounds):
        seen.append(list(real(names, rounds)))
        return seen[-1]

    monkeypatch.setattr(bench_calls, "rotated_rounds", spy)
    bench_calls.peers_latency(("uint32",), sizes=(10, 12), reps=bench_calls.PEER_ROUNDS,
                              libraries=(_FAKE_CUPY, None, _fake_peer()), csk=_FakeCsk)
    assert len(seen) == 2  # one a cell
    for orders in seen:
        assert len(orders) == bench_calls.PEER_ROUNDS and "csk.sort" in orders[0]
        assert len({order[0] for order in orders}) == len(orders[0])  # each one first in turn


def test_a_slow_stretch_of_the_cpu_falls_on_every_contender_alike(monkeypatch):
    """The CPU can change speed for a while within one cell (timing.cpu_probe_ms):
    over any stretch of a quarter of a cell's calls, every contender makes
    about the same number of calls (within a third of the fair share), so
    none of them is timed mostly in the slow part. With 5 rounds of 40
    calls, one made twice the other's number in some such stretch."""
    monkeypatch.setattr(bench_calls, "cpu_probe_ms", lambda: 1.0)
    order = []

    def spying(name, fn):
        def call(*args, **kwargs):
            order.append(name)
            return fn(*args, **kwargs)
        return call

    class Spy(_FakeCsk):
        sort = staticmethod(spying("csk.sort", np.sort))

    fake = types.SimpleNamespace(**vars(_FAKE_CUPY))
    fake.sort = spying("cupy.sort", np.sort)
    bench_calls.peers_latency(("uint32",), sizes=(10,), reps=bench_calls.PEER_REPS,
                              libraries=(fake, None, _fake_peer()), csk=Spy)
    timed = order[-bench_calls.PEER_REPS * 2:]  # after the checks and warm-ups
    window = len(timed) // 4
    fair = window / 2
    for start in range(len(timed) - window + 1):
        part = timed[start:start + window]
        assert abs(part.count("csk.sort") - fair) <= fair / 3, start


def test_a_cell_whose_cpu_changed_speed_is_marked(monkeypatch):
    """Rows carry the CPU probe from before and after their cell; the table
    marks a cell whose probe moved past PROBE_DRIFT and gives the range."""
    probes = iter([7.0, 12.0, 7.0, 7.2])
    monkeypatch.setattr(bench_calls, "cpu_probe_ms", lambda: next(probes))
    rows = bench_calls.peers_latency(("uint32",), sizes=(10, 12), reps=4,
                                     libraries=(_FAKE_CUPY, None, _fake_peer()), csk=_FakeCsk)
    assert {tuple(r["cpu_probe_ms"]) for r in rows} == {(7.0, 12.0), (7.0, 7.2)}
    lines = bench_calls.format_peers(rows).splitlines()
    assert lines[2].endswith(" *") and not lines[3].endswith(" *")
    assert "7.0-12.0 ms" in lines[4]


def test_a_cell_reports_our_calls_that_launched_no_graph(monkeypatch):
    """Rows carry how many replays of the cell's timed rounds had no CUDA
    graph to launch (launch.plans.issued_replays: read before and after the
    rounds, not the warm-up); the table shows a cell's count where it is
    not 0, with a legend."""
    from cudasortkit.launch import plans as launchplan

    counts = iter([10, 13, 20, 20])
    monkeypatch.setattr(launchplan, "issued_replays", lambda: next(counts))
    rows = bench_calls.peers_latency(("uint32",), sizes=(10, 12), reps=4,
                                     libraries=(_FAKE_CUPY, None, _fake_peer()), csk=_FakeCsk)
    assert [r["replays_without_graph"] for r in rows] == [3] * 6 + [0] * 6
    lines = bench_calls.format_peers(rows).splitlines()
    assert lines[2].endswith(" [3 without a graph]") and "without a graph" not in lines[3]
    assert "issued_replays" in lines[-1]


def test_a_replay_without_a_graph_is_counted():
    """LaunchPlan.replay counts a replay whose buffers have no graph (it
    issues its operations), not one that launches its graph."""
    from cudasortkit.launch import plans as launchplan

    plan = launchplan.LaunchPlan((), ())
    plan.graphs = types.SimpleNamespace(launch=lambda bases, job, stream=None: True,
                                         wants=lambda bases: False)
    job = types.SimpleNamespace(keys_in=1, keys_out=2, values_in=0, values_out=0, graphable=False)
    before = launchplan.issued_replays()
    plan.replay(job, ())
    assert launchplan.issued_replays() == before
    plan.graphs.launch = lambda bases, job, stream=None: False
    plan.replay(job, ())
    assert launchplan.issued_replays() == before + 1


def test_cpu_probe_times_the_fixed_loop():
    from cudasortkit.gpu import timing

    assert 0 < timing.cpu_probe_ms(tries=1) < 10_000


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no thread affinity here")
def test_per_call_timing_runs_on_one_cpu_and_gives_the_others_back():
    """Every contender of peers_latency is timed with the thread on one CPU
    (timing.on_one_cpu), which the rows and the table name; afterwards the
    thread may run where it could before."""
    before = os.sched_getaffinity(0)
    seen = []

    class Spy(_FakeCsk):
        @staticmethod
        def sort(x):
            seen.append(os.sched_getaffinity(0))
            return np.sort(x)

    rows = bench_calls.peers_latency(("uint32",), sizes=(10,), reps=3,
                                     libraries=(_FAKE_CUPY, None, _fake_peer()), csk=Spy)
    assert seen and all(len(s) == 1 and s == seen[0] for s in seen)
    cpu = next(iter(seen[0]))
    assert cpu in before and all(r["cpu"] == cpu for r in rows)
    assert f"thread pinned to CPU {cpu}" in bench_calls.format_peers(rows).splitlines()[0]
    assert os.sched_getaffinity(0) == before


def test_on_one_cpu_gives_the_cpus_back_when_the_block_raises():
    from cudasortkit.gpu.timing import on_one_cpu

    before = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    with pytest.raises(KeyError):
        with on_one_cpu() as cpu:
            assert cpu is None or os.sched_getaffinity(0) == {cpu}
            raise KeyError("inside")
    if before is not None:
        assert os.sched_getaffinity(0) == before


# ------------------------------------------- --peers, pairs and argsort cells
class _FakePairSorter:
    """make_radix_sort's result for pairs: a stable sort of the keys
    carrying the values."""

    def __call__(self, *, temp_storage, d_in_keys, d_out_keys, d_in_values, d_out_values,
                 num_items):
        if temp_storage is None:
            return 64
        order = np.argsort(d_in_keys[:num_items], kind="stable")
        d_out_keys[...] = d_in_keys[order]
        if d_in_values is not None:
            d_out_values[...] = d_in_values[order]


_FAKE_CUPY_ARANGE = types.SimpleNamespace(**vars(_FAKE_CUPY), arange=np.arange)


def test_device_peers_pairs_cells_sort_the_values_with_their_keys():
    cc = types.SimpleNamespace(make_radix_sort=lambda **kw: _FakePairSorter(),
                               SortOrder=types.SimpleNamespace(ASCENDING="asc"))
    keys = [np.array([3, 1, 2, 1], np.uint32), np.array([0, 5, 4, 4], np.uint32)]
    vals = [np.array([10, 11, 12, 13], np.int32), np.array([7, 6, 5, 4], np.int32)]
    runners = bench_calls.device_peers(cc, _FAKE_CUPY_ARANGE)(keys, "pairs", vals, "int32")
    assert list(runners) == [bench_calls.PREPARED]  # no one-shot row for pairs
    k, v = runners[bench_calls.PREPARED](1)
    assert k.tolist() == [0, 4, 4, 5] and v.tolist() == [7, 5, 4, 6]


def test_device_peers_argsort_cells_sort_positions_of_the_index_dtype():
    cc = types.SimpleNamespace(make_radix_sort=lambda **kw: _FakePairSorter(),
                               SortOrder=types.SimpleNamespace(ASCENDING="asc"))
    keys = [np.array([3, 1, 2, 1], np.float32)]
    for index_dtype in ("int32", "int64"):
        run = bench_calls.device_peers(cc, _FAKE_CUPY_ARANGE)(keys, "argsort", None,
                                                               index_dtype)[bench_calls.PREPARED]
        got = run(0)
        assert got.tolist() == [1, 3, 2, 0] and got.dtype == np.dtype(index_dtype)


def test_pair_cells_are_labelled_by_value_width_and_summarised():
    rows = [{"op": "pairs", "values": "int64", "dtype": "uint32", "n": 1 << 16, "dist": "uniform",
             "algorithm": "auto", "median_ms": 0.05, "gkeys_s": 1.0, "picked": "onesweep",
             "vs_cub": 1.2},
            {"op": "pairs", "values": "int64", "dtype": "uint32", "n": 1 << 16, "dist": "uniform",
             "algorithm": "onesweep", "median_ms": 0.04, "gkeys_s": 1.0},
            {"op": "pairs", "values": "int64", "dtype": "uint32", "n": 1 << 16, "dist": "uniform",
             "algorithm": bench_calls.PREPARED, "median_ms": 0.06, "gkeys_s": 1.0},
            {"op": "pairs", "values": "int32", "dtype": "uint32", "n": 1 << 16, "dist": "uniform",
             "algorithm": "onesweep", "median_ms": 0.03, "gkeys_s": 1.0}]
    table = bench.format_table(rows)
    assert "pairs/i8" in table and "pairs/i4" in table and "-> onesweep" in table
    cells = bench.format_cells(rows).splitlines()
    assert len(cells) == 1  # the int32 cell has no auto row
    assert "auto/best 1.250" in cells[0] and "best onesweep" in cells[0]
    assert "auto vs cub 1.20x" in cells[0]


def test_pair_values_are_random_not_positions():
    rng = np.random.default_rng(0)
    for dtype in ("int32", "int64", "float32", "float64"):
        v = bench.make_values(dtype, 1000, rng)
        assert v.dtype == np.dtype(dtype) and not np.array_equal(v, np.arange(1000))


def test_value_dtypes_and_no_calls_parse():
    args = bench.build_parser().parse_args(["--value-dtypes", "int32,int64", "--no-calls"])
    assert args.value_dtypes == "int32,int64" and args.no_calls is True

# ------------------------------------------------- the profilers (bench TOOL)
from cudasortkit.cli import main as cli_main  # noqa: E402
from cudasortkit.gpu import device  # noqa: E402


def _bench_parser():
    import argparse

    from cudasortkit.cli import bench_profilers

    parser = argparse.ArgumentParser()
    bench.build_parser(parser)
    parser.set_defaults(func="table")
    bench_profilers.add_tools(parser)
    return parser


def test_bench_without_a_tool_is_the_table_and_a_tool_runs_instead():
    parser = _bench_parser()
    args = parser.parse_args(["--sizes", "2^10", "--peers"])
    assert (args.func, args.tool, args.sizes, args.peers) == ("table", None, "2^10", True)
    args = parser.parse_args(["timeline", "--size", "2^20", "--algorithm", "onesweep"])
    assert args.tool == "timeline" and args.func.__name__ == "timeline"
    assert (args.size, args.algorithm, args.profile) == ("2^20", "onesweep", False)
    for tool in ("profile", "first-call", "kernels"):
        assert parser.parse_args([tool]).func.__name__ == tool.replace("-", "_").replace(
            "profile", "profile_calls")


def test_the_first_call_profile_runs_anywhere(capsys):
    assert cli_main.main(["bench", "first-call", "--size", "100", "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert "first call on 100 NumPy uint32 keys:" in out and "cumulative" in out


@pytest.mark.parametrize("tool", ["profile", "timeline", "kernels"])
def test_a_gpu_profiler_without_a_gpu_says_what_is_missing(tool, monkeypatch):
    monkeypatch.setattr(device, "gpu_available", lambda: False)
    monkeypatch.setattr(device, "unavailable_reason", lambda: "no device here")
    with pytest.raises(SystemExit, match=f"^bench {tool} needs a GPU: no device here$"):
        cli_main.main(["bench", tool])
