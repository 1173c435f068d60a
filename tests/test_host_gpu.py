"""Host (NumPy) arrays through the host pipeline: in core (large arrays,
pinned staging) and out of core (a small device memory cap forces it), for
sort, argsort and sort_by_key, against NumPy; the input is never changed,
and a failure or an interrupt leaves it intact and gives the pinned slots back."""
import numpy as np
import pytest

import cudasortkit as csk
from cudasortkit.host import pipeline as hostpipe
from cudasortkit.host import outofcore
from cudasortkit.host import transfer
from cudasortkit.host.pinned import pool
from helpers import (assert_keys_equal, assert_valid_argsort, make_keys, reference_argsort,
                     reference_sort)

pytestmark = pytest.mark.gpu

#: A cap this small makes a few million keys go out of core.
SMALL_CAP = "8MiB"


@pytest.fixture
def capped():
    csk.set_device_memory_limit(SMALL_CAP)
    yield
    csk.set_device_memory_limit(None)


def _keys(dist, dtype, n, seed=0):
    return make_keys(dist, dtype, n, np.random.default_rng(seed))


def _check_pool():
    assert pool.in_use_bytes == 0, "pinned slots were not given back"


def _spy_out_of_core(monkeypatch):
    calls = []
    real = outofcore.sort

    def spy(*args, **kw):
        calls.append(1)
        return real(*args, **kw)

    monkeypatch.setattr(outofcore, "sort", spy)
    return calls


@pytest.mark.parametrize("dtype, dist, n", [
    ("uint32", "uniform", 3_000_017), ("int64", "special", 2_000_003),
    ("float32", "special", 2_500_001), ("float64", "few_unique", 1_500_007),
    ("int16", "uniform", 2_000_000), ("float16", "special", 2_000_003),
])
@pytest.mark.parametrize("descending", [False, pytest.param(True, marks=pytest.mark.slow)])
@pytest.mark.parametrize("mode", ["auto", pytest.param("staged", marks=pytest.mark.slow)])
def test_sort_out_of_core(capped, monkeypatch, dtype, dist, n, descending, mode):
    monkeypatch.setenv("CUDASORTKIT_HOST_TRANSFER", mode)
    calls = _spy_out_of_core(monkeypatch)
    keys = _keys(dist, dtype, n)
    before = keys.copy()
    got = csk.sort(keys, descending=descending)
    assert calls, "the cap did not force the out-of-core path"
    assert_keys_equal(got, reference_sort(keys, descending))
    assert np.array_equal(keys.view(f"u{keys.itemsize}"), before.view(f"u{keys.itemsize}"))
    _check_pool()


@pytest.mark.parametrize("dtype, dist", [("float64", "special"), ("uint32", "few_unique"),
                                         ("int32", "all_equal"), ("float32", "uniform")])
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("mode", ["auto", pytest.param("registered", marks=pytest.mark.slow)])
def test_stable_argsort_out_of_core(capped, monkeypatch, dtype, dist, descending, mode):
    # registered: the keys gathered each pass go through one pinned scratch array
    monkeypatch.setenv("CUDASORTKIT_HOST_TRANSFER", mode)
    calls = _spy_out_of_core(monkeypatch)
    keys = _keys(dist, dtype, 1_200_011, seed=3)
    before = keys.copy()
    order = csk.argsort(keys, stable=True, descending=descending)
    assert calls
    assert_valid_argsort(order, keys, descending, stable=True)
    assert np.array_equal(keys, before, equal_nan=True)
    _check_pool()


def test_unstable_argsort_out_of_core(capped):
    keys = _keys("uniform", "float32", 1_000_003, seed=4)
    assert_valid_argsort(csk.argsort(keys), keys)


@pytest.mark.parametrize("kdtype, vdtype", [("float64", "int32"), ("uint32", "float64"),
                                            ("int64", "int64")])
@pytest.mark.parametrize("descending", [False, True])
def test_sort_by_key_out_of_core(capped, monkeypatch, kdtype, vdtype, descending):
    calls = _spy_out_of_core(monkeypatch)
    keys = _keys("special" if kdtype.startswith("f") else "few_unique", kdtype, 1_100_009, seed=5)
    values = np.arange(len(keys)).astype(vdtype)
    kb, vb = keys.copy(), values.copy()
    k, v = csk.sort_by_key(keys, values, descending=descending)
    assert calls
    idx = reference_argsort(keys, descending)
    assert_keys_equal(k, keys[idx])
    assert np.array_equal(v, values[idx])
    assert np.array_equal(keys, kb, equal_nan=True) and np.array_equal(values, vb)
    _check_pool()


def _all_in_the_last_bucket(sample, n):
    est = np.zeros(len(sample), np.int64)
    est[-1] = n
    return est


@pytest.mark.parametrize("skew", ["last_bucket", "spill_full"])
def test_placed_buckets_with_wrong_estimates(capped, monkeypatch, skew):
    """Estimates far off (the last bucket's region is the whole result):
    buckets still land in order, each saving what it would overwrite unread,
    or, past the spill limit, the sort starts again counted. (Placing by
    estimates is the staged path's; registered sorts count first.)"""
    monkeypatch.setenv("CUDASORTKIT_HOST_TRANSFER", "staged")
    counted = []
    real_counted = outofcore._sort_counted
    monkeypatch.setattr(outofcore, "_sort_counted",
                        lambda *a, **k: counted.append(1) or real_counted(*a, **k))
    monkeypatch.setattr(outofcore, "estimates", _all_in_the_last_bucket)
    monkeypatch.setattr(outofcore, "spill_limit", (lambda n, per_key: 2 * n * per_key)
                        if skew == "last_bucket" else (lambda n, per_key: 1 << 16))
    keys = _keys("uniform", "float64", 1_500_007, seed=14)
    before = keys.copy()
    assert_keys_equal(csk.sort(keys), np.sort(keys))
    assert np.array_equal(csk.argsort(keys, stable=True), np.argsort(keys, kind="stable"))
    assert len(counted) == (2 if skew == "spill_full" else 0)
    assert np.array_equal(keys, before)
    _check_pool()


@pytest.mark.parametrize("mode", transfer.MODES)
def test_in_place_out_of_core(capped, monkeypatch, mode):
    monkeypatch.setenv("CUDASORTKIT_HOST_TRANSFER", mode)
    calls = _spy_out_of_core(monkeypatch)
    copies = []
    real_copy = outofcore.parallel_copy
    monkeypatch.setattr(outofcore, "parallel_copy", lambda *a: copies.append(1) or real_copy(*a))
    keys = _keys("uniform", "uint64", 1_000_033, seed=6)
    expected = np.sort(keys)
    result = csk.sort(keys, out=keys)
    assert calls and result is keys
    assert np.array_equal(keys, expected)
    assert not copies, "out=a went through a second full copy"
    _check_pool()


@pytest.mark.parametrize("dist", ["uniform", "reverse"])
def test_in_place_sort_by_key_out_of_core(capped, monkeypatch, dist):
    """out=keys, values_out=values: sorted in place, stable."""
    calls = _spy_out_of_core(monkeypatch)
    keys = _keys(dist, "float32", 1_500_007, seed=15)
    values = np.arange(len(keys), dtype=np.int64)
    idx = np.argsort(keys, kind="stable")
    expected = keys[idx]
    k, v = csk.sort_by_key(keys, values, out=keys, values_out=values)
    assert calls and k is keys and v is values
    assert_keys_equal(keys, expected)
    assert np.array_equal(values, idx)
    _check_pool()


def test_out_and_values_out_out_of_core(capped):
    keys = _keys("uniform", "float32", 1_000_003, seed=7)
    values = np.arange(len(keys), dtype=np.int32)
    out, vout = np.full_like(keys, 7), np.full_like(values, -1)
    k, v = csk.sort_by_key(keys, values, out=out, values_out=vout)
    assert k is out and v is vout
    idx = np.argsort(keys, kind="stable")
    assert_keys_equal(out, keys[idx])
    assert np.array_equal(vout, values[idx])


@pytest.mark.parametrize("kind", ["sort", "argsort", "pairs"])
@pytest.mark.parametrize("mode", transfer.MODES)
def test_in_core_pipeline(monkeypatch, kind, mode):
    """No cap: large host arrays go through the pipeline in one device sort."""
    monkeypatch.setenv("CUDASORTKIT_HOST_TRANSFER", mode)
    monkeypatch.setattr(hostpipe, "MIN_BYTES", 1 << 20)
    calls = []
    real = hostpipe.sort_in_core
    monkeypatch.setattr(hostpipe, "sort_in_core", lambda *a, **k: calls.append(1) or real(*a, **k))
    keys = _keys("special", "float32", 3 * (1 << 20) + 5, seed=8)
    before = keys.copy()
    if kind == "sort":
        assert_keys_equal(csk.sort(keys, descending=True), reference_sort(keys, True))
    elif kind == "argsort":
        assert_valid_argsort(csk.argsort(keys, stable=True), keys, stable=True)
    else:
        values = np.arange(len(keys), dtype=np.float64)
        k, v = csk.sort_by_key(keys, values)
        idx = np.argsort(keys, kind="stable")
        assert_keys_equal(k, keys[idx])
        assert np.array_equal(v, values[idx])
    assert calls
    assert np.array_equal(keys, before, equal_nan=True)
    _check_pool()


def test_in_core_in_place(monkeypatch):
    monkeypatch.setattr(hostpipe, "MIN_BYTES", 1 << 20)
    keys = _keys("uniform", "int32", 1 << 21, seed=9)
    expected = np.sort(keys)
    assert csk.sort(keys, out=keys) is keys
    assert np.array_equal(keys, expected)


def test_torch_cpu_tensor_comes_back_as_one(capped):
    torch = pytest.importorskip("torch")
    keys = _keys("uniform", "float32", 1_000_003, seed=10)
    got = csk.sort(torch.from_numpy(keys))
    assert isinstance(got, torch.Tensor) and got.device.type == "cpu"
    assert_keys_equal(got.numpy(), np.sort(keys))


class Boom(RuntimeError):
    pass


@pytest.mark.parametrize("error", [Boom, KeyboardInterrupt])
@pytest.mark.parametrize("where", ["host copy", "plugin run"])
@pytest.mark.parametrize("in_place", [False, True])
def test_a_failure_leaves_the_input_intact_and_releases_pinned_memory(capped, monkeypatch, error,
                                                                      where, in_place):
    """A fresh result: the input intact. out=a (sorted in place out of
    core): a holds a permutation of its keys, each once."""
    keys = _keys("uniform", "float64", 1_000_003, seed=11)
    out = keys if in_place else None
    before = keys.copy()
    seen = []
    if where == "host copy":  # staged: registered transfers make no host copies
        monkeypatch.setenv("CUDASORTKIT_HOST_TRANSFER", "staged")
        real = transfer._host_copy

        def copy(dst, src):
            seen.append(1)
            if len(seen) == 10:
                raise error("injected")
            real(dst, src)

        monkeypatch.setattr(transfer, "_host_copy", copy)
    else:
        real = outofcore.run_job

        def run_job(*a, **k):
            seen.append(1)
            if len(seen) == 3:
                raise error("injected")
            return real(*a, **k)

        monkeypatch.setattr(outofcore, "run_job", run_job)
    with pytest.raises(error, match="injected"):
        csk.sort(keys, out=out)
    if in_place:
        assert np.array_equal(np.sort(keys), np.sort(before))
    else:
        assert np.array_equal(keys, before)
    _check_pool()
    monkeypatch.undo()
    csk.set_device_memory_limit(SMALL_CAP)
    assert np.array_equal(csk.sort(keys), np.sort(keys))  # and the next sort works


def test_progress_bar_or_a_clear_error(capped, capsys):
    keys = _keys("uniform", "uint32", 1_000_003, seed=12)
    import importlib.util

    if importlib.util.find_spec("tqdm") is None:
        with pytest.raises(ImportError, match="tqdm"):
            csk.sort(keys, progress=True)
        return
    assert np.array_equal(csk.sort(keys, progress=True), np.sort(keys))
    assert "sort 1,000,003 uint32" in capsys.readouterr().err
    with pytest.raises(TypeError, match="progress"):
        csk.sort(keys, progress="yes")


@pytest.mark.slow
@pytest.mark.parametrize("dtype, n, cap", [("uint32", 1 << 27, "256MiB"),
                                           ("float64", (1 << 26) + 3, "128MiB")])
def test_large_out_of_core(dtype, n, cap):
    csk.set_device_memory_limit(cap)
    try:
        keys = _keys("special" if dtype.startswith("f") else "uniform", dtype, n, seed=13)
        assert_keys_equal(csk.sort(keys), np.sort(keys))
        order = csk.argsort(keys, stable=True)
        assert np.array_equal(order, np.argsort(keys, kind="stable"))
    finally:
        csk.set_device_memory_limit(None)
