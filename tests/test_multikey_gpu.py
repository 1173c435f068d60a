"""Multi-key order on the GPU (CuPy and torch keys): lexsort through both
device plugins, sort_by_key with a tuple of keys, unique rows; every result
against NumPy."""
from __future__ import annotations

import numpy as np
import pytest

import cudasortkit as csk
from cudasortkit.calls.unique_rows import unique_rows
from helpers import as_dtype, comparable, make_keys
from test_multikey_cpu import reference_order

pytestmark = pytest.mark.gpu
cp = pytest.importorskip("cupy")

DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64"]  # bfloat16: torch (CuPy has no bfloat16)


def keys_of(dtype, n, seed, dist="special"):
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.integers(0, 2, n).astype(bool)
    k = make_keys(dist, as_dtype(dtype), n, rng)
    return k % 5 if k.dtype.kind in "iu" else k


def to_cupy(a):
    return cp.asarray(a)


@pytest.mark.parametrize("algorithm", ["packed", "passes", "auto"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_lexsort_device(dtype, algorithm):
    a, b = keys_of(dtype, 5000, 1), keys_of("int16", 5000, 2)
    want = np.lexsort((comparable(a), b))
    got = csk.lexsort((to_cupy(a), cp.asarray(b)), algorithm=algorithm)
    assert isinstance(got, cp.ndarray) and got.dtype == np.int64
    np.testing.assert_array_equal(got.get(), want)


@pytest.mark.parametrize("algorithm", ["packed", "passes"])
def test_lexsort_device_128_bits_noncontiguous_empty(algorithm):
    k = [keys_of("float64", 6000, 3)[::2], keys_of("int32", 3000, 4), keys_of("bool", 3000, 5)]
    got = csk.lexsort([cp.asarray(k[0]), cp.asarray(k[1]), cp.asarray(k[2])], algorithm=algorithm)
    np.testing.assert_array_equal(got.get(), np.lexsort(k))
    strided = cp.asarray(keys_of("float32", 4000, 6))[::2]
    np.testing.assert_array_equal(csk.lexsort([strided, cp.asarray(k[1][:2000])]).get(),
                                  np.lexsort([strided.get(), k[1][:2000]]))
    empty = csk.lexsort([cp.zeros(0, cp.int32), cp.zeros(0, cp.float32)], algorithm=algorithm)
    assert empty.shape == (0,)


@pytest.mark.parametrize("desc", [False, True, (True, False)])
def test_sort_by_key_tuple_device(desc):
    k1, k2 = keys_of("float32", 5000, 7), keys_of("int8", 5000, 8)
    v = np.arange(5000, dtype=np.float64)
    (s1, s2), sv = csk.sort_by_key((cp.asarray(k1), cp.asarray(k2)), cp.asarray(v), descending=desc)
    flags = (desc, desc) if isinstance(desc, bool) else desc
    want = reference_order([k1, k2], flags)
    np.testing.assert_array_equal(sv.get(), v[want])
    np.testing.assert_array_equal(s1.get(), k1[want])
    np.testing.assert_array_equal(s2.get(), k2[want])


@pytest.mark.parametrize("algorithm", ["auto", "packed", "passes"])
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "bfloat16", "int32"])
def test_sort_by_key_tuple_of_one_key_returns_the_plain_calls_bits(dtype, algorithm):
    """sort_by_key((k,), v) returns the keys bit for bit as sort_by_key(k, v)
    does on the device (-0.0 as +0.0, NaNs as one quiet NaN), and so does a
    tuple of two keys; values are the stable order's."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(12)
    n = 5000
    pool = np.array([0.0, -0.0, np.nan, -np.nan, 1.5, -2.0], np.float32)
    host = pool[rng.integers(0, len(pool), n)] if dtype != "int32" else rng.integers(-3, 3, n)
    k = torch.as_tensor(host, device="cuda").to(getattr(torch, dtype))
    v = torch.arange(n, device="cuda", dtype=torch.int64)
    (one,), one_values = csk.sort_by_key((k,), v, algorithm=algorithm)
    plain, plain_values = csk.sort_by_key(k, v)
    as_bits = (lambda t: t.view(torch.int16 if t.element_size() == 2 else
                                 torch.int32 if t.element_size() == 4 else torch.int64).cpu().numpy())
    np.testing.assert_array_equal(as_bits(one), as_bits(plain))
    np.testing.assert_array_equal(one_values.cpu().numpy(), plain_values.cpu().numpy())
    (first, second), values = csk.sort_by_key((k, k), v, algorithm=algorithm)
    np.testing.assert_array_equal(as_bits(first), as_bits(plain))
    np.testing.assert_array_equal(as_bits(second), as_bits(plain))
    np.testing.assert_array_equal(values.cpu().numpy(), plain_values.cpu().numpy())


@pytest.mark.parametrize("algorithm", ["packed", "passes"])
def test_lexsort_torch_bfloat16(algorithm):
    torch = pytest.importorskip("torch")
    a, b = keys_of("float32", 3000, 9), keys_of("int64", 3000, 10)
    ta = torch.as_tensor(a, device="cuda").to(torch.bfloat16)
    exact = ta.float().cpu().numpy()  # bfloat16 keys, widened exactly
    got = csk.lexsort((ta, torch.as_tensor(b, device="cuda")), algorithm=algorithm)
    assert isinstance(got, torch.Tensor) and got.is_cuda
    np.testing.assert_array_equal(got.cpu().numpy(), np.lexsort((exact, b)))


def test_bool_keys_any_nonzero_byte_is_true():
    """packed: a bool byte other than 0/1 is True (the core's sorts, and so
    passes, order bool keys as their bytes)."""
    raw = np.array([2, 0, 1, 255, 0, 1], np.uint8)
    k = cp.asarray(raw).view(cp.bool_)
    order = np.lexsort((np.arange(6), raw != 0))
    np.testing.assert_array_equal(csk.lexsort((cp.arange(6), k), algorithm="packed").get(), order)


FLAGS = dict(return_index=True, return_inverse=True, return_counts=True)


@pytest.mark.parametrize("dtype", ["uint8", "int32", "float32", "float64", "bool", "float16"])
@pytest.mark.parametrize("shape", [(5000, 10), (3000, 3, 2), (4000,), (0, 4)])
def test_unique_rows_device(dtype, shape):
    n = int(np.prod(shape))
    a = keys_of(dtype, n, 11).reshape(shape)
    if a.dtype.kind in "iu":
        a = a % 2
    got = unique_rows(cp.asarray(a), **FLAGS)
    want = np.unique(a, axis=0, **FLAGS)
    for g, w in zip(got, want):
        assert isinstance(g, cp.ndarray)
        np.testing.assert_array_equal(g.get(), w)
    bare = unique_rows(cp.asarray(a))
    np.testing.assert_array_equal(bare.get(), want[0])


@pytest.mark.slow
def test_unique_rows_2_20_x_10_uint8():
    a = np.random.default_rng(12).integers(0, 4, (1 << 20, 10)).astype(np.uint8)
    got = unique_rows(cp.asarray(a), **FLAGS)
    for g, w in zip(got, np.unique(a, axis=0, **FLAGS)):
        np.testing.assert_array_equal(g.get(), w)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["int32", "float32"])
@pytest.mark.parametrize("keys", [2, 3])
def test_lexsort_2_24(dtype, keys):
    ks = [keys_of(dtype, 1 << 24, 20 + i, "uniform") for i in range(keys)]
    np.testing.assert_array_equal(csk.lexsort([cp.asarray(k) for k in ks]).get(), np.lexsort(ks))


def test_unique_rows_torch_and_stream():
    torch = pytest.importorskip("torch")
    a = keys_of("float32", 3000 * 4, 13).reshape(3000, 4)
    a[::7] = a[1]  # repeated rows
    t = torch.as_tensor(a, device="cuda")
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        got = unique_rows(t, stream=s.cuda_stream, **FLAGS)
    s.synchronize()
    for g, w in zip(got, np.unique(a, axis=0, **FLAGS)):
        assert isinstance(g, torch.Tensor) and g.is_cuda
        np.testing.assert_array_equal(g.cpu().numpy(), w)


@pytest.mark.parametrize("algorithm", ["packed", "passes"])
@pytest.mark.parametrize("shape,axis", [((7, 300), -1), ((7, 300), 0), ((4, 5, 129), 1),
                                        ((4, 5, 129), -1), ((3, 0), 1), ((1, 1), 0)])
def test_lexsort_of_n_d_device_keys_along_an_axis(shape, axis, algorithm):
    """N-D CuPy keys: numpy.lexsort(keys, axis) row by row (NaN, -0.0, ties)."""
    n = int(np.prod(shape))
    a = keys_of("float32", n, 3).reshape(shape)
    b = keys_of("int16", n, 4).reshape(shape)
    want = np.lexsort((comparable(a), b), axis=axis)
    got = csk.lexsort((cp.asarray(a), cp.asarray(b)), axis=axis, algorithm=algorithm)
    assert isinstance(got, cp.ndarray) and got.dtype == np.int64 and got.shape == shape
    np.testing.assert_array_equal(got.get(), want)


def test_packed_takes_two_int64_keys_and_n_d_keys_count_the_row_number():
    """packed orders two int64 keys (128 bits); N-D keys add their row
    number (int32 here), so two int64 N-D keys are 160 bits: packed by name
    refuses them naming each key, auto orders them (passes)."""
    a, b = keys_of("int64", 6000, 21), keys_of("int64", 6000, 22)
    got = csk.lexsort((cp.asarray(a), cp.asarray(b)), algorithm="packed")
    np.testing.assert_array_equal(got.get(), np.lexsort((a, b)))
    a2, b2 = a.reshape(6, 1000), b.reshape(6, 1000)
    with pytest.raises(ValueError, match=r"the row number int32 \(32\), keys\[1\] int64 \(64\), "
                                         r"keys\[0\] int64 \(64\), 160 bits together"):
        csk.lexsort((cp.asarray(a2), cp.asarray(b2)), algorithm="packed")
    np.testing.assert_array_equal(csk.lexsort((cp.asarray(a2), cp.asarray(b2))).get(),
                                  np.lexsort((a2, b2)))


def test_lexsort_of_n_d_torch_keys_in_a_callers_stream():
    torch = pytest.importorskip("torch")
    a = keys_of("int32", 6 * 1000, 5).reshape(6, 1000)
    b = keys_of("float64", 6 * 1000, 6).reshape(6, 1000)
    want = np.lexsort((a, comparable(b)), axis=0)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        ta, tb = torch.as_tensor(a, device="cuda"), torch.as_tensor(b, device="cuda")
        torch.cuda._sleep(2_000_000)  # a busy stream: ordering bugs read unfinished keys
        got = csk.lexsort((ta, tb), axis=0, stream=s)
    s.synchronize()
    assert got.device.type == "cuda" and got.dtype == torch.int64
    np.testing.assert_array_equal(got.cpu().numpy(), want)


@pytest.mark.parametrize("library", ["cupy", "torch"])
def test_lexsort_of_0d_device_keys_as_numpy(library):
    """A 1-D device array's elements are 0-d keys (one element each): 0, a
    0-d int64 array of its library, as numpy.lexsort returns 0; a 0-d
    device array is no sequence of keys (TypeError)."""
    xp = pytest.importorskip(library)
    on = {"device": "cuda"} if library == "torch" else {}
    for keys in (xp.asarray([3, 1, 2], **on), [xp.asarray(2.0, **on), xp.asarray(1.0, **on)]):
        for axis in (-1, 0):
            got = csk.lexsort(keys, axis=axis)
            assert type(got) is type(xp.asarray(0, **on)) and tuple(got.shape) == ()
            assert int(got) == 0 and str(got.dtype).endswith("int64")
        with pytest.raises(np.exceptions.AxisError):
            csk.lexsort(keys, axis=1)
    with pytest.raises(TypeError, match="need sequence of keys with len > 0"):
        csk.lexsort(xp.asarray(3.0, **on))


def test_lexsort_of_n_d_device_keys_refuses_other_kinds():
    with pytest.raises(ValueError, match="same shape"):
        csk.lexsort((cp.zeros((2, 3)), cp.zeros((3, 2))))


def test_pycuda_and_bare_interface_arrays_for_unique_rows_and_n_d_lexsort():
    """pycuda GPUArrays and bare __cuda_array_interface__ objects: unique
    rows and N-D lexsort answer as NumPy, as pycuda GPUArrays (the kind
    cudasortkit returns for them)."""
    from pycuda import gpuarray

    from cudasortkit.gpu.device import get_device

    get_device()  # pycuda's arrays need a current context

    class Bare:
        def __init__(self, arr):
            self.__cuda_array_interface__ = arr.__cuda_array_interface__
            self._keep = arr

    rows = np.random.default_rng(7).integers(0, 3, (5000, 4)).astype(np.uint8)
    want = np.unique(rows, axis=0, return_inverse=True, return_counts=True)
    for a in (gpuarray.to_gpu(rows), Bare(gpuarray.to_gpu(rows))):
        got = csk.unique(a, axis=0, return_inverse=True, return_counts=True)
        assert all(isinstance(g, gpuarray.GPUArray) for g in got)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g.get(), w)
    a = keys_of("float32", 3 * 700, 8).reshape(3, 700)
    b = keys_of("int32", 3 * 700, 9).reshape(3, 700)
    want = np.lexsort((a, b), axis=1)
    for wrap in (lambda x: x, Bare):
        got = csk.lexsort((wrap(gpuarray.to_gpu(a)), wrap(gpuarray.to_gpu(b))), axis=1)
        assert isinstance(got, gpuarray.GPUArray)
        np.testing.assert_array_equal(got.get(), want)
