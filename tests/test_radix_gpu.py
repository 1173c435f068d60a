"""The `radix` plugin beyond the generic conformance suite
(tests/test_gpu_conformance.py -k radix): tile-boundary sizes for several
tunable settings, 2^24 + 7, entropy-reduced keys, denormals, exact stable
argsort (ascending and descending), key-value pairs, and the device-side
pass plan (all-equal keys: pass 0 only, 12-bit keys: two 8-bit passes).

Quick tier (-m gpu): tile boundaries at the default config, NaNs, denormals
and zeros, one dtype of each sweep. Slow tier (-m "gpu and slow"): the
other configs and dtypes, 2^24 + 7 keys."""
import dataclasses
import os
import shutil
import subprocess
import tempfile

import numpy as np
import pytest

import cudasortkit as csk
from cudasortkit.sdk import registry
from cudasortkit.dtypes import key_dtype
from helpers import assert_keys_equal, make_keys, reference_argsort


CONFIGS = [
    None,  # defaults: 8-bit digits, 256 threads x 16 keys
    {"digit_bits": 4, "block_size": 128, "items_per_thread": 4},
    {"digit_bits": 5, "block_size": 512, "items_per_thread": 8},
    {"digit_bits": 8, "block_size": 128, "items_per_thread": 20},  # 2 digits per thread in scans
    {"digit_bits": 7, "block_size": 256, "items_per_thread": 12},
]
BOUNDARY_DTYPES = ["uint32", "float32", "int64", "float16", "int8"]
slow = pytest.mark.slow


def quick(values, *keep):
    """`values` as parameters, all but those in `keep` marked slow."""
    return [v if v in keep else pytest.param(v, marks=slow) for v in values]


def _plugin():
    return registry.plugins()["radix"]


def _cupy():
    return pytest.importorskip("cupy")


def run_radix(a, config=None, descending=False, values=None):
    """Run the plugin directly (any config) on host arrays; (keys, values) back."""
    cp = _cupy()
    from cudasortkit.gpu.device import get_device
    from cudasortkit.sdk.job import Job

    plugin = _plugin()
    state = get_device()
    kd = key_dtype(a.dtype)
    keys_in = cp.asarray(a.view(kd))
    keys_out = cp.asarray(np.full(a.nbytes, 0xA5, np.uint8)).view(kd)  # poisoned
    vin = vout = None
    vb = 0
    if values is not None:
        vin = cp.asarray(values)
        vout = cp.asarray(np.full(values.nbytes, 0xA5, np.uint8)).view(values.dtype)
        vb = values.dtype.itemsize
    cp.cuda.Device().synchronize()
    job = Job(plugin, state, dtype=kd.name, n=a.size, keys_in=keys_in.data.ptr,
              keys_out=keys_out.data.ptr, values_in=0 if vin is None else vin.data.ptr,
              values_out=0 if vout is None else vout.data.ptr, value_bytes=vb,
              descending=descending, config=config or plugin.default_config())
    try:
        plugin.run(job)
    finally:
        job.finish()
    assert np.array_equal(keys_in.get().view(np.uint8), a.view(np.uint8)), "keys_in was modified"
    k = keys_out.get().view(a.dtype)
    return k, (None if vout is None else vout.get())


def _check_stable(a, config=None, descending=False):
    order = reference_argsort(a, descending)
    idx = np.arange(a.size, dtype=np.int64)
    k, v = run_radix(a, config, descending, values=idx)
    assert_keys_equal(k, a[order], f"keys n={a.size} {config} desc={descending}")
    if not np.array_equal(v, order):
        bad = np.flatnonzero(v != order)
        raise AssertionError(f"argsort n={a.size} {config} desc={descending} differs at {bad[:5]}")
    k2, _ = run_radix(a, config, descending)
    assert_keys_equal(k2, a[order], f"keys-only n={a.size} {config}")


@pytest.mark.gpu
@pytest.mark.parametrize("ci", quick(range(len(CONFIGS)), 0))  # quick: the default config
def test_tile_boundaries(ci, rng):
    config = CONFIGS[ci]
    full = dict(_plugin().default_config(), **(config or {}))
    tile = full["block_size"] * full["items_per_thread"]
    dtypes = BOUNDARY_DTYPES if ci == 0 else BOUNDARY_DTYPES[ci % 3: ci % 3 + 2]
    for dtype in dtypes:
        for n in (2, tile - 1, tile, tile + 1, 3 * tile + 1, 300 * tile + 17):
            a = make_keys("few_unique" if n % 2 else "uniform", dtype, n, rng)
            _check_stable(a, config, descending=bool(n % 3 == 0))


@pytest.mark.gpu
@slow
@pytest.mark.parametrize("dtype", ["uint32", "float64"])
def test_2p24_plus_7(dtype, rng):
    a = make_keys("uniform", dtype, (1 << 24) + 7, rng)
    order = csk.argsort(a, algorithm="radix", stable=True)
    assert np.array_equal(order, np.argsort(a, kind="stable"))
    assert_keys_equal(csk.sort(a, algorithm="radix"), np.sort(a))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", quick(["uint64", "int32", "float32", "uint16"], "uint64"))
def test_entropy_reduced(dtype, rng):
    for _ in range(3):
        a = make_keys("entropy_reduced", dtype, 300_007, rng)
        _check_stable(a, descending=bool(rng.integers(2)))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_denormals_zeros_nans(dtype, rng):
    fi = np.finfo(dtype)
    tiny = fi.smallest_subnormal
    sub = (rng.integers(-50, 50, 200_003) * tiny).astype(dtype)  # subnormals and +-0
    specials = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, fi.tiny, -fi.tiny], dtype)
    mask = rng.random(sub.size) < 0.1
    sub[mask] = rng.choice(specials, int(mask.sum()))
    for descending in (False, True):
        _check_stable(sub, descending=descending)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", quick(["int16", "float32", "uint64", "int8"], "float32"))
def test_stable_argsort_matches_numpy(dtype, rng):
    a = make_keys("few_unique", dtype, 1_000_003, rng)
    for descending in (False, True):
        order = csk.argsort(a, algorithm="radix", stable=True, descending=descending)
        assert np.array_equal(order, reference_argsort(a, descending))


@pytest.mark.gpu
@pytest.mark.parametrize("value_dtype", quick(["uint32", "float32", "int64", "float64"], "uint32", "float64"))
def test_pairs(value_dtype, rng):
    keys = make_keys("few_unique", "float32", 250_001, rng)
    values = rng.integers(-10**6, 10**6, keys.size).astype(value_dtype)
    for descending in (False, True):
        k, v = csk.sort_by_key(keys, values, algorithm="radix", descending=descending)
        order = reference_argsort(keys, descending)
        assert_keys_equal(k, keys[order])
        assert np.array_equal(v, values[order])


def _plan(dtype, n, digits_per_pass):
    """radix_plan (default config) on hand-made digit totals: digits_per_pass[p]
    lists the digits that hold keys in pass p (their counts split n evenly)."""
    cp = _cupy()
    from cudasortkit.gpu.device import get_device
    from cudasortkit.sdk.job import Job

    plugin = _plugin()
    cfg = plugin.default_config()
    passes = plugin.passes(cfg, np.dtype(dtype).itemsize)
    radix = 1 << cfg["digit_bits"]
    totals = np.zeros((passes, radix), np.uint64)
    for p, digits in enumerate(digits_per_pass):
        for k, d in enumerate(digits):
            totals[p, d] = n // len(digits) + (k < n % len(digits))
    totals_d = cp.asarray(totals.ravel())
    plan_d = cp.full(passes, 12345, cp.int32)  # poisoned
    cp.cuda.Device().synchronize()
    job = Job(plugin, get_device(), dtype=dtype, n=n, keys_in=0, keys_out=0, config=cfg)
    kernel = job.kernel("radix.cu", "radix_plan", defines={"offset_bytes": 4})
    try:
        job.launch(kernel, 1, cfg["block_size"], totals_d.data.ptr, n, plan_d.data.ptr)
    finally:
        job.finish()
    return [int(x) for x in plan_d.get()]


@pytest.mark.gpu
def test_plan_skips_trivial_passes():
    """The device-side plan: -1 for a pass whose digit is the same for every
    key, else index | active << 8 (the kernels of skipped passes return at once)."""
    varied = list(range(256))
    # 12-bit keys: two active passes of four
    assert _plan("uint32", 1000, [varied, range(16), [0], [0]]) == [0 | 2 << 8, 1 | 2 << 8, -1, -1]
    # low byte constant: the first active pass is pass 1
    assert _plan("uint32", 1000, [[7], varied, varied, varied]) == [-1, 0 | 3 << 8, 1 | 3 << 8, 2 | 3 << 8]
    # all keys equal: pass 0 still runs (a stable copy into keys_out)
    assert _plan("uint64", 5, [[3]] * 8) == [0 | 1 << 8] + [-1] * 7
    # n == 0: every digit total (0) equals n
    assert _plan("uint32", 0, [[], [], [], []]) == [0 | 1 << 8, -1, -1, -1]


@pytest.mark.gpu
def test_all_equal_keys(rng):
    for dtype in ("uint32", "float64", "int8"):
        a = make_keys("all_equal", dtype, 70_001, rng)
        _check_stable(a)
        _check_stable(a, descending=True)


@pytest.mark.gpu
def test_mixed_zeros_keep_order(rng):
    """-0.0 and +0.0 are one ordered word: every pass is trivial, pass 0 runs
    as a stable copy (canonicalising -0.0), input order kept."""
    a = np.where(rng.random(5001) < 0.5, 0.0, -0.0).astype(np.float32)
    _check_stable(a)


@pytest.mark.gpu
def test_twelve_bit_keys(rng):
    a = rng.integers(0, 1 << 12, 1_000_003).astype(np.uint32)
    _check_stable(a)  # argsort run + keys-only run


def test_valid_config_keeps_two_downsweep_blocks_per_sm():
    from cudasortkit.gpu.device import DeviceLimits

    p = _plugin()
    h100 = DeviceLimits.sm90()
    big = {"digit_bits": 8, "block_size": 512, "items_per_thread": 20}  # 103 KiB: two fit
    bigger = dict(big, block_size=1024, items_per_thread=16)  # 153 KiB: one
    assert p.valid_config(big, "uint64", 8, h100)
    assert not p.valid_config(bigger, "uint64", 8, h100)
    assert p.valid_config(p.default_config(), "uint64", 8, h100)
    small_sm = dataclasses.replace(h100, shared_per_sm=164 * 1024, shared_per_block_optin=163 * 1024)
    assert not p.valid_config(big, "uint64", 8, small_sm)  # sm_80: 81 KiB a block for two


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not found")
@pytest.mark.parametrize("dtype, value_bytes", [("uint32", 0), ("int64", 8), ("float16", 4)])
def test_compiles_with_64bit_offsets(dtype, value_bytes):
    """The > 2^32-key variant (OFFSET_BYTES 8), which the generic compile test
    (default defines) does not build."""
    from cudasortkit.build.compiler import NVCC_OPTIONS
    from cudasortkit.build.template import KernelTemplate

    plugin = _plugin()
    template = KernelTemplate("radix.cu", plugin.template_package, {"offset_bytes": 8})
    source = template.render(dtype, value_bytes, plugin.default_config())
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "radix.cu")
        with open(path, "w") as f:
            f.write(source)
        cmd = [shutil.which("nvcc"), "--cubin", *NVCC_OPTIONS, "-arch", "sm_90",
               "-o", os.path.join(tmp, "k.cubin"), path]
        for d in template.include_dirs:
            cmd += ["-I", d]
        result = subprocess.run(cmd, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
