"""cudasortkit.merge / merge_by_key without a GPU: argument checks, and the
host path (NumPy inputs, no GPU) against a stable-sort reference. On a machine
with a GPU the same calls run the GPU kernels and must give the same results."""
import numpy as np
import pytest

import cudasortkit as csk
from cudasortkit.dtypes import KEY_DTYPES
from cudasortkit.calls.sort_merge import host_merge_order
from cudasortkit.gpu.arrays import Operand
from cudasortkit.sdk import registry
from cudasortkit.sdk.plugin import SortPlugin, Tunable
from helpers import DISTRIBUTIONS, make_keys, reference_argsort, reference_sort


def sorted_keys(dist, dtype, n, rng, descending=False):
    return reference_sort(make_keys(dist, dtype, n, rng), descending)


def expected_merge(a, b, descending=False):
    """Stable sort of a ++ b: equal keys keep a's before b's (input order)."""
    both = np.concatenate([a, b])
    return both[reference_argsort(both, descending)], reference_argsort(both, descending)


@pytest.mark.parametrize("dtype", KEY_DTYPES)
@pytest.mark.parametrize("dist", DISTRIBUTIONS)
@pytest.mark.parametrize("descending", [False, True])
def test_merge_matches_stable_sort(dtype, dist, descending, rng):
    for na, nb in [(0, 0), (0, 5), (5, 0), (1, 1), (100, 3), (3, 100), (257, 255), (1000, 1000)]:
        a = sorted_keys(dist, dtype, na, rng, descending)
        b = sorted_keys(dist, dtype, nb, rng, descending)
        before = (a.copy(), b.copy())
        keys, order = expected_merge(a, b, descending)
        got = csk.merge(a, b, descending=descending)
        assert got.dtype == a.dtype and got.shape == (na + nb,)
        assert np.array_equal(got.view(f"u{a.itemsize}"), keys.view(f"u{a.itemsize}")), "keys differ bitwise"
        k, v = csk.merge_by_key(a, np.arange(na), b, np.arange(na, na + nb), descending=descending)
        assert np.array_equal(v, order), "pairs are not in stable merge order"
        assert np.array_equal(a, before[0], equal_nan=True) and np.array_equal(b, before[1], equal_nan=True)


def test_host_merge_order_is_a_permutation(rng):
    a = np.sort(rng.integers(0, 5, 50))
    b = np.sort(rng.integers(0, 5, 70))
    pos = host_merge_order(a, b)
    assert np.array_equal(np.sort(pos), np.arange(120))


def test_bool_merges_as_uint8():
    got = csk.merge(np.array([False, True]), np.array([False, False, True]))
    assert got.dtype == bool and got.tolist() == [False, False, False, True, True]


def test_out_is_written_and_returned(rng):
    a, b = np.sort(rng.random(10)), np.sort(rng.random(7))
    out = np.full(17, np.nan)
    assert csk.merge(a, b, out=out) is out
    assert np.array_equal(out, np.sort(np.concatenate([a, b])))


@pytest.mark.parametrize("call, error", [
    (lambda: csk.merge(np.zeros(3, np.int64), np.zeros(3, np.uint64)), TypeError),  # no exact one
    (lambda: csk.merge(np.zeros((2, 2)), np.zeros(3)), ValueError),
    (lambda: csk.merge(np.zeros(2, np.complex64), np.zeros(2, np.complex64)), TypeError),
    (lambda: csk.merge(np.zeros(2), np.zeros(3), out=np.zeros(4)), ValueError),
    (lambda: csk.merge_by_key(np.zeros(2), np.zeros(3), np.zeros(2), np.zeros(2)), ValueError),
    (lambda: csk.merge_by_key(np.zeros(2), np.zeros(2), np.zeros(2), np.zeros(2, np.int32)), TypeError),
    (lambda: csk.merge_by_key(np.zeros(2), np.zeros(2, np.int16), np.zeros(2), np.zeros(2, np.int16)),
     TypeError),
])
def test_bad_arguments_raise(call, error):
    with pytest.raises(error):
        call()


class _Broken(SortPlugin):
    """A merging GPU plugin chosen first whose merge() fails."""

    name = "broken_merge"
    dtypes = ("int32",)
    merges = True
    priority = -2
    tunables = {"block_size": Tunable(128)}
    templates = ("util.cu",)  # declared, never compiled here
    template_package = "cudasortkit.kernels"

    def run(self, job):
        raise AssertionError("never sorts")

    def merge(self, job, a, a_values, na, b, b_values, nb):
        raise RuntimeError("merge bug")


class _Good(_Broken):
    name = "good_merge"
    priority = -1
    merged = []

    def merge(self, job, a, a_values, na, b, b_values, nb):
        _Good.merged.append((job.plugin.name, a, na, b, nb, job.keys_out))


def test_a_failing_merge_takes_its_plugin_out_of_service_and_the_next_one_merges(monkeypatch):
    """plugin.merge runs under registry.guarded: a fault marks the plugin
    broken (PluginError) and the merge is made by the next merging plugin.
    The device is stubbed: what is checked is the choice, not the kernels."""
    from test_launchplan import StubState
    from cudasortkit.calls import sort_merge as merging

    class StubResult:
        def __init__(self, like, dtype, state, out, what, caller):
            self.ptr = 0x9000

        def finish(self):
            return "merged"

    class StubOperand:
        key_dtype = dtype = np.dtype(np.int32)
        on_device, ordinal = True, 0
        sized = Operand.sized

        def __init__(self, what, ptr, n):
            self.what, self.ptr, self.n = what, ptr, n

        def device_ptr(self, state):
            return self.ptr

    monkeypatch.setattr(merging, "Result", StubResult)
    registry.register(_Broken)
    registry.register(_Good)
    _Good.merged.clear()
    try:
        keys, values = merging._merge_device(StubOperand("a", 0x1000, 3), StubOperand("b", 0x2000, 4),
                                             None, None, False, None, None, StubState(0x100000), 1)
        assert (keys, values) == ("merged", None)
        assert _Good.merged == [("good_merge", 0x1000, 3, 0x2000, 4, 0x9000)]
        entry = registry.entries()["broken_merge"]
        assert not entry.ok and entry.error == "merge raised RuntimeError: merge bug"
    finally:
        registry.refresh()
