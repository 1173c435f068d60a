"""The batched plugins' kernels in the variants their run() builds beyond the
tunables: rows.cu at every tile it launches (up to 4096 slots of 8-byte keys
with 8-byte values, the most shared memory), segmented.cu per key width, and
block_radix.cu at the tiles block_radix.py launches, block_bitonic.cu at
every width and block it launches, warp_bitonic.cu at every width
(plugins/warp_rows.py). Skipped only when nvcc is missing."""
import shutil

import pytest

from cudasortkit.build.template import KernelTemplate
from test_kernels_compile import compile_template

pytestmark = pytest.mark.nvcc
NVCC = shutil.which("nvcc")


@pytest.mark.skipif(NVCC is None, reason="nvcc not found")
@pytest.mark.parametrize("tile", [1024, 4096])
@pytest.mark.parametrize("dtype, vb", [("float64", 8), ("int8", 0)])
def test_rows_tiles_compile(tile, dtype, vb):
    template = KernelTemplate("rows.cu", "cudasortkit.kernels", {"tile": tile})
    rc, msg = compile_template(template, dtype, vb, {"block_size": 512, "min_tile": 1024},
                               f"rows.cu tile={tile}")
    assert rc == 0, msg


@pytest.mark.skipif(NVCC is None, reason="nvcc not found")
@pytest.mark.parametrize("items, block, dtype, vb",
                         [(items, block, dtype, vb) for items, block in ((16, 256), (1, 512), (4, 512))
                          for dtype, vb in (("float32", 8), ("int8", 0), ("uint16", 4))]
                         + [(8, 512, "float32", 0), (8, 512, "uint16", 4)]
                         + [(1, 1024, "int8", 8), (2, 1024, "float32", 8), (4, 1024, "float32", 0),
                            (4, 1024, "bfloat16", 0)])
def test_block_radix_compile(items, block, dtype, vb):
    """block_radix.cu at the tiles block_radix.py launches (256 x 16 keys is
    the most shared memory; 512 x 8 4-byte keys only where they move alone,
    block_radix_rows without its several-segments kernel; 1024 threads with
    16-bit digit counters for one array, 4 keys a thread only keys alone)."""
    template = KernelTemplate("block_radix.cu", "cudasortkit.kernels", {"items_per_thread": items})
    config = {"block_size": block, "tile_items": 16, "tiles_up_to": 256, "warp_match": 2}
    rc, msg = compile_template(template, dtype, vb, config, f"block_radix.cu items={items}")
    assert rc == 0, msg


#: (network width, threads) block_radix.py's _network launches for
#: network_threads 128, 256 and 512 (at most half the width).
NETWORKS = sorted({(1 << w, min(t, 1 << (w - 1))) for w in range(6, 13) for t in (128, 256, 512)})


@pytest.mark.skipif(NVCC is None, reason="nvcc not found")
@pytest.mark.parametrize("unroll", [0, 1])
@pytest.mark.parametrize("width, threads", NETWORKS)
def test_block_bitonic_compile(width, threads, unroll):
    template = KernelTemplate("block_bitonic.cu", "cudasortkit.kernels",
                              {"net_keys": width, "net_unroll": unroll})
    for dtype in ("float32", "int8") if width in (64, 4096) else ("uint32",):
        rc, msg = compile_template(template, dtype, 0, {"block_size": threads},
                                   f"block_bitonic.cu net_keys={width}")
        assert rc == 0, msg


@pytest.mark.skipif(NVCC is None, reason="nvcc not found")
@pytest.mark.parametrize("unroll", [0, 1])
@pytest.mark.parametrize("width", [64, 128, 256, 512, 1024])
def test_warp_bitonic_compile(width, unroll):
    from cudasortkit.plugins import warp_rows

    template = KernelTemplate(warp_rows.TEMPLATE, "cudasortkit.kernels",
                              {"net_keys": width, "net_unroll": unroll, "wb_threads": warp_rows.BLOCK})
    for dtype in ("float32", "int8", "bfloat16") if width in (64, 1024) else ("uint32",):
        rc, msg = compile_template(template, dtype, 0, {"block_size": warp_rows.BLOCK},
                                   f"warp_bitonic.cu net_keys={width}")
        assert rc == 0, msg
