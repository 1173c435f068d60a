"""Counting sort on the GPU against NumPy: every dtype it declares, edge sizes,
distributions (shifted into a range it serves for 32/64-bit keys), all values
equal, one value missing, dtype limits, ranges just under / over RANGE_LIMIT,
the caller's key_range (kept and broken), stable argsort and pairs exactly as
NumPy's stable order, descending, misaligned inputs. Results are poisoned
first (conftest). The generic conformance suite exempts this plugin (it sorts
wide-range int32/int64 by name, which counting declines): these tests stand
in for it, and check the decline is a clear ValueError.

Quick tier (-m gpu): every dtype x operation (sort, stable argsort, pairs
with 4- and 8-byte values) both ways on the "special" distribution, edge
sizes of two dtypes, each histogram layout once, the declines and key_range
rules. Slow tier (-m "gpu and slow"): the other distributions, dtypes and
layouts, 2^24 and 2^25 keys."""
import numpy as np
import pytest

import cudasortkit as csk
from cudasortkit.dispatch.request import make_request
from cudasortkit.dispatch import select
from cudasortkit.gpu.arrays import Operand
from cudasortkit.plugins.counting import RANGE_LIMIT
from helpers import (DISTRIBUTIONS, EDGE_SIZES, assert_keys_equal, assert_valid_argsort,
                     make_keys, reference_argsort, reference_sort)

pytestmark = pytest.mark.gpu
NAME = "counting"
DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
slow = pytest.mark.slow


def quick(values, *keep):
    """`values` as parameters, all but those in `keep` marked slow."""
    return [v if v in keep else pytest.param(v, marks=slow) for v in values]


@pytest.fixture(scope="module")
def cupy():
    return pytest.importorskip("cupy")


@pytest.fixture(autouse=True)
def _no_lazy_tuning(monkeypatch):
    """Every shape here is new: first-run tuning would dominate the run time,
    and auto must follow the documented fallback order."""
    monkeypatch.setenv("CUDASORTKIT_AUTOTUNE", "0")


def random_int(lo, hi, rng):
    """A random Python int in [lo, hi] (any size, unlike Generator.integers)."""
    return lo + int(rng.integers(0, 1 << 62)) * (hi - lo + 1) // (1 << 62)


def narrow(dist, dtype, n, rng, width=None):
    """Keys of `dist` that counting serves: 8/16-bit as generated, wider
    dtypes folded into a window of `width` values somewhere in the dtype."""
    dt = np.dtype(dtype)
    if dt.itemsize <= 2:
        return make_keys(dist, dt, n, rng)
    info = np.iinfo(dt)
    width = int(width or rng.integers(1, 5000))
    lo = random_int(int(info.min), int(info.max) - width + 1, rng)
    raw = make_keys(dist, "uint32", n, rng).astype(np.uint64) % np.uint64(width)
    return (raw.astype(object) + lo).astype(dt) if dt.itemsize == 8 else (raw.astype(np.int64) + lo).astype(dt)


def check_all(cp, a, descending=False, key_range=None, what=""):
    """sort, stable argsort and pairs of `a` by counting, against NumPy."""
    dev = cp.asarray(a)
    got = csk.sort(dev, algorithm=NAME, descending=descending, key_range=key_range)
    assert_keys_equal(got, reference_sort(a, descending), f"sort {what} n={a.size}")
    order = csk.argsort(dev, algorithm=NAME, descending=descending, stable=True, key_range=key_range)
    assert_valid_argsort(order, a, descending, stable=True)
    values = np.arange(a.size, dtype=np.float64) * 0.5 - 3.0
    k, v = csk.sort_by_key(dev, cp.asarray(values), algorithm=NAME, descending=descending,
                           key_range=key_range)
    expected = reference_argsort(a, descending)
    assert_keys_equal(k, a[expected], f"pairs keys {what}")
    assert np.array_equal(v.get(), values[expected]), f"pairs values {what}"
    assert np.array_equal(dev.get().view(np.uint8), a.view(np.uint8)), "input was modified"


@pytest.mark.parametrize("dtype", quick(DTYPES, "int8", "uint64"))
def test_edge_sizes(cupy, dtype, rng):
    for n in EDGE_SIZES + [10**6 + 3]:
        check_all(cupy, narrow("uniform", dtype, n, rng), what=dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dist", quick(DISTRIBUTIONS, "special"))
def test_distributions(cupy, dtype, dist, rng):
    for descending in (False, True):
        check_all(cupy, narrow(dist, dtype, 100_003, rng), descending, what=f"{dtype} {dist}")


@pytest.mark.parametrize("dtype", DTYPES)
def test_pairs_four_byte_values(cupy, dtype, rng):
    """sort_by_key with 4-byte values, both ways (check_all's are 8 bytes)."""
    a = narrow("special", dtype, 65_537, rng)
    values = rng.integers(-2**31, 2**31, a.size).astype(np.int32)
    for descending in (False, True):
        k, v = csk.sort_by_key(cupy.asarray(a), cupy.asarray(values), algorithm=NAME,
                               descending=descending)
        order = reference_argsort(a, descending)
        assert_keys_equal(k, a[order], f"pairs keys {dtype} descending={descending}")
        assert np.array_equal(v.get(), values[order]), f"pairs values {dtype} descending={descending}"


@pytest.mark.parametrize("dtype", ["int32", "uint32", "int64", "uint64"])
def test_wide_range_is_declined_clearly(cupy, dtype, rng):
    a = make_keys("uniform", dtype, 10_000, rng)
    with pytest.raises(ValueError, match=f"algorithm '{NAME}' cannot .*keys span"):
        csk.sort(cupy.asarray(a), algorithm=NAME)
    with pytest.raises(ValueError, match="keys span"):
        csk.argsort(cupy.asarray(a), algorithm=NAME, stable=True)
    request = make_request("sort", Operand(cupy.asarray(a)), None, False, False)
    assert NAME not in select.usable(request)


@pytest.mark.parametrize("dtype", quick(["int32", "int64", "uint32"], "int32"))
def test_range_just_under_and_over_the_limit(cupy, dtype, rng):
    n = 300_007
    info = np.iinfo(dtype)
    lo = random_int(int(info.min), int(info.max) - RANGE_LIMIT, rng)
    a = (rng.integers(0, RANGE_LIMIT, n).astype(object) + lo).astype(dtype)
    a[:2] = [lo, lo + RANGE_LIMIT - 1]  # exactly RANGE_LIMIT values
    rng.shuffle(a)
    check_all(cupy, a, descending=bool(rng.integers(2)), what="at the limit")
    a[int(np.flatnonzero(a != lo)[0])] = lo + RANGE_LIMIT  # one more value: over the limit
    with pytest.raises(ValueError, match="keys span"):
        csk.sort(cupy.asarray(a), algorithm=NAME)
    assert_keys_equal(csk.sort(cupy.asarray(a)), np.sort(a), "auto over the limit")


@pytest.mark.parametrize("dtype", quick(DTYPES, "int8", "int64"))
def test_all_equal_and_dtype_limits(cupy, dtype, rng):
    info = np.iinfo(dtype)
    for value in (info.min, info.max, 0):
        check_all(cupy, np.full(70_001, value, dtype), what=f"all {value}")
    if np.dtype(dtype).itemsize <= 2:  # both ends of the dtype at once: the widest range
        a = rng.choice(np.array([info.min, info.max], dtype), 70_001)
        for descending in (False, True):
            check_all(cupy, a, descending, what="min and max")


@pytest.mark.parametrize("dtype", quick(["uint8", "int8", "uint16"], "uint8"))
def test_one_value_missing(cupy, dtype, rng):
    info = np.iinfo(dtype)
    every = np.arange(int(info.min), int(info.max) + 1).astype(dtype)
    for missing in (info.min, info.max, every[len(every) // 2]):
        a = rng.choice(every[every != missing], 200_003)
        check_all(cupy, a, descending=bool(rng.integers(2)), what=f"{missing} missing")


def test_int16_limits_and_bool(cupy, rng):
    a = rng.choice(np.array([-32768, 32767, -1, 0], np.int16), 100_000)
    check_all(cupy, a, what="int16 limits")
    check_all(cupy, a, descending=True, what="int16 limits")
    b = rng.integers(0, 2, 100_003).astype(bool)
    got = csk.sort(cupy.asarray(b), algorithm=NAME)
    assert got.dtype == bool and np.array_equal(got.get(), np.sort(b))
    order = csk.argsort(cupy.asarray(b), algorithm=NAME, descending=True, stable=True)
    assert np.array_equal(order.get(), reference_argsort(b.astype(np.uint8), True))


def test_key_range_given_kept_and_broken(cupy, rng):
    a = rng.integers(-500, 500, 1_000_003).astype(np.int64)
    check_all(cupy, a, key_range=(-500, 499), what="tight key_range")
    check_all(cupy, a, key_range=(-700, 600), what="loose key_range")
    u8 = rng.integers(10, 20, 50_000).astype(np.uint8)
    check_all(cupy, u8, key_range=(10, 19), what="uint8 key_range")
    for op in (lambda d: csk.sort(d, algorithm=NAME, key_range=(-400, 499)),
               lambda d: csk.argsort(d, algorithm=NAME, stable=True, key_range=(-500, 400))):
        with pytest.raises(ValueError, match="outside key_range"):
            op(cupy.asarray(a))
    with pytest.raises(ValueError, match="outside key_range"):
        csk.sort(cupy.asarray(u8), algorithm=NAME, key_range=(12, 19))


@pytest.mark.parametrize("width", quick([2, 256, 257, 65_536, 65_537, 500_000], 257, 65_537, 500_000))
def test_bin_counts_across_layouts(cupy, width, rng):
    """Each histogram layout (per-lane copies, one slice, several slices,
    global atomics) and 1, 2 and 3 scatter passes. Quick: 257 (copies, 2
    passes), 65,537 (two slices, 3 passes), 500,000 (global atomics)."""
    a = narrow("uniform", "int32", 2_000_003, rng, width=width)
    check_all(cupy, a, descending=False, what=f"width {width}")
    check_all(cupy, a[: 300_001].copy(), descending=True, what=f"width {width} desc")


def test_misaligned_inputs_and_host_arrays(cupy, rng):
    for dtype, skip in (("uint8", 1), ("uint8", 7), ("int16", 3), ("int32", 1), ("int64", 1)):
        a = narrow("uniform", dtype, 100_003, rng)
        dev = cupy.asarray(a)[skip:]
        got = csk.sort(dev, algorithm=NAME)
        assert_keys_equal(got, np.sort(a[skip:]), f"{dtype} offset {skip}")
        order = csk.argsort(dev, algorithm=NAME, stable=True)
        assert_valid_argsort(order, a[skip:], stable=True)
    h = narrow("few_unique", "int32", 100_003, rng)
    assert_keys_equal(csk.sort(h, algorithm=NAME), np.sort(h), "host int32")
    order = csk.argsort(h, algorithm=NAME, stable=True, descending=True)
    assert_valid_argsort(order, h, True, stable=True)


def test_out_and_in_place(cupy, rng):
    a = narrow("uniform", "uint16", 100_003, rng)
    dev = cupy.asarray(a)
    out = cupy.empty_like(dev)
    assert csk.sort(dev, algorithm=NAME, out=out) is out
    assert_keys_equal(out, np.sort(a))
    csk.sort(dev, algorithm=NAME, out=dev, descending=True)
    assert_keys_equal(dev, reference_sort(a, True))


@slow
def test_packed_counters_wrap(cupy, rng):
    """16-bit shared counters: one block sees far more than 2^16 equal keys,
    in both halves of one counter word (bins 4242 and 4243) and alone."""
    n = 1 << 25
    a = np.where(rng.random(n) < 0.4, 4243, 4242).astype(np.uint16)
    a[rng.integers(0, n, 1000)] = rng.integers(0, 1 << 16, 1000)
    for descending in (False, True):
        got = csk.sort(cupy.asarray(a), algorithm=NAME, descending=descending).get()
        assert np.array_equal(np.bincount(got, minlength=1 << 16), np.bincount(a, minlength=1 << 16))
        expected = np.sort(a)[::-1] if descending else np.sort(a)
        assert_keys_equal(got, expected, "two adjacent bins")
    b = np.full(n, 65535, np.uint16)
    assert_keys_equal(csk.sort(cupy.asarray(b), algorithm=NAME), b, "one odd bin")


@slow
def test_large(cupy, rng):
    a = rng.integers(0, 1 << 16, 1 << 24).astype(np.uint16)
    assert_valid_argsort(csk.argsort(cupy.asarray(a), algorithm=NAME, stable=True), a, stable=True)
    b = rng.integers(0, 1000, 1 << 24).astype(np.int32)
    assert_keys_equal(csk.sort(cupy.asarray(b), algorithm=NAME), np.sort(b), "int32 [0, 1000)")
    c = rng.integers(0, 256, (1 << 24) + 5).astype(np.uint8)
    assert_keys_equal(csk.sort(cupy.asarray(c), algorithm=NAME, descending=True),
                      np.sort(c)[::-1], "uint8 descending")


def test_auto_picks_counting_when_it_applies(cupy, rng):
    def chosen(a):
        request = make_request("sort", Operand(a), None, False, False)
        return select.DefaultPolicy().choose(request, select.usable(request)).plugin.name

    a = rng.integers(0, 256, 1 << 23).astype(np.uint8)
    assert chosen(cupy.asarray(a)) == NAME
    assert_keys_equal(csk.sort(cupy.asarray(a)), np.sort(a), "auto uint8")
    # 32-bit keys of 1,000 values: counting from WIDE_KEYS_FROM keys, onesweep below
    wide = cupy.random.randint(0, 1000, (1 << 25) + 1, dtype=cupy.int32)
    assert chosen(wide) == NAME
    assert chosen(wide[: 1 << 24]) == "onesweep"
    assert chosen(cupy.random.randint(0, 1 << 16, (1 << 25) + 1, dtype=cupy.int32)) == "onesweep"
    f = rng.random(1000).astype(np.float32)
    assert_keys_equal(csk.sort(cupy.asarray(f)), np.sort(f), "auto float32")


@pytest.mark.parametrize("dtype", quick(DTYPES, "int8", "uint16", "int32", "uint64"))
def test_device_min_max_probe(cupy, dtype, rng):
    from cudasortkit.build.corekernels import key_minmax
    from cudasortkit.gpu.device import get_device

    state = get_device()
    info = np.iinfo(dtype)
    for n in (1, 2, 33, 1000, 1_000_003):
        a = make_keys("uniform", dtype, n, rng)
        if n > 2:
            a[int(rng.integers(n))] = info.min if rng.integers(2) else info.max
        dev = cupy.asarray(a)
        assert key_minmax(state, int(dev.data.ptr), n, dtype) == (int(a.min()), int(a.max()))
