"""What the calls' host path remembers between calls (a Rows layout per
shape and axis, a torch tensor type, a torch dtype's NumPy dtype, a
selection request per its fields) never answers another call's question:
each shape, axis, dtype, k and flag gets its own answer, and arguments
that must fail fail every time."""
import importlib.util

import numpy as np
import pytest

import cudasortkit as csk
from cudasortkit import api
from cudasortkit.calls.axes import Rows
from cudasortkit.calls.select import SelectCalls
from cudasortkit.gpu.arrays import Operand, library_of, torch_to_numpy_dtype

try:
    AxisError = np.exceptions.AxisError
except AttributeError:  # NumPy < 1.25
    AxisError = np.AxisError


def layout(rows: Rows) -> tuple:
    return rows.shape, rows.axis, rows.n, rows.rows, rows.row_len, rows.moved_shape, rows.moves


def test_rows_layouts_answer_each_shape_and_axis():
    a = np.arange(24.0).reshape(2, 3, 4)
    b = np.arange(6.0).reshape(3, 2)
    want = [(a, -1, ((2, 3, 4), 2, 24, 6, 4, (2, 3, 4), False)),
            (a, 2, ((2, 3, 4), 2, 24, 6, 4, (2, 3, 4), False)),
            (a, 1, ((2, 3, 4), 1, 24, 8, 3, (2, 4, 3), True)),
            (a, 0, ((2, 3, 4), 0, 24, 12, 2, (3, 4, 2), True)),
            (a, None, ((2, 3, 4), None, 24, 1, 24, (24,), False)),
            (b, 1, ((3, 2), 1, 6, 3, 2, (3, 2), False)),
            (b, -1, ((3, 2), 1, 6, 3, 2, (3, 2), False)),
            (b, 0, ((3, 2), 0, 6, 2, 3, (2, 3), True))]
    for _ in range(2):  # the second round from the memo
        for x, axis, fields in want:
            rows = Rows(x, axis, "a", None)
            assert layout(rows) == fields
            moved = x.reshape(-1) if axis is None else np.moveaxis(x, rows.axis, -1).reshape(-1)
            assert np.array_equal(rows.flat, moved)
        assert layout(Rows(a, np.int64(1), "a", None)) == want[2][2]  # not remembered: the same


def test_bad_axes_fail_every_time():
    a = np.zeros((2, 3))
    Rows(a, 1, "a", None)
    for _ in range(2):
        with pytest.raises(TypeError, match="axis must be an integer"):
            Rows(a, True, "a", None)  # True == 1, but a bool is no axis
        with pytest.raises(AxisError):
            Rows(a, 2, "a", None)


def test_zero_d_arrays_are_one_row_only_where_asked():
    zero_d = np.array(3.0)
    for _ in range(2):
        assert layout(Rows(zero_d, 0, "a", None, zero_d_as_1d=True)) == \
            ((1,), 0, 1, 1, 1, (1,), False)
        with pytest.raises(AxisError):
            Rows(zero_d, 0, "a", None)
        assert layout(Rows(zero_d, None, "a", None)) == ((), None, 1, 1, 1, (1,), False)


def test_a_torch_tensor_type_still_asks_each_tensor_where_it_is(monkeypatch):
    torch = pytest.importorskip("torch")
    t = torch.zeros(3)
    assert library_of(t) == "torch-cpu"
    assert library_of(torch.nn.Parameter(torch.zeros(2))) == "torch-cpu"
    monkeypatch.setattr(torch.Tensor, "is_cuda", property(lambda self: True))
    assert library_of(t) == "torch"
    monkeypatch.undo()
    assert library_of(t) == "torch-cpu"


def test_torch_dtypes_each_their_own_and_unsupported_ones_refused():
    torch = pytest.importorskip("torch")
    for _ in range(2):
        for tdtype, want in ((torch.float32, np.float32), (torch.int16, np.int16),
                             (torch.bool, np.bool_), (torch.float64, np.float64)):
            assert torch_to_numpy_dtype(tdtype) == np.dtype(want)
        if importlib.util.find_spec("ml_dtypes"):
            import ml_dtypes

            assert torch_to_numpy_dtype(torch.bfloat16) == np.dtype(ml_dtypes.bfloat16)
        with pytest.raises(TypeError, match="complex64 is not supported"):
            Operand(torch.zeros(3, dtype=torch.complex64), "a")


def test_a_request_is_made_once_per_fields():
    calls = SelectCalls(api.selector)
    a = np.arange(30, dtype=np.float32).reshape(3, 10)
    keys, rows = Operand(a.reshape(-1), "a"), Rows(a, -1, "a", None)
    request = calls._request("topk", keys, rows, 4, True, True)
    assert calls._request("topk", keys, rows, 4, True, True) is request
    other = Operand(a.astype(np.int16).reshape(-1), "a")
    assert [calls._request("topk", other, rows, 4, True, True).dtype,
            calls._request("topk", keys, rows, 5, True, True).k,
            calls._request("topk", keys, rows, 4, False, True).largest,
            calls._request("topk", keys, rows, 4, True, False).sorted,
            calls._request("partition", keys, rows, 10, False, True, (2,)).kth] == \
        ["int16", 5, False, False, (2,)]
    assert request.dtype == "float32" and request.k == 4 and request.largest


def test_repeat_selections_answer_each_call_s_arguments():
    """One shape, calls differing only in dtype, k, largest or kth: each
    gets its own results."""
    rng = np.random.default_rng(3)
    a = rng.permutation(40).reshape(4, 10)
    for _ in range(2):
        for dtype in (np.float32, np.int16, np.float64):
            x = a.astype(dtype)
            for k in (3, 5):
                for largest in (True, False):
                    values, indices = csk.topk(x, k, largest=largest)
                    order = np.argsort(-x if largest else x, axis=-1, kind="stable")[:, :k]
                    assert values.dtype == dtype and np.array_equal(indices, order)
                    assert np.array_equal(values, np.take_along_axis(x, order, -1))
            for kth in (2, 7):
                assert np.array_equal(np.sort(x, -1)[:, kth], csk.partition(x, kth)[:, kth])
