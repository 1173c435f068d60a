"""API edges a new user meets, on the CPU (issue 26, section 3): NumPy's (and
PyTorch's, where they agree) behaviour for stable=None, 0-d arrays, one-key
descending sorts, overlapping outputs, argsort's int32 indices along the one
axis of a 1-D array, one progress= rule on every path, and error messages that
name what is wrong. Each call is made twice where a repeat takes another path
(the host shortcut in api.sort serves a shape auto has already given NumPy)."""
import numpy as np
import pytest

import cudasortkit as csk

KEYS = np.array([3.0, 1.0, 2.0, 1.0], np.float32)


def _twice(call):
    """call() made twice (the second may take a shortcut): both results."""
    return call(), call()


# ------------------------------------------------------------ 1. stable=None
def test_stable_none_is_the_default_in_1d_sorts():
    for got in _twice(lambda: csk.sort(KEYS, stable=None)):
        assert got.tolist() == [1.0, 1.0, 2.0, 3.0]
    for got in _twice(lambda: csk.argsort(KEYS, stable=None)):
        assert sorted(got.tolist()[:2]) == [1, 3] and got.tolist()[2:] == [2, 0]
    assert csk.sort([3, 1, 2], stable=None, descending=True).tolist() == [3, 2, 1]
    got = csk.argsort(KEYS, stable=None, index_dtype=np.int32)
    assert got.dtype == np.int32 and got.tolist()[2:] == [2, 0]


def test_stable_none_along_axes_and_in_segments():
    a = np.array([[3, 1], [0, 2]], np.int32)
    assert csk.sort(a, axis=0, stable=None).tolist() == [[0, 1], [3, 2]]
    assert csk.sort(a, axis=None, stable=None).tolist() == [0, 1, 2, 3]
    assert csk.argsort(a, axis=1, stable=None).tolist() == [[1, 0], [0, 1]]
    keys, offsets = np.array([3, 1, 2, 9, 7]), np.array([0, 3, 5])
    assert csk.segmented_sort(keys, offsets, stable=None).tolist() == [1, 2, 3, 7, 9]
    assert csk.segmented_argsort(keys, offsets, stable=None).tolist() == [1, 2, 0, 4, 3]
    assert csk.explain(KEYS, stable=None) is not None


def test_stable_none_with_torch_cpu_tensors():
    torch = pytest.importorskip("torch")
    t = torch.tensor([3.0, 1.0, 2.0])
    assert csk.sort(t, stable=None).tolist() == [1.0, 2.0, 3.0]
    assert csk.argsort(t, stable=None).tolist() == [1, 2, 0]
    assert csk.sort(t.reshape(1, 3), axis=0, stable=None).tolist() == [[3.0, 1.0, 2.0]]
