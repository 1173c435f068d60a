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
                                     (2048, "block_radix"), (2049, "merge_sort"),
                                     (1 << 12, "merge_sort")])
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
