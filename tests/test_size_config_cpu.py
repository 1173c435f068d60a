"""A plugin's default config for a size (SortPlugin.size_config): the core's
defaults for a job of n keys, and onesweep's smaller tiles for small sorts."""
import pytest

from cudasortkit.sdk import registry
from cudasortkit.sdk.plugin import SortPlugin, Tunable


class Sized(SortPlugin):
    name = "sized_probe"
    dtypes = ("float32",)
    device = "cpu"
    tunables = {"tile": Tunable(8, (2, 8))}

    def size_config(self, config, dtype, value_bytes, n):
        return dict(config, tile=2) if n <= 100 else config

    def run(self, job):
        raise AssertionError("not run here")


def test_default_config_applies_size_config_only_when_n_is_known():
    p = Sized()
    assert registry.default_config(p, "float32", 0) == {"tile": 8}
    assert registry.default_config(p, "float32", 0, 100) == {"tile": 2}
    assert registry.default_config(p, "float32", 0, 101) == {"tile": 8}


def test_a_failing_size_config_takes_the_plugin_out_of_service():
    class Broken(Sized):
        name = "sized_broken"

        def size_config(self, config, dtype, value_bytes, n):
            raise RuntimeError("boom")

    registry.register(Broken)
    try:
        with pytest.raises(Exception, match="size_config raised RuntimeError: boom"):
            registry.default_config(registry.entries()["sized_broken"].plugin, "float32", 0, 5)
        assert not registry.entries()["sized_broken"].ok
    finally:
        registry.entries().pop("sized_broken", None)
        registry.refresh()


@pytest.mark.parametrize("dtype", ["uint32", "float32", "int32"])
def test_onesweep_uses_smaller_tiles_for_small_keys_only_sorts(dtype):
    p = registry.plugins()["onesweep"]
    big = registry.default_config(p, dtype, 0, (1 << 21) + 1)
    assert (big["block_size"], big["items_per_thread"]) == (512, 20)
    one_a_sm = registry.default_config(p, dtype, 0, 1 << 21)
    assert (one_a_sm["block_size"], one_a_sm["items_per_thread"], one_a_sm["min_blocks"]) == (512, 16, 3)
    small = registry.default_config(p, dtype, 0, 1 << 16)
    assert (small["block_size"], small["items_per_thread"], small["min_blocks"]) == (384, 8, 0)
    mid = registry.default_config(p, dtype, 0, 1 << 18)
    assert (mid["block_size"], mid["items_per_thread"]) == (384, 12)
    from cudasortkit.gpu.device import DeviceLimits
    assert all(p.valid_config(c, dtype, 0, DeviceLimits.sm90()) for c in (small, mid))
    # up to WIDE_LOOKBACK_UP_TO keys the look-back loads 4 tiles' words at once
    assert small["lookback_window"] == mid["lookback_window"] == one_a_sm["lookback_window"] == 4
    assert big["lookback_window"] == 1


def test_onesweep_keeps_its_defaults_where_nothing_was_measured():
    p = registry.plugins()["onesweep"]
    assert registry.default_config(p, "uint16", 0, 1 << 12) == p.default_config("uint16", 0)
    assert registry.default_config(p, "uint64", 0, (1 << 21) + 1) == p.default_config("uint64")
    for dtype, vb in (("uint64", 4), ("uint16", 8)):  # nothing to gather
        assert registry.default_config(p, dtype, vb, 1 << 24) == p.default_config(dtype, vb)
    # uint32 with int64 values past GATHER_UP_TO: the default but for evict-last stores
    assert registry.default_config(p, "uint32", 8, 1 << 24) == dict(p.default_config("uint32", 8),
                                                                    evict_last=1)


@pytest.mark.parametrize("dtype", ["uint32", "float64", "int16"])
@pytest.mark.parametrize("vb", [4, 8])
def test_onesweep_sorts_small_pairs_in_smaller_tiles_with_a_wide_look_back(dtype, vb):
    from cudasortkit.gpu.device import DeviceLimits

    p = registry.plugins()["onesweep"]
    got = {}
    for n in (1 << 12, 1 << 17, (1 << 17) + 1, 1 << 19, 1 << 21, (1 << 21) + 1):
        c = registry.default_config(p, dtype, vb, n)
        got[n] = (c["block_size"], c["items_per_thread"], c["lookback_window"])
        assert p.valid_config(c, dtype, vb, DeviceLimits.sm90())
    assert got[1 << 12] == got[1 << 17] == (384, 8, 4)
    assert got[(1 << 17) + 1] == got[1 << 19] == (384, 12, 4)
    pair4 = (dtype, vb) == ("uint32", 4)  # PAIR4_TILES: 512-thread tiles, a window of 2
    assert got[1 << 21] == (512 if pair4 else 384, 16, 4)
    assert got[(1 << 21) + 1] == ((512, 16, 2) if pair4 else (384, 16, 1))


def test_onesweep_sorts_4_byte_pairs_past_small_ones_in_bigger_tiles():
    from cudasortkit.gpu.device import DeviceLimits

    p = registry.plugins()["onesweep"]
    for dtype in ("uint32", "float32", "int32"):
        got = {}
        for n in (1 << 19, (1 << 19) + 1, 1 << 21, (1 << 21) + 1, 1 << 22, (1 << 22) + 1,
                  1 << 24, (1 << 24) + 1, 1 << 28):
            c = registry.default_config(p, dtype, 4, n)
            got[n] = (c["block_size"], c["items_per_thread"], c["min_blocks"],
                      c["batch_values"], c["lookback_window"])
            assert p.valid_config(c, dtype, 4, DeviceLimits.sm90())
        assert got[1 << 19] == (384, 12, 0, 1, 4)
        assert got[(1 << 19) + 1] == got[1 << 21] == (512, 16, 0, 1, 4)
        assert got[(1 << 21) + 1] == got[1 << 22] == (512, 16, 0, 1, 2)
        assert got[(1 << 22) + 1] == got[1 << 24] == (512, 20, 0, 1, 2)
        assert got[(1 << 24) + 1] == got[1 << 28] == (512, 20, 0, 1, 1)
    # other widths keep the default tile; every sort with values loads them
    # in a batch, with registers for 2 blocks an SM (no spills at min_blocks 0)
    for dtype, vb in (("uint16", 4), ("uint32", 8), ("uint64", 4)):
        c = registry.default_config(p, dtype, vb, 1 << 24)
        assert (c["block_size"], c["min_blocks"], c["batch_values"]) == (384, 0, 1)


def test_onesweep_gathers_8_byte_values_where_carrying_positions_pays():
    """gather_values: 8-byte keys always, 4-byte keys up to GATHER_UP_TO
    keys, never for 1- and 2-byte keys (one or two passes) nor 4-byte
    values (a position is no narrower); invalid without 8-byte values."""
    from cudasortkit.gpu.device import DeviceLimits

    p = registry.plugins()["onesweep"]
    gather = lambda dtype, vb, n: registry.default_config(p, dtype, vb, n)["gather_values"]  # noqa: E731
    assert gather("uint64", 8, 1 << 26) == gather("float64", 8, 1 << 16) == 1
    assert gather("uint32", 8, p.GATHER_UP_TO) == 1 and gather("uint32", 8, p.GATHER_UP_TO + 1) == 0
    assert gather("uint16", 8, 1 << 20) == gather("uint8", 8, 1 << 20) == 0
    assert gather("uint64", 4, 1 << 20) == gather("uint32", 0, 1 << 20) == 0
    config = dict(p.default_config("uint32", 4), gather_values=1)
    assert not p.valid_config(config, "uint32", 4, DeviceLimits.sm90())
    assert not p.valid_config(config, "uint32", 0, DeviceLimits.sm90())
    assert p.valid_config(config, "uint32", 8, DeviceLimits.sm90())


def test_msd_local_carries_8_byte_values_on_its_route():
    """msd_local: from MIN_PAIR_KEYS keys (its MSD route) 8-byte values ride
    the passes as they are; below that it runs onesweep's passes, with
    onesweep's rule (8-byte keys gather)."""
    from cudasortkit.plugins.msd_local import MIN_PAIR_KEYS

    p = registry.plugins()["msd_local"]
    gather = lambda dtype, n: registry.default_config(p, dtype, 8, n)["gather_values"]  # noqa: E731
    assert gather("uint64", MIN_PAIR_KEYS) == gather("float64", 1 << 26) == 0
    assert gather("int64", MIN_PAIR_KEYS - 1) == 1


@pytest.mark.parametrize("dtype", ["uint64", "float64", "int64"])
def test_onesweep_sorts_small_8_byte_keys_alone_in_smaller_tiles(dtype):
    from cudasortkit.gpu.device import DeviceLimits

    p = registry.plugins()["onesweep"]
    tiles = {}
    for n in (1 << 12, 1 << 19, (1 << 19) + 1, 1 << 21):
        c = registry.default_config(p, dtype, 0, n)
        tiles[n] = (c["block_size"], c["items_per_thread"], c["lookback_window"])
        assert p.valid_config(c, dtype, 0, DeviceLimits.sm90())
    assert tiles[1 << 12] == tiles[1 << 19] == (384, 12, 4)
    assert tiles[(1 << 19) + 1] == tiles[1 << 21] == (512, 16, 4)
    big = registry.default_config(p, dtype, 0, (1 << 21) + 1)
    assert (big["block_size"], big["items_per_thread"], big["lookback_window"]) == (384, 24, 1)


def test_plugins_of_other_kinds_get_their_defaults_for_any_size():
    """A Job of a selection plugin (no size_config: a kind without size
    rules) takes its default config; this broke every GPU selection plugin."""
    for group in ("cudasortkit.selection", "cudasortkit.search"):
        for plugin in registry.plugins(group).values():
            if hasattr(plugin, "size_config"):
                continue
            expected = plugin.default_config("float32", 0)
            assert registry.default_config(plugin, "float32", 0, 1 << 20) == expected
            assert registry.entries(group)[plugin.name].ok


@pytest.mark.parametrize("dtype", ["uint64", "float64", "int64"])
def test_merge_sort_sorts_small_8_byte_keys_alone_in_smaller_tiles(dtype):
    p = registry.plugins()["merge_sort"]
    base = registry.default_config(p, dtype, 0)
    assert registry.default_config(p, dtype, 0, 1024) == dict(base, block_size=256,
                                                              items_per_thread=7)
    assert registry.default_config(p, dtype, 0, 4096) == dict(base, block_size=128,
                                                              items_per_thread=11)
    assert registry.default_config(p, dtype, 0, 4097) == base
    # with a payload, and for 4-byte keys: the defaults
    assert registry.default_config(p, dtype, 8, 1024) == registry.default_config(p, dtype, 8)
    assert registry.default_config(p, "uint32", 0, 1024) == registry.default_config(p, "uint32", 0)


def test_auto_keeps_merge_sort_for_8_byte_keys_alone_up_to_2_16(monkeypatch):
    """Declared priorities (nothing measured): merge_sort up to 2^15 keys for
    every key type, and up to 2^16 for sorts of 8-byte keys alone; onesweep
    past that (its small 8-byte tiles lead at 2^18: 0.078 against
    0.090 ms, H100)."""
    from cudasortkit.dispatch import select
    from cudasortkit.sdk.plugin import Request

    monkeypatch.setattr(select, "gpu_available", lambda: True)

    def pick(kind, dtype, n, value_bytes=0):
        request = Request(kind, dtype, n, value_bytes=value_bytes)
        return select.DefaultPolicy().choose(request, select.usable(request)).plugin.name

    for dtype in ("uint64", "float64"):
        assert pick("sort", dtype, 1 << 16) == "merge_sort"
        assert pick("sort", dtype, (1 << 16) + 1) == "onesweep"
        assert pick("sort", dtype, 1 << 18) == "onesweep"
        assert pick("argsort", dtype, 1 << 16, 8) != "merge_sort"
    assert pick("sort", "uint32", 1 << 16) == "onesweep"
    assert pick("sort", "uint32", 1 << 15) == "merge_sort"


def test_onesweep_stores_evict_last_only_past_the_l2():
    p = registry.plugins()["onesweep"]
    past = p.EVICT_LAST_ABOVE + 1
    for dtype in ("uint32", "float32", "int32"):
        assert registry.default_config(p, dtype, 0, past)["evict_last"] == 1
        assert registry.default_config(p, dtype, 0, p.EVICT_LAST_ABOVE)["evict_last"] == 0
    for value_bytes in (4, 8):   # pairs and argsorts of 4-byte keys too
        assert registry.default_config(p, "uint32", value_bytes, past)["evict_last"] == 1
        assert registry.default_config(p, "float32", value_bytes, p.EVICT_LAST_ABOVE)[
            "evict_last"] == 0
    assert registry.default_config(p, "uint64", 0, past)["evict_last"] == 0   # not measured
    assert registry.default_config(p, "uint64", 8, past)["evict_last"] == 0


def test_counting_goes_first_for_many_byte_keys_alone():
    from cudasortkit.sdk.plugin import Request

    counting, onesweep = registry.plugins()["counting"], registry.plugins()["onesweep"]
    prio = lambda p, dtype, n, vb=0: p.priority_for_request(  # noqa: E731
        Request("sort" if vb == 0 else "pairs", dtype, n, value_bytes=vb))
    for dtype in ("uint8", "int8"):
        assert prio(counting, dtype, 1 << 16) > prio(onesweep, dtype, 1 << 16)
        assert prio(counting, dtype, (1 << 18) + 1) < prio(onesweep, dtype, (1 << 18) + 1)
        assert prio(counting, dtype, 1 << 20, 8) > prio(onesweep, dtype, 1 << 20, 8)  # pairs
    assert prio(counting, "uint16", 1 << 20) > prio(onesweep, "uint16", 1 << 20)
