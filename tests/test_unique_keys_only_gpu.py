"""csk.unique of device arrays without the order (plain, and with
return_counts alone): a keys-only sort, then kernels/unique.cu's tile
counts, scan and write (float keys) or its one look-back pass (integer and
bool keys), against NumPy. Values equal bit for bit to the
first occurrence (the input's first zero and first NaN where a sort may
have canonicalised them), counts exactly NumPy's, at sizes around the tile
(2048 keys), primes and 2^k +- 1, every key dtype and distribution, NaNs
and zeros early, late and absent, equal_nan both ways, repeated calls of a
shape (a prepared sort) on new data, CuPy and PyTorch. Every flag
combination once more through the tiles. Result buffers are poisoned
(conftest)."""
import numpy as np
import pytest

import cudasortkit as csk
from cudasortkit.dtypes import KEY_DTYPES
from helpers import DISTRIBUTIONS, is_bf16, make_keys, to_device, to_numpy

pytestmark = pytest.mark.gpu
slow = pytest.mark.slow
#: Around the tile (2048 keys), several tiles, primes, 2^k +- 1.
SIZES = [1, 2, 3, 31, 2047, 2048, 2049, 4095, 4097, 7919, 65537, 104729, (1 << 20) - 1]
FLAG_SETS = [(False, False, False), (False, False, True), (True, False, False),
             (False, True, False), (True, True, True), (False, True, True)]
#: Calls of one call's sizes within which a prepared unique's graphs must
#: have run: a pool's addresses for them come back in a cycle of a few calls.
REPEATS = 16


def _bits(x: np.ndarray) -> np.ndarray:
    return x.view(f"u{x.itemsize}") if x.dtype != np.bool_ else x


def _expected(a: np.ndarray, flags, equal_nan: bool):
    """np.unique of the flat keys with `flags`; values as the first
    occurrences' own bits (bfloat16 through float32)."""
    flat = a.reshape(-1)
    ref = flat.astype(np.float32) if is_bf16(a.dtype) else flat
    _, index, inverse, counts = np.unique(ref, True, True, True, equal_nan=equal_nan)
    out = [flat[index]]
    out += [x for x, f in zip((index, inverse.reshape(a.shape), counts), flags) if f]
    return out


def check(a: np.ndarray, device_a, flags=(False, False, False), equal_nan=True):
    got = csk.unique(device_a, *flags, equal_nan=equal_nan)
    got = [to_numpy(x) for x in (got if any(flags) else (got,))]
    expected = _expected(a, flags, equal_nan)
    assert len(got) == len(expected)
    assert got[0].dtype == a.dtype and got[0].shape == expected[0].shape, "values"
    bad = np.flatnonzero(_bits(got[0]) != _bits(expected[0]))
    assert not len(bad), (f"n={a.size} flags={flags}: {len(bad)} values wrong, first at "
                          f"{bad[0]}: {got[0][bad[0]]!r}, NumPy {expected[0][bad[0]]!r}")
    for g, e in zip(got[1:], expected[1:]):
        assert g.dtype == np.int64 and g.shape == e.shape and np.array_equal(g, e), flags


def _special_floats(dtype, n, rng, where):
    """Floats whose zeros (both signs) and NaNs (other payloads too) come
    first, last, everywhere or nowhere."""
    a = make_keys("uniform", dtype, n, rng)
    a[(a == 0) | np.isnan(a.astype(np.float32))] = 1
    specials = np.array([-0.0, 0.0, np.nan, -np.nan], np.float32).astype(a.dtype)
    k = min(n, 6)
    if where == "first":
        a[:k] = specials[rng.integers(0, 4, k)]
    elif where == "last":
        a[n - k:] = specials[rng.integers(0, 4, k)]
    elif where == "everywhere":
        at = rng.integers(0, n, max(1, n // 10))
        a[at] = specials[rng.integers(0, 4, len(at))]
    if where != "nowhere" and not is_bf16(a.dtype):
        bits = a.view(f"u{a.itemsize}")
        odd = np.isnan(a) & (rng.random(n) < 0.5)
        bits[odd] |= bits.dtype.type(1)  # NaNs of another payload
    return a


@pytest.mark.parametrize("dtype", [*KEY_DTYPES, "bool"])
def test_plain_and_counts_every_dtype(dtype, rng):
    for n in SIZES:
        a = make_keys("special", dtype, n, rng) if dtype != "bool" else rng.random(n) < 0.5
        for flags in ((False, False, False), (False, False, True)):
            check(a, to_device(a), flags)


@pytest.mark.parametrize("dist", DISTRIBUTIONS)
@pytest.mark.parametrize("dtype", ["int32", "float64", "uint8", "float32"])
def test_plain_distributions(dist, dtype, rng):
    for n in (2049, 100003):
        a = make_keys(dist, dtype, n, rng)
        for flags in FLAG_SETS:
            check(a, to_device(a), flags)


@pytest.mark.parametrize("where", ["first", "last", "everywhere", "nowhere"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_zeros_and_nans_take_the_first_occurrences_bits(dtype, where, rng):
    for n in (1, 5, 2049, 70001):
        a = _special_floats(dtype, n, rng, where)
        for equal_nan in (True, False):
            for flags in ((False, False, False), (False, False, True)):
                check(a, to_device(a), flags, equal_nan)


def test_minus_zero_first_then_plus():
    cupy = pytest.importorskip("cupy")
    for dtype in (np.float32, np.float64):
        a = np.zeros(100001, dtype)
        a[5000] = -0.0  # the first zero is +0.0: kept
        assert not np.signbit(csk.unique(cupy.asarray(a)).get()[0])
        a[0] = -0.0  # now the first is -0.0
        got = csk.unique(cupy.asarray(a), return_counts=True)
        assert np.signbit(got[0].get()[0]) and got[1].get().tolist() == [100001]


def _uploader(library: str):
    """NumPy array -> a device array of `library` (cupy or torch)."""
    if library == "cupy":
        return pytest.importorskip("cupy").asarray
    torch = pytest.importorskip("torch")
    return lambda x: torch.from_numpy(x).cuda()


@pytest.mark.parametrize("library", ["cupy", "torch"])
def test_repeated_shapes_on_new_data(library, rng):
    """The keys-only sort of a repeated shape is a prepared call: each call
    on new keys is right, and so are the earlier results after it."""
    to = _uploader(library)
    results = []
    for i in range(5):
        a = rng.integers(0, 1000 * (i + 1), 1 << 16).astype(np.int32)
        for flags in ((False, False, False), (False, False, True)):
            got = csk.unique(to(a), *flags)
            results.append((a, flags, got))
    for a, flags, got in results:
        got = [to_numpy(x) for x in (got if any(flags) else (got,))]
        for g, e in zip(got, _expected(a, flags, True)):
            assert np.array_equal(g, e), flags


def test_n_d_strided_and_stream(rng):
    cupy = pytest.importorskip("cupy")
    a = rng.integers(0, 300, size=(300, 70)).astype(np.int64)
    d = cupy.asarray(a)
    for flags in FLAG_SETS:
        check(a, d, flags)
        check(a[:, ::3].copy(), d[:, ::3], flags)
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        got = csk.unique(d, return_counts=True, stream=s)
    s.synchronize()
    ev, ec = _expected(a, (False, False, True), True)
    assert np.array_equal(got[0].get(), ev) and np.array_equal(got[1].get(), ec)


@slow
@pytest.mark.parametrize("n", [1 << 24, (1 << 26) + 1])
@pytest.mark.parametrize("dtype", ["int32", "float64"])
def test_benchmark_sizes(n, dtype, rng):
    """What `bench --family` times: plain, and inverse with counts."""
    a = make_keys("uniform", dtype, n, rng)
    if dtype == "int32":
        a %= 1 << 20
    for flags in ((False, False, False), (False, True, True)):
        check(a, to_device(a), flags)


@pytest.mark.parametrize("library", ["cupy", "torch"])
@pytest.mark.parametrize("distinct", [1000, 1 << 21])
@pytest.mark.parametrize("slack", [0, None])
def test_results_made_before_u_is_known_are_cut_right(library, distinct, slack, rng, monkeypatch):
    """Between EARLY_FROM and EARLY_UP_TO keys the results are made n long
    and cut to u: a view where u is at least n/2 (or, with the default
    slack, where the view holds at most 32 MiB more), else a copy ordered
    after the kernel writing them (results are poisoned under the tests: a
    copy made before the kernel is done shows it); every flag, against
    NumPy, twice (the second a prepared sort)."""
    from cudasortkit.calls import unique as u
    from cudasortkit.gpu import arrays

    if slack is not None:  # 0: every cut below n/2 is a copy
        monkeypatch.setattr(arrays, "VIEW_SLACK_BYTES", slack)

    n = 1 << 22
    assert u.EARLY_FROM < n <= u.EARLY_UP_TO
    to = _uploader(library)
    for _ in range(2):
        a = rng.integers(0, distinct, n).astype(np.int64)
        for flags in FLAG_SETS:
            got = csk.unique(to(a), *flags)
            got = [to_numpy(x) for x in (got if any(flags) else (got,))]
            for g, e in zip(got, _expected(a, flags, True)):
                assert np.array_equal(g.reshape(-1), np.asarray(e).reshape(-1)), (distinct, flags)


@pytest.mark.parametrize("library", ["cupy", "torch"])
@pytest.mark.parametrize("dtype", ["bool", "int8", "uint8", "int32", "int64", "float32",
                                   "float64"])
@pytest.mark.parametrize("n", [2, 2049, 104729, 1 << 20])
def test_prepared_unique_repeats_on_new_data(library, dtype, n, rng, monkeypatch):
    """A unique repeated on one length of integer, bool or float keys, with
    each set of flags (and floats without equal_nan), is prepared
    (calls/unique_prepared.py) where its sort is: every call on new keys,
    few distinct (a copy of the cut results: no slack allowed) and many (a
    view), floats with zeros of both signs and NaNs, is NumPy's (values the
    first occurrences' bits); the earlier results still are after the later
    calls. The int32 and float64 calls of 2^20 keys take the prepared path.
    (Counted where it runs: a find() of our own would count as a call of the
    prepared sort, and move its next probe of the keys' range.)"""
    from cudasortkit.calls import unique_prepared
    from cudasortkit.gpu import arrays

    monkeypatch.setattr(arrays, "VIEW_SLACK_BYTES", 0)  # few distinct: copies, as above
    served = []
    run = unique_prepared.PreparedUnique.__call__
    monkeypatch.setattr(unique_prepared.PreparedUnique, "__call__",
                        lambda self, a: served.append(1) or run(self, a))
    to = _uploader(library)
    floats = dtype.startswith("float")
    cases = [(flags, True) for flags in FLAG_SETS] + ([((False, False, False), False),
                                                        ((False, True, True), False)]
                                                       if floats else [])
    for flags, equal_nan in cases:
        results = []
        served.clear()
        for i in range(4):
            a = make_keys("uniform", dtype, n, rng)
            if i % 2 and dtype != "bool":
                a = (a % 5).astype(dtype)
            if floats and n > 2:
                a[i::97], a[i + 5::101], a[i + 7::103] = np.nan, -0.0, 0.0
            got = csk.unique(to(a), *flags, equal_nan=equal_nan)
            results.append((a, [to_numpy(x) for x in (got if any(flags) else (got,))]))
        for a, got in results:
            expected = _expected(a, flags, equal_nan)
            assert len(got) == len(expected), flags
            assert np.array_equal(_bits(got[0]), _bits(expected[0])), (flags, equal_nan)
            for g, e in zip(got[1:], expected[1:]):
                assert g.dtype == np.int64 and np.array_equal(g.reshape(-1), e.reshape(-1)), flags
        if dtype in ("int32", "float64") and n == 1 << 20:
            assert served, f"2^20 {dtype} keys with {flags}, equal_nan={equal_nan} not prepared"


@pytest.mark.parametrize("library", ["cupy", "torch"])
@pytest.mark.parametrize("dtype", ["uint8", "int32", "int64", "float32", "float64"])
@pytest.mark.parametrize("n", [2049, 104729, 1 << 20])
def test_prepared_unique_graphs_on_new_keys_in_one_array(library, dtype, n, rng):
    """A prepared unique called again and again on one array whose keys
    are rewritten in place, its results dropped after each call (so the
    caller's pool hands their blocks back): its kernels after the sort run
    as graphs of those addresses (captured on a second sighting, then
    launched: launch/graphs.py) wherever it is prepared (int32 and float64
    at 2^20 keys always are), and every call is NumPy's, with each set of
    flags. A graph replaying the last call's keys or results, or
    launched before the sort it follows, fails here (the results are
    poisoned first: conftest). The addresses a pool hands out depend on the
    sizes the calls before asked for (results cut to u are copies at some
    u), and with the same sizes they repeat in a cycle of a few calls, so
    graphs are required only where the calls repeat one call's sizes: past
    the eighth call the keys are the eighth's rotated and negated, new keys
    (and results) with the same u, until graphs ran in two of those calls
    (at most REPEATS)."""
    from cudasortkit import api
    from cudasortkit.calls import unique_prepared

    to = _uploader(library)
    floats = dtype.startswith("float")
    for flags in FLAG_SETS:
        d = to(make_keys("uniform", dtype, n, rng))
        launched_before = 0
        for i in range(8 + REPEATS):
            if i < 8:
                a = make_keys("uniform", dtype, n, rng)
                if i % 3 == 1:
                    a = (a % (3 + i)).astype(dtype)
                if floats:
                    a[i::97], a[i + 5::101] = np.nan, -0.0
                base = a
            else:  # negation maps equal keys (NaNs, -0.0 and 0.0 too) to equal keys
                a = np.roll(np.negative(base) if i % 2 else base, i)
            d[...] = to(a)
            got = csk.unique(d, *flags)
            got = [to_numpy(x) for x in (got if any(flags) else (got,))]
            expected = _expected(a, flags, True)
            assert np.array_equal(_bits(got[0]), _bits(expected[0])), (flags, i)
            for g, e in zip(got[1:], expected[1:]):
                assert np.array_equal(g.reshape(-1), e.reshape(-1)), (flags, i)
            del got
            call = unique_prepared.find(api.prepared, d, flags, True)
            launches = 0 if call is None else call.graphs.launches
            if i == 7:
                launched_before = launches
            elif i > 8 and (call is None or launches >= launched_before + 2):
                break
        if dtype in ("int32", "float64") and n == 1 << 20:
            assert call is not None, f"2^20 {dtype} keys with {flags} not prepared"
        if call is not None:
            assert call.graphs.launches > 0 and call.graphs.off is None, (flags, call.graphs.off)


def test_prepared_unique_on_a_busy_stream(rng):
    """A prepared unique (plain, and with the inverse and counts) on a CuPy
    stream of its own, right after work on that stream rewrote the keys: it
    sees the new keys, and its results are ready in that stream's order."""
    cupy = pytest.importorskip("cupy")
    n = 1 << 20
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        d = cupy.asarray(rng.integers(0, 1000, n).astype(np.int32))
        for flags in ((False, False, False), (False, True, True)):
            csk.unique(d, *flags)
            csk.unique(d, *flags)  # prepared from here on
            for i in range(3):
                big = cupy.arange(1 << 26, dtype=cupy.int64)   # keeps the stream busy
                big.sum()
                d[:] = cupy.arange(n, dtype=cupy.int32) % (7 + i)   # queued after it
                got = csk.unique(d, *flags)
                values = got[0] if any(flags) else got
                assert np.array_equal(values.get(), np.arange(7 + i)), (flags, i)
                if any(flags):
                    inverse, counts = (x.get() for x in got[1:])
                    assert np.array_equal(inverse, np.arange(n) % (7 + i)), (flags, i)
                    assert counts.sum() == n and counts.size == 7 + i, (flags, i)
    s.synchronize()
