"""searchsorted's host path without a GPU: prepared searches
(calls/search_prepared.py) replay what the general path launched, and the
general path's decisions are memoised per shape under the generations
they stand on."""
import os
import subprocess
import sys

import numpy as np

import cudasortkit as csk
from cudasortkit.calls import search
from cudasortkit.sdk import registry
from cudasortkit.sdk.search import SearchQuery
from cudasortkit.tuning import runtime

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_prepared_searches_replay_the_general_paths_launches():
    """tests/search_call_cpu.py --check: over stand-ins for CuPy and the
    device, a repeated csk.searchsorted is prepared (calls/search_prepared.py)
    and replays the kernels, grids and arguments the general path launched,
    pointers moved to the call's arrays, for every plugin and both sides;
    new measurements send it back to the general path."""
    out = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "search_call_cpu.py"),
                          "--check"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "checked 40 prepared searches" in out.stdout


def test_decisions_are_memoised_per_shape_and_generation(monkeypatch):
    """A repeated shape asks no plugin again; a plugin registered or taken
    out of service, or new measurements, decide again."""
    asked = []
    decide = search._decide
    monkeypatch.setattr(search, "_decide", lambda q, a: asked.append(q.m) or decide(q, a))
    query = SearchQuery("float32", 1 << 20, 12345, 1, False)
    first = search._choose(query, "auto")
    assert search._choose(SearchQuery("float32", 1 << 20, 12345, 1, False, a=64), "auto") is first
    assert asked == [12345]
    runtime.reset()
    assert search._choose(query, "auto").plugin == first.plugin and len(asked) == 2
    registry.refresh()
    search._choose(query, "auto")
    assert len(asked) == 3
    search._choose(SearchQuery("float32", 1 << 20, 12345, 1, True), "auto")  # the other side
    assert len(asked) == 4


def test_explain_hands_out_a_copy():
    a, v = np.zeros(1 << 20, np.float32), np.zeros(1000, np.float32)
    first = csk.explain_searchsorted(a, v)
    first.estimates.clear()
    assert csk.explain_searchsorted(a, v).estimates


def test_explain_of_host_arrays_leaves_the_kept_decision_alone():
    """explain_searchsorted of host arrays adds to its copy's reason that
    NumPy runs; the decision kept for repeats is not changed by it."""
    a, v = np.zeros(1 << 20, np.float32), np.zeros(1000, np.float32)
    first = str(csk.explain_searchsorted(a, v).reason)
    assert "host arrays: NumPy's searchsorted runs" in first
    assert str(csk.explain_searchsorted(a, v).reason) == first
