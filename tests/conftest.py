"""Shared test setup: the `gpu` marker skips without a usable GPU, every GPU
test runs with poisoned result buffers (cudasortkit.arrays.POISON_BYTE), and
the GPU tests come in two tiers.

Tiers. A test marked `slow` runs only when the -m expression names `slow`;
otherwise it is deselected at collection:

    python -m pytest -m gpu                  quick tier: every plugin x key dtype
                                             x operation, both orders, edge cases
    python -m pytest -m "gpu and slow"       slow tier: the exhaustive sweeps
    python -m pytest -m "gpu and (slow or not slow)"    both tiers in one run

Plain `python -m pytest` (CI) deselects slow tests too; they are GPU tests,
which skip there anyway. A GPU test is quick unless it is marked slow: mark a
new test (or a parameter, with pytest.param(..., marks=pytest.mark.slow))
slow when it sweeps sizes, distributions or configurations, sorts 2^24 keys
or more, or tunes.
"""
import os
import re
import tempfile

import numpy as np
import pytest

# Tests choose algorithms explicitly or through auto's documented fallback: no
# lazy tuning (it would add seconds per new size), and never the user's cache.
# Tuner tests opt back in with monkeypatch.
os.environ.setdefault("CUDASORTKIT_AUTOTUNE", "0")
os.environ.setdefault("CUDASORTKIT_CACHE_DIR", tempfile.mkdtemp(prefix="csk-test-cache-"))

from cudasortkit import arrays
from cudasortkit.device import gpu_available, unavailable_reason


def _slow_selected(config) -> bool:
    return re.search(r"\bslow\b", config.getoption("markexpr") or "") is not None


def pytest_collection_modifyitems(config, items):
    if not _slow_selected(config):
        slow = [item for item in items if item.get_closest_marker("slow") is not None]
        if slow:
            items[:] = [item for item in items if item.get_closest_marker("slow") is None]
            config.hook.pytest_deselected(items=slow)
    if gpu_available():
        return
    skip = pytest.mark.skip(reason=f"no GPU: {unavailable_reason()}")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _poison_results(request, monkeypatch):
    if "gpu" in request.keywords:
        monkeypatch.setattr(arrays, "POISON_BYTE", 0xA5)


@pytest.fixture
def rng(request):
    """Fresh random data each run; the seed is in the test's output on failure."""
    seed = int(np.random.SeedSequence().entropy % (1 << 63))
    print(f"rng seed {seed} for {request.node.nodeid}")
    return np.random.default_rng(seed)
