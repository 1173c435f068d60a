"""Defects a new user hits (issue 13, section 4), CPU only: the CLI without a
GPU, broken plugins, corrupt tuning caches and explain's arguments."""
import json
import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import cudasortkit as csk
from cudasortkit import cli, device, registry, select
from cudasortkit.plugin import Request, SortPlugin, Tunable
from cudasortkit.tuning import cache, policy, runtime, tuner

INFO = {"name": "Fake GPU 9000", "compute_capability": "9.0", "sm_count": 132, "driver": "12.8",
        "nvcc": "Build cuda_12.8", "cudasortkit": "0.1.0"}
NO_PYCUDA = "pycuda is not installed (No module named 'pycuda'); install cudasortkit[cuda]"


@pytest.fixture(autouse=True)
def _fresh_state():
    """Plugins these tests register or break, and warnings given once, are
    forgotten afterwards."""
    cache._warned.clear()
    yield
    cache._warned.clear()
    registry.refresh()
    runtime.reset()


@pytest.fixture
def no_gpu(monkeypatch):
    monkeypatch.setattr(device, "gpu_available", lambda: False)
    monkeypatch.setattr(device, "unavailable_reason", lambda: NO_PYCUDA)


# ------------------------------------------------------------------ 4.2 bench
def test_bench_without_gpu_says_what_is_missing_in_one_line(no_gpu):
    with pytest.raises(SystemExit) as exc:
        cli.main(["bench"])
    message = str(exc.value.code)
    assert message == f"bench needs a GPU: {NO_PYCUDA}"


@pytest.mark.skipif(device.gpu_available(), reason="there is a GPU here")
def test_bench_command_without_gpu_exits_with_one_line_and_no_traceback():
    done = subprocess.run([sys.executable, "-m", "cudasortkit", "bench"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [f"bench needs a GPU: {device.unavailable_reason()}"]


# ------------------------------------------------------------------- 4.3 info
def test_info_prints_the_cache_dir_the_tuner_uses(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(cache.ENV_DIR, str(tmp_path / "tuning"))
    assert cli.main(["info"]) == 0
    assert f"cache dir: {tmp_path / 'tuning'}" in capsys.readouterr().out.splitlines()


# -------------------------------------------------------------- 4.7 explain
def test_explain_names_the_valid_kinds():
    a = np.arange(10, dtype=np.float32)
    with pytest.raises(ValueError, match="kind must be one of 'sort', 'argsort', 'pairs', got 'bogus'"):
        csk.explain(a, kind="bogus")
    with pytest.raises(ValueError, match="kind='pairs' needs values=.*'sort' or 'argsort'"):
        csk.explain(a, kind="pairs")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert csk.explain(a, kind="pairs", values=np.arange(10)).name
