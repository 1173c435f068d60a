"""Sorts along an axis and ragged segmented sorts on the GPU against NumPy:
every batched plugin (rows, block_radix, segmented_radix) and auto, sort / stable
argsort / sort_by_key, both orders, special values (NaN, inf, -0.0,
integer limits), empty rows and segments, host and device offsets. Result
buffers are poisoned (conftest)."""
import numpy as np
import pytest

import cudasortkit as csk
from helpers import as_dtype, assert_keys_equal, make_keys, reference_argsort, to_device, to_numpy

pytestmark = pytest.mark.gpu
slow = pytest.mark.slow
BATCHED = ["rows", "block_radix", "segmented_radix", "auto"]
#: Plugins that hold one segment in a block: (longest segment, widest key).
BLOCK_LIMITS = {"rows": (4096, 8), "block_radix": (4096, 4)}


def serves(algorithm: str, dtype: str, row_len: int) -> bool:
    """False where a plugin asked for by name declines the request."""
    if algorithm == "block_radix" and np.dtype(as_dtype(dtype)).itemsize > 4:
        return False
    return algorithm != "rows" or row_len <= BLOCK_LIMITS["rows"][0]


def reference_rows(a: np.ndarray, axis, descending: bool) -> np.ndarray:
    """Stable argsort of every row of `a` along `axis` (NumPy 2.5's order)."""
    if axis is None:
        return reference_argsort(a.reshape(-1), descending)
    m = np.moveaxis(a, axis, -1)
    flat = m.reshape(int(np.prod(m.shape[:-1])), m.shape[-1])
    out = np.empty(flat.shape, np.int64)
    for r in range(flat.shape[0]):
        out[r] = reference_argsort(flat[r], descending)
    return np.moveaxis(out.reshape(m.shape), -1, axis)


def check_nd(a: np.ndarray, axis, algorithm, descending, ops=("sort", "argsort", "pairs")):
    dev = to_device(a)
    order = reference_rows(a, axis, descending)
    src = a.reshape(-1) if axis is None else a
    ax = -1 if axis is None else axis
    expected = np.take_along_axis(src, order, ax)
    what = f"{algorithm} shape={a.shape} axis={axis} {a.dtype} desc={descending}"
    if "sort" in ops:
        got = csk.sort(dev, axis=axis, descending=descending, algorithm=algorithm)
        assert type(got) is type(dev) and tuple(got.shape) == expected.shape, what
        assert_keys_equal(to_numpy(got).reshape(-1), expected.reshape(-1), what)
    if "argsort" in ops:
        got = to_numpy(csk.argsort(dev, axis=axis, descending=descending, stable=True,
                                   algorithm=algorithm))
        assert got.dtype == np.int64 and np.array_equal(got, order), what + " argsort"
    if "pairs" in ops:
        values = np.arange(a.size, dtype=np.float64).reshape(a.shape)
        k, v = csk.sort_by_key(dev, to_device(values), axis=axis, descending=descending,
                               algorithm=algorithm)
        assert_keys_equal(to_numpy(k).reshape(-1), expected.reshape(-1), what + " pairs keys")
        vs = values.reshape(-1) if axis is None else values
        assert np.array_equal(to_numpy(v), np.take_along_axis(vs, order, ax)), what + " pairs values"
    assert np.array_equal(to_numpy(dev).view(np.uint8), a.view(np.uint8)), "input was modified"


QUICK = [((1000, 37), -1), ((5, 300, 7), 1), ((4097, 3), 0), ((3, 0), -1), ((0, 5), 1),
         ((700, 2), -1), ((2, 4096), 1), ((6, 9), None)]


@pytest.mark.parametrize("algorithm", BATCHED)
@pytest.mark.parametrize("dtype", ["float32", "int64", "uint8", "float16"])
def test_axes_quick(algorithm, dtype, rng):
    for shape, axis in QUICK:
        a = make_keys("special", dtype, int(np.prod(shape)), rng).reshape(shape)
        rows = a.shape[axis] if axis is not None else a.size
        if algorithm in BLOCK_LIMITS and (rows > 4096 or axis is None):
            continue  # one row goes to the 1-D plugins; a block holds <= 4096 keys
        if not serves(algorithm, dtype, rows):
            continue
        for descending in (False, True):
            check_nd(a, axis, algorithm if a.ndim > 1 and axis is not None else "auto", descending)


@slow
@pytest.mark.parametrize("algorithm", BATCHED)
@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "uint16", "uint32", "uint64",
                                   "bfloat16", "float64"])
@pytest.mark.parametrize("dist", ["uniform", "few_unique", "special"])
def test_axes_slow(algorithm, dtype, dist, rng):
    for shape, axis in [((2049, 33), -1), ((129, 4096), -1), ((31, 5, 17), 0), ((1 << 14, 2), -1),
                        ((3, 70001), -1), ((4095, 1), 0)]:
        if (algorithm in BLOCK_LIMITS and shape[axis] > 4096) or not serves(algorithm, dtype, 0):
            continue
        a = make_keys(dist, dtype, int(np.prod(shape)), rng).reshape(shape)
        check_nd(a, axis, algorithm, descending=dist == "special")


def test_out_in_place_and_torch(rng):
    torch = pytest.importorskip("torch")
    a = make_keys("uniform", "float32", 300 * 40, rng).reshape(300, 40)
    t = torch.from_numpy(a.copy()).cuda()
    got = csk.sort(t, axis=0)
    assert isinstance(got, torch.Tensor) and got.shape == t.shape
    assert np.array_equal(got.cpu().numpy(), np.sort(a, axis=0))
    assert np.array_equal(csk.argsort(t, axis=0, stable=True).cpu().numpy(),
                          np.argsort(a, axis=0, kind="stable"))
    csk.sort(t, axis=1, out=t)  # in place
    assert np.array_equal(t.cpu().numpy(), np.sort(a, axis=1))
    cupy = pytest.importorskip("cupy")
    c = cupy.asarray(a)
    out = cupy.full(a.shape, 7, a.dtype)
    assert csk.sort(c, axis=0, out=out) is out
    assert np.array_equal(out.get(), np.sort(a, axis=0))
    with pytest.raises(ValueError, match="shape"):
        csk.sort(c, axis=0, out=cupy.empty((40, 300), a.dtype))


# ------------------------------------------------------------------ ragged
def ragged_offsets(lengths) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)


def reference_segments(keys, offsets, descending):
    order = np.empty(len(keys), np.int64)
    for s in range(len(offsets) - 1):
        lo, hi = offsets[s], offsets[s + 1]
        order[lo:hi] = lo + reference_argsort(keys[lo:hi], descending)
    return order


def check_ragged(keys, offsets, algorithm, descending, as_device_offsets, offset_dtype):
    dev = to_device(keys)
    off = offsets.astype(offset_dtype)
    off = to_device(off) if as_device_offsets else off
    order = reference_segments(keys, offsets, descending)
    what = f"{algorithm} {len(offsets) - 1} segments {keys.dtype} desc={descending}"
    got = csk.segmented_sort(dev, off, descending=descending, algorithm=algorithm)
    assert_keys_equal(got, keys[order], what)
    got = to_numpy(csk.segmented_argsort(dev, off, descending=descending, stable=True,
                                         algorithm=algorithm))
    assert np.array_equal(got, order), what + " argsort"
    values = to_device(np.arange(len(keys), dtype=np.int32))
    k, v = csk.segmented_sort(dev, off, values, descending=descending, algorithm=algorithm)
    assert_keys_equal(k, keys[order], what + " pairs")
    assert np.array_equal(to_numpy(v), order.astype(np.int32)), what + " pairs values"


@pytest.mark.parametrize("algorithm", BATCHED)
@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_ragged_quick(algorithm, dtype, rng):
    if not serves(algorithm, dtype, 0):
        pytest.skip(f"{algorithm} does not sort {dtype}")
    lengths = rng.integers(0, 40, 3000)
    lengths[::7] = 0
    # Around block_radix's limits: half its tile (2048: several to a
    # block), one block (4096), longer (one global sort).
    lengths[[40, 41, 300, 302, 900]] = [2048, 2049, 4096, 2047, 1]
    if algorithm != "rows":
        lengths[[5, 301, 2000]] = [70_000, 4097, 9_000]
    offsets = ragged_offsets(lengths)
    keys = make_keys("special", dtype, int(offsets[-1]), rng)
    for i, (descending, on_device, odt) in enumerate([(False, False, np.int64), (True, True, np.int32)]):
        check_ragged(keys, offsets, algorithm, descending, on_device, odt)


@slow
@pytest.mark.parametrize("algorithm", BATCHED)
@pytest.mark.parametrize("dtype", ["uint8", "int32", "float64", "bfloat16"])
def test_ragged_slow(algorithm, dtype, rng):
    if not serves(algorithm, dtype, 0):
        pytest.skip(f"{algorithm} does not sort {dtype}")
    lengths = np.concatenate([rng.integers(0, 41, 20000), rng.integers(1000, 4097, 20)])
    rng.shuffle(lengths)
    offsets = ragged_offsets(lengths)
    keys = make_keys("few_unique", dtype, int(offsets[-1]), rng)
    for descending in (False, True):
        check_ragged(keys, offsets, algorithm, descending, True, np.int64)


@pytest.mark.parametrize("algorithm", ["block_radix", "auto"])
def test_ragged_many_long(algorithm, rng):
    """Over 64 segments longer than a block (7 segment bits above the key),
    among short and empty ones; offsets checked on the device as int32 and
    int64, and on the host."""
    lengths = rng.integers(0, 30, 5000)
    lengths[rng.choice(5000, 70, replace=False)] = rng.integers(4097, 6000, 70)
    lengths[[0, 1, -1]] = [0, 8192, 4096]
    offsets = ragged_offsets(lengths)
    keys = make_keys("uniform", "float32", int(offsets[-1]), rng)
    for descending, on_device, odt in [(False, True, np.int32), (True, True, np.int64),
                                       (False, False, np.int32)]:
        check_ragged(keys, offsets, algorithm, descending, on_device, odt)


def test_bad_offsets_write_nothing(rng):
    keys = to_device(make_keys("uniform", "float32", 100, rng))
    cupy = pytest.importorskip("cupy")
    for bad, match in [([0, 50, 40, 100], "decrease"), ([0, 50, 101], "number of keys"),
                       ([1, 50, 100], r"\[0\] must be 0"), ([], "at least one"),
                       (np.zeros((2, 2), np.int64), "1-D"), (np.array([0, 100.0]), "int32 or int64")]:
        with pytest.raises((ValueError, TypeError), match=match):
            csk.segmented_sort(keys, bad)
        if len(np.asarray(bad).shape) == 1 and np.asarray(bad).dtype.kind == "i" and len(bad):
            for odt in (np.int64, np.int32):
                with pytest.raises(ValueError, match=match):
                    csk.segmented_argsort(keys, cupy.asarray(np.asarray(bad, odt)))
    assert as_dtype("float32") == keys.dtype
