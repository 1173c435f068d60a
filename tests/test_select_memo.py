"""select's memo of choices by name and of auto's fallback (no GPU needed:
a fake GPU plugin, a fake tuner hook and gpu_available patched on)."""
import numpy as np
import pytest

from cudasortkit import execute, registry, select
from cudasortkit.arrays import Operand
from cudasortkit.plugin import SortPlugin, Tunable
from cudasortkit.tuning import runtime

#: Above this many keys the fake plugin asks for the key range (like counting).
PROBE_ABOVE = 100


class RangeAsking(SortPlugin):
    name = "range_asking"
    dtypes = ("int32",)
    stable = True
    tunables = {"block_size": Tunable(128)}
    templates = ("bitonic.cu",)
    asked = 0

    def unsupported(self, request):
        type(self).asked += 1
        if request.n > PROBE_ABOVE:
            lo, hi = request.keys_range()
            if hi - lo > 1000:
                return "keys span too many values"
        return super().unsupported(request)

    def run(self, job):
        raise NotImplementedError


class FakeTuner:
    """select.policy with nothing measured; `pending` while lazy tuning is
    unfinished; with `shape_key`, select keys its memo on the tuner's key."""

    def __init__(self, shape_key=None):
        self.pending_shapes = False
        self.cached = lambda request: None
        self.pending = lambda request: self.pending_shapes
        if shape_key is not None:
            self.shape_key = shape_key

    def __call__(self, request, candidates):
        return None


@pytest.fixture(params=[None, runtime._fast_key], ids=["own-key", "tuner-key"])
def fake_gpu(request, monkeypatch):
    registry.register(RangeAsking)
    alone = {n: registry.plugins()[n] for n in ("range_asking", "numpy")}
    monkeypatch.setattr(registry, "plugins", lambda: alone)  # counting would measure int keys too
    tuner = FakeTuner(request.param)
    monkeypatch.setattr(select, "_tuning_loaded", True)
    monkeypatch.setattr(select, "policy", tuner)
    monkeypatch.setattr(select, "configure", lambda request, plugin: {"block_size": 128})
    monkeypatch.setattr(select, "gpu_available", lambda: True)
    RangeAsking.asked = 0
    select.forget_decisions()
    yield tuner
    registry.entries().pop(RangeAsking.name, None)
    runtime.reset()


def sort_request(n, spread=10, key_range=None, descending=False):
    keys = Operand((np.arange(n, dtype=np.int32) % 7) * spread, "a")
    return execute.make_request("sort", keys, None, descending, True, key_range)


def asks(algorithm, *requests):
    """How often the plugin's unsupported() ran while choosing for each request."""
    before = RangeAsking.asked
    for r in requests:
        select.choose(r, algorithm)
    return RangeAsking.asked - before


@pytest.mark.parametrize("algorithm", ["range_asking", "auto"])
def test_choices_are_memoised_per_shape(fake_gpu, algorithm):
    assert asks(algorithm, sort_request(50), sort_request(50), sort_request(50)) == 1
    assert asks(algorithm, sort_request(50, descending=True)) == 1  # another shape
    plugin, config = select.choose(sort_request(50), "range_asking")
    assert plugin.name == "range_asking" and config == {"block_size": 128}
    config["block_size"] = 1  # the caller's copy
    assert select.choose(sort_request(50), "range_asking")[1] == {"block_size": 128}


@pytest.mark.parametrize("algorithm", ["range_asking", "auto"])
def test_choices_that_measured_the_keys_are_not_memoised(fake_gpu, algorithm):
    assert asks(algorithm, sort_request(500), sort_request(500)) == 2
    with pytest.raises(ValueError, match="too many values"):
        select.choose(sort_request(500, spread=1000), "range_asking")
    assert select.choose(sort_request(500, spread=1000), "auto")[0].name == "numpy"


@pytest.mark.parametrize("algorithm", ["range_asking", "auto"])
def test_key_range_options_and_pending_tuning_are_not_memoised(fake_gpu, algorithm):
    assert asks(algorithm, sort_request(50, key_range=(0, 9)), sort_request(50, key_range=(0, 9))) == 2
    with_options = execute.make_request("sort", Operand(np.zeros(50, np.int32)), None, False, True,
                                    None, hint=1)
    assert asks(algorithm, with_options, with_options) == 2
    fake_gpu.pending_shapes = True
    assert asks(algorithm, sort_request(50), sort_request(50)) == 2
    fake_gpu.pending_shapes = False
    assert asks(algorithm, sort_request(50), sort_request(50)) == 1


def test_tuning_changes_and_new_plugins_forget_choices(fake_gpu):
    assert asks("range_asking", sort_request(50), sort_request(50)) == 1
    runtime.reset()
    assert asks("range_asking", sort_request(50)) == 1
    runtime.Context(None, None).changed()
    assert asks("range_asking", sort_request(50)) == 1
    registry.register(RangeAsking)  # the registry changed
    assert asks("range_asking", sort_request(50), sort_request(50)) == 1


def test_a_swapped_hook_is_not_answered_from_the_memo(fake_gpu, monkeypatch):
    assert select.choose(sort_request(50), "range_asking")[1] == {"block_size": 128}
    monkeypatch.setattr(select, "configure", lambda request, plugin: {"block_size": 64})
    assert select.choose(sort_request(50), "range_asking")[1] == {"block_size": 64}
    cpu = registry.plugins()["numpy"]
    assert select.choose(sort_request(50), "auto")[0] is cpu
    picked = (registry.plugins()["range_asking"], None)
    monkeypatch.setattr(select, "policy", lambda request, candidates: picked)
    assert select.choose(sort_request(50), "auto") == picked
