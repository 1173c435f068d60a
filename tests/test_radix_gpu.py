"""The `radix` plugin beyond the generic conformance suite
(tests/test_gpu_conformance.py -k radix): tile-boundary sizes for several
tunable settings, 2^24 + 7, entropy-reduced keys, denormals, exact stable
argsort (ascending and descending), key-value pairs, and pass skipping
(all-equal keys run no scatter pass, 12-bit keys two 8-bit passes)."""
import os
import shutil
import subprocess
import tempfile

import numpy as np
import pytest

import cudasortkit as csk
from cudasortkit import registry
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


def _plugin():
    return registry.plugins()["radix"]


def _cupy():
    return pytest.importorskip("cupy")


def run_radix(a, config=None, descending=False, values=None):
    """Run the plugin directly (any config) on host arrays; (keys, values) back."""
    cp = _cupy()
    from cudasortkit.device import get_device
    from cudasortkit.job import Job

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
@pytest.mark.parametrize("ci", range(len(CONFIGS)))
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
@pytest.mark.parametrize("dtype", ["uint32", "float64"])
def test_2p24_plus_7(dtype, rng):
    a = make_keys("uniform", dtype, (1 << 24) + 7, rng)
    order = csk.argsort(a, algorithm="radix", stable=True)
    assert np.array_equal(order, np.argsort(a, kind="stable"))
    assert_keys_equal(csk.sort(a, algorithm="radix"), np.sort(a))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["uint64", "int32", "float32", "uint16"])
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
@pytest.mark.parametrize("dtype", ["int16", "float32", "uint64", "int8"])
def test_stable_argsort_matches_numpy(dtype, rng):
    a = make_keys("few_unique", dtype, 1_000_003, rng)
    for descending in (False, True):
        order = csk.argsort(a, algorithm="radix", stable=True, descending=descending)
        assert np.array_equal(order, reference_argsort(a, descending))


@pytest.mark.gpu
@pytest.mark.parametrize("value_dtype", ["uint32", "float32", "int64", "float64"])
def test_pairs(value_dtype, rng):
    keys = make_keys("few_unique", "float32", 250_001, rng)
    values = rng.integers(-10**6, 10**6, keys.size).astype(value_dtype)
    for descending in (False, True):
        k, v = csk.sort_by_key(keys, values, algorithm="radix", descending=descending)
        order = reference_argsort(keys, descending)
        assert_keys_equal(k, keys[order])
        assert np.array_equal(v, values[order])


def _count_scatters(monkeypatch):
    from cudasortkit.job import Job

    seen = []
    original = Job.launch

    def spy(self, kernel, *args, **kwargs):
        seen.append(kernel.name)
        return original(self, kernel, *args, **kwargs)

    monkeypatch.setattr(Job, "launch", spy)
    return seen


@pytest.mark.gpu
def test_all_equal_skips_every_pass(monkeypatch, rng):
    seen = _count_scatters(monkeypatch)
    for dtype in ("uint32", "float64", "int8"):
        a = make_keys("all_equal", dtype, 70_001, rng)
        _check_stable(a)
        _check_stable(a, descending=True)
    assert "radix_downsweep" not in seen
    assert "radix_histogram_all" in seen


@pytest.mark.gpu
def test_mixed_zeros_skip_and_keep_order(rng):
    """-0.0 and +0.0 are one ordered word: all passes skip, input order kept."""
    a = np.where(rng.random(5001) < 0.5, 0.0, -0.0).astype(np.float32)
    _check_stable(a)


@pytest.mark.gpu
def test_twelve_bit_keys_take_two_passes(monkeypatch, rng):
    seen = _count_scatters(monkeypatch)
    a = rng.integers(0, 1 << 12, 1_000_003).astype(np.uint32)
    _check_stable(a)  # argsort run + keys-only run
    assert seen.count("radix_downsweep") == 4, seen
    assert seen.count("radix_upsweep") == 2, seen  # the first pass reuses the histogram


def test_valid_config_rejects_oversized_tiles():
    p = _plugin()
    big = {"digit_bits": 8, "block_size": 512, "items_per_thread": 20}
    assert not p.valid_config(big, "uint64", 8)
    assert p.valid_config(p.default_config(), "uint64", 8)


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not found")
@pytest.mark.parametrize("dtype, value_bytes", [("uint32", 0), ("int64", 8), ("float16", 4)])
def test_compiles_with_64bit_offsets(dtype, value_bytes):
    """The > 2^32-key variant (OFFSET_BYTES 8), which the generic compile test
    (default defines) does not build."""
    from cudasortkit.compiler import NVCC_OPTIONS
    from cudasortkit.render import include_dirs, render

    cls = type(_plugin())
    source = render(cls, "radix.cu", dtype, value_bytes, None, {"offset_bytes": 8})
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "radix.cu")
        with open(path, "w") as f:
            f.write(source)
        cmd = [shutil.which("nvcc"), "--cubin", *NVCC_OPTIONS, "-arch", "sm_90",
               "-o", os.path.join(tmp, "k.cubin"), path]
        for d in include_dirs(cls):
            cmd += ["-I", d]
        result = subprocess.run(cmd, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
