"""API edges a new user meets, on the CPU: NumPy's (and PyTorch's, where
they agree) behaviour for stable=None, 0-d arrays, one-key descending sorts,
overlapping outputs, argsort's int32 indices along the one axis of a 1-D
array, one progress= rule on every path, error messages that name what is
wrong, keys of the other byte order, the selection calls' edges, and docs
that say what the code does. Each call is made twice where a repeat takes another path
(the host shortcut in api.sort serves a shape auto has already given NumPy)."""
import re

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


def test_the_host_shortcut_of_argsort_keeps_its_results():
    """Once auto gave a tiny host shape to NumPy, the next argsorts of it
    call NumPy directly: int64 indices, the stable order exactly
    numpy.argsort(kind='stable')'s, an unstable one a valid order; int32
    indices and descending sorts keep the general path."""
    rng = np.random.default_rng(3)
    a = rng.integers(0, 5, 300).astype(np.float32)
    a[::17], a[1::13] = np.nan, -0.0
    for _ in range(3):
        stable = csk.argsort(a, stable=True)
        assert stable.dtype == np.int64 and np.array_equal(stable, np.argsort(a, kind="stable"))
        plain = csk.argsort(a)
        assert plain.dtype == np.int64 and np.array_equal(a[plain], np.sort(a), equal_nan=True)
        narrow = csk.argsort(a, stable=True, index_dtype=np.int32)
        assert narrow.dtype == np.int32 and np.array_equal(narrow, stable)
        down, nans = csk.argsort(a, descending=True, stable=True), int(np.isnan(a).sum())
        assert np.isnan(a[down][a.size - nans:]).all(), "NaNs last, descending too"
        assert np.array_equal(a[down][:a.size - nans], np.sort(a[~np.isnan(a)])[::-1])


def test_the_host_shortcut_of_sort_by_key_keeps_its_results():
    """Once auto gave a tiny host key-value shape to NumPy, the next calls
    of it (same value width) call NumPy directly: stable, values moved with
    their keys; values of an unsupported dtype still raise as before."""
    rng = np.random.default_rng(4)
    keys = rng.integers(0, 4, 257).astype(np.float32)
    keys[::19] = np.nan
    values = np.arange(257, dtype=np.int64) * 3
    order = np.argsort(keys, kind="stable")
    for _ in range(3):
        k, v = csk.sort_by_key(keys, values)
        assert np.array_equal(k, keys[order], equal_nan=True) and np.array_equal(v, values[order])
    with pytest.raises(TypeError, match="values"):
        csk.sort_by_key(keys, values.astype(object))
    with pytest.raises(ValueError, match="differ in length"):
        csk.sort_by_key(keys, values[:-1])


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


# ------------------------------------------------------------ 2. 0-d arrays
def _zero_d_inputs():
    """0-d inputs of every host kind: a NumPy array, a NumPy scalar, a Python
    float, a CPU tensor (if torch is installed)."""
    found = [np.array(0.5, np.float32), np.float32(0.5), 0.5]
    try:
        import torch
    except ImportError:
        return found
    return found + [torch.tensor(0.5)]


def _as_list(x):
    return x.tolist() if hasattr(x, "tolist") else list(x)


@pytest.mark.parametrize("axis", [-1, 0, 1, -2])
def test_zero_d_sorted_along_an_axis_raises_numpys_axis_error(axis):
    for a in _zero_d_inputs():
        with pytest.raises(np.exceptions.AxisError):
            np.sort(np.asarray(a), axis=axis)
        with pytest.raises(np.exceptions.AxisError):
            csk.sort(a, axis=axis)
        with pytest.raises(np.exceptions.AxisError):
            csk.sort_by_key(a, a, axis=axis)


def test_zero_d_with_axis_none_is_flattened_as_numpy_does():
    for a in _zero_d_inputs():
        assert _as_list(csk.sort(a, axis=None)) == np.sort(np.asarray(a), axis=None).tolist()
        assert _as_list(csk.argsort(a, axis=None)) == [0]
        keys, values = csk.sort_by_key(a, a, axis=None)
        assert _as_list(keys) == [0.5] and _as_list(values) == [0.5]
    got = csk.sort(np.float32(0.5), axis=None)
    assert isinstance(got, np.ndarray) and got.shape == (1,) and got.dtype == np.float32


@pytest.mark.parametrize("axis", [-1, 0, 1, None])
def test_argsort_of_zero_d_is_numpys(axis):
    # NumPy's argsort sees a 0-d array as 1-D of one key (PyArray_CheckAxis):
    # axis -1 and 0 give [0]; axis 1 is out of bounds "for array of dimension 1".
    for a in _zero_d_inputs():
        try:
            want = np.argsort(np.asarray(a), axis=axis).tolist()
        except np.exceptions.AxisError:
            with pytest.raises(np.exceptions.AxisError, match="dimension 1"):
                csk.argsort(a, axis=axis)
            continue
        got = csk.argsort(a, axis=axis)
        assert _as_list(got) == want == [0]
        assert type(got) is (np.ndarray if not hasattr(a, "is_cuda") else type(a))


# ------------------------------------------- 3. one key, descending: layout
def _positive_c_layout(x: np.ndarray) -> bool:
    return x.flags.c_contiguous and all(s > 0 for s in x.strides)


@pytest.mark.parametrize("shape, axis", [((1,), -1), ((1, 1), -1), ((1, 1), 0), ((1,), None),
                                         ((1, 1), None), ((0,), -1)])
def test_one_key_descending_results_have_positive_strides(shape, axis):
    a = np.full(shape, 5.0)
    for algorithm in ("auto", "numpy"):
        for stable in (False, True):
            got = csk.sort(a, axis=axis, descending=True, stable=stable, algorithm=algorithm)
            assert _positive_c_layout(got) or got.size == 0 and got.flags.c_contiguous, got.strides
            assert got.tolist() == np.sort(a, axis=axis).tolist()
            order = csk.argsort(a, axis=axis, descending=True, stable=stable, algorithm=algorithm)
            assert _positive_c_layout(order) or order.size == 0
    keys, values = csk.sort_by_key(a, np.ones(shape, np.int64), axis=axis, descending=True)
    assert _positive_c_layout(keys) or keys.size == 0
    assert _positive_c_layout(values) or values.size == 0


@pytest.mark.parametrize("shape, axis", [((1,), -1), ((1, 1), -1), ((1,), None), ((1, 1), None)])
def test_one_key_descending_torch_cpu_tensor(shape, axis):
    torch = pytest.importorskip("torch")
    t = torch.full(shape, 5.0)
    for stable in (False, True):
        got = csk.sort(t, axis=axis, descending=True, stable=stable)
        assert isinstance(got, torch.Tensor) and got.tolist() == t.reshape(got.shape).tolist()
        order = csk.argsort(t, axis=axis, descending=True, stable=stable)
        assert order.flatten().tolist() == [0]
    keys, values = csk.sort_by_key(t, torch.ones(shape, dtype=torch.int64), axis=axis,
                                   descending=True)
    assert keys.flatten().tolist() == [5.0] and values.flatten().tolist() == [1]


# ------------------------------------------- 4. outputs that share memory
def test_sort_by_key_outputs_that_overlap_are_refused():
    k = np.array([3, 1, 2], np.int64)
    v = np.array([30, 10, 20], np.int64)
    with pytest.raises(ValueError, match="out and values_out overlap"):
        csk.sort_by_key(k, v, out=k, values_out=k)
    buf = np.zeros(5, np.int64)
    with pytest.raises(ValueError, match="out and values_out overlap"):
        csk.sort_by_key(k, v, out=buf[:3], values_out=buf[2:])
    # an output over the other input: the sort would overwrite what it still reads
    with pytest.raises(ValueError, match="out overlaps the input values"):
        csk.sort_by_key(k, v, out=v)
    with pytest.raises(ValueError, match="values_out overlaps the input keys"):
        csk.sort_by_key(k, v, values_out=k)
    assert k.tolist() == [3, 1, 2] and v.tolist() == [30, 10, 20]  # nothing written
    assert buf.tolist() == [0] * 5
    # separate outputs (neighbours in one buffer), and in place, are fine
    ko, vo = csk.sort_by_key(k, v, out=buf[:3], values_out=np.empty(3, np.int64))
    assert ko.tolist() == [1, 2, 3] and vo.tolist() == [10, 20, 30]
    ko, vo = csk.sort_by_key(k, v, out=k, values_out=v)
    assert ko is k and vo is v and k.tolist() == [1, 2, 3] and v.tolist() == [10, 20, 30]


def test_sort_by_key_overlapping_outputs_along_an_axis_are_refused():
    k = np.array([[3, 1], [2, 0]], np.int64)
    v = k * 10
    with pytest.raises(ValueError, match="out and values_out overlap"):
        csk.sort_by_key(k, v, axis=0, out=k, values_out=k)
    with pytest.raises(ValueError, match="out and values_out overlap"):
        csk.sort_by_key(k, v, axis=0, out=v, values_out=v)
    both = np.zeros((2, 2, 2), np.int64)  # strided outputs, interleaved: they overlap
    with pytest.raises(ValueError, match="out and values_out overlap"):
        csk.sort_by_key(k, v, axis=0, out=both[..., 0], values_out=both[..., 1])
    assert k.tolist() == [[3, 1], [2, 0]] and v.tolist() == [[30, 10], [20, 0]]
    ko, vo = csk.sort_by_key(k, v, axis=0, out=k, values_out=v)
    assert ko.tolist() == [[2, 0], [3, 1]] and vo.tolist() == [[20, 0], [30, 10]]


def test_sort_by_key_overlapping_torch_outputs_are_refused():
    torch = pytest.importorskip("torch")
    k = torch.tensor([3, 1, 2])
    v = torch.tensor([30, 10, 20])
    with pytest.raises(ValueError, match="out and values_out overlap"):
        csk.sort_by_key(k, v, out=k, values_out=k)
    out = torch.empty(3, dtype=torch.int64)
    with pytest.raises(ValueError, match="out and values_out overlap"):
        csk.sort_by_key(k, v, out=out, values_out=torch.from_numpy(out.numpy()))  # one memory
    assert k.tolist() == [3, 1, 2]


def test_merge_by_key_outputs_that_overlap_are_refused():
    buf = np.zeros(4, np.int64)
    with pytest.raises(ValueError, match="out and values_out overlap"):
        csk.merge_by_key(np.array([1, 3]), np.array([10, 30]), np.array([2, 4]),
                         np.array([20, 40]), out=buf, values_out=buf)
    assert buf.tolist() == [0] * 4


# ----------------------------------- 5. int32 indices along a 1-D array's axis
@pytest.mark.parametrize("axis", [-1, 0, None])
def test_int32_indices_along_the_one_axis_of_a_1d_array(axis):
    a = np.array([3.0, 1.0, 2.0, 1.0], np.float32)
    want = np.argsort(a, axis=axis, kind="stable").astype(np.int32)
    for x in (a, a.tolist()):
        for _ in range(2):
            got = csk.argsort(x, axis=axis, stable=True, index_dtype=np.int32)
            assert got.dtype == np.int32 and got.tolist() == want.tolist()
    got = csk.argsort(np.array(7.0), axis=axis, index_dtype=np.int32)  # 0-d: one key, as NumPy
    assert got.dtype == np.int32 and got.tolist() == [0]


def test_int32_indices_of_one_row():
    a = np.array([[3, 1, 2], [0, 5, 4]], np.int16)
    got = csk.argsort(a, axis=None, stable=True, index_dtype=np.int32)  # the flattened array
    want = np.argsort(a, axis=None, kind="stable")
    assert got.dtype == np.int32 and got.tolist() == want.tolist()
    got = csk.argsort(a[:1], axis=-1, index_dtype=np.int32)  # shape (1, 3): one row
    assert got.dtype == np.int32 and got.tolist() == [[1, 2, 0]]
    with pytest.raises(ValueError, match="1-D"):  # rows along an axis: int64 only
        csk.argsort(a, axis=1, index_dtype=np.int32)
    with pytest.raises(np.exceptions.AxisError):
        csk.argsort(a[0], axis=1, index_dtype=np.int32)


def test_int32_indices_of_torch_cpu_tensors_along_axis_0():
    torch = pytest.importorskip("torch")
    got = csk.argsort(torch.tensor([3, 1, 2]), axis=0, index_dtype=np.int32)
    assert isinstance(got, torch.Tensor) and got.dtype == torch.int32 and got.tolist() == [1, 2, 0]


# ------------------------------------------------ 6. and 8. progress=, one rule
def _progress_calls(progress):
    """Every public call that takes progress=, on the paths a host array can
    take: 1-D (the second sort of a tiny shape takes api.sort's NumPy
    shortcut), a list, along an axis, int32 indices, key-value."""
    a = np.array([3, 1, 2], np.int32)
    grid = np.array([[3, 1], [2, 0]], np.int32)
    return [
        lambda: csk.sort(a, progress=progress),
        lambda: csk.sort([3, 1, 2], progress=progress),
        lambda: csk.sort(grid, axis=0, progress=progress),
        lambda: csk.argsort(a, progress=progress),
        lambda: csk.argsort(a, index_dtype=np.int32, progress=progress),
        lambda: csk.argsort(grid, axis=None, progress=progress),
        lambda: csk.sort_by_key(a, a, progress=progress),
        lambda: csk.sort_by_key(grid, grid, axis=0, progress=progress),
    ]


@pytest.mark.parametrize("bad", ["yes", 1, None, 0.0])
def test_progress_must_be_a_bool_on_every_path_every_time(bad):
    a = np.array([3, 1, 2], np.int32)
    csk.sort(a)  # this shape has run: the next may take the shortcut
    for call in _progress_calls(bad):
        for _ in range(2):
            with pytest.raises(TypeError, match="progress must be True or False"):
                call()


def test_progress_true_without_tqdm_raises_on_every_path(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "tqdm", None)  # import tqdm raises ImportError
    csk.sort(np.array([3, 1, 2], np.int32))
    for call in _progress_calls(True):
        for _ in range(2):
            with pytest.raises(ImportError, match="progress=True needs the tqdm package"):
                call()
    for call in _progress_calls(False):
        call()


def test_progress_true_with_tqdm_sorts():
    pytest.importorskip("tqdm")
    for call in _progress_calls(True):
        call()


# ------------------------------------------------------------ 7. messages
def test_a_list_of_too_large_integers_names_its_dtype():
    for call in (lambda: csk.sort([2**70, 1]), lambda: csk.argsort([[2**70, 1]], axis=0),
                 lambda: csk.sort(2**70, axis=None), lambda: csk.sort([1, "a", None])):
        with pytest.raises(TypeError) as caught:
            call()
        text = str(caught.value)
        assert "dtype object" in text and "keys must be one of bool, int8" in text, text
        assert "cannot sort numpy.ndarray" not in text
    with pytest.raises(TypeError, match=r"a: cannot sort builtins\.object; pass one of numpy"):
        csk.sort(object())  # not array-like at all: the kinds are named


@pytest.mark.parametrize("dtype", [np.int16, np.float16, np.complex128, np.bool_, "U3",
                                   "datetime64[s]"])
def test_a_bad_values_dtype_names_values(dtype):
    keys = np.array([2, 1, 3])
    values = np.zeros(3, dtype)
    for call in (lambda: csk.sort_by_key(keys, values),
                 lambda: csk.sort_by_key(keys.reshape(3, 1), values.reshape(3, 1), axis=0),
                 lambda: csk.segmented_sort(keys, np.array([0, 1, 3]), values),
                 lambda: csk.merge_by_key(keys, values, keys, values)):
        with pytest.raises(TypeError) as caught:
            call()
        text = str(caught.value)
        assert "values must be" in text and "complex64" in text, text
        assert "keys must" not in text


def test_complex64_values_are_moved_like_any_8_byte_value():
    keys = np.array([3, 1, 2, 1], np.int32)
    values = np.array([3 + 1j, 1 - 1j, 2j, 4], np.complex64)
    k, v = csk.sort_by_key(keys, values)
    assert k.tolist() == [1, 1, 2, 3] and v.tolist() == [1 - 1j, 4, 2j, 3 + 1j]
    assert v.dtype == np.complex64
    k, v = csk.sort_by_key(keys.reshape(2, 2), values.reshape(2, 2), axis=0, descending=True)
    assert v.tolist() == [[3 + 1j, 1 - 1j], [2j, 4]]  # column 1: equal keys, input order
    k, v = csk.segmented_sort(keys, np.array([0, 2, 4]), values)
    assert v.tolist() == [1 - 1j, 3 + 1j, 4, 2j]
    out = np.empty(4, np.complex64)
    k, v = csk.merge_by_key(keys[:2], values[:2], keys[2:], values[2:], values_out=out)
    assert v is out
    with pytest.raises(TypeError, match="keys must be one of"):  # complex keys: still not
        csk.sort(values)


def test_complex64_values_of_torch_cpu_tensors():
    torch = pytest.importorskip("torch")
    k, v = csk.sort_by_key(torch.tensor([2, 1]), torch.tensor([2j, 1j], dtype=torch.complex64))
    assert v.dtype == torch.complex64 and v.tolist() == [1j, 2j]
    with pytest.raises(TypeError, match="values must be"):
        csk.sort_by_key(torch.tensor([2, 1]), torch.tensor([2, 1], dtype=torch.int16))


def test_out_that_is_not_an_array_is_told_so():
    a = np.array([3.0, 1.0, 2.0])
    for call, what in ((lambda: csk.sort(a, out=[0, 0, 0]), "out"),
                       (lambda: csk.sort(a.reshape(3, 1), axis=0, out=[[0], [0], [0]]), "out"),
                       (lambda: csk.sort_by_key(a, a, values_out=[0, 0, 0]), "values_out"),
                       (lambda: csk.merge(a, a, out=[0] * 6), "out"),
                       (lambda: csk.sort(a, out=(0.0, 0.0, 0.0)), "out")):
        with pytest.raises(TypeError, match=f"^{what} must be an array"):
            call()
    assert a.tolist() == [3.0, 1.0, 2.0]


# ------------------------------------------------------------ 8. docs
def test_docs_descending_equivalents_for_numpy_before_2_5():
    """docs/api.md's recipes for NumPy < 2.5 give cudasortkit's (NumPy 2.5's)
    descending order, and numpy.sort(a)[::-1] does not."""
    f = np.array([1.0, np.nan, 2.0, 2.0, -np.nan, 1.0, -0.0, 0.0, -np.inf], np.float32)
    got = csk.sort(f, descending=True, algorithm="numpy")
    np.testing.assert_array_equal(-np.sort(-f), got)
    assert not np.array_equal(np.sort(f)[::-1], got, equal_nan=True)
    assert np.argsort(-f, kind="stable").tolist() == \
        csk.argsort(f, descending=True, stable=True, algorithm="numpy").tolist() == \
        [2, 3, 0, 5, 6, 7, 8, 1, 4]
    for dtype in (np.int8, np.uint16, np.int64, np.uint64, np.bool_):
        info = np.iinfo(dtype) if dtype is not np.bool_ else None
        i = np.array([3, 0, 1, 3, 1] + ([info.min, info.max] if info else []), dtype)
        assert (~np.sort(~i)).tolist() == csk.sort(i, descending=True).tolist()
        assert np.argsort(~i, kind="stable").tolist() == \
            csk.argsort(i, descending=True, stable=True).tolist()
    import re
    from pathlib import Path

    text = Path(__file__).resolve().parents[1].joinpath("docs", "api.md").read_text()
    text = re.sub(r"\s+", " ", text)
    for recipe in ("-numpy.sort(-a)", "~numpy.sort(~a)", 'numpy.argsort(-a, kind="stable")',
                   'numpy.argsort(~a, kind="stable")'):
        assert f"`{recipe}`" in text, recipe
    assert "Arrays must be 1-D" not in text


# ------------------------------------------------ non-native byte order keys
_SWAPPED = [np.array([3.0, 1.0, np.nan, 2.0, -0.0, 1.0, 7.5], ">f8"),
            np.array([5, -3, 9, 0, -3, 2, 1], ">i4"), np.array([5, -3, 9, 0, -3, 2, 1], ">i8"),
            np.array([5, 3, 9, 0, 3, 2, 1], ">u2"), np.array([1.5, -2.0, 0.5, 9.0], ">f2")]


def _same(got, want):
    """Equal values and the same dtype, byte order included (NumPy's answer)."""
    assert type(got) is type(want) and got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape and np.array_equal(got, want, equal_nan=got.dtype.kind == "f")


@pytest.mark.parametrize("a", _SWAPPED, ids=lambda a: a.dtype.str)
def test_non_native_byte_order_keys_sort_as_numpy_does_whatever_came_before(a):
    """A host array of the other byte order ('>f8') is sorted as NumPy sorts
    it, its key results in its own dtype, the same before and after calls
    that put a native array of its kind on the small-array shortcut."""
    native = a.astype(a.dtype.newbyteorder("="))
    m = np.resize(a, 12).reshape(3, 4).astype(a.dtype)  # (np.resize makes it native)
    assert m.dtype == a.dtype
    for round_ in range(3):
        _same(csk.sort(a), np.sort(a))
        _same(csk.sort(a, stable=True), np.sort(a, kind="stable"))
        _same(csk.argsort(a, stable=True), np.argsort(a, kind="stable"))
        _same(csk.sort(m, axis=0), np.sort(m, axis=0))
        _same(csk.sort(m, axis=None), np.sort(m, axis=None))
        _same(csk.argsort(m, stable=True), np.argsort(m, kind="stable"))
        order = np.argsort(a, kind="stable")
        k, v = csk.sort_by_key(a, np.arange(a.size, dtype=">i8"))
        _same(k, a[order])
        _same(v, np.arange(a.size, dtype=">i8")[order])
        (k2,), v2 = csk.sort_by_key((a,), np.arange(a.size))
        _same(k2, a[order])
        _same(csk.segmented_sort(a, [0, 3, a.size]),
              np.concatenate([np.sort(a[:3]), np.sort(a[3:])]).astype(a.dtype))
        _same(csk.merge(np.sort(a[:3]), np.sort(a[3:])), np.sort(a, kind="stable"))
        _same(csk.partition(a, 2)[2:3], np.partition(a, 2)[2:3])
        _same(csk.topk(a, 2, largest=False)[0], np.sort(a)[:2])
        _same(csk.unique(a), np.unique(a))
        _same(csk.unique(a, return_index=True)[0], np.unique(a, return_index=True)[0])
        _same(csk.lexsort((a, a)), np.lexsort((a, a)))
        _same(csk.searchsorted(np.sort(a), a), np.searchsorted(np.sort(a), a))
        out = np.empty_like(a)
        assert csk.sort(a, out=out) is out
        _same(out, np.sort(a))
        for axis in (0, -1):  # N-D out= of the caller's byte order, in place too
            nd_out, in_place = np.empty_like(m), m.copy()
            assert csk.sort(m, axis=axis, out=nd_out) is nd_out
            _same(nd_out, np.sort(m, axis=axis))
            csk.sort(in_place, axis=axis, out=in_place)
            _same(in_place, np.sort(m, axis=axis))
        csk.sort(native), csk.argsort(native), csk.sort_by_key(native, np.arange(a.size))


def test_docs_and_code_agree_on_which_host_sorts_keep_the_keys_bits():
    """On the host a stable sort (and sort_by_key) returns the keys' own bits
    in stable order; the default one is numpy.sort's answer, bit for bit,
    which need not keep a zero's sign or a NaN's payload: api.md says so."""
    rng = np.random.default_rng(8)
    for dtype in (np.float32, np.float64):
        bits = np.dtype(f"u{np.dtype(dtype).itemsize}")
        for n in (5, 20, 300, 5000):
            k = np.array([0.0, -0.0, np.nan, -np.nan, 1.0], dtype)[rng.integers(0, 5, n)]
            k.view(bits)[np.isnan(k) & (rng.random(n) < 0.5)] |= 1  # other NaN payloads
            stable = k[np.argsort(k, kind="stable")]
            for _ in range(2):  # the second call may take the small-array shortcut
                assert np.array_equal(csk.sort(k, stable=True).view(bits), stable.view(bits))
                assert np.array_equal(csk.sort_by_key(k, np.arange(n))[0].view(bits),
                                      stable.view(bits))
                assert np.array_equal(csk.sort(k).view(bits), np.sort(k).view(bits))
    import re
    from pathlib import Path

    text = re.sub(r"\s+", " ", Path(__file__).resolve().parents[1].joinpath(
        "docs", "api.md").read_text())
    assert "The CPU plugin returns the keys' own bits." not in text
    assert ("On the host, a stable sort (`stable=True`, `sort_by_key`, `merge`) returns the "
            "keys' own bits in stable order; the default (unstable) sort returns what "
            "`numpy.sort` returns") in text


# ------------------------------------------------------- selection edges
def _raises_as(call, reference):
    """call() raises what reference() raises (type and NumPy's words)."""
    with pytest.raises(Exception) as want:
        reference()
    with pytest.raises(type(want.value), match=re.escape(str(want.value))):
        call()


def test_partition_edges_are_numpys():
    """argpartition of a 0-d array is [0]; an empty array takes any integer
    kth; kth must be integers as numpy.asarray(kth) reads them (an empty
    list is none: TypeError; a bool: ValueError), at most 1-D."""
    zero_d = np.array(3.0)
    for kth in (0, -1, [0]):
        for axis in (-1, 0, None):
            got = csk.argpartition(zero_d, kth, axis=axis)
            assert got.dtype == np.int64 and got.tolist() == [0]
            assert np.argpartition(zero_d, kth, axis=axis).tolist() == [0]
    _raises_as(lambda: csk.argpartition(zero_d, 1), lambda: np.argpartition(zero_d, 1))
    _raises_as(lambda: csk.partition(zero_d, 0), lambda: np.partition(zero_d, 0))
    assert csk.partition(zero_d, 0, axis=None).tolist() == [3.0]
    for shape, axis in (((0,), -1), ((0, 3), 1), ((3, 0), 0), ((3, 0), -1)):
        for kth in (0, 5, -7, [0, 9]):
            empty = np.zeros(shape)
            got = csk.partition(empty, kth, axis=axis)
            assert got.shape == np.partition(empty, kth, axis=axis).shape == shape
            assert csk.argpartition(empty, kth, axis=axis).shape == shape
    a = np.array([3.0, 1.0, 2.0])
    for kth in ([], (), 1.0, [1, 2.0], "1", None, np.array([0.0])):
        for call, ref in ((csk.partition, np.partition), (csk.argpartition, np.argpartition)):
            _raises_as(lambda: call(a, kth), lambda: ref(a, kth))
    for kth in (True, [True], np.array([], bool)):
        _raises_as(lambda: csk.partition(a, kth), lambda: np.partition(a, kth))
    with pytest.raises(ValueError, match="kth must be an integer or a 1-D sequence"):
        csk.partition(a, [[0]])
    assert sorted(csk.partition(a, np.array([], np.int64)).tolist()) == [1.0, 2.0, 3.0]


def test_topk_of_a_0d_array_gives_0d_results_as_torch():
    """torch.topk of a 0-d tensor (k 0 or 1, dim -1 or 0): 0-d values (the
    key) and 0-d int64 indices (0)."""
    for k in (0, 1):
        for axis in (-1, 0):
            values, indices = csk.topk(np.array(2.5, np.float32), k, axis=axis)
            assert values.shape == () and values.dtype == np.float32 and values == 2.5
            assert indices.shape == () and indices.dtype == np.int64 and indices == 0
    values, indices = np.empty((), np.float32), np.empty((), np.int64)
    assert csk.topk(np.array(2.5, np.float32), 1, out=(values, indices))[0] is values
    assert values == 2.5 and indices == 0
    with pytest.raises(ValueError, match=r"k must be in \[0, 1\]"):
        csk.topk(np.array(2.5), 2)
    with pytest.raises(np.exceptions.AxisError):
        csk.topk(np.array(2.5), 1, axis=1)


def _documented_signatures(doc: str) -> dict:
    """{name: (parameters text)} of every `cudasortkit.NAME(...)` signature
    in the docs' python code blocks (a signature may run over lines)."""
    from pathlib import Path

    text = Path(__file__).resolve().parents[1].joinpath("docs", doc).read_text()
    found = {}
    for block in re.findall(r"```python\n(.*?)```", text, re.S):
        for name, params in re.findall(r"^cudasortkit\.(\w+)\((.*?)\)\s*$", block, re.S | re.M):
            found[name] = " ".join(params.split())
    return found


@pytest.mark.parametrize("doc", ["api.md", "unique_search.md"])
def test_documented_signatures_are_the_codes(doc):
    """Every signature the docs give is the function's own: the same
    parameters, in order, positional or keyword-only, with the same defaults
    (stable=None, order=, explain's k/kth/largest, unique's sorted=)."""
    import inspect

    documented = _documented_signatures(doc)
    assert documented, doc
    for name, params in documented.items():
        doc_sig = eval(f"lambda {params}: None", {"numpy": np, "np": np})
        want = [(p.name, p.kind, p.default) for p in inspect.signature(getattr(csk, name)).parameters.values()]
        got = [(p.name, p.kind, p.default) for p in inspect.signature(doc_sig).parameters.values()]
        assert got == want, f"{doc}: cudasortkit.{name}({params}) is not the code's {want}"
