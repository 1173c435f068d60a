"""The Selector's one decision cache (no GPU needed: a fake GPU plugin, a
fake policy and gpu_available patched on): decisions are memoised per
request shape, except those that read the keys, carry a key_range or
options, or that the policy says may still change; a new plugin or a new
policy generation is never answered from the cache."""
import numpy as np
import pytest

from cudasortkit.dispatch.request import make_request
from cudasortkit.sdk import registry
from cudasortkit.dispatch import select
from cudasortkit.gpu.arrays import Operand
from cudasortkit.sdk.plugin import Request, SortPlugin, Tunable
from cudasortkit.dispatch.select import Choice, DefaultPolicy, Selector

#: Above this many keys the fake plugin asks for the key range (like counting).
PROBE_ABOVE = 100


class RangeAsking(SortPlugin):
    name = "range_asking"
    dtypes = ("int32",)
    stable = True
    priority = 5
    decides_on_key_range = True
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


class FakePolicy(DefaultPolicy):
    """The default rule, a fixed config by name, and switches for tests."""

    def __init__(self):
        self.generation = 0
        self.final = True
        self.config = {"block_size": 128}

    def choose(self, request, candidates):
        c = super().choose(request, candidates)
        return Choice(c.plugin, c.config, c.reason, self.final)

    def configure(self, request, plugin):
        return dict(self.config)


@pytest.fixture
def fake_gpu(monkeypatch):
    registry.register(RangeAsking)
    alone = {n: registry.plugins()[n] for n in ("range_asking", "numpy")}
    monkeypatch.setattr(registry, "plugins", lambda: alone)  # counting would measure int keys too
    monkeypatch.setattr(select, "gpu_available", lambda: True)
    RangeAsking.asked = 0
    policy = FakePolicy()
    yield Selector(policy)
    registry.entries().pop(RangeAsking.name, None)
    registry.refresh()


def sort_request(n, spread=10, key_range=None, descending=False, on_device=True):
    """A request as for device keys (host arrays this short stay on the CPU
    plugin without asking GPU plugins); its range probe reads host keys."""
    keys = Operand((np.arange(n, dtype=np.int32) % 7) * spread, "a")
    return as_device(make_request("sort", keys, None, descending, True, key_range),
                     on_device)


def as_device(request, on_device=True):
    return Request.from_fields(**{**vars(request), "on_device": on_device})


def asks(selector, algorithm, *requests):
    """How often the plugin's unsupported() ran while choosing for each request."""
    before = RangeAsking.asked
    for r in requests:
        selector.choose(r, algorithm)
    return RangeAsking.asked - before


@pytest.mark.parametrize("algorithm", ["range_asking", "auto"])
def test_choices_are_memoised_per_shape(fake_gpu, algorithm):
    assert asks(fake_gpu, algorithm, sort_request(50), sort_request(50), sort_request(50)) == 1
    assert asks(fake_gpu, algorithm, sort_request(50, descending=True)) == 1  # another shape
    plugin, config = fake_gpu.choose(sort_request(50), "range_asking")
    assert plugin.name == "range_asking" and config == {"block_size": 128}
    config["block_size"] = 1  # the caller's copy
    assert fake_gpu.choose(sort_request(50), "range_asking")[1] == {"block_size": 128}


def test_choosing_a_plugin_that_read_the_keys_range_is_not_memoised(fake_gpu):
    algorithm = "range_asking"
    assert asks(fake_gpu, algorithm, sort_request(500), sort_request(500)) == 2
    with pytest.raises(ValueError, match="too many values"):
        fake_gpu.choose(sort_request(500, spread=1000), "range_asking")


def test_a_choice_the_range_turned_away_is_reused_for_a_while(fake_gpu):
    """The keys were too spread for the range-deciding plugin: the plugin
    chosen instead sorts any keys, so the range is read again only every
    PROBE_REUSE calls."""
    wide = sort_request(500, spread=1000)
    assert fake_gpu.choose(wide, "auto")[0].name == "numpy"
    assert asks(fake_gpu, "auto", *[sort_request(500, spread=1000)] * Selector.PROBE_REUSE) == 0
    assert asks(fake_gpu, "auto", sort_request(500, spread=1000)) == 1  # read again


def test_keys_that_stay_spread_are_read_less_and_less_often(fake_gpu):
    """Each read of the range that turns the shape away from the
    range-deciding plugin again doubles the calls before the next read;
    keys that fit that plugin at a read start the count over."""
    wide, narrow = sort_request(500, spread=1000), sort_request(500)
    reads = [asks(fake_gpu, "auto", wide) for _ in range(1 + 64 + 1 + 128 + 1 + 256 + 1)]
    assert [i for i, r in enumerate(reads) if r] == [0, 65, 65 + 129, 65 + 129 + 257]
    for _ in range(512):  # the 512 calls granted at the last read
        assert fake_gpu.choose(wide, "auto")[0].name == "numpy"
    assert fake_gpu.choose(narrow, "auto")[0].name == "range_asking"  # read: the keys fit
    assert fake_gpu.choose(wide, "auto")[0].name == "numpy"  # asked, turned away again
    assert asks(fake_gpu, "auto", *[wide] * Selector.PROBE_REUSE) == 0
    assert asks(fake_gpu, "auto", wide) == 1  # counted from PROBE_REUSE again


def test_the_calls_between_reads_never_pass_the_maximum(fake_gpu):
    wide = sort_request(500, spread=1000)
    key = fake_gpu.key(wide, "auto")
    granted = []
    while len(granted) < 12:  # the calls each read of the range grants
        if asks(fake_gpu, "auto", wide):
            granted.append(fake_gpu._decisions[key].granted)
    assert granted[:4] == [64, 128, 256, 512] and max(granted) == Selector.PROBE_REUSE_MAX
    assert granted[-1] == Selector.PROBE_REUSE_MAX


@pytest.mark.parametrize("algorithm", ["range_asking", "auto"])
def test_key_range_options_and_unsettled_choices_are_not_memoised(fake_gpu, algorithm):
    assert asks(fake_gpu, algorithm, sort_request(50, key_range=(0, 9)),
                sort_request(50, key_range=(0, 9))) == 2
    with_options = as_device(make_request("sort", Operand(np.zeros(50, np.int32)), None,
                                                  False, True, None, hint=1))
    assert asks(fake_gpu, algorithm, with_options, with_options) == 2
    if algorithm == "auto":
        fake_gpu.policy.final = False
        assert asks(fake_gpu, algorithm, sort_request(50), sort_request(50)) == 2
        fake_gpu.policy.final = True
    assert asks(fake_gpu, algorithm, sort_request(50), sort_request(50)) == 1


def test_new_measurements_and_new_plugins_are_never_answered_from_the_cache(fake_gpu):
    assert asks(fake_gpu, "range_asking", sort_request(50), sort_request(50)) == 1
    fake_gpu.policy.generation += 1  # the policy's measurements changed
    fake_gpu.policy.config = {"block_size": 64}
    assert fake_gpu.choose(sort_request(50), "range_asking")[1] == {"block_size": 64}
    registry.register(RangeAsking)  # the registry changed
    assert asks(fake_gpu, "range_asking", sort_request(50), sort_request(50)) == 1
    fake_gpu.forget()
    assert asks(fake_gpu, "range_asking", sort_request(50)) == 1


def test_the_default_policy_follows_declared_priorities(fake_gpu):
    assert fake_gpu.choose(sort_request(50, on_device=False), "auto")[0].name == "numpy"  # host, small
    assert fake_gpu.choose(sort_request(50), "auto")[0].name == "range_asking"


def test_tiny_host_arrays_are_decided_without_asking_for_the_gpu(fake_gpu, monkeypatch):
    def no_gpu_question():
        raise AssertionError("the GPU was asked about")

    monkeypatch.setattr(select, "gpu_available", no_gpu_question)
    tiny = sort_request(select.HOST_TINY - 1, on_device=False)
    assert fake_gpu.choose(tiny, "auto")[0].name == "numpy"
    with pytest.raises(AssertionError, match="the GPU was asked"):
        fake_gpu.choose(sort_request(select.HOST_TINY, on_device=False), "auto")


def test_tiny_host_sorts_learn_their_fast_path(fake_gpu):
    a = np.zeros(50, np.int32)
    assert not fake_gpu.host_sort_shape_known(a.dtype, True, a.size)
    fake_gpu.choose(sort_request(50, on_device=False), "auto")  # the CPU plugin, which sorts like cudasortkit.order
    assert fake_gpu.host_sort_shape_known(a.dtype, True, a.size)
    fake_gpu.policy.generation += 1
    assert not fake_gpu.host_sort_shape_known(a.dtype, True, a.size)


@pytest.mark.parametrize("index_dtype, learns", [(np.dtype(np.int64), True), (np.dtype(np.int32), False)])
def test_tiny_host_argsorts_with_int64_indices_learn_their_fast_path(fake_gpu, index_dtype, learns):
    """np.argsort returns int64 indices: only such argsorts take NumPy
    directly, and only for argsort (a sort of the shape is its own entry)."""
    keys = Operand(np.arange(50, dtype=np.int32) % 7, "a")
    request = make_request("argsort", keys, None, False, False, index_dtype=index_dtype)
    fake_gpu.choose(request, "auto")
    dtype = np.dtype(np.int32)
    assert fake_gpu.host_sort_shape_known(dtype, False, 50, "argsort", 8) == learns
    assert not fake_gpu.host_sort_shape_known(dtype, False, 50, "argsort", 4)
    assert not fake_gpu.host_sort_shape_known(dtype, False, 50, "sort")


def test_tiny_host_key_value_sorts_learn_their_fast_path_per_value_width(fake_gpu):
    keys = Operand(np.arange(50, dtype=np.int32) % 7, "a")
    values = Operand(np.arange(50, dtype=np.float32), "values", "values")
    fake_gpu.choose(make_request("pairs", keys, values, False, True), "auto")
    dtype = np.dtype(np.int32)
    assert fake_gpu.host_sort_shape_known(dtype, True, 50, "pairs", 4)
    assert not fake_gpu.host_sort_shape_known(dtype, True, 50, "pairs", 8)


def test_a_memoised_choice_still_counts_its_calls(fake_gpu, monkeypatch):
    """The measured policy's learner is paid per call: the Selector calls a
    choice's `observe` on every call its cache answers."""
    seen = []
    plain = FakePolicy.choose

    def counted(self, request, candidates):
        c = plain(self, request, candidates)
        return Choice(c.plugin, c.config, c.reason, c.final, lambda: seen.append(1))

    monkeypatch.setattr(FakePolicy, "choose", counted)
    for _ in range(3):
        fake_gpu.choose(sort_request(50), "auto")
    assert asks(fake_gpu, "auto", sort_request(50)) == 0 and len(seen) == 3
    a = np.zeros(50, np.int32)
    assert not fake_gpu.host_sort_shape_known(a.dtype, True, a.size)  # it still learns


def test_a_range_deciding_choice_is_asked_again_for_each_call_s_keys(fake_gpu):
    """Memoised, but the plugin that decided on the keys' range must accept
    every later call's keys; when it declines, auto decides again."""
    def device_request(spread):
        r = sort_request(500, spread=spread)
        return type(r).from_fields(**{**r.__dict__, "on_device": True})

    assert fake_gpu.choose(device_request(10), "auto")[0].name == "range_asking"
    assert fake_gpu.choose(device_request(10), "auto")[0].name == "range_asking"
    assert fake_gpu.choose(device_request(1000), "auto")[0].name == "numpy"


def test_plain_host_sorts_take_numpy_s_default_without_a_keyword(fake_gpu):
    """api.sort's tiny-array lookup: the shape learnt by a plain sort, "" for
    NumPy's default kind (no keyword passed), "stable" for stable sorts, none
    for argsorts; gone when the policy's generation or the registry moves."""
    from cudasortkit.sdk import registry

    a = np.zeros(50, np.int32)
    assert fake_gpu.plain_host_sort(a, False) is None
    fake_gpu.choose(sort_request(50, on_device=False), "auto")
    keys = Operand((np.arange(50, dtype=np.int32) % 7) * 10, "a")
    fake_gpu.choose(as_device(make_request("sort", keys, None, False, False), False), "auto")
    assert fake_gpu.plain_host_sort(a, True) == "stable"
    assert fake_gpu.plain_host_sort(a, False) == ""
    assert fake_gpu.plain_host_sort(np.zeros(50, np.float32), False) is None  # another dtype
    assert fake_gpu.plain_host_sort(np.zeros(500, np.int32), False) is None  # another size bucket
    fake_gpu.policy.generation += 1
    assert fake_gpu.plain_host_sort(a, True) is None
    fake_gpu.choose(sort_request(50, on_device=False), "auto")
    assert fake_gpu.plain_host_sort(a, True) == "stable"
    registry.refresh()
    assert fake_gpu.plain_host_sort(a, True) is None


def test_the_measured_policy_reads_its_generation_without_a_frame():
    """MeasuredPolicy's generation_reader is runtime.generation (a C call,
    which the selector reads on its hottest paths): the property's number,
    moving with runtime.reset()."""
    from cudasortkit.tuning import runtime
    from cudasortkit.tuning.measured import MeasuredPolicy

    policy = MeasuredPolicy()
    before = policy.generation
    assert policy.generation_reader() == before == runtime.generation()
    runtime.reset()
    assert policy.generation_reader() == policy.generation == before + 1
    assert not hasattr(runtime.generation, "__code__")  # no Python frame
