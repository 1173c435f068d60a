"""Which plugin auto gives a small 1-D device sort with nothing measured
(no GPU needed: the real registry, the default policy, gpu_available
patched on): block_radix sorts one array of up to 2,048 keys of at most 4
bytes as one row, merge_sort takes over above that; block_radix refuses
arrays longer than its one row and says so."""
import numpy as np
import pytest

from cudasortkit.dispatch import select
from cudasortkit.dispatch.request import make_request
from cudasortkit.dispatch.select import DefaultPolicy, Selector
from cudasortkit.gpu.arrays import Operand
from cudasortkit.sdk import registry
from cudasortkit.sdk.plugin import Request


@pytest.fixture
def selector(monkeypatch):
    monkeypatch.setattr(select, "gpu_available", lambda: True)
    return Selector(DefaultPolicy())


def device_request(kind, dtype, n):
    keys = Operand(np.zeros(n, dtype=dtype), "a")
    request = make_request(kind, keys, None, False, kind != "sort", None)
    return Request.from_fields(**{**vars(request), "on_device": True})


@pytest.mark.parametrize("dtype", ["uint32", "float32", "int16", "uint8"])
@pytest.mark.parametrize("kind", ["sort", "argsort"])
@pytest.mark.parametrize("n, name", [(2, "block_radix"), (1000, "block_radix"),
                                     (2048, "block_radix"), (2049, "block_radix"),
                                     (1 << 12, "block_radix"), ((1 << 12) + 1, "merge_sort")])
def test_small_arrays_go_to_one_block_s_radix_sort(selector, kind, dtype, n, name):
    assert selector.choose(device_request(kind, dtype, n), "auto")[0].name == name


def test_eight_byte_keys_stay_with_merge_sort(selector):
    assert selector.choose(device_request("sort", "float64", 1000), "auto")[0].name == "merge_sort"


def test_block_radix_names_its_one_array_limit():
    plugin = registry.plugins()["block_radix"]
    assert plugin.unsupported(device_request("sort", "uint32", 4096)) is None
    why = plugin.unsupported(device_request("sort", "uint32", 4097))
    assert why == ("block_radix sorts rows, segments and arrays of at most 4,096 keys, "
                   "not 4,097")


class LaunchRecorder:
    """Just enough of a Job for block_radix's run() on one array (no
    request: the tuner's way in): records the kernels it builds and launches."""

    def __init__(self, n, value_bytes=0, key_bytes=4, **config):
        plugin = registry.plugins()["block_radix"]
        self.n, self.value_bytes, self.key_bytes, self.request = n, value_bytes, key_bytes, None
        self.config = {**plugin.default_config("uint32", value_bytes), **config}
        self.keys_in, self.keys_out, self.values_in, self.values_out = 11, 22, 33 if value_bytes else 0, 44
        self.desc_mask = 0xFFFFFFFF
        self.built, self.launches = [], []
        plugin.run(self)

    def kernel(self, template, name, defines=None, config=None, value_bytes=None):
        self.built.append((template, name, dict(defines or {}), dict(config or self.config)))
        return name

    def launch(self, kernel, grid, block, *args, shared=0):
        self.launches.append((kernel, grid, block, args))


@pytest.mark.parametrize("n, width, threads", [(1, 64, 32), (64, 64, 32), (65, 128, 64),
                                               (1000, 1024, 128), (1025, 2048, 128),
                                               (3001, 4096, 128), (4096, 4096, 128)])
def test_array_kernel_1_sorts_keys_alone_by_the_bitonic_network(n, width, threads):
    job = LaunchRecorder(n, array_kernel=1, network_threads=128, network_unroll=0)
    assert job.launches == [("block_bitonic_sort", 1, threads, (11, 22, n, 0xFFFFFFFF))]
    assert job.built == [("block_bitonic.cu", "block_bitonic_sort",
                          {"net_keys": width, "net_unroll": 0}, {"block_size": threads})]


def test_one_array_sorted_keys_alone_goes_to_the_unrolled_network_by_default():
    job = LaunchRecorder(3000)
    assert job.built == [("block_bitonic.cu", "block_bitonic_sort",
                          {"net_keys": 4096, "net_unroll": 1}, {"block_size": 256})]


@pytest.mark.parametrize("threads, expected", [(256, 256), (512, 512)])
def test_network_threads_cap_the_network_s_block(threads, expected):
    job = LaunchRecorder(4096, array_kernel=1, network_threads=threads)
    assert job.launches[0][2] == expected and job.built[0][2]["net_keys"] == 4096


def test_network_unroll_picks_the_network_s_code():
    job = LaunchRecorder(3000, array_kernel=1, network_unroll=1)
    assert job.built[0][2] == {"net_keys": 4096, "net_unroll": 1}


def test_the_network_leaves_pairs_to_the_radix_sort():
    job = LaunchRecorder(2048, value_bytes=8, array_kernel=1)
    assert [k for k, *_ in job.launches] == ["block_radix_rows"]


@pytest.mark.parametrize("n, value_bytes, block, items", [
    (1024, 0, 1024, 1), (2048, 0, 1024, 2), (4096, 0, 1024, 4),
    (2048, 8, 1024, 2),   # keys, positions and 16-bit counters fit 48 KiB
    (4096, 8, 256, 16)])  # they do not at 4 keys a thread: 256 x 16, as with 512
def test_array_block_1024(n, value_bytes, block, items):
    job = LaunchRecorder(n, value_bytes=value_bytes, array_kernel=0, array_block=1024)
    (kernel, grid, launched, _), = job.launches
    assert (kernel, grid, launched) == ("block_radix_rows", 1, block)
    template, name, defines, config = job.built[0]
    assert defines == {"items_per_thread": items} and config["block_size"] == block


def test_shared_bytes_counts_16_bit_counters_above_512_threads():
    from cudasortkit.plugins.block_radix import SHARED_LIMIT, _shared_bytes

    # keys alone: 16 KiB of keys, one aux slot, 32 warps x 258 16-bit counters
    assert _shared_bytes(1024, 4, 4, aux=False) == 16384 + 4 + 32 * 516 + 33 * 4 + 32
    assert _shared_bytes(1024, 4, 4, aux=True) > SHARED_LIMIT
    assert _shared_bytes(512, 8, 4, aux=False) == 16384 + 4 + 16 * 1024 + 17 * 4 + 32


def test_warp_rows_take_keys_only_rows_of_33_to_the_limit():
    """plugins/warp_rows.serves: keys alone, longer than half the narrowest
    network, at most the tunable's limit and the widest network; both row
    plugins declare the tunable and ship the template."""
    from cudasortkit.plugins import warp_rows
    from cudasortkit.sdk import registry

    assert not warp_rows.serves(32, 1024, True) and warp_rows.serves(33, 1024, True)
    assert warp_rows.serves(1024, 1024, True) and not warp_rows.serves(1025, 4096, True)
    assert not warp_rows.serves(256, 1024, False) and not warp_rows.serves(256, 0, True)
    assert not warp_rows.serves(257, 256, True)
    assert [warp_rows.width(n) for n in (33, 64, 65, 1000)] == [64, 64, 128, 1024]
    for name in ("block_radix", "rows"):
        plugin = registry.plugins()[name]
        assert warp_rows.TEMPLATE in plugin.templates
        assert plugin.default_config()["row_network"] == 1024
