"""The shared scan primitive (cudasortkit.sdk.scan.DeviceScan, kernels/scan.cu)
against numpy.cumsum: 32- and 64-bit counts, exclusive and inclusive, lengths
0 ... 2^26 around every tile and level boundary, in place and reused; and
(CI) scan.cu compiles for every count width and tunable value.

Quick tier (-m gpu): lengths up to TILE^2 + 1 (two and three levels); slow
tier (-m "gpu and slow"): 2^26 - 1 and 2^26."""
import os
import shutil
import subprocess
import tempfile

import numpy as np
import pytest

from cudasortkit.sdk import registry
from cudasortkit.build.compiler import NVCC_OPTIONS
from cudasortkit.sdk.scan import (COUNT_BYTES, SCAN_BLOCK, SCAN_BLOCK_CHOICES, SCAN_DTYPE, SCAN_ITEMS,
                              SCAN_ITEMS_CHOICES, scan_config, scan_template)

TILE = SCAN_BLOCK * SCAN_ITEMS
SIZES = [0, 1, 2, 3, 31, 32, 33, 255, 257, TILE - 1, TILE, TILE + 1, 2 * TILE + 7, 7919,
         TILE * TILE - 1, TILE * TILE, TILE * TILE + 1, 10**6 + 3]
LARGE_SIZES = [(1 << 26) - 1, 1 << 26]
NVCC = shutil.which("nvcc")


def _counts(n, count_bytes, rng):
    dt = np.dtype(f"u{count_bytes}")
    # Mostly small counts, some huge ones so the sums wrap like uint32/uint64.
    x = rng.integers(0, 1000, size=n, dtype=np.uint64).astype(dt)
    big = rng.random(n) < 0.01
    x[big] = rng.integers(0, np.iinfo(dt).max, size=int(big.sum()), dtype=dt, endpoint=True)
    return x


def _reference(x, inclusive):
    inc = np.cumsum(x, dtype=x.dtype)
    if inclusive:
        return inc
    out = np.zeros_like(x)
    out[1:] = inc[:-1]
    return out


@pytest.fixture(scope="module")
def job():
    from cudasortkit.gpu.device import get_device
    from cudasortkit.sdk.job import Job

    state = get_device()
    # any plugin's job: the scan is the core's, launched on the job's stream
    j = Job(registry.plugins()["radix"], state, dtype="uint32", n=0, keys_in=0, keys_out=0)
    yield j
    j.release()


def _to_device(state, host):
    buf = state.allocate(max(host.nbytes, 1))
    if host.nbytes:
        state.cuda.memcpy_htod(int(buf), host)
    return buf


def _from_device(state, buf, n, dt):
    out = np.empty(n, dt)
    if n:
        state.cuda.memcpy_dtoh(out, int(buf))
    return out


@pytest.mark.gpu
@pytest.mark.parametrize("count_bytes", COUNT_BYTES)
@pytest.mark.parametrize("inclusive", [False, True])
@pytest.mark.parametrize("sizes", [pytest.param(SIZES, id="sizes"),
                                   pytest.param(LARGE_SIZES, id="large", marks=pytest.mark.slow)])
def test_scan_matches_cumsum(job, count_bytes, inclusive, sizes, rng):
    from cudasortkit.sdk.scan import DeviceScan

    state = job.state
    dt = np.dtype(f"u{count_bytes}")
    for n in sizes:
        x = _counts(n, count_bytes, rng)
        src = _to_device(state, x)
        dst = state.allocate(max(x.nbytes, 1))
        state.cuda.memset_d8(int(dst), 0xA5, max(x.nbytes, 1))
        scan = DeviceScan(job, n, count_bytes=count_bytes)
        scan(int(src), int(dst), inclusive=inclusive)
        state.stream.synchronize()
        got = _from_device(state, dst, n, dt)
        np.testing.assert_array_equal(got, _reference(x, inclusive), err_msg=f"n={n}")
        np.testing.assert_array_equal(_from_device(state, src, n, dt), x, err_msg="input changed")
        total = _from_device(state, scan.total_ptr, 1, dt)[0]
        assert total == (x.sum(dtype=dt) if n else 0), f"total n={n}"
        src.free()
        dst.free()


@pytest.mark.gpu
@pytest.mark.parametrize("count_bytes", COUNT_BYTES)
def test_scan_in_place_and_reused(job, count_bytes, rng):
    """One DeviceScan, called repeatedly (different data, in place) stays right."""
    from cudasortkit.sdk.scan import DeviceScan

    state = job.state
    dt = np.dtype(f"u{count_bytes}")
    n = 3 * TILE * TILE + 5  # three levels
    scan = DeviceScan(job, n, count_bytes=count_bytes)
    for inclusive in (False, True, False):
        x = _counts(n, count_bytes, rng)
        buf = _to_device(state, x)
        scan(int(buf), int(buf), inclusive=inclusive)
        state.stream.synchronize()
        np.testing.assert_array_equal(_from_device(state, buf, n, dt), _reference(x, inclusive))
        buf.free()


def test_bad_count_width():
    with pytest.raises(ValueError):
        scan_template(2)


def _compile(config, count_bytes):
    template = scan_template(count_bytes)
    source = template.render(SCAN_DTYPE, 0, config)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "scan.cu")
        with open(path, "w") as f:
            f.write(source)
        cmd = [NVCC, "--cubin", *NVCC_OPTIONS, "-arch", "sm_75", "-o", os.path.join(tmp, "k.cubin"), path]
        cmd2 = [NVCC, "--cubin", *NVCC_OPTIONS, "-arch", "sm_90", "-o", os.path.join(tmp, "k2.cubin"), path]
        for d in template.include_dirs:
            cmd += ["-I", d]
            cmd2 += ["-I", d]
        r1 = subprocess.run(cmd, capture_output=True, text=True)
        r2 = subprocess.run(cmd2, capture_output=True, text=True)
    return r1.returncode or r2.returncode, f"{config} count_bytes={count_bytes}:\n{r1.stderr}{r2.stderr}"


@pytest.mark.nvcc
@pytest.mark.skipif(NVCC is None, reason="nvcc not found")
@pytest.mark.parametrize("count_bytes", COUNT_BYTES)
def test_scan_kernels_compile(count_bytes):
    base = scan_config()
    space = {"block_size": SCAN_BLOCK_CHOICES, "items_per_thread": SCAN_ITEMS_CHOICES}
    configs = [base] + [dict(base, **{k: v}) for k, vals in space.items()
                        for v in vals if v != base[k]]
    for config in configs:
        rc, msg = _compile(config, count_bytes)
        assert rc == 0, msg
