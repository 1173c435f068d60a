"""What a user can hand the API on a machine without a GPU: array kinds,
dtypes and argument values, each accepted as NumPy/PyTorch users expect or
refused with an exception that says what is supported."""
import warnings

import numpy as np
import pytest

import cudasortkit as csk


# ------------------------------------------------------------ array kinds
def test_masked_arrays_are_refused():
    a = np.ma.array([3, 1, 2], mask=[False, True, False])
    with pytest.raises(TypeError, match="masked"):
        csk.sort(a)
    with pytest.raises(TypeError, match="masked"):
        csk.argsort(a)


def test_objects_that_are_not_arrays_are_named():
    with pytest.raises(TypeError, match=r"builtins\.object.*numpy\.ndarray"):
        csk.sort(object())


def test_bfloat16_numpy_arrays_sort_on_the_cpu():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    a = np.array([2.5, np.nan, -1.0, 0.0, -0.0, 3.0, 2.5], np.float32).astype(ml_dtypes.bfloat16)
    got = csk.sort(a, algorithm="numpy")
    assert got.dtype == a.dtype
    f = got.astype(np.float32)
    assert f[:-1].tolist() == [-1.0, 0.0, 0.0, 2.5, 2.5, 3.0] and np.isnan(f[-1])
    assert csk.argsort(a, stable=True, algorithm="numpy").tolist() == [2, 3, 4, 0, 6, 5, 1]


def test_unsupported_numpy_dtypes_name_the_supported_ones():
    with pytest.raises(TypeError, match="bfloat16.*float64"):
        csk.sort(np.array([1 + 2j, 3j]))
    with pytest.raises(TypeError, match="supported"):
        csk.sort(np.array(["b", "a"]))


def test_torch_cpu_tensors_come_back_as_cpu_tensors():
    torch = pytest.importorskip("torch")
    t = torch.tensor([3.0, 1.0, 2.0], requires_grad=True)
    got = csk.sort(t)
    assert isinstance(got, torch.Tensor) and got.device.type == "cpu"
    assert got.tolist() == [1.0, 2.0, 3.0]
    order = csk.argsort(t)
    assert isinstance(order, torch.Tensor) and order.dtype == torch.int64
    assert order.tolist() == [1, 2, 0]
    k, v = csk.sort_by_key(torch.tensor([2, 1], dtype=torch.int32),
                           torch.tensor([20, 10], dtype=torch.int64))
    assert k.tolist() == [1, 2] and v.tolist() == [10, 20]
    b = torch.tensor([1.5, -2.0, 0.5], dtype=torch.bfloat16)
    if pytest.importorskip("ml_dtypes"):
        got = csk.sort(b)
        assert got.dtype == torch.bfloat16 and got.tolist() == [-2.0, 0.5, 1.5]


def test_torch_cpu_out_is_written_in_place():
    torch = pytest.importorskip("torch")
    t = torch.tensor([3, 1, 2], dtype=torch.int32)
    out = torch.empty(3, dtype=torch.int32)
    assert csk.sort(t, out=out) is out
    assert out.tolist() == [1, 2, 3]


def test_float8_tensors_are_refused_with_a_type_error():
    torch = pytest.importorskip("torch")
    if not hasattr(torch, "float8_e4m3fn"):
        pytest.skip("this torch has no float8")
    t = torch.zeros(4).to(torch.float8_e4m3fn)
    with pytest.raises(TypeError, match="not supported.*float16"):
        csk.sort(t)


# ------------------------------------------------------------ argument values
# stable=None is the default, as in NumPy and PyTorch (tests/test_api_edges_cpu.py)
@pytest.mark.parametrize("flag, value", [(flag, value) for flag in ("descending", "stable")
                                         for value in ("no", 0, 1, [True])]
                         + [("descending", None)])
def test_flags_must_be_bools(flag, value):
    with pytest.raises(TypeError, match=flag):
        csk.sort(np.arange(3), **{flag: value})


def test_numpy_bools_are_bools():
    assert csk.sort(np.array([2, 1]), descending=np.True_).tolist() == [2, 1]


def test_descending_must_be_a_bool_everywhere():
    with pytest.raises(TypeError, match="descending"):
        csk.argsort(np.arange(3), descending="no")
    with pytest.raises(TypeError, match="descending"):
        csk.sort_by_key(np.arange(3), np.arange(3), descending="yes")
    with pytest.raises(TypeError, match="descending"):
        csk.merge(np.arange(3), np.arange(3), descending="no")


def test_algorithm_must_be_a_name():
    with pytest.raises(TypeError, match="algorithm"):
        csk.sort(np.arange(3), algorithm=["numpy"])


@pytest.mark.parametrize("key_range", [5, (1,), (1, 2, 3), ("a", "b"), (1.5, 2), (True, 3)])
def test_bad_key_range_values_name_key_range(key_range):
    with pytest.raises(TypeError, match="key_range"):
        csk.sort(np.arange(3), key_range=key_range)


def test_key_range_lo_above_hi():
    with pytest.raises(ValueError, match="key_range"):
        csk.sort(np.arange(3), key_range=(5, 1))


def test_key_range_is_for_integer_keys():
    with pytest.raises(TypeError, match="key_range"):
        csk.sort(np.arange(3.0), key_range=(0, 2))


def test_a_broken_key_range_promise_raises_on_the_cpu_as_on_the_gpu():
    with pytest.raises(ValueError, match="key_range"):
        csk.sort(np.array([1, 50, 3]), key_range=(0, 10), algorithm="numpy")
    assert csk.sort(np.array([1, 5, 3]), key_range=(0, 10), algorithm="numpy").tolist() == [1, 3, 5]


def test_non_contiguous_out_is_refused():
    a = np.array([3, 1, 2], np.int64)
    out = np.empty(6, np.int64)[::2]
    with pytest.raises(ValueError, match="contiguous"):
        csk.sort(a, out=out, algorithm="numpy")


def test_out_must_match():
    with pytest.raises(ValueError, match="out must be"):
        csk.sort(np.arange(3), out=np.empty(4, np.int64), algorithm="numpy")
    with pytest.raises(TypeError, match="out must be an array"):  # a list: never written
        csk.sort(np.arange(3), out=[0, 0, 0], algorithm="numpy")


def test_in_place_sort_on_the_cpu():
    a = np.array([3, 1, 2])
    assert csk.sort(a, out=a, algorithm="numpy") is a
    assert a.tolist() == [1, 2, 3]


def test_merge_out_overlapping_an_input_is_refused():
    buf = np.array([1, 3, 5, 2, 4, 6, 0, 0, 0, 0, 0, 0])
    a, b = buf[:3], buf[3:6]
    with pytest.raises(ValueError, match="overlaps"):
        csk.merge(a, b, out=buf[2:8])
    out = np.empty(6, buf.dtype)
    assert csk.merge(a, b, out=out) is out and out.tolist() == [1, 2, 3, 4, 5, 6]


def test_stream_must_be_a_stream():
    with pytest.raises(TypeError, match="stream"):
        csk.sort(np.arange(3), stream="default")


def test_cpu_fallback_warning_points_at_the_callers_line(monkeypatch):
    from cudasortkit.dispatch import select
    from cudasortkit.gpu.device import gpu_available

    if gpu_available():
        pytest.skip("a GPU is here: no CPU fallback warning")
    monkeypatch.setattr(select, "_warned_cpu", False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        csk.sort(np.arange(select.HOST_TINY))  # (shorter host arrays never ask for a GPU)
    assert caught and caught[0].filename == __file__, [w.filename for w in caught]


# ------------------------------------------------------------ argsort index_dtype
def test_int32_indices_on_the_host(rng):
    from helpers import make_keys, reference_argsort

    for dtype, n in (("float32", 1001), ("int16", 4099), ("uint64", 2)):
        a = make_keys("few_unique", dtype, n, rng)
        for descending in (False, True):
            got = csk.argsort(a, stable=True, descending=descending, index_dtype=np.int32)
            assert got.dtype == np.int32
            assert np.array_equal(got, reference_argsort(a, descending).astype(np.int32))
    assert csk.argsort(np.array([3, 1, 2]), index_dtype="int64").dtype == np.int64


def test_unsupported_index_dtypes_are_refused():
    from cudasortkit.dispatch.request import check_index_dtype

    a = np.arange(10)
    for bad in (np.float32, np.uint32, np.int16, "i1"):
        with pytest.raises(TypeError, match="index_dtype must be numpy.int64 or numpy.int32"):
            csk.argsort(a, index_dtype=bad)
    with pytest.raises(ValueError, match="1-D"):
        csk.argsort(a.reshape(2, 5), index_dtype=np.int32)
    with pytest.raises(ValueError, match="below 2\\^31"):
        check_index_dtype(np.int32, 1 << 31)
    assert check_index_dtype(np.int32, (1 << 31) - 1) == np.int32
    assert check_index_dtype(np.int64, 1 << 40) == np.int64


def test_int32_indices_count_keys_by_shape_when_size_is_a_method():
    class TorchLike:  # torch.Tensor.size is a method, not NumPy's count
        shape, ndim = (1 << 31,), 1

        def size(self):
            return self.shape

    with pytest.raises(ValueError, match="2147483648 keys"):
        csk.argsort(TorchLike(), index_dtype=np.int32)


# --------------------------------------------------- messages that say what to do
def test_algorithm_must_be_a_name_in_every_call():
    """One rule, one TypeError: sort's, for searchsorted, explain_searchsorted
    and lexsort too."""
    a = np.arange(4.0)
    for call in (lambda: csk.sort(a, algorithm=5), lambda: csk.searchsorted(a, 1.0, algorithm=5),
                 lambda: csk.explain_searchsorted(a, 1.0, algorithm=5),
                 lambda: csk.lexsort([a], algorithm=5), lambda: csk.topk(a, 1, algorithm=5),
                 lambda: csk.sort_by_key((a, a), a, algorithm=5)):
        with pytest.raises(TypeError, match=r"algorithm must be a plugin name or 'auto' \(a str\), "
                                            r"got 5"):
            call()


def test_a_sorter_of_the_wrong_shape_names_both_shapes():
    a = np.arange(36.0)
    with pytest.raises(ValueError, match=r"sorter must have a's shape \(36,\) \(an argsort of a\), "
                                         r"got shape \(6, 6\)"):
        csk.searchsorted(a, 3.0, sorter=np.arange(36).reshape(6, 6))
    with pytest.raises(ValueError, match=r"sorter.size must equal a.size: 30 != 36"):
        csk.searchsorted(a, 3.0, sorter=np.arange(30))


def test_order_must_be_field_names():
    s = np.zeros(3, [("a", "i4"), ("b", "f4")])
    for order in (5, [5], ("a", 5), 1.5):
        with pytest.raises((TypeError, ValueError), match=r"order must be a field name or a "
                                                          r"sequence of field names \(a, b\)"):
            csk.argsort(s, order=order)
    with pytest.raises(ValueError, match="unknown field name: c"):
        csk.sort(s, order="c")


def test_sort_by_key_with_a_list_of_keys_says_to_pass_a_tuple():
    k = np.arange(3)
    for keys in ([k, k], [k]):
        with pytest.raises(TypeError, match=r"a list of \d key arrays: pass them as a tuple"):
            csk.sort_by_key(keys, np.arange(3))
    # a list of numbers is one key array, as NumPy reads it
    assert csk.sort_by_key([3, 1, 2], np.arange(3))[1].tolist() == [1, 2, 0]


def test_segmented_sort_without_offsets_names_them():
    for call in (csk.segmented_sort, csk.segmented_argsort):
        with pytest.raises(TypeError, match=r"offsets must be an int32 or int64 array .*got None"):
            call(np.arange(3), None)


def test_descending_2d_structured_sort_does_not_name_order_unless_given():
    s = np.zeros((2, 3), [("a", "i4"), ("b", "f4")])
    for call in (csk.sort, csk.argsort):
        with pytest.raises(ValueError) as refused:
            call(s, descending=True)
        assert "order=" not in str(refused.value)
        assert "descending=True sorts 1-D structured arrays (or axis=None)" in str(refused.value)
        assert "2-D" in str(refused.value)
    assert csk.sort(s, descending=True, axis=None).shape == (6,)


@pytest.mark.parametrize("x, y", [("int32", "int64"), ("uint8", "int8"), ("int16", "float32"),
                                  ("bool", "uint16"), ("float16", "int8"), ("int32", "float64")])
def test_merge_of_two_dtypes_promotes_as_numpy(x, y):
    """merge of keys of two dtypes: NumPy's result_type, where it holds
    both exactly; merge_by_key's keys too."""
    rng = np.random.default_rng(2)
    a = np.sort(rng.integers(0, 50, 30).astype(x))
    b = np.sort(rng.integers(0, 50, 20).astype(y))
    common = np.result_type(a.dtype, b.dtype)
    got = csk.merge(a, b)
    assert got.dtype == common
    assert np.array_equal(got, np.sort(np.concatenate([a, b]).astype(common), kind="stable"))
    keys, values = csk.merge_by_key(a, np.arange(30.0), b, np.arange(20.0))
    assert keys.dtype == common and np.array_equal(keys, got)


@pytest.mark.parametrize("x, y", [("int64", "uint64"), ("int64", "float64"), ("uint64", "float32"),
                                  ("uint64", "int8")])
def test_merge_of_two_dtypes_without_an_exact_common_one_says_to_cast(x, y):
    with pytest.raises(TypeError, match=r"a \(.*\) and b \(.*\) have no common dtype that holds "
                                        r"both exactly.*cast"):
        csk.merge(np.zeros(3, x), np.zeros(3, y))
