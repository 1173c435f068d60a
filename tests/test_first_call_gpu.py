"""A new size's first call on the GPU (cudasortkit/launch/built.py): with
building aside on, a call whose config has not run here runs one that has
and builds its own in the background; every result is NumPy's, and once
the build is done the call's own config runs and its repeats are prepared.
(The time bar, 0.1 s for 3,000,000 float32 keys after a 2^24 sort in a
fresh process, is tests/first_call_tune_check.py's.)"""
import numpy as np
import pytest

import cudasortkit as csk
from cudasortkit import api, settings
from cudasortkit.launch import built
from cudasortkit.sdk import registry
from helpers import assert_valid_argsort

pytestmark = pytest.mark.gpu


@pytest.fixture
def aside(monkeypatch):
    cupy = pytest.importorskip("cupy")
    monkeypatch.setenv(settings.BUILD_ASIDE, "1")
    built.wait()
    built.forget()  # nothing ran: the first call below builds its config in the call
    yield cupy
    built.wait()


@pytest.mark.parametrize("algorithm", ["auto", "onesweep"])
def test_a_new_sizes_first_call_stands_in_then_runs_its_own_config(aside, algorithm):
    """onesweep's size rules give 300,001 keys another config than 2^22."""
    cupy = aside
    rng = np.random.default_rng(51)
    big = rng.standard_normal(1 << 22).astype(np.float32)
    np.testing.assert_array_equal(csk.sort(cupy.asarray(big), algorithm=algorithm).get(),
                                  np.sort(big))
    before = built.counters()["stand_ins"]
    h = rng.standard_normal(300_001).astype(np.float32)
    x = cupy.asarray(h)
    np.testing.assert_array_equal(csk.sort(x, algorithm=algorithm).get(), np.sort(h))
    assert built.counters()["stand_ins"] == before + 1
    assert api.prepared.find("sort", x, False, False, algorithm) is None  # (a stand-in's)
    built.wait()
    for _ in range(3):
        np.testing.assert_array_equal(csk.sort(x, algorithm=algorithm).get(), np.sort(h))
    call = api.prepared.find("sort", x, False, False, algorithm)
    assert call is not None and call.plugin.name == "onesweep"
    assert call.config == registry.default_config(call.plugin, "float32", 0, h.size)
    assert built.counters()["failed"] == 0


def test_auto_argsorts_and_pairs_stand_in_with_another_plugin_right(aside):
    """Only radix ran for argsort and pairs: auto's onesweep (declared
    first) is built aside while radix sorts."""
    cupy = aside
    rng = np.random.default_rng(52)
    first = rng.integers(0, 1 << 30, 1 << 22).astype(np.uint32)
    csk.argsort(cupy.asarray(first), algorithm="radix")
    csk.sort_by_key(cupy.asarray(first), cupy.arange(first.size, dtype=cupy.int32),
                    algorithm="radix")
    h = rng.integers(0, 1 << 30, 200_003).astype(np.uint32)  # (too spread for counting)
    h[::7] = h[0]  # (ties: the stable orders are tested)
    before = built.counters()["stand_ins"]
    order = csk.argsort(cupy.asarray(h), stable=True)
    np.testing.assert_array_equal(order.get(), np.argsort(h, kind="stable"))
    assert_valid_argsort(csk.argsort(cupy.asarray(h)).get(), h)
    keys, values = csk.sort_by_key(cupy.asarray(h), cupy.arange(h.size, dtype=cupy.int32))
    want = np.argsort(h, kind="stable")
    np.testing.assert_array_equal(keys.get(), h[want])
    np.testing.assert_array_equal(values.get(), want.astype(np.int32))
    assert built.counters()["stand_ins"] >= before + 2
    built.wait()
    assert built.counters()["failed"] == 0
