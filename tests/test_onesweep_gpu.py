"""onesweep beyond the generic conformance suite: tile and warp-segment
boundaries, many tiles, skipped passes (each count of active passes, so every
buffer parity), exact stable argsort/pairs ascending and descending, other
tunable values, and more than 2^31 keys (64-bit offsets and status words).

Quick tier (-m gpu): tile boundaries of every dtype at the default
early_counts, each count of skipped passes (argsort; 8- and 11-bit digits),
one dtype of the stable argsort/pairs sweep, the default config and 11-bit
digits (uint32: 11/11/10, float64: 6 passes) at tile boundaries.
Slow tier (-m "gpu and slow"): early_counts=0, pairs of skipped passes, the
other dtypes and tunables, every dtype with 10- and 11-bit digits (argsort,
4- and 8-byte values, descending), 2^24 + 7 and 2^31 + 12,345 keys."""
import numpy as np
import pytest

import cudasortkit as csk
from cudasortkit.sdk import registry
from helpers import assert_keys_equal, make_keys, reference_argsort, reference_sort

pytestmark = pytest.mark.gpu
NAME = "onesweep"
slow = pytest.mark.slow


def quick(values, *keep):
    """`values` as parameters, all but those in `keep` marked slow."""
    return [v if v in keep else pytest.param(v, marks=slow) for v in values]


def _plugin():
    return registry.plugins()[NAME]


def _cupy():
    return pytest.importorskip("cupy")


def _run(a_dev, config=None, kind="sort", values=None, descending=False):
    """Run the plugin with an explicit config (the public API takes none)."""
    from cudasortkit.dispatch.execute import run_plugin

    return run_plugin(_plugin(), config, kind, a_dev, values, descending=descending)


def _check_exact(a, descending=False, config=None, kind="argsort"):
    """Keys and the stable order (argsort, or int32 payload for pairs)."""
    cupy = _cupy()
    dev = cupy.asarray(a)
    order = reference_argsort(a, descending)
    if kind == "argsort":
        k, v = _run(dev, config, "argsort", descending=descending)
        got = v.get()
    else:
        payload = np.arange(a.size, dtype=np.int32)
        k, v = _run(dev, config, "pairs", cupy.asarray(payload), descending)
        assert_keys_equal(k, a[order], "pairs keys")
        got = v.get()
    if not np.array_equal(got, order):
        bad = np.flatnonzero(got != order)
        raise AssertionError(f"{kind} n={a.size} desc={descending}: order differs at {bad[:5]} "
                             f"({bad.size} of {a.size})")
    k, _ = _run(dev, config, "sort", descending=descending)
    assert_keys_equal(k, a[order], f"sort n={a.size} desc={descending}")
    assert np.array_equal(dev.get().view(np.uint8), a.view(np.uint8)), "input was modified"


def _boundary_sizes(config):
    tile = config["block_size"] * config["items_per_thread"]
    warp_items = 32 * config["items_per_thread"]
    sizes = {2, 31, 33, warp_items - 1, warp_items, warp_items + 1, tile - 1, tile, tile + 1,
             2 * tile - 1, 2 * tile + 1, 3 * tile + warp_items + 5, 17 * tile - 1, 17 * tile + 1}
    return sorted(s for s in sizes if s >= 2)


@pytest.mark.parametrize("dtype", ["uint32", "int64", "float32", "uint8", "float16"])
@pytest.mark.parametrize("early_counts", quick([0, 1], 1))
def test_tile_boundaries(dtype, early_counts, rng):
    config = dict(_plugin().default_config(), early_counts=early_counts)
    for n in _boundary_sizes(config):
        _check_exact(make_keys("uniform", dtype, n, rng), descending=bool(n % 2), config=config)


def _keys_checker(dtype, config):
    """check(a, descending, what): the plugin's sort of keys `a` alone under
    `config` gives NumPy's keys."""
    cupy = _cupy()

    def check(a, descending, what):
        keys, _ = _run(cupy.asarray(a), config, descending=descending)
        assert_keys_equal(keys, reference_sort(a, descending), f"{dtype} {what} desc={descending}")
    return check


@pytest.mark.parametrize("dtype", ["uint32", "float32", "int16", "uint8", "uint64"])
def test_unordered_first_pass(dtype, rng):
    """Keys alone whose first pass ranks in any order (unordered_first, the
    default for keys of at most 4 bytes alone): every tile-boundary size,
    both directions, uniform and special keys; one sort in which some tiles'
    first digit is crowded (those rank in order) and the others' is not; and
    keys whose first pass is skipped (the next pass is the first to run)."""
    if np.dtype(dtype).itemsize <= 4:
        assert _plugin().default_config(np.dtype(dtype), 0)["unordered_first"] == 1
    config = dict(_plugin().default_config(np.dtype(dtype), 0), unordered_first=1)
    check = _keys_checker(dtype, config)
    for n in _boundary_sizes(config):
        check(make_keys("uniform" if n % 3 else "special", dtype, n, rng), bool(n % 2), f"n={n}")
    tile = config["block_size"] * config["items_per_thread"]
    a = make_keys("uniform", dtype, 9 * tile + 5, rng)
    words = a.view(f"u{a.itemsize}")
    for t in range(1, 9, 2):  # odd tiles: 90% of the keys share the first digit
        part = words[t * tile:(t + 1) * tile]
        part[rng.random(part.size) < 0.9] &= ~np.array(0xFF, words.dtype)
    for descending in (False, True):
        check(a, descending, "crowded and uniform tiles")
    words[:] &= ~np.array(0xFF, words.dtype)  # the first digit the same everywhere
    check(a, False, "first pass skipped")


@pytest.mark.parametrize("dtype", ["uint32", "float32", "int16", "uint64"])
@pytest.mark.parametrize("first", quick([0, 1], 1))
def test_unordered_later_passes(dtype, first, rng):
    """Keys alone whose later passes rank in any order each warp whose keys
    agree on every lower digit (unordered_later): every tile-boundary size,
    both directions; keys whose lower digits take a few values (long runs
    of equal lower digits, so most warps of the later passes agree) or
    none alike (no warp does); runs that start and end inside warps; and
    sorted, reversed and few-valued inputs. With and without the first
    pass in any order."""
    if np.dtype(dtype).itemsize <= 4:
        assert _plugin().default_config(np.dtype(dtype), 0)["unordered_later"] == 1
    config = dict(_plugin().default_config(np.dtype(dtype), 0), unordered_later=1,
                  unordered_first=first)
    check = _keys_checker(dtype, config)
    for n in _boundary_sizes(config):
        check(make_keys("uniform" if n % 3 else "special", dtype, n, rng), bool(n % 2), f"n={n}")
    tile = config["block_size"] * config["items_per_thread"]
    n = 21 * tile + 333
    a = make_keys("uniform", dtype, n, rng)
    words = a.view(f"u{a.itemsize}")
    low = np.array([0, 0x1234, 0xFFFF, 0x00FF], dtype=np.uint64).astype(words.dtype)
    for kinds in (1, 2, 3, 4):  # the low 16 bits take `kinds` values
        words[:] = (words & ~np.array(0xFFFF, words.dtype)) | rng.choice(low[:kinds], n)
        for descending in (False, True):
            check(a, descending, f"{kinds} low patterns")
    words[:] = (words & ~np.array(0xFF, words.dtype)) | (np.arange(n) % 7).astype(words.dtype)
    check(a, False, "7 low patterns, interleaved")
    for what, b in (("sorted", np.sort(a)), ("reversed", np.sort(a)[::-1].copy()),
                    ("few values", rng.choice(a[:5], n))):
        check(b, False, what)
        check(b, True, what)


@slow
def test_many_tiles(rng):
    cupy = _cupy()
    n = (1 << 24) + 7
    a = make_keys("uniform", "uint32", n, rng)
    got = csk.sort(cupy.asarray(a), algorithm=NAME)
    assert_keys_equal(got, np.sort(a), "2^24+7 uint32")
    b = make_keys("entropy_reduced", "float64", n, rng)
    got = csk.sort(cupy.asarray(b), algorithm=NAME, descending=True)
    assert_keys_equal(got, reference_sort(b, True), "2^24+7 float64 descending")


# Keys whose varying bits lie in chosen 8-bit digits: 0, 1, 2, 3 active passes.
@pytest.mark.parametrize("varying, active", [(0x00000000, 0), (0x00FF0000, 1), (0x00000FFF, 2),
                                             (0xFF00FF00, 2), (0xFFFFFF00, 3), (0xFFFFFFFF, 4)])
@pytest.mark.parametrize("kind", quick(["argsort", "pairs"], "argsort"))
def test_skipped_passes(varying, active, kind, rng):
    base = np.uint32(0x5A3C_96E1) & ~np.uint32(varying)
    bits = (rng.integers(0, 1 << 32, 300_007, dtype=np.uint64).astype(np.uint32) & np.uint32(varying)) | base
    _check_exact(bits, descending=False, kind=kind)
    _check_exact(bits, descending=True, kind=kind)
    _check_exact(bits.view(np.int32), descending=False, kind=kind)


# The same with 11-bit digits (bits 0-10, 11-21, 22-31): 0 to 3 active passes.
@pytest.mark.parametrize("varying, active", [(0x00000000, 0), (0x003FF800, 1), (0xFFC007FF, 2),
                                             (0x00400400, 2), (0xFFFFFFFF, 3)])
@pytest.mark.parametrize("kind", quick(["argsort", "pairs"], "argsort"))
def test_skipped_eleven_bit_passes(varying, active, kind, rng):
    config = dict(_plugin().default_config(), radix_bits=11)
    base = np.uint32(0x5A3C_96E1) & ~np.uint32(varying)
    bits = (rng.integers(0, 1 << 32, 200_003, dtype=np.uint64).astype(np.uint32) & np.uint32(varying)) | base
    _check_exact(bits, descending=False, config=config, kind=kind)
    _check_exact(bits.view(np.int32), descending=True, config=config, kind=kind)


def test_eleven_bit_digits_at_tile_boundaries(rng):
    config = dict(_plugin().default_config(), radix_bits=11)
    sizes = _boundary_sizes(config)
    for n in sizes[::2]:
        _check_exact(make_keys("uniform", "uint32", n, rng), descending=bool(n % 2), config=config)
    for n in sizes[1::3]:
        _check_exact(make_keys("special", "float64", n, rng), descending=True, config=config,
                     kind="pairs")


@slow
@pytest.mark.parametrize("radix_bits, block_size", [(11, 384), (11, 256), (10, 512)])
@pytest.mark.parametrize("dtype", ["uint8", "int16", "float16", "uint32", "int32", "float32",
                                   "int64", "uint64", "float64"])
def test_wide_digits_every_dtype(dtype, radix_bits, block_size, rng):
    """Keys only, argsort, 4-byte payload (pairs) and 8-byte values, both
    directions, several distributions, with 10/11-bit digits."""
    cupy = _cupy()
    config = dict(_plugin().default_config(), radix_bits=radix_bits, block_size=block_size)
    for dist, n in (("uniform", 300_007), ("special", 50_021), ("few_unique", 70_001)):
        a = make_keys(dist, dtype, n, rng)
        for descending in (False, True):
            _check_exact(a, descending, config, kind="argsort")
            _check_exact(a, descending, config, kind="pairs")
            values = rng.integers(-(1 << 62), 1 << 62, n, dtype=np.int64)
            k, v = _run(cupy.asarray(a), config, "pairs", cupy.asarray(values), descending)
            order = reference_argsort(a, descending)
            assert_keys_equal(k, a[order], f"{dtype} {dist} 8-byte values keys")
            assert np.array_equal(v.get(), values[order]), f"{dtype} {dist} 8-byte values"


def test_twelve_bit_keys_and_all_equal(rng):
    for dtype in ("uint32", "uint64", "int16"):
        a = rng.integers(0, 1 << 12, 1_000_003).astype(dtype)
        _check_exact(a)
    for dtype in ("float64", "int8", "float32"):
        _check_exact(make_keys("all_equal", dtype, 70_001, rng), descending=True)


@pytest.mark.parametrize("dtype", quick(["uint32", "int32", "float32", "float64", "int64", "uint16", "int8"],
                                         "float32"))
@pytest.mark.parametrize("descending", [False, True])
def test_stable_argsort_and_pairs(dtype, descending, rng):
    for dist in ("few_unique", "special", "sorted"):
        a = make_keys(dist, dtype, 200_003, rng)
        _check_exact(a, descending, kind="argsort")
        _check_exact(a, descending, kind="pairs")


def test_pairs_eight_byte_values(rng):
    cupy = _cupy()
    keys = make_keys("few_unique", "float32", 500_009, rng)
    values = rng.standard_normal(keys.size)
    for descending in (False, True):
        k, v = csk.sort_by_key(cupy.asarray(keys), cupy.asarray(values), algorithm=NAME,
                               descending=descending)
        order = reference_argsort(keys, descending)
        assert_keys_equal(k, keys[order])
        assert np.array_equal(v.get(), values[order])


@pytest.mark.parametrize("window", [4] + [pytest.param(w, marks=slow) for w in (2, 1)])
@pytest.mark.parametrize("dtype", ["uint32", "float32", "int64"])
def test_look_back_windows_over_many_tiles(window, dtype, rng):
    """A look-back that loads `window` predecessors' words at once (and
    takes them nearest first, up to one not yet published or a prefix)
    orders every tile of a pass of ~200 tiles as one word at a time does;
    8-byte keys with 11-bit digits own several digits a thread (one word a
    digit a round whatever the window)."""
    for change in ({"lookback_window": window, "block_size": 256, "items_per_thread": 8},
                   {"lookback_window": window, "radix_bits": 11}):
        config = dict(_plugin().default_config(dtype), **change)
        n = 200 * config["block_size"] * config["items_per_thread"] + 13
        _check_exact(make_keys("uniform", dtype, n, rng), bool(window % 2 == 0), config)


@pytest.mark.parametrize("change", [{"early_counts": 1}] + [pytest.param(c, marks=slow) for c in [
                                    {"lookback_window": 2}, {"lookback_window": 4, "radix_bits": 11},
                                    {"early_counts": 1, "items_per_thread": 24},
                                    {"radix_bits": 11, "early_counts": 0},
                                    {"radix_bits": 11, "block_size": 512, "items_per_thread": 24},
                                    {"radix_bits": 11, "block_size": 256, "items_per_thread": 8},
                                    {"radix_bits": 10, "block_size": 256},
                                    {"early_counts": 1, "block_size": 384, "radix_bits": 7},
                                    {"radix_bits": 6}, {"radix_bits": 7}, {"block_size": 384},
                                    {"block_size": 512, "items_per_thread": 8},
                                    {"items_per_thread": 24}, {"items_per_thread": 12}]])
def test_other_tunables(change, rng):
    """Each config on the dtypes and payloads it is valid for (a wide-digit,
    large tile does not fit shared memory with 8-byte keys and payloads)."""
    from cudasortkit.gpu.device import get_device

    config = dict(_plugin().default_config(), **change)
    limits = get_device().limits
    checked = 0
    for dtype in ("uint32", "float64", "int16"):
        n = 3 * config["block_size"] * config["items_per_thread"] + 77
        if _plugin().valid_config(config, dtype, 8, limits):  # argsort: 8-byte indices
            _check_exact(make_keys("special", dtype, n, rng), True, config)
            checked += 1
        if _plugin().valid_config(config, dtype, 4, limits):
            _check_exact(make_keys("uniform", dtype, 100_003, rng), False, config, kind="pairs")
            checked += 1
    assert checked >= 2, f"{change} is valid for too few cases to be worth a parameter"


@slow
def test_histogram_flushes_of_eight_byte_eleven_bit_keys(rng):
    """11-bit digits of 8-byte keys leave room for two copies of the
    histogram's 16-bit counters, so each block flushes them every ~120K
    keys: 2^25 keys take every block through several rounds."""
    cupy = _cupy()
    n = (1 << 25) + 3
    a = cupy.asarray(make_keys("uniform", "uint64", n, rng))
    config = dict(_plugin().default_config("uint64"), radix_bits=11)
    got, _ = _run(a, config)
    assert bool(cupy.array_equal(got, cupy.sort(a))), "2^25+3 uint64, 11-bit digits"


@slow
def test_more_than_2_pow_31_keys(rng):
    cupy = _cupy()
    n = (1 << 31) + 12_345
    free, _ = cupy.cuda.Device().mem_info
    if free < 10 * n:
        pytest.skip(f"needs ~{10 * n >> 30} GiB free on the GPU")
    block = cupy.asarray(rng.integers(0, 256, 1 << 20, dtype=np.uint8))  # cheap to make:
    a = cupy.concatenate([cupy.tile(block, n >> 20), block[: n & ((1 << 20) - 1)]])  # tiled
    got = csk.sort(a, algorithm=NAME)
    assert bool(cupy.all(got[1:] >= got[:-1])), "not sorted"
    assert bool(cupy.all(cupy.bincount(got, minlength=256) == cupy.bincount(a, minlength=256)))
    del got
    got = csk.sort(a, algorithm=NAME, descending=True)
    assert bool(cupy.all(got[1:] <= got[:-1])), "not sorted descending"
    assert bool(cupy.all(cupy.bincount(got, minlength=256) == cupy.bincount(a, minlength=256)))


@pytest.mark.parametrize("n", [1 << 16, (1 << 20) + 3])
def test_replayed_sorts_run_as_graphs_whose_passes_overlap(n, rng):
    """Repeated sorts of one shape replay a CUDA graph; on sm_90 and up its
    histogram and passes are the driver-loaded, overlapped kernels (a
    capture that failed would turn graphs off for the plan: caught here),
    and every replay's result is right, also with the input changed in
    place between replays."""
    from cudasortkit.gpu.device import get_device
    from cudasortkit.launch import plans as launchplan

    cupy = _cupy()
    a = make_keys("uniform", "uint32", n, rng)
    dev = cupy.asarray(a)
    for i in range(6):
        assert_keys_equal(csk.sort(dev, algorithm=NAME), np.sort(a), f"replay {i}")
        a = make_keys("uniform", "uint32", n, rng)
        dev[...] = cupy.asarray(a)
    # the plan of this shape: its histogram's second argument is n
    plans = [p for p in launchplan._plans.values()
             if type(p) is launchplan.LaunchPlan and any(
                 getattr(op, "kernel", None) is not None and op.kernel.name == "onesweep_histogram"
                 and op.args[1] == n for op in p.ops)]
    assert plans, "no recorded onesweep plan of this shape"
    assert all(p.graphs.off is None for p in plans), [p.graphs.off for p in plans]
    assert any(len(p.graphs) for p in plans), "the replays captured no graph"
    if tuple(get_device().compute_capability) >= (9, 0):
        kernels = [op.kernel for p in plans for op in p.ops if getattr(op, "kernel", None)]
        assert all(k.overlap_function for k in kernels
                   if k.name in ("onesweep_pass", "onesweep_histogram"))


@pytest.mark.parametrize("dtype", ["uint32", "float32", "uint64", "int16"])
def test_evict_last_stores_sort_alike(dtype, rng):
    """Keys stored under the L2 evict-last policy (the default for 4-byte
    keys alone past EVICT_LAST_ABOVE keys) sort as plain stores do; 2-byte
    keys store plainly whatever the config."""
    cupy = _cupy()
    config = dict(_plugin().default_config(dtype), evict_last=1)
    _check_exact(make_keys("uniform", dtype, 300_007, rng), True, config)
    a = make_keys("special", dtype, 300_007, rng)
    keys, _ = _run(cupy.asarray(a), config)  # keys alone: the production path
    assert_keys_equal(keys, np.sort(a), f"{dtype} keys alone, evict-last stores")


@pytest.mark.parametrize("dtype", ["uint32", "float32"])
def test_pairs_past_evict_last_above_store_evict_last_and_sort(dtype, rng):
    """Pairs and argsorts of 4-byte keys past EVICT_LAST_ABOVE keys store
    their keys and the values they carry evict-last by default: the keys,
    the stable order of int32 values and the argsort are NumPy's; int64
    values (carried, past GATHER_UP_TO) arrive with their keys."""
    cupy = _cupy()
    n = _plugin().EVICT_LAST_ABOVE + 5
    for value_bytes in (4, 8):
        assert registry.default_config(_plugin(), dtype, value_bytes, n)["evict_last"] == 1
    a = make_keys("special", dtype, n, rng)
    _check_exact(a, False, None, "pairs")
    _check_exact(a, True, None, "argsort")
    values = rng.integers(-(1 << 62), 1 << 62, n)
    order = reference_argsort(a, False)
    k, v = _run(cupy.asarray(a), None, "pairs", cupy.asarray(values))
    assert_keys_equal(k, a[order], f"{dtype} keys with int64 values")
    assert np.array_equal(v.get(), values[order]), f"{dtype} int64 values"


def test_a_sort_past_evict_last_above_stores_evict_last_and_sorts(rng):
    cupy = _cupy()
    n = _plugin().EVICT_LAST_ABOVE + 5
    assert registry.default_config(_plugin(), "float32", 0, n)["evict_last"] == 1
    a = make_keys("uniform", "float32", n, rng)
    assert_keys_equal(csk.sort(cupy.asarray(a), algorithm=NAME), np.sort(a), "2^22+5 float32")
