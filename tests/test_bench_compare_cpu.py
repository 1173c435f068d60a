"""bench compare: cells by their time over CuPy's in the same run."""
import json

from cudasortkit.cli import bench_compare


def _run(path, cupy_ms, ours_ms):
    rows = [{"op": "sort", "dtype": "uint32", "n": 1024, "algorithm": "cupy", "median_ms": cupy_ms},
            {"op": "sort", "dtype": "uint32", "n": 1024, "algorithm": "auto", "median_ms": ours_ms},
            {"op": "sort", "dtype": "uint32", "n": 1024, "algorithm": "broken", "error": "x"}]
    path.write_text(json.dumps(rows))
    return str(path)


def test_a_run_that_moved_cupy_too_is_not_a_change(tmp_path):
    # after's run is 10% slower for CuPy and for ours alike: the cell held
    before = [_run(tmp_path / "b0.json", 1.0, 0.5), _run(tmp_path / "b1.json", 1.0, 0.5)]
    after = [_run(tmp_path / "a0.json", 1.1, 0.55), _run(tmp_path / "a1.json", 1.1, 0.55)]
    lines, moved, within = bench_compare.compare(before, after, 0.02)
    assert moved == within == 0 and len(lines) == 2 and "auto" in lines[1] and "broken" not in "".join(lines)


def test_a_slower_cell_is_named(tmp_path):
    before = [_run(tmp_path / "b0.json", 1.0, 0.5)]
    after = [_run(tmp_path / "a0.json", 1.0, 0.53)]
    lines, moved, within = bench_compare.compare(before, after, 0.02)
    assert moved == 1 and within == 0 and lines[1].endswith("<- moved") and "1.060" in lines[1]


def test_a_move_smaller_than_the_runs_own_spread_is_counted_apart(tmp_path):
    # before's two runs lie 10% apart over CuPy; after moved 5%
    before = [_run(tmp_path / "b0.json", 1.0, 0.5), _run(tmp_path / "b1.json", 1.0, 0.55)]
    after = [_run(tmp_path / "a0.json", 1.0, 0.55), _run(tmp_path / "a1.json", 1.0, 0.55)]
    lines, moved, within = bench_compare.compare(before, after, 0.02)
    assert moved == within == 1 and "10.0%" in lines[1]
