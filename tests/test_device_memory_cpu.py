"""Out of GPU memory (cudasortkit/gpu/device.py), without a GPU: the pool's
allocation and a result array made by CuPy or PyTorch are tried once more
after what cudasortkit keeps for reuse goes back to its pool and every
pool's unused blocks go back to the driver; a second failure is a
MemoryError naming who allocated, and no other error is swallowed."""
from types import SimpleNamespace

import pytest

from cudasortkit.gpu import device
from cudasortkit.gpu.device import DeviceState


class DriverMemoryError(Exception):
    """pycuda's out-of-memory error, as the pool raises it."""


class OutOfMemoryError(RuntimeError):
    """Named as PyTorch's is."""


def _state(failures: int, released: list):
    """A DeviceState's parts that allocate() and allocating() use: a pool
    failing `failures` times, then handing out 0x1000."""
    left = [failures]

    def allocate(nbytes):
        if left[0]:
            left[0] -= 1
            raise DriverMemoryError("out of memory")
        return 0x1000

    pool = SimpleNamespace(allocate=allocate, free_held=lambda: released.append("own pool"))
    state = SimpleNamespace(pool=pool, cuda=SimpleNamespace(MemoryError=DriverMemoryError),
                            name="Test GPU", activate=lambda: None)
    state.free_unused = lambda: DeviceState.free_unused(state)
    return state


@pytest.fixture
def released(monkeypatch):
    calls = []
    monkeypatch.setattr(device, "release_unused_elsewhere", lambda: calls.append("elsewhere"))
    monkeypatch.setattr(device.caches, "release_kept", lambda: calls.append("kept"))
    return calls


def test_the_pool_tries_again_after_kept_memory_and_other_libraries_blocks_go_back(released):
    state = _state(1, released)
    assert DeviceState.allocate(state, 100, "plugin 'x'") == 0x1000
    assert released == ["kept", "elsewhere"]


def test_a_second_failure_is_a_memory_error_naming_who(released):
    state = _state(2, released)
    with pytest.raises(MemoryError, match=r"plugin 'x': out of GPU memory allocating 100 bytes on Test GPU"):
        DeviceState.allocate(state, 100, lambda: "plugin 'x'")
    assert released == ["kept", "elsewhere"]


@pytest.mark.parametrize("error", [MemoryError, OutOfMemoryError])
def test_a_result_array_is_made_again_after_every_pool_gives_back(released, error, monkeypatch):
    state = _state(0, released)
    tries = []

    def make():
        tries.append(1)
        if len(tries) == 1:
            raise error("out of memory allocating 8,589,934,592 bytes")
        return "array"

    assert DeviceState.allocating(state, make) == "array"
    assert released == ["kept", "own pool", "elsewhere"] and len(tries) == 2


def test_other_errors_pass_through_untouched(released):
    state = _state(0, released)

    def make():
        raise ValueError("bad dtype")

    with pytest.raises(ValueError, match="bad dtype"):
        DeviceState.allocating(state, make)
    assert released == []
