"""Shared test setup: the `gpu` marker skips without a usable GPU, and every
GPU test runs with poisoned result buffers (cudasortkit.arrays.POISON_BYTE)."""
import os
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


def pytest_collection_modifyitems(config, items):
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
