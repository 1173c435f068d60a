"""The host pipeline's logic without a GPU: transfer.Pipe, the in-core path
and the out-of-core sample sort run against a stand-in for pycuda whose
"device memory" is host memory (copies are memmoves, events are done at
once) and whose kernels are NumPy (the key order is keys.cuh's, rebuilt
here). It checks the bookkeeping (pieces, slots, counts, offsets, buckets,
stability, out=a), not the GPU."""
import ctypes
import mmap
import sys
import types

import numpy as np
import pytest

import cudasortkit as csk
from cudasortkit.host import pipeline as hostpipe
from cudasortkit.host import outofcore
from cudasortkit.host import pinned
from cudasortkit.host import transfer
from cudasortkit.sdk.plugin import Request
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
    """Device memory: anonymous mmap, so that tracemalloc sees host memory only."""

    def __init__(self, n):
        self.m = mmap.mmap(-1, max(int(n), 1))
        self.a = np.frombuffer(self.m, np.uint8)

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
    # Staged transfers: the stand-in driver moves bytes, it pins nothing
    # (test_auto_mode_falls_back_to_staged covers the default out of core).
    monkeypatch.setenv("CUDASORTKIT_HOST_TRANSFER", "staged")
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

    def iota(state, ptr, n, start, index_bytes=8):
        _view(ptr, n, np.int64 if index_bytes == 8 else np.int32)[:] = np.arange(start, start + n)

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
    import cudasortkit.host.kernels as hk

    monkeypatch.setattr(hk, "iota64_from", iota)
    plugin = types.SimpleNamespace(name="fake", makes_indices=False)
    real_ooc = outofcore.sort
    paths = []
    monkeypatch.setattr(outofcore, "sort", lambda *a, **k: paths.append("ooc") or real_ooc(*a, **k))

    def sort(kind, keys, values=None, descending=False, out=None, values_out=None, cap=None):
        from cudasortkit.gpu.arrays import Operand
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


@pytest.mark.parametrize("chosen", ["auto", "registered"])
def test_auto_mode_falls_back_to_staged(fake, monkeypatch, chosen):
    """Out of core, auto registers the arrays; if pinning fails it sorts
    staged instead, unless registered was asked for by name."""
    monkeypatch.setenv("CUDASORTKIT_HOST_TRANSFER", chosen)
    modes = []
    real_init = transfer.Pipe.__init__

    def init(self, state, mode=None, **kw):
        real_init(self, state, mode, **kw)
        modes.append(self.mode)

    def refuse(self, array):
        raise RuntimeError("cudasortkit: cuMemHostRegister failed with CUDA error 2")

    monkeypatch.setattr(transfer.Pipe, "__init__", init)
    monkeypatch.setattr(transfer.Pipe, "pin", refuse)
    keys = make_keys("uniform", "uint32", 300_007, np.random.default_rng(5))
    if chosen == "registered":
        with pytest.raises(RuntimeError, match="cuMemHostRegister"):
            fake("sort", keys, cap=CAP)
        assert modes == ["registered"]
    else:
        k, _ = fake("sort", keys, cap=CAP)
        assert np.array_equal(k, np.sort(keys)) and modes == ["registered", "staged"]
    assert pinned.pool.in_use_bytes == 0


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
    with pytest.raises(KeyboardInterrupt):  # out=keys: test_an_interrupted_copy_leaves_a_permutation
        fake("sort", keys, cap=CAP)
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


# ------------------------------------------------------------ in place (out=a)
IN_PLACE_DISTS = ["uniform", "sorted", "reverse", "few_unique", "all_equal"]


def _in_place(fake, kind, a, values=None, descending=False):
    """sort(a, out=a) or sort_by_key(a, values, out=a, values_out=values), out of core."""
    if kind == "sort":
        k, _ = fake("sort", a, out=a, descending=descending, cap=CAP)
    else:
        k, v = fake("pairs", a, values, out=a, values_out=values, descending=descending, cap=CAP)
        assert v is values
    assert k is a


def _assert_permutation(a, before, values=None):
    """a holds the keys of `before`, each once; values (indices into
    `before`, if given) each still with its own key."""
    bits = f"u{a.itemsize}"
    assert np.array_equal(np.sort(a.view(bits)), np.sort(before.view(bits)))
    if values is not None:
        assert np.array_equal(np.sort(values), np.arange(len(before)))
        assert np.array_equal(a.view(bits), before[values].view(bits))


@pytest.mark.parametrize("dist", IN_PLACE_DISTS)
@pytest.mark.parametrize("dtype, n, descending", [("uint32", 300_007, False),
                                                  ("float64", 262_145, True),
                                                  ("int16", 199_999, False),
                                                  ("uint64", 45_007, True)])
def test_in_place_sort_matches_numpy(fake, monkeypatch, dist, dtype, n, descending):
    copies = _spy(monkeypatch, outofcore, "parallel_copy")
    keys = make_keys(dist, dtype, n, np.random.default_rng(21))
    expected = keys[reference_argsort(keys, descending)]
    a = keys.copy()
    _in_place(fake, "sort", a, descending=descending)
    assert np.array_equal(a, expected, equal_nan=True)
    assert not copies, "out=a went through a second full copy"
    assert pinned.pool.in_use_bytes == 0


@pytest.mark.parametrize("dist", IN_PLACE_DISTS)
@pytest.mark.parametrize("n, descending", [(300_007, False), (131_073, True)])
def test_in_place_pairs_are_stable(fake, dist, n, descending):
    keys = make_keys(dist, "float32", n, np.random.default_rng(22))
    idx = reference_argsort(keys, descending)
    a, values = keys.copy(), np.arange(n, dtype=np.int64)
    _in_place(fake, "pairs", a, values, descending)
    assert np.array_equal(a, keys[idx], equal_nan=True)
    assert np.array_equal(values, idx)
    assert pinned.pool.in_use_bytes == 0


@pytest.mark.parametrize("which", ["keys", "values"])
def test_in_place_one_column(fake, which):
    """Only one output is its input: the other input is never written."""
    keys = make_keys("few_unique", "uint32", 250_001, np.random.default_rng(23))
    values = np.arange(len(keys), dtype=np.int32)
    kb, vb = keys.copy(), values.copy()
    idx = np.argsort(kb, kind="stable")
    if which == "keys":
        k, v = fake("pairs", keys, values, out=keys, cap=CAP)
        assert k is keys and np.array_equal(values, vb)
    else:
        k, v = fake("pairs", keys, values, values_out=values, cap=CAP)
        assert v is values and np.array_equal(keys, kb)
    assert np.array_equal(k, kb[idx]) and np.array_equal(v, vb[idx])


def test_in_place_counts_again_when_a_bucket_is_too_big(fake, monkeypatch):
    """A bucket of several values bigger than one sort after the
    distribution: the chunks lie sorted, so they are counted again against
    more buckets and the bucket pass reads them where they lie."""
    real = outofcore.splitters_from_sample
    calls = []

    def coarse(words, buckets, max_word):
        calls.append(buckets)
        return real(words, 2 if len(calls) == 1 else buckets, max_word)

    monkeypatch.setattr(outofcore, "splitters_from_sample", coarse)
    keys = make_keys("uniform", "uint32", 300_007, np.random.default_rng(24))
    a, values = keys.copy(), np.arange(len(keys), dtype=np.int64)
    _in_place(fake, "pairs", a, values)
    assert len(calls) >= 2
    assert np.array_equal(values, np.argsort(keys, kind="stable"))


class Boom(RuntimeError):
    pass


def _fail_at(monkeypatch, module, name, k, error, counted=None):
    """module.name raises error("injected") on its k-th call from now (of
    those for which counted(*args) is true, if given)."""
    real = getattr(module, name)
    calls = []

    def failing(*a, **kw):
        if counted is None or counted(*a):
            calls.append(1)
        if len(calls) == k and (counted is None or counted(*a)):
            raise error("injected")
        return real(*a, **kw)

    monkeypatch.setattr(module, name, failing)
    return calls


def _check_failures(fake, monkeypatch, kind, keys, module, name, error, ks, counted=None):
    """Each k: the k-th call of module.name (counted(a, *args) true) raises;
    a is left a permutation. (The splitters come from a random sample: a
    call may make fewer calls than k, and then it must have sorted.)"""
    real = getattr(module, name)
    raised = 0
    for k in ks:
        a, values = keys.copy(), np.arange(len(keys), dtype=np.int64)
        calls = _fail_at(monkeypatch, module, name, k, error,
                         counted and (lambda *args, a=a: counted(a, *args)))
        try:
            _in_place(fake, kind, a, values if kind == "pairs" else None)
        except error as exc:
            assert "injected" in str(exc)
            raised += 1
        else:
            assert len(calls) < k and np.array_equal(a, np.sort(keys))
        monkeypatch.setattr(module, name, real)
        _assert_permutation(a, keys, values if kind == "pairs" else None)
        assert pinned.pool.in_use_bytes == 0
    assert raised >= len(ks) - 2
    a = keys.copy()
    _in_place(fake, "sort", a)  # and the next sort works
    assert np.array_equal(a, np.sort(keys))


@pytest.mark.parametrize("kind", ["sort", "pairs"])
@pytest.mark.parametrize("dist", ["uniform", "reverse", "few_unique"])
@pytest.mark.parametrize("error", [Boom, KeyboardInterrupt])
def test_a_failed_device_sort_leaves_a_permutation(fake, monkeypatch, kind, dist, error):
    """The k-th device sort raises (distribution pass, bucket pass, first,
    last): a holds its keys, each once, and (pairs) each with its value."""
    keys = make_keys(dist, "uint32", 300_007, np.random.default_rng(25))
    real = outofcore.run_job
    calls = []
    monkeypatch.setattr(outofcore, "run_job", lambda *a, **k: calls.append(1) or real(*a, **k))
    _in_place(fake, kind, keys.copy(), np.arange(len(keys), dtype=np.int64))
    monkeypatch.setattr(outofcore, "run_job", real)
    total = len(calls)
    assert total >= 6
    ks = sorted({1, 2, total // 3, total // 2, total // 2 + 1, total - 1, total})
    _check_failures(fake, monkeypatch, kind, keys, outofcore, "run_job", error, ks)


def _into(a, dst, src) -> bool:
    """True for a host copy that writes into a (a download's, not an upload's)."""
    return np.shares_memory(dst, a)


@pytest.mark.parametrize("kind", ["sort", "pairs"])
@pytest.mark.parametrize("dist", ["uniform", "reverse"])
@pytest.mark.parametrize("counted", [None, _into], ids=["any copy", "copy down"])
def test_an_interrupted_copy_leaves_a_permutation(fake, monkeypatch, kind, dist, counted):
    """Ctrl-C in a host copy of the pipe (up or down, either pass; or while
    a result comes down into a, half written)."""
    keys = make_keys(dist, "uint32", 300_007, np.random.default_rng(26))
    real = transfer._host_copy
    calls = []
    a = keys.copy()
    monkeypatch.setattr(transfer, "_host_copy", lambda *args: (
        (counted is None or counted(a, *args)) and calls.append(1)) or real(*args))
    _in_place(fake, kind, a, np.arange(len(keys), dtype=np.int64))
    monkeypatch.setattr(transfer, "_host_copy", real)
    total = len(calls)
    ks = sorted({1, 7, total // 4, total // 2, 3 * total // 4 + 1, total - 3, total})
    _check_failures(fake, monkeypatch, kind, keys, transfer, "_host_copy", KeyboardInterrupt, ks,
                    counted)


@pytest.mark.parametrize("kind", ["sort", "pairs"])
def test_a_spill_that_cannot_grow_leaves_a_permutation(fake, monkeypatch, kind):
    """MemoryError while saving what a result would overwrite."""
    monkeypatch.setattr(outofcore, "in_place_spill_bytes", lambda n, piece, per_key: 100_000)
    keys = make_keys("reverse", "uint32", 300_007, np.random.default_rng(27))
    a, values = keys.copy(), np.arange(len(keys), dtype=np.int64)
    with pytest.raises(MemoryError):
        _in_place(fake, kind, a, values if kind == "pairs" else None)
    _assert_permutation(a, keys, values if kind == "pairs" else None)
    assert pinned.pool.in_use_bytes == 0


@pytest.mark.parametrize("kind", ["sort", "pairs"])
@pytest.mark.parametrize("dist", IN_PLACE_DISTS)
def test_in_place_host_memory_is_bounded(fake, monkeypatch, kind, dist):
    """Traced host memory (NumPy's; the stand-in's device memory is not
    traced) of an out-of-core out=a sort: at most the documented spill
    bound (half the data plus one piece) and small change, never a second
    copy of the data."""
    import tracemalloc

    from cudasortkit.launch.run import bytes_per_key

    n, cap = 2_000_003, 4 * CAP
    keys = make_keys(dist, "uint32", n, np.random.default_rng(28))
    values = np.arange(n, dtype=np.int64) if kind == "pairs" else None
    a = keys.copy()
    _in_place(fake, "sort", a[:200_000])  # the stand-in's pinned slots, made once
    request = types.SimpleNamespace(dtype="uint32", value_bytes=8 if values is not None else 0)
    piece, _ = outofcore.plan(n, bytes_per_key(request), cap)
    per_key = a.itemsize + (values.itemsize if values is not None else 0)
    bound = outofcore.in_place_spill_bytes(n, piece, per_key)
    peaks = []

    def on_the_device(kernel):
        """The stand-in's kernels allocate NumPy temporaries where a GPU
        uses device memory: the peak before each, and none of its own."""
        def run(*args, **kw):
            peaks.append(tracemalloc.get_traced_memory()[1])
            try:
                return kernel(*args, **kw)
            finally:
                tracemalloc.reset_peak()
        return run

    for name in ("run_job", "bucket_count", "encode_words"):
        monkeypatch.setattr(outofcore, name, on_the_device(getattr(outofcore, name)))
    tracemalloc.start()
    try:
        if kind == "sort":
            fake("sort", a, out=a, cap=cap)
        else:
            fake("pairs", a, values, out=a, values_out=values, cap=cap)
        peak = max(peaks + [tracemalloc.get_traced_memory()[1]])
    finally:
        tracemalloc.stop()
    assert np.array_equal(a, np.sort(keys))
    print(f"\n{kind} {dist}: peak {peak / 2**20:.2f} MiB = {peak / (n * per_key):.3f} of the "
          f"data; bound {bound / 2**20:.2f} MiB")
    assert peak <= bound + (1 << 20), (peak, bound)


def test_an_output_overlapping_its_input_otherwise_is_still_right(fake, monkeypatch):
    """out a shifted view of the keys' memory (values_out=values exact):
    not sorted in place (its copy of the keys would read what it wrote, in
    pieces), but into fresh arrays copied over at the end."""
    in_place = _spy(monkeypatch, outofcore, "_sort_in_place")
    n = 200_003
    buf = make_keys("uniform", "uint32", n + 1, np.random.default_rng(29))
    keys = buf[:n].copy()
    buf[:n] = keys
    values = np.arange(n, dtype=np.int64)
    k, v = fake("pairs", buf[:n], values, out=buf[1:], values_out=values, cap=CAP)
    idx = np.argsort(keys, kind="stable")
    assert np.array_equal(buf[1:], keys[idx]) and np.array_equal(values, idx)
    assert not in_place
