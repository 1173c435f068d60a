"""`bench --family` without a GPU: its unique and searchsorted grids run
over NumPy stand-ins for CuPy and PyTorch (cudasortkit's host paths answer
for ours), CUDA-event timing replaced by fixed times; every contender is
checked before it is timed (a wrong one is reported, not timed), the
ratios and bars come out right, and the table and summary say so."""
import types

import numpy as np
import pytest

from cudasortkit.cli import bench, bench_family


def _fake_libraries(wrong=()):
    """(cupy, torch) over NumPy; a library named in `wrong` answers wrongly."""
    def off(name, result):
        return result + 1 if name in wrong else result

    cupy = types.SimpleNamespace(
        asarray=np.asarray, array_equal=np.array_equal,
        unique=lambda a, **flags: off("cupy", np.unique(a, **flags)) if not flags
        else np.unique(a, **flags),
        searchsorted=lambda a, v: off("cupy", np.searchsorted(a, v)))
    torch = types.SimpleNamespace(
        as_tensor=lambda x, device=None: np.asarray(x),
        unique=lambda t, sorted=True, **flags: np.unique(t, **flags),
        searchsorted=lambda a, v: off("torch", np.searchsorted(a, v)))
    return cupy, torch


@pytest.fixture
def fake(monkeypatch):
    """Fixed times by contender: csk 1 ms, cupy 2 ms, torch 0.5 ms, others 3."""
    def time_gpu(run, repeats=10, warmup=2, **kwargs):
        run(0)
        ms = timing.get(name_of(run), 3.0)
        return {"median_ms": ms, "times": [ms] * repeats}

    timing = {"csk": 1.0, "cupy": 2.0, "torch": 0.5}

    def name_of(run):  # race() times fn through a lambda; the contender's name is its key
        return current[0]

    current = [None]
    race = bench_family.race

    def named_race(contenders, repeats, rounds=bench_family.ROUNDS):
        out = {}
        for name, fn in contenders.items():
            current[0] = name
            out.update(race({name: fn}, repeats, rounds))
        return out

    import cudasortkit as csk

    searchsorted = csk.searchsorted

    def named_on_host(a, v, *args, algorithm="auto", **kwargs):
        # The stand-ins are host arrays, for which a named search plugin
        # raises (NumPy searches them): the host path answers for each
        # plugin the grid names.
        return searchsorted(a, v, *args, **kwargs)

    monkeypatch.setattr(csk, "searchsorted", named_on_host)
    monkeypatch.setattr(bench_family, "time_gpu", time_gpu)
    monkeypatch.setattr(bench_family, "race", named_race)
    monkeypatch.setattr(bench_family, "_libraries", _fake_libraries)
    return monkeypatch


def test_search_grid_checks_times_and_marks_bars(fake):
    rows = bench_family.search_grid(4, logs=(4, 7), dtypes=("float32", "int64"))
    assert len(rows) == 8 and all(r["ok"] for r in rows)
    for r in rows:
        assert r["csk_ms"] == 1.0 and r["cupy_ms"] == 2.0 and r["torch_ms"] == 0.5
        assert r["x_cupy"] == 2.0 and r["x_torch"] == 0.5 and not r["met"]
        assert set(r["plugins_ms"]) == {"binary", "tree", "kary"}
        assert r["plugin"] in ("binary", "tree", "kary")
    table = bench_family.format_rows(rows)
    assert "MISS" in table and "2.00" in table and "0.50" in table
    assert bench_family.summary(rows).startswith("bars met in 0 of 8 cells")


def test_a_wrong_peer_is_reported_not_timed(fake):
    fake.setattr(bench_family, "_libraries", lambda: _fake_libraries(wrong=("torch",)))
    rows = bench_family.search_grid(2, logs=(5,), dtypes=("int64",))
    (row,) = rows
    assert row["ok"] and "torch_ms" not in row and "torch: wrong result" in row["errors"]
    assert row["met"]  # against cupy alone: 2.0x
    assert "torch: wrong result" in bench_family.format_rows(rows)


def test_unique_grid_both_flag_sets(fake):
    rows = bench_family.unique_grid(2, logs=(6, 9), dtypes=("int32", "float64"))
    assert [r["flags"] for r in rows] == ["plain", "inverse+counts"] * 4
    assert all(r["ok"] and r["bar"] == bench_family.UNIQUE_BAR for r in rows)
    fake.setattr(bench_family, "_libraries", lambda: _fake_libraries(wrong=("cupy",)))
    plain = bench_family.unique_grid(2, logs=(6,), dtypes=("int32",))[0]
    assert "cupy_ms" not in plain and "cupy: wrong result" in plain["errors"]


def test_the_bar_holds_when_both_peers_are_slower():
    row = {"case": "c", "ok": True, "csk_ms": 1.0, "cupy_ms": 1.3, "torch_ms": 1.25}
    bench_family._ratios(row, 1.2)
    assert row["met"]
    row["torch_ms"] = 1.1
    bench_family._ratios(row, 1.2)
    assert not row["met"]
    assert "met" in bench_family.format_rows([dict(row, torch_ms=1.3, met=True)])


def test_family_cases_flag():
    args = bench.build_parser().parse_args(["--family", "--family-cases", "searchsorted,host"])
    assert args.family and args.family_cases == "searchsorted,host"
    with pytest.raises(SystemExit, match="unknown --family-cases"):
        bench_family.main(1, ["nope"])
    assert set(bench_family.GROUPS) == {"lexsort", "unique_rows", "unique", "searchsorted",
                                        "host"}
