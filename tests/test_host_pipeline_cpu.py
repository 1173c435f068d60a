"""The host pipeline's logic without a GPU: transfer.Pipe, the in-core path
and the out-of-core sample sort run against a stand-in for pycuda whose
"device memory" is host memory (copies are memmoves, events are done at
once) and whose kernels are NumPy (the key order is keys.cuh's, rebuilt
here). It checks the bookkeeping (pieces, slots, counts, offsets, buckets,
stability, out=a), not the GPU."""
import ctypes
import sys
import types

import numpy as np
import pytest

import cudasortkit as csk
from cudasortkit import hostpipe, outofcore, pinned, transfer
from cudasortkit.plugin import Request
from helpers import make_keys, reference_argsort


def _addr(a):
    return a.__array_interface__["data"][0]


class _Event:
    def __init__(self, flags=0):
        pass

    def record(self, stream=None):
        pass

    def query(self):
        return True

    def synchronize(self):
        pass


class _Stream:
    def synchronize(self):
        pass

    def wait_for_event(self, event):
        pass


def _fake_driver():
    d = types.ModuleType("pycuda.driver")
    d.Event, d.Stream = _Event, _Stream
    d.event_flags = types.SimpleNamespace(DISABLE_TIMING=2)
    d.host_alloc_flags = types.SimpleNamespace(PORTABLE=1)
    d.Error = RuntimeError
    d.pagelocked_empty = lambda n, dtype, mem_flags=0: np.empty(n, dtype)

    def htod(dptr, src, stream=None):
        src = np.ascontiguousarray(src)
        ctypes.memmove(int(dptr), _addr(src), src.nbytes)

    def dtoh(dst, ptr, stream=None):
        ctypes.memmove(_addr(dst), int(ptr), dst.nbytes)

    d.memcpy_htod_async = d.memcpy_htod = htod
    d.memcpy_dtoh_async = d.memcpy_dtoh = dtoh
    d.memcpy_dtod_async = lambda dst, src, n, stream=None: ctypes.memmove(int(dst), int(src), n)
    d.memset_d8_async = lambda ptr, v, n, stream=None: ctypes.memset(int(ptr), v, n)
    d.memset_d32_async = lambda ptr, v, n, stream=None: ctypes.memset(int(ptr), v & 0xFF, 4 * n)
    return d


class _Buf:
    def __init__(self, n):
        self.a = np.empty(max(int(n), 1), np.uint8)

    def __int__(self):
        return _addr(self.a)

    def free(self):
        pass


class _State:
    ordinal = 0

    def __init__(self, driver):
        self.cuda = driver
        self.stream = _Stream()
        self.pool = types.SimpleNamespace(free_held=lambda: None)
        self.allocated = 0

    def allocate(self, n, who=""):
        self.allocated += int(n)
        return _Buf(n)

    def free_memory(self):
        return 1 << 40


def _words(keys: np.ndarray, descending: bool) -> np.ndarray:
    """keys.cuh's csk_encode as uint64."""
    kb = keys.dtype.itemsize
    ut = np.dtype(f"u{kb}")
    x = keys.view(ut).astype(np.uint64)
    sign = np.uint64(1 << (8 * kb - 1))
    ones = np.uint64((1 << (8 * kb)) - 1)
    if keys.dtype.kind == "u":
        u = x
    elif keys.dtype.kind == "i":
        u = x ^ sign
    else:
        mag = x & (ones ^ sign)
        inf = np.uint64({2: 0x7C00, 4: 0x7F800000, 8: 0x7FF0000000000000}[kb])
        x = np.where(mag == 0, np.uint64(0), x)
        u = np.where(x & sign, (~x) & ones, x | sign)
        u = np.where(mag > inf, ones, u)
    if descending:
        nan = u == ones if keys.dtype.kind == "f" else np.zeros(len(u), bool)
        u = np.where(nan, u, u ^ ones)
    return u.astype(np.uint64)


def _view(ptr, n, dtype):
    dtype = np.dtype(dtype)
    buf = (ctypes.c_char * (n * dtype.itemsize)).from_address(int(ptr))
    return np.frombuffer(buf, dtype, n)


@pytest.fixture
def fake(monkeypatch):
    driver = _fake_driver()
    monkeypatch.setitem(sys.modules, "pycuda.driver", driver)
    pkg = types.ModuleType("pycuda")
    pkg.driver = driver
    monkeypatch.setitem(sys.modules, "pycuda", pkg)
    monkeypatch.setattr(pinned, "pool", pinned.PinnedPool(1 << 16, 1 << 20))
    monkeypatch.setattr(transfer, "pinned_pool", pinned.pool)
    monkeypatch.setattr(transfer, "_streams", {})
    state = _State(driver)
    dtypes = {}

    def run_job(plugin, config, request, state, n, kin, kout, vin, vout, expected):
        dt = dtypes["keys"]
        keys = _view(kin, n, dt)
        order = np.argsort(_words(keys, request.descending), kind="stable")
        _view(kout, n, dt)[:] = keys[order]
        if vout:
            vdt = dtypes["values"]
            values = _view(vin, n, vdt) if vin else np.arange(n, dtype=np.int64)
            _view(vout, n, vdt)[:] = values[order]

    def iota(state, ptr, n, start):
        _view(ptr, n, np.int64)[:] = np.arange(start, start + n)

    def encode(state, dtype, keys, n, mask, out):
        _view(out, n, np.uint64)[:] = _words(_view(keys, n, dtypes["keys"]), mask != 0)

    def count(state, dtype, keys, n, mask, splitters, nsplit, counts):
        w = _words(_view(keys, n, dtypes["keys"]), mask != 0)
        sp = _view(splitters, nsplit, np.uint64)
        b = np.searchsorted(sp, w, side="right")
        _view(counts, nsplit + 1, np.uint64)[:] += np.bincount(b, minlength=nsplit + 1).astype(np.uint64)

    for module in (hostpipe, outofcore):
        monkeypatch.setattr(module, "run_job", run_job)
    monkeypatch.setattr(outofcore, "iota64_from", iota)
    monkeypatch.setattr(outofcore, "encode_words", encode)
    monkeypatch.setattr(outofcore, "bucket_count", count)
    import cudasortkit.hostkernels as hk

    monkeypatch.setattr(hk, "iota64_from", iota)
    plugin = types.SimpleNamespace(name="fake", makes_indices=False)
    real_ooc = outofcore.sort
    paths = []
    monkeypatch.setattr(outofcore, "sort", lambda *a, **k: paths.append("ooc") or real_ooc(*a, **k))

    def sort(kind, keys, values=None, descending=False, out=None, values_out=None, cap=None):
        from cudasortkit.arrays import Operand
        from cudasortkit.dtypes import key_name

        dtypes["keys"] = keys.dtype
        vb = {"sort": 0, "argsort": 8}.get(kind, values.dtype.itemsize if values is not None else 0)
        dtypes["values"] = np.int64 if kind == "argsort" else (values.dtype if values is not None else None)
        k = Operand(keys, "keys")
        v = Operand(values, "values") if values is not None else None
        targets = {"out": Operand(out, "out") if out is not None else None,
                   "values_out": Operand(values_out, "values_out") if values_out is not None else None}
        request = Request.from_fields(kind=kind, dtype=key_name(keys.dtype), n=len(keys),
                                      stable=True, descending=descending, value_bytes=vb,
                                      on_device=False, key_range=None, options={},
                                      range_probe=None, segments=None)
        csk.set_device_memory_limit(cap)
        paths.clear()
        try:
            return hostpipe.run(plugin, None, request, k, v, targets, state, (MemoryError,))
        finally:
            csk.set_device_memory_limit(None)
            assert paths == (["ooc"] if cap else []), paths

    return sort


CAP = 1 << 20  # 1 MiB: a few hundred thousand keys go out of core


@pytest.mark.parametrize("dtype, dist", [("uint32", "uniform"), ("float64", "special"),
                                         ("int16", "few_unique"), ("float32", "all_equal"),
                                         ("int64", "special")])
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("cap", [None, CAP])
def test_sort_and_argsort(fake, dtype, dist, descending, cap):
    keys = make_keys(dist, dtype, 300_007, np.random.default_rng(1))
    before = keys.copy()
    idx = reference_argsort(keys, descending)
    k, _ = fake("sort", keys, descending=descending, cap=cap)
    assert np.array_equal(k, keys[idx], equal_nan=True)
    _, order = fake("argsort", keys, descending=descending, cap=cap)
    assert np.array_equal(order, idx)
    assert np.array_equal(keys, before, equal_nan=True)
    assert pinned.pool.in_use_bytes == 0


@pytest.mark.parametrize("cap", [None, CAP])
def test_pairs_and_in_place(fake, cap):
    keys = make_keys("few_unique", "float32", 200_003, np.random.default_rng(2))
    values = np.arange(len(keys), dtype=np.int32)
    idx = np.argsort(keys, kind="stable")
    k, v = fake("pairs", keys, values, cap=cap)
    assert np.array_equal(k, keys[idx], equal_nan=True) and np.array_equal(v, values[idx])
    a = keys.copy()
    k, _ = fake("sort", a, out=a, cap=cap)
    assert k is a and np.array_equal(a, keys[idx], equal_nan=True)


def test_a_failing_copy_gives_the_slots_back(fake, monkeypatch):
    keys = make_keys("uniform", "uint32", 300_007, np.random.default_rng(3))
    before = keys.copy()
    calls = []

    def copy(dst, src):
        calls.append(1)
        if len(calls) == 25:
            raise KeyboardInterrupt("injected")
        np.copyto(dst, src)

    monkeypatch.setattr(transfer, "_host_copy", copy)
    with pytest.raises(KeyboardInterrupt):
        fake("sort", keys, out=keys, cap=CAP)
    assert np.array_equal(keys, before)
    assert pinned.pool.in_use_bytes == 0


def _spy(monkeypatch, module, name):
    calls = []
    real = getattr(module, name)
    monkeypatch.setattr(module, name, lambda *a, **k: calls.append(1) or real(*a, **k))
    return calls


@pytest.mark.parametrize("kind", ["sort", "argsort", "pairs"])
@pytest.mark.parametrize("skew", ["sample", "reversed", "first_bucket", "last_bucket"])
def test_placed_buckets_land_in_order_however_wrong_the_estimates(fake, monkeypatch, kind, skew):
    """No count pass: buckets go where the sample's estimates put them; bad
    estimates only mean spill and saved parts, never a wrong result."""
    counted = _spy(monkeypatch, outofcore, "_sort_counted")
    real = outofcore.estimates

    def skewed(sample, n):
        est = real(sample, n)
        if skew == "reversed":
            est = est[::-1].copy()
        elif skew in ("first_bucket", "last_bucket"):
            est = np.zeros_like(est)
            est[0 if skew == "first_bucket" else -1] = n
        return est

    monkeypatch.setattr(outofcore, "estimates", skewed)
    monkeypatch.setattr(outofcore, "spill_limit", lambda n, per_key: 2 * n * per_key)
    keys = make_keys("uniform", "float32", 300_007, np.random.default_rng(5))
    values = np.arange(len(keys), dtype=np.int32) if kind == "pairs" else None
    idx = np.argsort(keys, kind="stable")
    k, v = fake(kind, keys, values, cap=CAP)
    if kind != "argsort":
        assert np.array_equal(k, keys[idx], equal_nan=True)
    if kind == "argsort":
        assert np.array_equal(v, idx)
    elif kind == "pairs":
        assert np.array_equal(v, values[idx])
    assert not counted, "the placed sort fell back to the counted one"
    assert pinned.pool.in_use_bytes == 0


@pytest.mark.parametrize("dist", ["uniform", "few_unique", "all_equal"])
def test_a_spill_too_big_falls_back_to_the_counted_sort(fake, monkeypatch, dist):
    counted = _spy(monkeypatch, outofcore, "_sort_counted")
    monkeypatch.setattr(outofcore, "estimates", lambda sample, n: np.eye(1, len(sample), 0,
                                                                        np.int64)[0] * n)
    monkeypatch.setattr(outofcore, "spill_limit", lambda n, per_key: 1024)
    keys = make_keys(dist, "uint32", 300_007, np.random.default_rng(6))
    k, _ = fake("sort", keys, descending=True, cap=CAP)
    assert np.array_equal(k, np.sort(keys)[::-1])
    _, order = fake("argsort", keys, cap=CAP)
    assert np.array_equal(order, np.argsort(keys, kind="stable"))
    assert counted
    assert pinned.pool.in_use_bytes == 0


def test_argsort_out_of_core_keeps_no_keys_on_the_host(fake):
    """Its host memory: the indices it returns, a bounded spill and one
    piece of gathered keys; not a second array of all the keys."""
    import tracemalloc

    keys = make_keys("uniform", "uint32", 4_000_037, np.random.default_rng(7))
    fake("argsort", keys[:500_000], cap=4 * CAP)  # the stand-in's pinned slots, made once
    tracemalloc.start()
    try:
        _, order = fake("argsort", keys, cap=4 * CAP)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert np.array_equal(order, np.argsort(keys, kind="stable"))
    assert peak < order.nbytes + keys.nbytes * 3 // 4, (peak, order.nbytes)


def test_staged_pieces_are_small_for_small_transfers(monkeypatch):
    """About two pieces per copy thread, within [1 MiB, one slot]; the
    environment can fix the size."""
    monkeypatch.delenv("CUDASORTKIT_HOST_PIECE", raising=False)
    monkeypatch.setenv("CUDASORTKIT_COPY_THREADS", "12")
    slot = pinned.pool.slot_bytes
    assert slot == 8 << 20
    assert transfer.staged_piece_bytes(100) == min(transfer.MIN_PIECE_BYTES, slot)
    mid = transfer.staged_piece_bytes(64 << 20)
    assert transfer.MIN_PIECE_BYTES <= mid <= slot and -(-(64 << 20) // mid) >= 2 * 12
    assert transfer.staged_piece_bytes(1 << 34) == slot
    monkeypatch.setenv("CUDASORTKIT_HOST_PIECE", "2MiB")
    assert transfer.staged_piece_bytes(1 << 34) == min(2 << 20, slot)
