"""Uniform rows sorted keys alone by one warp each (plugins/warp_rows.py,
kernels/warp_bitonic.cu), through block_radix and rows by name and auto,
against NumPy row by row: row lengths around every network width (64 to
1024 keys) and the warps of a block, keys of 1, 2 and 4 bytes with NaN,
-0.0/+0.0, infinities and the integer limits, both orders; results bit
for bit those of the plugins' other kernels (row_network 0); the input
untouched. Result buffers are poisoned by the test session's debug
setting."""
import numpy as np
import pytest

import cudasortkit as csk
from cudasortkit.sdk import registry
from helpers import assert_keys_equal, make_keys, reference_sort, small_key_dtypes, to_numpy

pytestmark = pytest.mark.gpu

LENGTHS = [2, 3, 5, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257, 509, 511, 512, 513,
           1000, 1023, 1024]
ROWS = 37  # five blocks of eight warps, the last one part-full


def _sorted_rows(a, descending):
    return np.stack([reference_sort(row, descending) for row in a])


def _run(name, dev, descending, row_network=None):
    """`name` by name, or with its row_network tunable set (run_plugin)."""
    if row_network is None:
        return csk.sort(dev, axis=-1, algorithm=name, descending=descending)
    from cudasortkit.dispatch.execute import run_plugin
    from cudasortkit.sdk.segments import Segments

    plugin = registry.plugins()[name]
    config = {**plugin.default_config(), "row_network": row_network}
    rows, length = dev.shape
    keys, _ = run_plugin(plugin, config, "sort", dev.reshape(-1), None, descending=descending,
                         segments=Segments.rows(rows, length))
    return keys.reshape(rows, length)


@pytest.mark.parametrize("name", ["block_radix", "rows"])
@pytest.mark.parametrize("dtype", small_key_dtypes())
def test_rows_of_every_width(name, dtype, rng):
    cupy = pytest.importorskip("cupy")
    limit = registry.plugins()[name].default_config()["row_network"]
    for length in LENGTHS:
        a = make_keys("special", dtype, ROWS * length, rng).reshape(ROWS, length)
        dev = cupy.asarray(a)
        for descending in (False, True):
            what = f"{name} {dtype} rows of {length} desc={descending}"
            got = _run(name, dev, descending)
            assert_keys_equal(got, _sorted_rows(a, descending), what)
            if length <= limit:
                other = _run(name, dev, descending, row_network=0)
                assert np.array_equal(to_numpy(got).view(np.uint8),
                                      to_numpy(other).view(np.uint8)), what + ": not the other kernel's"
        assert np.array_equal(to_numpy(dev).view(np.uint8), a.view(np.uint8)), "input was modified"


@pytest.mark.parametrize("dist", ["uniform", "few_unique", "all_equal", "sorted", "reverse"])
def test_many_rows_and_auto(dist, rng):
    """Thousands of rows (a grid of many blocks), and what auto runs for
    keys-only rows, for several distributions."""
    cupy = pytest.importorskip("cupy")
    for length, rows in ((16, 5000), (200, 4097), (700, 1500)):
        a = make_keys(dist, "float32", rows * length, rng).reshape(rows, length)
        for descending in (False, True):
            got = csk.sort(cupy.asarray(a), axis=-1, descending=descending)
            assert_keys_equal(got, _sorted_rows(a, descending),
                              f"auto {dist} rows {rows} x {length} desc={descending}")


def test_torch_rows_and_argsort_unchanged(rng):
    """A CUDA tensor's rows by the warp network; argsort of the same rows
    (not keys alone: the plugins' stable kernels) still NumPy's stable order."""
    torch = pytest.importorskip("torch")
    a = make_keys("few_unique", "int32", 300 * 100, rng).reshape(300, 100)
    t = torch.as_tensor(a, device="cuda")
    for name in ("block_radix", "rows", "auto"):
        got = csk.sort(t, axis=-1, algorithm=name)
        assert isinstance(got, torch.Tensor) and got.is_cuda
        assert_keys_equal(got, _sorted_rows(a, False), name)
        order = csk.argsort(t, axis=-1, algorithm=name, stable=True)
        assert np.array_equal(to_numpy(order), np.argsort(a, axis=-1, kind="stable")), name
