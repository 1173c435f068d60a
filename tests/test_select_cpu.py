"""topk, partition and argpartition on host arrays (the CPU plugin), the
API's rules (arguments, out=, shapes, axis) and the selection plugin kind."""
import subprocess
import sys

import numpy as np
import pytest

import cudasortkit as csk
from cudasortkit.dtypes import KEY_DTYPES
from cudasortkit.errors import PluginError
from cudasortkit.sdk import registry
from cudasortkit.sdk.selection import SELECT_OPS, GeneralSelectPlugin, SelectPlugin, SelectRequest

from helpers import as_dtype, make_keys
from select_reference import (assert_partition_values, assert_partitioned, assert_topk,
                              reference_topk)

DTYPES = ["bool", *KEY_DTYPES]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dist", ["uniform", "few_unique", "special", "all_equal"])
def test_topk_matches_the_reference(dtype, dist):
    rng = np.random.default_rng(7)
    a = make_keys(dist, as_dtype(dtype), 6 * 37, rng).reshape(6, 37)
    for k in (0, 1, 5, 36, 37):
        for largest in (True, False):
            assert_topk(csk.topk(a, k, largest=largest), a, k, -1, largest)
            assert_topk(csk.topk(a, k, largest=largest, sorted=False), a, k, -1, largest)


def test_tie_rule_nan_and_signed_zero():
    a = np.array([1.0, np.nan, -0.0, 2.0, 0.0, np.nan, 2.0, -np.inf, np.inf])
    v, i = csk.topk(a, 9)
    assert i.tolist() == [1, 5, 8, 3, 6, 0, 2, 4, 7]  # NaNs first, ties lower index first
    v, i = csk.topk(a, 9, largest=False)
    assert i.tolist() == [7, 2, 4, 0, 3, 6, 8, 1, 5]  # NaNs last
    assert np.signbit(v[1]) and not np.signbit(v[2])  # the caller's own -0.0 and +0.0
    assert csk.topk(np.zeros(6, np.int16), 4)[1].tolist() == [0, 1, 2, 3]


def test_values_agree_with_torch_topk():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    for dtype in ("float32", "float64", "int32", "int64", "int8", "uint8", "float16"):
        a = make_keys("special", as_dtype(dtype), 4 * 50, rng).reshape(4, 50)
        for largest in (True, False):
            tv, ti = torch.topk(torch.from_numpy(a), 10, largest=largest)
            v, i = csk.topk(a, 10, largest=largest)
            assert np.array_equal(v, tv.numpy(), equal_nan=a.dtype.kind == "f")
            # torch's indices may order ties otherwise: same keys at both
            assert np.array_equal(np.take_along_axis(a, i, -1), np.take_along_axis(a, ti.numpy(), -1),
                                  equal_nan=a.dtype.kind == "f")


def test_torch_cpu_tensors_in_and_out():
    torch = pytest.importorskip("torch")
    t = torch.tensor([[3.0, 1.0, 2.0], [0.0, 5.0, 4.0]])
    v, i = csk.topk(t, 2)
    assert isinstance(v, torch.Tensor) and isinstance(i, torch.Tensor) and i.dtype == torch.int64
    assert v.tolist() == [[3.0, 2.0], [5.0, 4.0]] and i.tolist() == [[0, 2], [1, 2]]
    assert isinstance(csk.argpartition(t, 1), torch.Tensor)


@pytest.mark.parametrize("axis", [0, 1, -1, 2, -3])
def test_topk_along_any_axis_of_non_contiguous_input(axis):
    rng = np.random.default_rng(axis + 5)
    base = make_keys("few_unique", np.dtype("float32"), 5 * 6 * 8 * 2, rng).reshape(5, 6, 16)
    a = base[:, ::-1, ::2].transpose(1, 0, 2)  # strided and transposed: (6, 5, 8)
    k = min(3, a.shape[axis])
    v, i = csk.topk(a, k, axis=axis)
    assert v.shape[axis % 3] == k and v.shape == i.shape
    assert_topk((v, i), a, k, axis)


def test_empty_and_edge_shapes():
    a = np.zeros((0, 5), np.float32)
    v, i = csk.topk(a, 3)
    assert v.shape == (0, 3) and i.shape == (0, 3) and i.dtype == np.int64
    v, i = csk.topk(np.zeros((4, 0)), 0)
    assert v.shape == (4, 0)
    v, i = csk.topk(np.zeros((4, 3)), 0, axis=0)
    assert v.shape == (0, 3)
    assert csk.partition(np.zeros((0, 3)), 1).shape == (0, 3)
    assert_topk(csk.topk(np.array([5]), 1), np.array([5]), 1)


def test_argument_errors():
    a = np.arange(10.0)
    with pytest.raises(ValueError, match="k must be in"):
        csk.topk(a, 11)
    with pytest.raises(ValueError, match="k must be in"):
        csk.topk(a, -1)
    with pytest.raises(TypeError, match="k must be an integer"):
        csk.topk(a, True)
    with pytest.raises(TypeError, match="k must be an integer"):
        csk.topk(a, 2.0)
    with pytest.raises(TypeError, match="largest"):
        csk.topk(a, 2, largest=None)
    with pytest.raises(TypeError, match="sorted"):
        csk.topk(a, 2, sorted="yes")
    with pytest.raises(TypeError, match="integer axis"):
        csk.topk(a, 2, axis=None)
    with pytest.raises(np.exceptions.AxisError if hasattr(np, "exceptions") else np.AxisError):
        csk.topk(a, 2, axis=1)
    with pytest.raises(TypeError):
        csk.topk(np.array(["a", "b"]), 1)
    with pytest.raises(TypeError):
        csk.topk(np.zeros(3, complex), 1)
    with pytest.raises(ValueError, match="unknown selection algorithm"):
        csk.topk(a, 2, algorithm="nope")
    with pytest.raises(TypeError, match="algorithm"):
        csk.topk(a, 2, algorithm=3)


def test_topk_out():
    a = np.array([[4, 9, 1], [7, 7, 2]], np.int32)
    vals, idx = np.full((2, 2), -99, np.int32), np.full((2, 2), -99, np.int64)
    v, i = csk.topk(a, 2, out=(vals, idx))
    assert v is vals and i is idx
    assert vals.tolist() == [[9, 4], [7, 7]] and idx.tolist() == [[1, 0], [0, 1]]
    with pytest.raises(ValueError, match="shape"):
        csk.topk(a, 2, out=(np.empty((2, 3), np.int32), idx))
    with pytest.raises(ValueError, match="dtype"):
        csk.topk(a, 2, out=(vals, np.empty((2, 2), np.int32)))
    with pytest.raises(TypeError, match="pair"):
        csk.topk(a, 2, out=vals)
    ro = np.empty((2, 2), np.int32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="writeable"):
        csk.topk(a, 2, out=(ro, idx))
    before = vals.copy()
    with pytest.raises(ValueError):  # checked before anything is written
        csk.topk(a, 2, out=(vals, np.empty((3, 2), np.int64)))
    assert np.array_equal(vals, before)


@pytest.mark.parametrize("dtype", DTYPES)
def test_partition_and_argpartition_like_numpy(dtype):
    rng = np.random.default_rng(11)
    a = make_keys("special", as_dtype(dtype), 5 * 41, rng).reshape(5, 41)
    for kth in (0, 20, 40, -1, [3, 17, 30], (0, 40)):
        idx = csk.argpartition(a, kth)
        assert_partitioned(idx, a, kth)
        assert_partition_values(csk.partition(a, kth), a, kth)
    for axis in (0, None):
        flat = a.reshape(-1) if axis is None else a
        idx = csk.argpartition(a, 2, axis=axis)
        assert_partitioned(idx, flat, 2, 0 if axis is None else axis)
        if dtype != "bfloat16":
            want = np.partition(a, 2, axis=axis)
            got = csk.partition(a, 2, axis=axis)
            assert np.array_equal(np.take(got, 2, axis=0 if axis is None else axis),
                                  np.take(want, 2, axis=0 if axis is None else axis),
                                  equal_nan=a.dtype.kind == "f")


def test_kth_errors_as_numpy():
    a = np.arange(5)
    for kth in (5, -6, [1, 5]):
        with pytest.raises(ValueError):
            np.argpartition(a, kth)
        with pytest.raises(ValueError, match="out of bounds"):
            csk.argpartition(a, kth)
    with pytest.raises(TypeError, match="kth"):
        csk.partition(a, 1.5)
    with pytest.raises(ValueError, match="Booleans unacceptable as partition index"):
        csk.partition(a, True)  # NumPy's ValueError
    assert csk.partition(np.zeros(0), 0).shape == (0,)  # NumPy checks no kth of an empty array


def test_the_selection_plugin_kind_is_listed_and_explained():
    kinds = {r["name"]: r for r in csk.algorithms()}
    for name in ("numpy_select", "sort_select", "radix_select", "warp_select"):
        assert kinds[name]["kind"] == "selection" and kinds[name]["status"] == "ok", kinds[name]
    assert kinds["radix"]["kind"] == "sort"
    assert "cudasortkit.selection" in registry.KINDS
    d = csk.explain(np.arange(100.0), kind="topk", k=5)
    assert d.name == "numpy_select" and "top-5" in str(d)
    d = csk.explain(np.arange(100.0), kind="partition", kth=3)
    assert d.name == "numpy_select" and "partition" in str(d)
    with pytest.raises(ValueError, match="k="):
        csk.explain(np.arange(3.0), kind="topk")
    out = subprocess.run([sys.executable, "-m", "cudasortkit", "list"], capture_output=True,
                         text=True, check=True).stdout
    assert "radix_select" in out and "sort_select" in out and "numpy_select" in out


def test_gpu_plugins_declare_their_choice_by_shape():
    radix = registry.plugins("cudasortkit.selection")["radix_select"]
    sort = registry.plugins("cudasortkit.selection")["sort_select"]
    long_rows = SelectRequest("topk", "float32", 1, 1 << 23, 1000)
    short_rows = SelectRequest("topk", "float32", 1 << 16, 1024, 8)
    one_short_row = SelectRequest("topk", "float32", 1, 1024, 100)
    warp = registry.plugins("cudasortkit.selection")["warp_select"]
    assert radix.priority_for(long_rows)[0] < sort.priority_for(long_rows)[0]
    assert radix.priority_for(short_rows)[0] < sort.priority_for(short_rows)[0]
    assert sort.priority_for(one_short_row)[0] < radix.priority_for(one_short_row)[0]
    assert warp.unsupported(short_rows) is None and warp.unsupported(long_rows) is not None
    assert warp.priority_for(short_rows)[0] < sort.priority_for(short_rows)[0]
    assert warp.unsupported(SelectRequest("topk", "float32", 8, 1024, 33)) is not None
    assert radix.unsupported(SelectRequest("partition", "float32", 1, 10, 10, False, True, True,
                                           (1, 2))) is not None


def test_declarations_are_checked():
    class NoOps(SelectPlugin):
        name, dtypes, ops, device = "no_ops", ("float32",), (), "cpu"

        def run(self, job):
            pass

    class NoRun(SelectPlugin):
        name, dtypes, device = "no_run", ("float32",), "cpu"

    with pytest.raises(ValueError, match="ops"):
        registry.check_class(NoOps, "cudasortkit.selection")
    with pytest.raises(TypeError, match="run"):
        registry.check_class(NoRun, "cudasortkit.selection")
    with pytest.raises(TypeError, match="SelectPlugin"):
        registry.check_class(type("X", (), {}), "cudasortkit.selection")


def test_the_plugins_for_every_request_take_their_declaration_from_the_sdk():
    for name in ("numpy_select", "sort_select", "radix_select"):
        cls = type(registry.plugins("cudasortkit.selection")[name])
        assert issubclass(cls, GeneralSelectPlugin)
        assert not {"dtypes", "ops"} & set(vars(cls)), "one declaration, in sdk/selection.py"
        assert cls.dtypes == KEY_DTYPES and cls.ops == SELECT_OPS


def test_a_plugin_returning_wrong_results_is_taken_out_of_service():
    class Wrong(SelectPlugin):
        name, dtypes, device, ops = "wrong_select", ("float32",), "cpu", ("topk",)
        summary = "test plugin"

        def run(self, job):
            return job.keys[:, :1], None

    class Custom(SelectPlugin):
        name, dtypes, device, ops = "custom_select", ("float32",), "cpu", ("topk",)

        def run(self, job):
            idx = np.argsort(-job.keys, axis=-1, kind="stable")[:, :job.k]
            return np.take_along_axis(job.keys, idx, -1), idx

    registry.register(Wrong)
    registry.register(Custom)
    try:
        a = np.array([[1.0, 3.0, 2.0]], np.float32)
        with pytest.raises(PluginError, match="wrong_select"):
            csk.topk(a, 2, algorithm="wrong_select")
        with pytest.raises(ValueError, match="disabled"):
            csk.topk(a, 2, algorithm="wrong_select")
        assert csk.topk(a, 2, algorithm="custom_select")[1].tolist() == [[1, 2]]
        with pytest.raises(ValueError, match="cannot serve"):
            csk.topk(a.astype(np.float64), 2, algorithm="custom_select")
    finally:
        registry.refresh()


def test_gpu_plugin_by_name_without_a_gpu_says_so():
    from cudasortkit.gpu.device import gpu_available

    if gpu_available():
        pytest.skip("a GPU is here")
    with pytest.raises(ValueError, match="needs a GPU"):
        csk.topk(np.arange(10.0), 2, algorithm="radix_select")


def test_reference_is_what_docs_say():
    v, i = reference_topk(np.array([[2, 1, 2, 3]]), 3)
    assert i.tolist() == [[3, 0, 2]] and v.tolist() == [[3, 2, 2]]


def test_bench_select_cases_are_the_issues_bar():
    from cudasortkit.cli import bench, bench_select

    args = bench.build_parser().parse_args(["--select"])
    assert args.select
    assert [(op, shape, k, bar) for op, shape, k, bar in bench_select.CASES] == [
        ("topk", (1, 1 << 23), 1000, 2.0), ("topk", (4096, 32000), 50, 1.5),
        ("topk", (1 << 16, 1024), 8, 1.5), ("topk", (1 << 24,), 1 << 20, 2.0),
        ("argpartition", (1 << 24,), 1 << 23, 3.0)]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "int8", "uint64", "float64", "bool"])
def test_topk_threshold_path_with_many_ties(dtype):
    """k between 1 and n - 1: the k-th key found by partition, its ties
    taken by index, -0.0 among +0.0, NaNs among the best or the worst."""
    rng = np.random.default_rng(13)
    for trial in range(6):
        a = make_keys(["few_unique", "special"][trial % 2], as_dtype(dtype), 4 * 300,
                      rng).reshape(4, 300)
        for k in rng.integers(1, 300, 4):
            for largest in (True, False):
                assert_topk(csk.topk(a, int(k), largest=largest), a, int(k), -1, largest)
