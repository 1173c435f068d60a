"""bench's --variant: a registered copy of a plugin whose config the spec sets."""
from cudasortkit.cli import bench
from cudasortkit.sdk import registry


def test_variant_sets_config_beyond_listed_choices():
    try:
        name = bench.register_variant("onesweep:block_size=512,items_per_thread=64,radix_bits=11")
        assert name == "onesweep_bs512_ipt64_rb11"
        plugin = registry.plugins()[name]
        for value_bytes in (0, 8):  # onesweep's own keys-only default (20 a thread) yields too
            config = plugin.default_config("uint32", value_bytes)
            assert (config["block_size"], config["items_per_thread"], config["radix_bits"]) == (512, 64, 11)
        assert registry.plugins()["onesweep"].default_config("uint32", 0)["items_per_thread"] == 20
    finally:
        registry.refresh()  # forget the variant
    assert name not in registry.plugins()
