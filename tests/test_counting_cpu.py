"""Counting sort's support and layout logic, no GPU needed: which requests it
takes (dtype, key range, caller's key_range, probe at most once), how keys map
to bins, and how the histogram and scatter passes are laid out."""
import numpy as np
import pytest

import cudasortkit as csk
from cudasortkit.dispatch import request as dispatch_request
from cudasortkit.gpu.arrays import Operand
from cudasortkit.gpu.device import DeviceLimits
from cudasortkit.sdk.plugin import Request
from cudasortkit.plugins.counting import (MAX_KEYS, RANGE_LIMIT, CountingSort, bin_layout,
                                          clamp_range)

PLUGIN = CountingSort()


def request(dtype="int32", n=1000, probe=None, **kw):
    return Request(kind=kw.pop("kind", "sort"), dtype=dtype, n=n, range_probe=probe, **kw)


def no_probe():
    raise AssertionError("the range probe must not run here")


def test_integer_dtypes_only():
    assert set(PLUGIN.dtypes) == {"int8", "int16", "int32", "int64",
                                  "uint8", "uint16", "uint32", "uint64"}
    for dtype in ("float16", "float32", "float64"):
        reason = PLUGIN.unsupported(request(dtype, probe=no_probe))
        assert reason and "integer keys only" in reason


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "uint16"])
@pytest.mark.parametrize("kind", ["sort", "argsort", "pairs"])
def test_narrow_keys_always_supported_without_probing(dtype, kind):
    vb = {"sort": 0, "argsort": 8, "pairs": 4}[kind]
    r = request(dtype, n=1 << 26, probe=no_probe, kind=kind, value_bytes=vb, stable=True,
                descending=True)
    assert PLUGIN.unsupported(r) is None


@pytest.mark.parametrize("dtype", ["int32", "uint32", "int64", "uint64"])
def test_wide_keys_by_measured_range(dtype):
    assert PLUGIN.unsupported(request(dtype, probe=lambda: (5, 5 + RANGE_LIMIT - 1))) is None
    reason = PLUGIN.unsupported(request(dtype, probe=lambda: (5, 5 + RANGE_LIMIT)))
    assert reason and "at most" in reason and f"{RANGE_LIMIT + 1:,}" in reason


def test_wide_keys_by_key_range_skip_the_probe():
    assert PLUGIN.unsupported(request("int64", key_range=(-10, 10), probe=no_probe)) is None
    reason = PLUGIN.unsupported(request("int64", key_range=(0, 1 << 40), probe=no_probe))
    assert reason and "at most" in reason


def test_key_range_outside_the_dtype():
    reason = PLUGIN.unsupported(request("uint8", key_range=(300, 400), probe=no_probe))
    assert reason and "holds no uint8" in reason
    assert clamp_range("uint8", (-5, 300)) == (0, 255)
    assert clamp_range("int32", (0.5, 9.5)) == (1, 9)


def test_unknown_range_and_tiny_requests():
    assert "key_range" in PLUGIN.unsupported(request("int32", probe=None))
    assert PLUGIN.unsupported(request("int32", n=1, probe=no_probe)) is None
    assert PLUGIN.unsupported(request("int32", n=0, probe=no_probe)) is None
    assert "32-bit" in PLUGIN.unsupported(request("uint8", n=MAX_KEYS + 1, probe=no_probe))


def test_probe_runs_once_per_call_and_not_for_narrow_keys(monkeypatch):
    calls = []
    measure = dispatch_request.RangeProbe._measure

    def counting_measure(self):
        calls.append(1)
        return measure(self)

    monkeypatch.setattr(dispatch_request.RangeProbe, "_measure", counting_measure)
    a = np.arange(-3, 997, dtype=np.int32)
    r = dispatch_request.make_request("sort", Operand(a), None, False, False)
    assert r.keys_range() == (-3, 996) and r.keys_range() == (-3, 996)
    assert PLUGIN.unsupported(r) is None and len(calls) == 1
    r16 = dispatch_request.make_request("sort", Operand(a.astype(np.int16)), None, False, False)
    assert PLUGIN.unsupported(r16) is None and len(calls) == 1
    given = dispatch_request.make_request("sort", Operand(a), None, False, False, key_range=(-3, 996))
    assert given.keys_range() == (-3, 996) and len(calls) == 1


def test_probe_is_not_part_of_request_equality():
    assert request(probe=lambda: (0, 1)) == request(probe=lambda: (0, 2))


def test_host_probe_handles_bool_and_empty():
    assert dispatch_request.RangeProbe(Operand(np.array([True, False, True])))() == (0, 1)
    assert dispatch_request.RangeProbe(Operand(np.zeros(0, np.int32)))() is None
    assert dispatch_request.RangeProbe(Operand(np.zeros(3, np.float32)))() is None


def test_by_name_wide_range_is_a_clear_value_error():
    a = np.array([0, 2**31 - 1, -5], np.int32)
    with pytest.raises(ValueError, match="algorithm 'counting' cannot sort 3 int32 keys: keys span"):
        csk.sort(a, algorithm="counting")
    with pytest.raises(ValueError, match="integer keys only"):
        csk.sort(np.zeros(3, np.float32), algorithm="counting")


def test_auto_prefers_counting():
    from cudasortkit.sdk import registry

    gpu = [p for p in registry.plugins().values() if p.device == "gpu"]
    assert min(gpu, key=lambda p: p.priority_for(1 << 24)).name == "counting"


def test_wide_keys_go_to_counting_first_only_alone_many_and_few_valued():
    """32/64-bit keys: counting before onesweep only for keys alone, from
    WIDE_KEYS_FROM keys, spanning (2^8, 2^14] values; never below 4 bytes."""
    from cudasortkit.sdk import registry

    onesweep = registry.plugins()["onesweep"]
    n = CountingSort.WIDE_KEYS_FROM

    def first(**kw):
        req = request(**kw)
        return PLUGIN.priority_for_request(req) < onesweep.priority_for_request(req)

    assert first(dtype="int32", n=n, key_range=(0, 999))
    assert first(dtype="uint64", n=n, key_range=(5, 5 + (1 << 14) - 1))
    assert first(dtype="int32", n=n, probe=lambda: (-300, 300))
    assert not first(dtype="int32", n=n, key_range=(0, 255))           # one onesweep pass
    assert not first(dtype="int64", n=n, key_range=(0, 1 << 14))       # 2^14 + 1 values
    assert not first(dtype="int32", n=n - 1, key_range=(0, 999))       # too few keys
    assert not first(dtype="int32", n=n, key_range=(0, 999), kind="argsort", value_bytes=8)
    assert not first(dtype="uint32", n=n, probe=lambda: None)          # range unknown
    # 8- and 16-bit keys read no range
    assert first(dtype="int16", n=1 << 24, probe=no_probe)


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64", "uint8", "uint16",
                                   "uint32", "uint64"])
def test_bin_layout_matches_ordered_words(dtype):
    info = np.iinfo(dtype)
    bits = 8 * np.dtype(dtype).itemsize
    keys = np.array([info.min, info.min + 1, -1 if info.min else 7, 0, info.max - 1, info.max],
                    dtype)
    lo, hi = int(keys.min()), int(keys.max())
    for descending in (False, True):
        base, bins = bin_layout(dtype, lo, hi, descending)
        assert bins == hi - lo + 1
        ordered = keys.view(f"u{keys.itemsize}").astype(object)
        if info.min:
            ordered = [(int(u) ^ (1 << (bits - 1))) for u in ordered]
        if descending:
            ordered = [((1 << bits) - 1) ^ int(u) for u in ordered]
        got = [(int(u) - base) % (1 << bits) for u in ordered]
        expected = [(hi - int(k)) if descending else (int(k) - lo) for k in keys]
        assert got == expected


def test_histogram_layout():
    assert PLUGIN.histogram_layout(256, 65536) == (1, 256, 32)
    assert PLUGIN.histogram_layout(1000, 65536) == (1, 1000, 8)
    assert PLUGIN.histogram_layout(4096, 65536) == (1, 4096, 2)
    assert PLUGIN.histogram_layout(4097, 65536) == (1, 4097, 0)  # packed 16-bit
    assert PLUGIN.histogram_layout(65536, 65536) == (1, 65536, 0)
    assert PLUGIN.histogram_layout(65536, 16384) == (4, 16384, 0)
    assert PLUGIN.histogram_layout(65537, 65536) == (2, 65536, 0)
    assert PLUGIN.histogram_layout(4 * 65536 + 1, 65536) == (0, 0, 1)  # global atomics
    assert PLUGIN.histogram_layout(RANGE_LIMIT, 65536) == (0, 0, 1)
    assert PLUGIN.histogram_shared(1, 65536, 0) == 128 * 1024
    assert PLUGIN.histogram_shared(1, 4097, 0) == 2049 * 4
    assert PLUGIN.histogram_shared(1, 256, 32) == 32 * 1024
    assert PLUGIN.histogram_shared(0, 0, 1) == 0


def test_default_config_is_valid_on_an_h100():
    cfg = PLUGIN.default_config()
    for dtype in PLUGIN.dtypes:
        for vb in (0, 4, 8):
            assert PLUGIN.valid_config(cfg, dtype, vb, DeviceLimits.sm90())
