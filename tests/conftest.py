"""Shared test setup: the `gpu` marker skips without a usable GPU, and every
GPU test runs with poisoned result buffers (cudasortkit.arrays.POISON_BYTE)."""
import numpy as np
import pytest

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
