"""Multi-key order on the host: lexsort, structured order=, sort_by_key with
a tuple of keys, unique rows; the plugin kind and the API's rules (NumPy's
semantics, references from NumPy itself)."""
from __future__ import annotations

import numpy as np
import pytest

import cudasortkit as csk
from cudasortkit.calls import multikey
from cudasortkit.calls.unique_rows import compact, unique_rows
from cudasortkit.sdk import registry
from cudasortkit.sdk.multikey import MultikeyJob, key_bits
from helpers import DISTRIBUTIONS, as_dtype, comparable, dense_rank, make_keys

DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64"]
PADDED = np.dtype({"names": ["a", "b"], "formats": ["u1", "<f4"], "offsets": [0, 4],
                   "itemsize": 12})


def keys_of(dtype, dist, n, seed):
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.integers(0, 2, n).astype(bool)
    return make_keys(dist, as_dtype(dtype), n, rng)


def reference_order(keys, descending):
    """Stable order by keys (first primary), each ascending or descending in
    NumPy 2.5's order (NaNs last both ways), from dense ranks."""
    ranks = []
    for k, desc in zip(keys, descending):
        r = dense_rank(np.asarray(k)).astype(np.int64)
        if desc:
            c = comparable(np.asarray(k))
            nan = np.isnan(c) if c.dtype.kind == "f" else np.zeros(len(c), bool)
            r = np.where(nan, np.iinfo(np.int64).max, -r)
        ranks.append(r)
    return np.lexsort(ranks[::-1])


# ------------------------------------------------------------------ lexsort
@pytest.mark.parametrize("dtype", DTYPES + ["bfloat16"])
@pytest.mark.parametrize("dist", DISTRIBUTIONS)
def test_lexsort_matches_numpy(dtype, dist):
    a = keys_of(dtype, dist, 300, 1)
    b = keys_of("int8", "few_unique", 300, 2)
    got = csk.lexsort((a, b))
    want = np.lexsort((comparable(a), b))
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, want)


def test_lexsort_nan_and_signed_zero():
    a = np.array([np.nan, 0.0, -0.0, 1.0, np.nan, -0.0, -np.inf], np.float32)
    b = np.zeros(7, np.int32)
    np.testing.assert_array_equal(csk.lexsort((a, b)), np.lexsort((a, b)))
    np.testing.assert_array_equal(csk.lexsort((b, a)), np.lexsort((b, a)))


def test_lexsort_nd_axis_noncontiguous_2d_and_empty():
    rng = np.random.default_rng(3)
    k = rng.integers(0, 3, (3, 4, 10))
    for axis in (-1, 0, 1):
        np.testing.assert_array_equal(csk.lexsort(k, axis=axis), np.lexsort(k, axis=axis))
    strided = [rng.integers(0, 4, 40)[::2], rng.random(40)[::-2]]
    np.testing.assert_array_equal(csk.lexsort(strided), np.lexsort(strided))
    empty = (np.array([], np.int32), np.array([], np.float32))
    assert csk.lexsort(empty).shape == (0,)
    np.testing.assert_array_equal(csk.lexsort(k[:, 0, :]), np.lexsort(k[:, 0, :]))  # 2-D: rows are keys


def test_lexsort_bad_input():
    with pytest.raises(TypeError, match="len > 0"):
        csk.lexsort(())
    with pytest.raises(ValueError, match="same shape"):
        csk.lexsort([np.arange(3), np.arange(4)])
    with pytest.raises(ValueError, match="no working multi-key plugin named 'nope'"):
        csk.lexsort([np.arange(3)], algorithm="nope")
    with pytest.raises(ValueError, match="cannot order"):
        csk.lexsort([np.arange(3)], algorithm="packed")  # host keys: a GPU plugin refuses


def test_lexsort_of_0d_arrays_as_numpy():
    """A 0-d array is no sequence of keys (NumPy's TypeError); 0-d keys in
    a sequence, or the elements of a 1-D array, are one element each: 0."""
    for keys in (np.array(3.0), np.float64(2.0)):
        with pytest.raises(TypeError, match="need sequence of keys with len > 0"):
            np.lexsort(keys)
        with pytest.raises(TypeError, match="need sequence of keys with len > 0"):
            csk.lexsort(keys)
    for keys in ([np.array(3)], np.array([3, 1, 2]), [np.array(2.0), np.array(1.0)]):
        for axis in (-1, 0):
            got = csk.lexsort(keys, axis=axis)
            assert got == np.lexsort(keys, axis=axis) == 0 and np.asarray(got).dtype == np.int64
    with pytest.raises(np.exceptions.AxisError):
        csk.lexsort(np.array([3, 1]), axis=1)


def test_lexsort_of_no_sequence_says_what_to_pass():
    for keys in (5, None, 2.5):
        with pytest.raises(TypeError, match="need sequence of keys with len > 0 in lexsort: "
                                            "pass a sequence of key arrays"):
            csk.lexsort(keys)


def test_lexsort_and_sort_by_key_of_cpu_tensors():
    torch = pytest.importorskip("torch")
    a, b = keys_of("float32", "special", 200, 40), keys_of("int16", "few_unique", 200, 41)
    ta, tb = torch.from_numpy(a).to(torch.bfloat16), torch.from_numpy(b)
    got = csk.lexsort((ta, tb))
    assert isinstance(got, torch.Tensor) and got.dtype == torch.int64
    np.testing.assert_array_equal(got.numpy(), np.lexsort((ta.float().numpy(), b)))
    (kb, ka), v = csk.sort_by_key((tb, torch.from_numpy(a)), torch.arange(200.0))
    want = np.lexsort((a, b))
    assert isinstance(v, torch.Tensor) and isinstance(kb, torch.Tensor)
    np.testing.assert_array_equal(v.numpy(), want.astype(np.float32))
    np.testing.assert_array_equal(kb.numpy(), b[want])


# ------------------------------------------------------- structured order=
def padded(n=200, seed=4):
    rng = np.random.default_rng(seed)
    s = np.zeros(n, PADDED)
    s["a"] = rng.integers(0, 4, n)
    s["b"] = rng.choice(np.array([np.nan, -0.0, 0.0, 1.5, -2.0], np.float32), n)
    s.view(np.uint8).reshape(n, 12)[:, 1:4] = rng.integers(0, 256, (n, 3))  # padding garbage
    return s


@pytest.mark.parametrize("order", [None, "a", "b", ["b", "a"], ["a"]])
def test_structured_order_matches_numpy(order):
    s = padded()
    np.testing.assert_array_equal(csk.argsort(s, order=order),
                                  np.argsort(s, order=order, kind="stable"))
    got, want = csk.sort(s, order=order), np.sort(s, order=order, kind="stable")
    assert got.dtype == s.dtype
    for name in s.dtype.names:  # padding bytes are no part of the result
        np.testing.assert_array_equal(got[name], want[name])


def test_a_structured_array_never_takes_the_tiny_host_shortcut():
    """api.sort hands tiny plain host arrays straight to NumPy once auto gave
    their shape to it; a structured array of the same length still sorts by
    its fields, padding left out."""
    plain = np.random.default_rng(5).random(200).astype(np.float32)
    for _ in range(3):
        np.testing.assert_array_equal(csk.sort(plain), np.sort(plain))
    s = padded(200)
    got, want = csk.sort(s), np.sort(s, kind="stable")
    for name in s.dtype.names:
        np.testing.assert_array_equal(got[name], want[name])


def test_structured_nd_axis_and_none():
    s = padded(60).reshape(3, 20)
    for axis in (-1, 0, None):
        np.testing.assert_array_equal(csk.argsort(s, order="b", axis=axis),
                                      np.argsort(s, order="b", axis=axis, kind="stable"))
        got = csk.sort(s, order=["b"], axis=axis)
        want = np.sort(s, order=["b"], axis=axis, kind="stable")
        for name in s.dtype.names:
            np.testing.assert_array_equal(got[name], want[name])


@pytest.mark.parametrize("fmt", ["U5", "S5", "M8[s]", "m8[s]", "c8"])
def test_fields_of_strings_and_other_numpy_dtypes_sort_as_numpy(fmt):
    """order= takes any field NumPy orders (strings, bytes, datetimes,
    complex), as multikey.md says."""
    from pathlib import Path

    s = np.zeros(6, [("a", fmt), ("b", "i4")])
    s["a"] = np.array([3, 1, 2, 1, 3, 0]).astype(fmt) if fmt[0] not in "US" else \
        ["c", "a", "b", "a", "c", ""]
    s["b"] = [5, 4, 3, 2, 1, 0]
    for order in ("a", ["b", "a"], None):
        np.testing.assert_array_equal(csk.argsort(s, order=order),
                                      np.argsort(s, order=order, kind="stable"))
        np.testing.assert_array_equal(csk.sort(s, order=order), np.sort(s, order=order,
                                                                        kind="stable"))
    text = " ".join(Path(__file__).resolve().parents[1].joinpath("docs", "multikey.md")
                    .read_text().split())
    assert "Fields must be numbers or bool" not in text
    assert "A field may be of any dtype NumPy sorts" in text


def test_structured_order_errors_as_numpy():
    s = padded(5)
    with pytest.raises(ValueError, match="Cannot specify order"):
        csk.argsort(np.arange(3), order="a")
    with pytest.raises(ValueError, match="unknown field name: c"):
        csk.sort(s, order="c")
    with pytest.raises(ValueError, match="duplicate field name: b"):
        csk.argsort(s, order=["b", "b"])
    with pytest.raises(ValueError, match="without out="):
        csk.sort(s, order="a", out=s.copy())
    with pytest.raises(TypeError, match="descending"):
        csk.argsort(s, descending="yes")
    nested = np.zeros(3, [("a", "i4"), ("b", "f4", (2,))])
    with pytest.raises(TypeError, match="not a scalar key"):
        csk.argsort(nested)


# ------------------------------------------------- multi-key sort_by_key
@pytest.mark.parametrize("desc", [False, True, (True, False), (False, True)])
@pytest.mark.parametrize("dtype", ["float32", "int16", "bool", "float64"])
def test_sort_by_key_tuple(desc, dtype):
    k1 = keys_of(dtype, "special", 400, 5)
    k2 = keys_of("float32", "special", 400, 6)
    v = np.arange(400, dtype=np.int64)
    flags = (desc, desc) if isinstance(desc, bool) else desc
    (s1, s2), sv = csk.sort_by_key((k1, k2), v, descending=desc)
    want = reference_order([k1, k2], flags)
    np.testing.assert_array_equal(sv, want)
    np.testing.assert_array_equal(s1, k1[want])
    np.testing.assert_array_equal(s2.view(np.uint32), k2[want].view(np.uint32))


def test_sort_by_key_tuple_rules():
    k = np.arange(4)
    with pytest.raises(ValueError, match="differ in length"):
        csk.sort_by_key((k, k), np.arange(5.0))
    with pytest.raises(ValueError, match="sequence of 2 bools"):
        csk.sort_by_key((k, k), np.arange(4.0), descending=(True,))
    with pytest.raises(ValueError, match="no out="):
        csk.sort_by_key((k, k), np.arange(4.0), out=k)
    with pytest.raises(ValueError, match="same shape"):
        csk.sort_by_key((k, np.arange(5)), np.arange(4.0))
    with pytest.raises(TypeError, match="values"):
        csk.sort_by_key((k, k), np.array(["x"] * 4))


# ------------------------------------------------------------- plugin kind
class _DeviceKey:
    on_device = True

    def __init__(self, dtype):
        self.dtype = np.dtype(dtype)


def test_multikey_kind_registered_and_auto_choice():
    found = registry.plugins("cudasortkit.multikey")
    assert {"numpy_lexsort", "packed", "passes"} <= set(found)
    host = MultikeyJob([np.arange(3)], (False,), 3)
    assert multikey.choose(host).name == "numpy_lexsort"
    fits = MultikeyJob([_DeviceKey("int64"), _DeviceKey("float32"), _DeviceKey("int16"),
                        _DeviceKey("bool")], (False,) * 4, 3)
    assert fits.bits == 64 + 32 + 16 + 1 and multikey.choose(fits).name == "packed"
    wide = MultikeyJob([_DeviceKey("float64")] * 3, (False,) * 3, 3)
    assert wide.bits == 192 and multikey.choose(wide).name == "passes"
    assert key_bits(np.bool_) == 1 and key_bits(np.int8) == 8


def test_packed_takes_128_bits_and_says_what_counts_beyond():
    """packed takes device keys of up to 128 bits together (two int64
    keys); refusing more, the message names every key's dtype and width
    (an N-D lexsort's row number among them), the limit and what to use."""
    two = MultikeyJob([_DeviceKey("int64"), _DeviceKey("int64")], (False, False), 3)
    assert two.bits == 128 and multikey.choose(two, "packed").name == "packed"
    row = _DeviceKey("int32")
    row.what = "the row number"
    wider = MultikeyJob([row, _DeviceKey("int64"), _DeviceKey("int64")], (False,) * 3, 3)
    with pytest.raises(ValueError) as refused:
        multikey.choose(wider, "packed")
    message = str(refused.value)
    for part in ("160 bits", "the row number int32 (32)", "int64 (64)", "<= 128 bits",
                 "passes"):
        assert part in message, message


# -------------------------------------------------------------- unique rows
def _assert_unique_equal(got, want):
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)


FLAGS = [dict(), dict(return_index=True), dict(return_inverse=True, return_counts=True),
         dict(return_index=True, return_inverse=True, return_counts=True)]


@pytest.mark.parametrize("flags", FLAGS)
def test_unique_rows_host_is_numpy(flags):
    rng = np.random.default_rng(7)
    a = rng.integers(0, 3, (500, 3)).astype(np.uint8)
    _assert_unique_equal(unique_rows(a, **flags), np.unique(a, axis=0, **flags))


@pytest.mark.parametrize("dtype", [d for d in DTYPES if d != "float16"])
@pytest.mark.parametrize("shape", [(300, 3), (200, 2, 2), (300, 1)])
def test_compact_matches_numpy(dtype, shape):
    """The device path's host half (run starts and compaction of the rows in
    their multi-key order) against numpy.unique(axis=0) with every flag."""
    n = int(np.prod(shape))
    a = keys_of(dtype, "special", n, 8)
    a = (a % 3 if a.dtype.kind in "iu" else a).reshape(shape)
    rows = a.reshape(shape[0], -1)
    order = np.lexsort(comparable(rows).T[::-1])
    got = compact(rows, order, shape, True, True, True)
    want = np.unique(a, axis=0, return_index=True, return_inverse=True, return_counts=True)
    np.testing.assert_array_equal(comparable(got[0]), want[0])
    for g, w in zip(got[1:], want[1:]):
        assert g.dtype == np.int64
        np.testing.assert_array_equal(g, w)


def test_unique_rows_nan_rows_stay_apart_as_numpy():
    a = np.array([[1, np.nan], [0, 1], [1, np.nan], [-0.0, 1], [np.nan, 0], [np.nan, 0]])
    for equal_nan in (True, False):
        flags = dict(return_index=True, return_inverse=True, return_counts=True)
        want = np.unique(a, axis=0, equal_nan=equal_nan, **flags)
        _assert_unique_equal(unique_rows(a, equal_nan=equal_nan, **flags), want)
        order = np.lexsort(a.T[::-1])
        for g, w in zip(compact(a, order, a.shape, True, True, True), want):
            np.testing.assert_array_equal(g, w)


# -------------------------------------------------------------------- bench
def test_bench_family_flag_and_table():
    from cudasortkit.cli import bench, bench_family

    assert bench.build_parser().parse_args(["--family"]).family
    assert bench_family.CASES[:2] == [bench_family.lexsort_rows, bench_family.unique_rows_rows]
    table = bench_family.format_rows([{"case": "lexsort", "ok": True, "csk_ms": 2.0,
                                       "cupy_ms": 5.0}, {"case": "wrong", "ok": False}])
    assert "2.50" in table and "False" in table


# ------------------------------------ the device plugins' logic, emulated
def _ordered(k: np.ndarray, desc: bool) -> np.ndarray:
    """keys.cuh's csk_encode in NumPy: ordered unsigned words (NaNs all ones
    and not flipped when descending, -0.0 as +0.0)."""
    if k.dtype == np.bool_:
        return (k != 0).astype(np.uint64) ^ np.uint64(desc)
    bits = 8 * k.dtype.itemsize
    ones = np.uint64((1 << bits) - 1)
    u = k.view(f"u{k.dtype.itemsize}").astype(np.uint64)
    sign = np.uint64(1 << (bits - 1))
    if k.dtype.kind == "i":
        u = u ^ sign
    elif k.dtype.kind in "fV":
        c = comparable(k)
        u = np.where(c == 0, np.uint64(0), u)
        u = np.where(u & sign != 0, ~u & ones, u | sign)
        nan = np.isnan(c)
        u = np.where(nan, ones, u)
        return np.where(nan, u, u ^ ones) if desc else u
    return u ^ ones if desc else u


class _Key:
    on_device = True

    def __init__(self, array, memory):
        self.array, self.dtype = array, array.dtype
        from cudasortkit.dtypes import key_dtype
        self.key_dtype = key_dtype(array.dtype)
        self._ptr = memory.put(array)

    def device_ptr(self, state):
        return self._ptr


class _Memory:
    """Device pointers -> NumPy arrays, for emulated launches."""

    def __init__(self):
        self.arrays = {}

    def put(self, a):
        ptr = 0x1000 * (len(self.arrays) + 1)
        self.arrays[ptr] = a
        return ptr


@pytest.mark.parametrize("dtypes", [("int32", "float32"), ("float32", "int32", "float32"),
                                    ("bool", "int8", "float16"), ("float64", "int64"),
                                    ("uint16", "bfloat16", "bool", "float64", "int32")])
@pytest.mark.parametrize("plugin_name", ["packed", "passes"])
@pytest.mark.parametrize("desc", [False, True, "mixed"])
def test_device_plugins_emulated(monkeypatch, dtypes, plugin_name, desc):
    """PackedLexsort / PassesLexsort.run with csk_pack and csk_gather emulated
    in NumPy and the core's stable sorts as NumPy's: the fields' shifts and
    widths, the words' dtypes and the two-word sort give the reference order."""
    from cudasortkit.plugins import multikey as plugins

    memory = _Memory()
    n = 500
    keys = [keys_of(d, "special", n, 30 + i) for i, d in enumerate(dtypes)]
    keys = [k % 3 if k.dtype.kind in "iu" else k for k in keys]
    flags = tuple((i % 2 == 1) if desc == "mixed" else desc for i in range(len(keys)))

    def launch(owner, state, dtype, name, count, args):
        if name == "csk_gather":
            src, order, _, dst = args
            memory.arrays[dst][...] = memory.arrays[src][memory.arrays[order]]
            return
        kp, _, lo, lo_bytes, hi, hi_bytes, shift, width, mask, first = args
        key = memory.arrays[kp]
        assert mask in (0, (1 << (8 * max(key.dtype.itemsize, 1))) - 1)
        u = _ordered(key, bool(mask)) & np.uint64((1 << width) - 1 if width < 64 else ~0 & (2**64 - 1))
        field = [int(x) << shift for x in u]
        for ptr, nbytes, part in ((lo, lo_bytes, lambda f: f & (2**64 - 1)), (hi, hi_bytes, lambda f: f >> 64)):
            if not ptr:
                continue
            words = memory.arrays[ptr]
            assert words.dtype.itemsize == nbytes
            vals = np.array([part(f) for f in field], np.uint64)
            assert int(vals.max(initial=0)) < 2 ** (8 * nbytes), "a field spills out of its word"
            words[...] = vals.astype(words.dtype) if first else words | vals.astype(words.dtype)

    def ptr_of(a):  # the emulated device address of an array (registered on first use)
        return next((p for p, x in memory.arrays.items() if x is a), None) or memory.put(a)

    monkeypatch.setattr(plugins, "launch", launch)
    monkeypatch.setattr("cudasortkit.sdk.multikey.launch", launch)
    monkeypatch.setattr("cudasortkit.sdk.multikey.device_ptr", ptr_of)

    def empty(count, dtype):
        a = np.zeros(count, dtype)
        return a, memory.put(a)

    def argsort(a, d):
        return csk.order.argsort(a, d)

    def sort_pairs(k, v, d):
        o = csk.order.argsort(k, d)
        return k[o], v[o]

    job = MultikeyJob([_Key(k, memory) for k in keys], flags, n, object(), argsort=argsort,
                      sort_pairs=sort_pairs, empty=empty)
    plugin = registry.plugins("cudasortkit.multikey")[plugin_name]
    if plugin_name == "packed" and job.bits > 128:
        assert not plugin.supports(job)
        return
    got = plugin.run(job)
    np.testing.assert_array_equal(got, reference_order(keys, flags))


@pytest.mark.parametrize("flags", [(False, False, False), (True, True, True), (False, True, False),
                                   (True, False, True)])
@pytest.mark.parametrize("dtype,shape", [("uint8", (2000, 10)), ("float32", (500, 3)),
                                         ("float64", (300, 2, 2)), ("int16", (400, 1)),
                                         ("bool", (100, 3)), ("bool bytes", (300, 3))])
def test_compact_device_emulated(monkeypatch, dtype, shape, flags):
    """compact_device with its kernels (csk_row_starts, csk_unique_scatter,
    csk_unique_rows), the scan and the buffers emulated in NumPy gives
    numpy.unique(axis=0)'s results: the glue, offsets and null outputs.
    "bool bytes": bools of other bytes than 0 and 1, which NumPy orders and
    compares by truth value: the rows compared are their truth values
    (unique_rows makes them), the rows returned a's own bytes."""
    from cudasortkit.calls import unique_rows as ur

    memory = _Memory()
    n = shape[0]
    if dtype == "bool bytes":
        rng = np.random.default_rng(51)
        a = (rng.integers(0, 2, shape) * rng.integers(1, 4, shape)).astype(np.uint8).view(bool)
    else:
        a = keys_of(dtype, "special", int(np.prod(shape)), 50)
        a = (a % 3 if a.dtype.kind in "iu" else a).reshape(shape)
    flat_array = np.ascontiguousarray(a).reshape(-1)

    def same(x, y):  # csk_same_key: NaN equals nothing, -0.0 == +0.0; bools as their bytes
        x, y = comparable(np.asarray(x)), comparable(np.asarray(y))
        return x.view(np.uint8) == y.view(np.uint8) if x.dtype.kind == "b" else x == y

    def launch(owner, state, dt, name, count, args):
        m = memory.arrays
        if name == "csk_row_starts":
            rows, w, order, cnt, ends = args
            r, o = m[rows].reshape(-1, w), m[order]
            st = np.ones(cnt, np.uint32)
            st[1:] = ~np.all(same(r[o[1:]], r[o[:-1]]), axis=1)
            m[ends].view(np.uint32)[...] = st
        elif name == "csk_unique_scatter":
            order, ends, cnt, inverse, firsts = args
            o, e = m[order], m[ends].view(np.uint32).astype(np.int64)
            fs = m[firsts].view(np.int64)
            if inverse:
                m[inverse][o] = e - 1
            start = np.r_[True, e[1:] != e[:-1]]
            fs[e[start] - 1] = np.flatnonzero(start)
            fs[e[-1]] = cnt
        else:
            rows, w, order, firsts, k, unique, index, counts = args
            f = m[firsts].view(np.int64)
            chosen = m[order][f[:k]]
            if index:
                m[index][...] = chosen
            if counts:
                m[counts][...] = np.diff(f)
            m[unique].reshape(-1, w)[...] = m[rows].reshape(-1, w)[chosen]

    class Buf(int):
        def free(self):
            pass

    class FakeJob:
        def __init__(self, *args, **kwargs):
            pass

        def alloc(self, nbytes):
            return Buf(memory.put(np.zeros(nbytes, np.uint8)))  # raw bytes, viewed by users

        def finish(self):
            pass

    class FakeScan:
        def __init__(self, job, count, count_bytes):
            self.total_ptr = memory.put(np.zeros(1, np.uint32))

        def __call__(self, src, dst, inclusive):
            ends = memory.arrays[dst].view(np.uint32)
            ends[...] = np.cumsum(memory.arrays[src].view(np.uint32))
            memory.arrays[self.total_ptr][0] = ends[-1]

    class FakeResult:
        def __init__(self, like, count, dt, state, caller):
            self.array = np.full(count, 99, dt)
            self.ptr = memory.put(self.array)

        def finish(self):
            return self.array

    class State:
        @staticmethod
        def read_back(ptr, nbytes, then=None):
            assert nbytes == 4 and then is None
            return int(memory.arrays[ptr][0])

    monkeypatch.setattr(ur, "launch", launch)
    monkeypatch.setattr(ur, "Job", FakeJob)
    monkeypatch.setattr(ur, "DeviceScan", FakeScan)
    monkeypatch.setattr(ur, "_result", FakeResult)
    monkeypatch.setattr(ur, "device_ptr", lambda x: next(p for p, y in memory.arrays.items() if y is x))
    flat = _Key(flat_array, memory)
    flat.n = flat_array.size
    truth = flat_array.view(np.uint8) != 0 if dtype == "bool bytes" else flat_array
    compared = _Key(truth, memory)
    compared.n = truth.size
    order = np.lexsort(comparable(truth.reshape(n, -1)).T[::-1]).astype(np.int64)
    memory.put(order)
    got = ur.compact_device(flat, order, shape, flags, State(), 0, compared)
    want = np.unique(a, axis=0, **dict(zip(("return_index", "return_inverse", "return_counts"),
                                           flags)))
    want = want if isinstance(want, tuple) else (want,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)


def test_structured_descending_reverses_every_field_nans_last():
    s = padded(300, 9)
    got = csk.argsort(s, order="b", descending=True)
    np.testing.assert_array_equal(got, reference_order([s["b"], s["a"]], (True, True)))
    np.testing.assert_array_equal(csk.sort(s, order="b", descending=True)["b"].view(np.uint32),
                                  s["b"][got].view(np.uint32))
    assert np.isnan(s["b"][got][-1]) and np.isnan(s["b"]).any()


class _DeviceArray:
    """A device array by __cuda_array_interface__ only: its data a NumPy
    array in the emulated device memory, at its host address."""

    def __init__(self, host):
        self.host = host
        self.__cuda_array_interface__ = {"shape": host.shape, "typestr": host.dtype.str,
                                         "data": (host.__array_interface__["data"][0], False),
                                         "version": 3, "strides": None}


def _canonical(keys: np.ndarray) -> np.ndarray:
    """Keys as a device sort returns them (keys.cuh's ordered word and back):
    float zeros +0.0, NaNs the one quiet NaN (every bit but the sign set)."""
    if keys.dtype.kind != "f":
        return keys
    bits = keys.view(f"u{keys.itemsize}")
    sign = bits.dtype.type(1) << bits.dtype.type(8 * keys.itemsize - 1)
    out = np.where(keys == 0, bits.dtype.type(0), bits)
    out[np.isnan(keys)] = ~sign
    return out.view(keys.dtype)


@pytest.mark.parametrize("count", [1, 2])
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int32", "bool"])
def test_sort_by_key_tuple_device_keys_as_a_sort_returns_them_emulated(monkeypatch, dtype, count):
    """Multi-key sort_by_key of device keys returns the keys as the one-key
    device sort_by_key does (api.md: float zeros +0.0, NaNs one quiet NaN),
    the values' own bits: the gathers' kernels emulated in NumPy."""
    import cudasortkit.sdk.multikey as sdk

    rng = np.random.default_rng(60 + count)
    n = 300
    pool = np.array([0.0, -0.0, np.nan, 1.0, -np.nan], np.float64)
    keys = [pool[rng.integers(0, len(pool), n)].astype(dtype) if dtype.startswith("float")
            else rng.integers(0, 3, n).astype(dtype) for _ in range(count)]
    for k in keys:
        if dtype.startswith("float"):  # NaN payloads too
            bits = k.view(f"u{k.itemsize}")
            bits[np.isnan(k) & (rng.random(n) < 0.5)] |= 1
    values = rng.random(n)
    memory = {}

    def put(a):
        memory[a.__array_interface__["data"][0]] = a
        return a.__array_interface__["data"][0]

    def launch(owner, state, dt, name, n_, args):
        src, order, _, dst = (memory[int(p)] if i != 2 else p for i, p in enumerate(args))
        got = src[order]
        if name == "csk_gather_keys":
            assert np.dtype(dt) == src.dtype, "csk_gather_keys reads the keys' kind"
            got = _canonical(got)
        else:
            assert name == "csk_gather" and np.dtype(dt) == np.dtype(f"u{src.itemsize}")
        dst[...] = got

    def new_array(like, count_, dt, state, caller):
        a = np.zeros(count_, dt)
        return type("R", (), {"value": _DeviceArray(a), "ptr": put(a)})()

    reference = np.lexsort([comparable(k) for k in reversed(keys)]).astype(np.int64)
    put(reference)

    def order_of(keys_, descending, selector, algorithm="auto", stream=None, then=None):
        return then(reference, object(), 0)  # the order, as a device plugin computes it

    monkeypatch.setattr(sdk, "launch", launch)
    monkeypatch.setattr(sdk, "device_ptr", lambda a: put(a) if isinstance(a, np.ndarray)
                        else a.__cuda_array_interface__["data"][0])
    monkeypatch.setattr(multikey, "new_array", new_array)
    monkeypatch.setattr(multikey, "order_of", order_of)
    for a in (*keys, values):
        put(a)
    got_keys, got_values = multikey.sort_by_keys(tuple(_DeviceArray(k) for k in keys),
                                                 _DeviceArray(values), False, None)
    assert np.array_equal(got_values.host, values[reference])
    for got, k in zip(got_keys, keys):
        want = _canonical(k[reference])
        assert np.array_equal(got.host.view(np.uint8), want.view(np.uint8)), "keys' bits"
