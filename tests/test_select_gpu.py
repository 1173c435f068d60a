"""topk / partition / argpartition on the GPU: every GPU selection plugin,
every key dtype, against the references of tests/select_reference.py
(values bit for bit, indices exactly under the tie rule: equal keys lower
index first, NaN largest) and torch.topk's values; result buffers are
poisoned (tests/conftest.py), so an element a plugin forgets shows up."""
import numpy as np
import pytest

import cudasortkit as csk
from cudasortkit.dtypes import KEY_DTYPES, key_name
from cudasortkit.sdk import registry
from cudasortkit.sdk.selection import SelectRequest

from helpers import as_dtype, is_bf16, make_keys, to_device, to_numpy
from select_reference import (assert_partition_values, assert_partitioned, assert_same_bits,
                              assert_topk, reference_topk)

pytestmark = pytest.mark.gpu

SELECT = {n: p for n, p in registry.plugins("cudasortkit.selection").items() if p.device == "gpu"}
DTYPES = ["bool", *KEY_DTYPES]
#: (rows, row length): one long row (several tiles), a few rows, many short ones.
SHAPES = [(1, 5000), (3, 1000), (17, 33)]


def _serves(name, a, k, axis=-1, largest=True) -> bool:
    """Whether plugin `name` serves a topk of `a` (some take short rows or small k only)."""
    length = a.shape[axis]
    request = SelectRequest("topk", key_name(a.dtype), a.size // max(length, 1), length, k,
                            largest)
    return SELECT[name].unsupported(request) is None


def _device(a):
    if a.dtype == np.bool_:
        cupy = pytest.importorskip("cupy")
        return cupy.asarray(a)
    return to_device(a)


@pytest.mark.parametrize("name", sorted(SELECT))
@pytest.mark.parametrize("dtype", DTYPES)
def test_topk_every_dtype(name, dtype, rng):
    for dist in ("special", "few_unique", "all_equal"):
        for rows, length in SHAPES:
            a = make_keys(dist, as_dtype(dtype), rows * length, rng).reshape(rows, length)
            dev = _device(a)
            for k in (0, 1, 7, length):
                for largest in (True, False):
                    if not _serves(name, a, k, -1, largest):
                        continue
                    got = csk.topk(dev, k, largest=largest, algorithm=name)
                    assert type(got[0]) is type(dev) and type(got[1]) is type(dev)
                    assert_topk(got, a, k, -1, largest)


@pytest.mark.parametrize("name", sorted(SELECT))
def test_ties_nan_and_signed_zero(name):
    for reps in (700, 3):  # 6300 keys, and 27 (short rows take those)
        a = np.array([1.0, np.nan, -0.0, 2.0, 0.0, np.nan, 2.0, -np.inf, np.inf] * reps)
        _ties(name, a)


def _ties(name, a):
    dev = _device(a)
    for largest in (True, False):
        for k in (1, 2, 3, 9, 1400, 2101, len(a)):
            if k > len(a) or not _serves(name, a, k):
                continue
            assert_topk(csk.topk(dev, k, largest=largest, algorithm=name), a, k, -1, largest)


@pytest.mark.parametrize("name", sorted(SELECT))
def test_values_equal_torch_topk(name):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    length = 3000 if _serves(name, np.zeros((4, 3000)), 20) else 2000
    for dtype in (torch.float32, torch.bfloat16, torch.float16, torch.int32, torch.int64):
        t = (torch.randn(4, length, device="cuda") * 100).to(dtype)
        if dtype.is_floating_point:
            t[0, torch.from_numpy(rng.integers(0, length, 20)).cuda()] = float("nan")
            t[1, :100] = -0.0
        for largest in (True, False):
            tv, ti = torch.topk(t, 20, largest=largest)
            v, i = csk.topk(t, 20, largest=largest, algorithm=name)
            assert v.dtype == t.dtype and i.dtype == torch.int64 and v.is_cuda
            if dtype.is_floating_point:
                assert torch.equal(v.isnan(), tv.isnan())
            same = (v == tv) | (v.isnan() & tv.isnan()) if dtype.is_floating_point else v == tv
            assert bool(same.all())
            assert bool((torch.gather(t, 1, i) == v).logical_or(v.isnan()).all())


@pytest.mark.parametrize("name", sorted(SELECT))
@pytest.mark.parametrize("axis", [0, 1, -3])
def test_any_axis_and_non_contiguous(name, axis, rng):
    cupy = pytest.importorskip("cupy")
    a = make_keys("few_unique", np.dtype("float32"), 6 * 5 * 40, rng).reshape(6, 5, 40)
    dev = cupy.asarray(a)[:, ::-1, ::2].transpose(1, 0, 2)  # (5, 6, 20), strided
    host = a[:, ::-1, ::2].transpose(1, 0, 2)
    k = min(4, host.shape[axis])
    assert_topk(csk.topk(dev, k, axis=axis, algorithm=name), host, k, axis)


@pytest.mark.parametrize("name", sorted(SELECT))
def test_out_and_empty(name):
    cupy = pytest.importorskip("cupy")
    a = cupy.asarray(np.array([[4, 9, 1, 9], [7, 7, 2, 0]], np.int32))
    vals, idx = cupy.full((2, 3), -99, np.int32), cupy.full((2, 3), -99, np.int64)
    v, i = csk.topk(a, 3, out=(vals, idx), algorithm=name)
    assert v is vals and i is idx
    assert vals.get().tolist() == [[9, 9, 4], [7, 7, 2]] and idx.get().tolist() == [[1, 3, 0], [0, 1, 2]]
    v, i = csk.topk(cupy.zeros((0, 5), np.float32), 2, algorithm=name)
    assert v.shape == (0, 2) and isinstance(v, cupy.ndarray)


@pytest.mark.parametrize("name", sorted(SELECT))
@pytest.mark.parametrize("dtype", DTYPES)
def test_partition_every_dtype(name, dtype, rng):
    plugin = SELECT[name]
    if "partition" not in plugin.ops:
        pytest.skip(f"{name} serves topk only")
    for rows, length in SHAPES:
        a = make_keys("special", as_dtype(dtype), rows * length, rng).reshape(rows, length)
        dev = _device(a)
        for kth in (0, length // 2, length - 1, -1, [1, length - 2]):
            if name == "radix_select" and np.ndim(kth):
                continue  # one kth only: sort_select serves several (auto checks)
            assert_partitioned(csk.argpartition(dev, kth, algorithm=name), a, kth)
            assert_partition_values(csk.partition(dev, kth, algorithm=name), a, kth)


def _assert_topk_prefix(got, a, order, k):
    """assert_topk against `order`, the rows' full selection order (one
    reference sort serves every k)."""
    values, indices = got
    ei = order[:, :k]
    assert np.array_equal(to_numpy(indices), ei)
    assert_same_bits(values, np.take_along_axis(a, ei, -1))


@pytest.mark.parametrize("dist", ["special", "few_unique", "all_equal"])
def test_radix_select_paths_on_both_sides_of_their_size_rules(dist):
    """radix_select's paths: several rows of at most STREAM_ROW keys (one
    block per row, rs_stream_select), one more key (the multi-block passes,
    several rows at once); k up to SORT_CAP sorted in one block
    (rs_sort_small), one more through the core's argsort; rows where over
    RS_CAP (1024) keys share the k-th's digit (more passes, ties by index)."""
    from cudasortkit.plugins.radix_select import SORT_CAP, STREAM_ROW

    rng = np.random.default_rng(11)
    for length in (STREAM_ROW, STREAM_ROW + 1):
        a = make_keys(dist, np.dtype("float32"), 2 * length, rng).reshape(2, length)
        dev = _device(a)
        for largest in (True, False):
            order = reference_topk(a, length, -1, largest)[1]
            for k in (1, 50, SORT_CAP, SORT_CAP + 1, length):
                got = csk.topk(dev, k, largest=largest, algorithm="radix_select")
                _assert_topk_prefix(got, a, order, k)


@pytest.mark.parametrize("dtype", DTYPES)
def test_radix_select_streamed_rows_every_dtype(dtype, rng):
    """Streamed rows longer than RS_CAP: digit passes over global memory for
    every key width (8 to 64 bits), then the candidates in shared memory, or
    (all bits known, over RS_CAP ties) the ties by index."""
    for dist in ("special", "few_unique", "uniform", "all_equal"):
        a = make_keys(dist, as_dtype(dtype), 3 * 3000, rng).reshape(3, 3000)
        dev = _device(a)
        for largest in (True, False):
            order = reference_topk(a, 3000, -1, largest)[1]
            for k in (1, 7, 1500, 2049, 3000):
                _assert_topk_prefix(csk.topk(dev, k, largest=largest, algorithm="radix_select"),
                                    a, order, k)


SAMPLED_QUICK = ["float32", "int8", "bfloat16", "uint16"]


@pytest.mark.parametrize("dtype", [pytest.param(d, marks=() if d in SAMPLED_QUICK
                                                 else pytest.mark.slow) for d in DTYPES])
def test_radix_select_sampled_path(dtype, rng):
    """The sampled path (keys of at most 32 bits, k <= SORT_CAP, rows of at
    least SAMPLED_MIN_ROW keys): rows of every distribution, one long row
    (over SORT_CAP keys below the threshold: the narrowing loop), prime
    lengths; all-equal and few-unique rows take the ties case. One long row
    with k over SORT_CAP takes the sampled sort (large_k_plan), or the exact
    passes where ties at the threshold are needed."""
    from cudasortkit.plugins.radix_select import (SAMPLED_MIN_ROW, SORT_CAP, large_k_plan,
                                                  sample_plan)

    dt = as_dtype(dtype)
    for rows, length in ((1, (1 << 18) + 3), (6, 10007), (2, SAMPLED_MIN_ROW)):
        for dist in ("special", "few_unique", "all_equal", "uniform", "sorted", "reverse"):
            a = make_keys(dist, dt, rows * length, rng).reshape(rows, length)
            dev = _device(a)
            for largest in (True, False):
                order = reference_topk(a, length, -1, largest)[1]
                for k in (1, 50, 1000, SORT_CAP, SORT_CAP + 1, 5000):
                    if dt.itemsize > 4 or (sample_plan(length, k) is None
                                           and large_k_plan(rows, length, k) is None):
                        continue
                    got = csk.topk(dev, k, largest=largest, algorithm="radix_select")
                    _assert_topk_prefix(got, a, order, k)


def test_radix_select_sampled_path_when_the_threshold_misses(rng):
    """Rows whose sampled positions hold their largest keys (topk's
    threshold too high: too few keys pass) or their smallest (too many:
    over the candidates' capacity), NaN among them: rs_final takes the exact
    path for those rows and the result is still the reference's."""
    from cudasortkit.plugins.radix_select import large_k_plan, sample_plan, sample_positions

    length = (1 << 17) + 1  # one row: also the sampled sort (k over SORT_CAP)
    a = rng.standard_normal((1, length)).astype(np.float32)
    for k in (3000, 9000):
        samples, _, _ = large_k_plan(1, length, k)
        pos = np.array(sample_positions(length, samples))
        for fill in (1e6 + np.arange(len(pos)), -1e6 - np.arange(len(pos)), np.nan):
            b = a.copy()
            b[0, pos] = fill
            for largest in (True, False):
                order = reference_topk(b, length, -1, largest)[1]
                _assert_topk_prefix(csk.topk(_device(b), k, largest=largest,
                                             algorithm="radix_select"), b, order, k)
    length = 40000
    a = rng.standard_normal((4, length)).astype(np.float32)
    for k in (1, 30, 700):
        samples, _, _ = sample_plan(length, k)
        pos = np.array(sample_positions(length, samples))
        b = a.copy()
        b[0, pos] = 1e6 + np.arange(len(pos))  # largest=True: too few pass
        b[1, pos] = -1e6 - np.arange(len(pos))  # largest=False: too few; True: overflow
        b[2, pos] = np.nan
        dev = _device(b)
        for largest in (True, False):
            order = reference_topk(b, length, -1, largest)[1]
            _assert_topk_prefix(csk.topk(dev, k, largest=largest, algorithm="radix_select"),
                                b, order, k)


def test_radix_select_partition_of_several_long_rows(rng):
    """Partition's digit passes over several rows of several tiles each: the
    last block of each row picks that row's digit."""
    a = make_keys("special", np.dtype("float32"), 3 * 20000, rng).reshape(3, 20000)
    dev = _device(a)
    for kth in (0, 9999, 19999):
        assert_partitioned(csk.argpartition(dev, kth, algorithm="radix_select"), a, kth)
        assert_partition_values(csk.partition(dev, kth, algorithm="radix_select"), a, kth)


@pytest.mark.parametrize("rows", [64, 65])
def test_radix_select_digit_width_rule(rows, rng):
    """The long-row path's digits: 11 bits for at most WIDE_ROWS (64) rows,
    8 bits for more (partition always takes it; topk for rows of more than
    STREAM_ROW keys, referenced by the CPU plugin)."""
    from cudasortkit.plugins.radix_select import STREAM_ROW, WIDE_ROWS

    assert WIDE_ROWS == 64
    for dtype in ("float32", "int8", "float64"):
        a = make_keys("special", as_dtype(dtype), rows * 300, rng).reshape(rows, 300)
        for kth in (0, 150, -1):
            assert_partitioned(csk.argpartition(_device(a), kth, algorithm="radix_select"),
                               a, kth)
    a = make_keys("few_unique", np.dtype("float32"), rows * (STREAM_ROW + 1), rng)
    a = a.reshape(rows, STREAM_ROW + 1)
    a[:, :1000] = rng.standard_normal((rows, 1000))
    dev = _device(a)
    for k in (5, 3000):
        for largest in (True, False):
            v, i = csk.topk(dev, k, largest=largest, algorithm="radix_select")
            ev, ei = csk.topk(a, k, largest=largest, algorithm="numpy_select")
            assert np.array_equal(to_numpy(i), ei)
            assert_same_bits(v, ev)


def test_auto_partition_with_several_kth_and_a_host_array():
    a = np.random.default_rng(1).standard_normal(1 << 17).astype(np.float32)
    assert_partitioned(csk.argpartition(a, [5, 100, 70000]), a, [5, 100, 70000])
    assert_topk(csk.topk(a, 33), a, 33)  # host array past the CPU cutoff: a GPU plugin


def test_caller_stream():
    cupy = pytest.importorskip("cupy")
    a = np.random.default_rng(2).standard_normal((8, 4096)).astype(np.float32)
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        dev = cupy.asarray(a)
        v, i = csk.topk(dev, 10)
    s.synchronize()
    assert_topk((v, i), a, 10)
    v, i = csk.topk(dev, 10, stream=s)
    s.synchronize()
    assert_topk((v, i), a, 10)


@pytest.mark.parametrize("axis", [-1, 0])
def test_torch_current_and_given_streams(axis):
    """A torch tensor's topk orders on torch's current stream (and on
    stream= when given): its input is written there behind a long kernel,
    and its results read there right after the call, so a missing
    dependency or a result allocated on another stream shows as wrong data."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    old, new = (rng.standard_normal((8, 4096)).astype(np.float32) for _ in range(2))
    x = torch.from_numpy(old).cuda()
    new_dev, old_dev = torch.from_numpy(new).cuda(), torch.from_numpy(old).cuda()
    torch.cuda.synchronize()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        torch.cuda._sleep(int(30e6))  # cycles: ~20-30 ms at H100 clocks
        x.copy_(new_dev)
        v, i = csk.topk(x, 5, axis=axis)
        got = v.clone(), i.clone()
    s.synchronize()
    assert_topk((got[0].cpu().numpy(), got[1].cpu().numpy()), new, 5, axis)
    with torch.cuda.stream(s):
        torch.cuda._sleep(int(30e6))
        x.copy_(old_dev)
    v, i = csk.topk(x, 5, axis=axis, stream=s)  # the default stream current (k <= 8: any axis)
    with torch.cuda.stream(s):
        got = v.clone(), i.clone()
    s.synchronize()
    assert_topk((got[0].cpu().numpy(), got[1].cpu().numpy()), old, 5, axis)


def test_explain_says_which_and_why():
    cupy = pytest.importorskip("cupy")
    d = csk.explain(cupy.zeros(1 << 20, np.float32), kind="topk", k=1000)
    assert d.name == "radix_select" and "priority" in str(d)
    d = csk.explain(cupy.zeros((1 << 10, 1024), np.float32), kind="topk", k=8)
    assert d.name == "warp_select"
    d = csk.explain(cupy.zeros((1 << 10, 1024), np.float32), kind="topk", k=100)
    assert d.name == "radix_select"
    d = csk.explain(cupy.zeros(1024, np.float32), kind="topk", k=100)
    assert d.name == "sort_select"


# ------------------------------------------------------ the bar shapes
BAR = [((1, 1 << 23), 1000), ((4096, 32000), 50), ((1 << 16, 1024), 8), ((1, 1 << 24), 1 << 20)]


@pytest.mark.slow
@pytest.mark.parametrize("shape, k", BAR)
def test_bar_shapes_match_the_cpu_plugin(shape, k):
    """The CPU plugin is checked against the per-key reference
    (test_select_cpu.py); here it references the big shapes, on a slice of
    rows where there are many."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(9)
    a = rng.standard_normal(shape).astype(np.float32)
    a[0, rng.integers(0, shape[1], 10)] = a[0, 5]  # ties
    t = torch.from_numpy(a).cuda()
    v, i = csk.topk(t, k)
    rows = slice(0, 64)
    ev, ei = csk.topk(a[rows], k, algorithm="numpy_select")
    assert np.array_equal(i[rows].cpu().numpy(), ei)
    assert_same_bits(v[rows].cpu().numpy(), ev)
    tv, _ = torch.topk(t, k)
    assert torch.equal(v, tv)


@pytest.mark.slow
def test_bar_argpartition_2_24():
    cupy = pytest.importorskip("cupy")
    a = np.random.default_rng(4).standard_normal(1 << 24).astype(np.float32)
    kth = len(a) // 2
    idx = to_numpy(csk.argpartition(cupy.asarray(a), kth))
    assert np.array_equal(np.sort(idx), np.arange(len(a)))
    p = a[idx]
    assert p[kth] == np.partition(a, kth)[kth]
    assert (p[:kth] <= p[kth]).all() and (p[kth + 1:] >= p[kth]).all()


def test_bfloat16_torch_tensors():
    torch = pytest.importorskip("torch")
    a = make_keys("special", as_dtype("bfloat16"), 3 * 500, np.random.default_rng(8)).reshape(3, 500)
    t = to_device(a)
    assert is_bf16(a.dtype)
    for name in sorted(SELECT):
        v, i = csk.topk(t, 20, largest=False, algorithm=name)  # every plugin serves 500 keys, k=20
        assert v.dtype == torch.bfloat16
        assert_topk((v, i), a, 20, -1, False)


@pytest.mark.parametrize("library", ["cupy", "torch"])
def test_prepared_topk_and_partition_repeat_on_fresh_data(library):
    """A plain repeat call of one shape is a prepared call (its launch plan
    replayed on the new arrays): each call's results are its own keys'
    (fresh data, poisoned results), calls of other k, largest, dtype or
    shape in between are theirs, and a non-contiguous array of the shape
    takes the general path."""
    from cudasortkit import api

    xp = pytest.importorskip(library)
    rng = np.random.default_rng(8)

    def dev(h):
        return xp.asarray(h) if library == "cupy" else xp.from_numpy(h).cuda()

    shapes = [((3, 40000), 50), ((1, 1 << 17), 1000), ((64, 1024), 8)]
    for _ in range(3):
        for shape, k in shapes:
            for largest in (True, False):
                h = rng.standard_normal(shape).astype(np.float32)
                assert_topk(csk.topk(dev(h), k, largest=largest), h, k, -1, largest)
                h16 = h.astype(np.float16)
                assert_topk(csk.topk(dev(h16), k, largest=largest), h16, k, -1, largest)
        h = rng.standard_normal((2, 70001)).astype(np.float32)
        assert_partitioned(csk.argpartition(dev(h), 35000), h, 35000)
        assert_partition_values(csk.partition(dev(h), 35000), h, 35000)
    a = dev(rng.standard_normal((3, 40000)).astype(np.float32))
    assert api.selections.prepared.find(a, ("topk", 50, -1, True, True, "auto")) is not None
    wide = dev(rng.standard_normal((3, 80000)).astype(np.float32))
    strided = wide[:, ::2]
    assert api.selections.prepared.find(strided, ("topk", 50, -1, True, True, "auto")) is None
    got = csk.topk(strided, 50)
    assert_topk(got, to_numpy(strided), 50)


def test_prepared_topk_orders_on_a_busy_torch_stream():
    """Prepared calls (the shape's second call on) order on the caller's
    current stream: the input is written behind a long kernel there and the
    results are read there right after."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    x = torch.empty((2, 50000), device="cuda")
    s = torch.cuda.Stream()
    for _ in range(3):
        h = rng.standard_normal((2, 50000)).astype(np.float32)
        src = torch.from_numpy(h).cuda()
        torch.cuda.synchronize()
        with torch.cuda.stream(s):
            torch.cuda._sleep(int(30e6))
            x.copy_(src)
            v, i = csk.topk(x, 20)
            got = v.clone(), i.clone()
        s.synchronize()
        assert_topk((got[0].cpu().numpy(), got[1].cpu().numpy()), h, 20)
