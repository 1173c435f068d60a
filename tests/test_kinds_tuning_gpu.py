"""GPU test of measured choice for the non-sort kinds: `python -m
cudasortkit.tune --kinds --quick` into a temporary cache, then auto's
choice for one shape of each kind (selection, search, multikey) is the
plugin measured fastest there."""
import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest

import cudasortkit as csk
from cudasortkit.calls import multikey
from cudasortkit.sdk.multikey import MultikeyJob
from cudasortkit.tuning import cache, kinds, runtime

pytestmark = pytest.mark.gpu
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class _DeviceKey:
    on_device = True

    def __init__(self, dtype):
        self.dtype = np.dtype(dtype)


@pytest.fixture
def tmp_cache(tmp_path, monkeypatch):
    monkeypatch.setenv(cache.ENV_DIR, str(tmp_path))
    runtime.reset()
    yield tmp_path
    runtime.reset()


@pytest.mark.slow  # it tunes (about 90 s on an H100)
def test_tune_kinds_quick_then_auto_takes_the_measured_winners(tmp_cache):
    cupy = pytest.importorskip("cupy")
    out = tmp_cache / "kinds.json"
    env = dict(os.environ, **{cache.ENV_DIR: str(tmp_cache)})
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "cudasortkit.tune", "--kinds", "--quick",
                           "--json", str(out)], capture_output=True, text=True, env=env,
                          timeout=600, cwd=ROOT)
    print(done.stdout)
    print(f"tune --kinds --quick: {time.monotonic() - t0:.1f} s wall")
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    best = json.loads(out.read_text())["best"]
    runtime.reset()  # read the file the child wrote

    def winner(kind, shape):
        return best[f"{kind.group} {kind.key(shape)}"]

    rng = np.random.default_rng(1)
    a = cupy.asarray(rng.standard_normal(1 << 20, dtype=np.float32))
    topk = csk.explain(a, kind="topk", k=16)
    assert topk.name == winner(kinds.SELECTION, ("topk", "float32", 0, 20, 4)), str(topk)
    assert "measured here" in topk.reason, str(topk)

    keys = cupy.sort(a)
    search = csk.explain_searchsorted(keys, a[:1 << 10])
    assert search.plugin == winner(kinds.SEARCH, ("float32", 20, 10, 0, "0")), str(search)
    assert "measured here" in str(search)

    job = MultikeyJob([_DeviceKey("int32"), _DeviceKey("float32")], (False, False), 1 << 20)
    plugin, why = multikey.choose_why(job)
    assert plugin.name == winner(kinds.MULTIKEY, ("2", "64", 20, "device")), why
    assert why.startswith("measured here")
