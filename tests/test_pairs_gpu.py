"""Key-value sorts and argsorts that carry less than their values
(docs/algorithms/onesweep.md, msd_local.md): onesweep carrying 32-bit
positions and gathering 8-byte values in its last pass (gather_values),
argsort's positions staged as 4 bytes, msd_local's argsorts and pairs of
8-byte keys (the MSD route, LSD from the start, LSD after an overflow),
counting's replays of 8- and 16-bit keys, and repeated sort_by_key calls
through the prepared path. Every result is compared with NumPy's stable
argsort of the keys (values in that order) on fresh data of many
distributions; outputs are poisoned (conftest); the inputs must stay as
they were.

Quick tier: each path once at a size that exercises it, both orders.
Slow: every distribution, value dtype and size of the sweeps."""
import numpy as np
import pytest

import cudasortkit as csk
from cudasortkit import api
from cudasortkit.launch import plans
from helpers import (DISTRIBUTIONS, assert_keys_equal, assert_valid_argsort, make_keys,
                     reference_argsort)

pytestmark = pytest.mark.gpu
slow = pytest.mark.slow
#: Sizes around the tile and power-of-two edges, primes, 0 to 2.
EDGE_SIZES = [0, 1, 2, 3, 255, 257, 4095, 4097, 65521, (1 << 16) + 1, 131071, 1000003]
#: Value dtypes of 4 and 8 bytes.
VALUE_DTYPES = ["int32", "float32", "int64", "float64"]
#: At least MIN_PAIR_KEYS (2^20) keys: msd_local's MSD route.
N_MSD = (1 << 20) + 4099


def _cupy():
    return pytest.importorskip("cupy")


def _values(dtype, n, rng):
    """Random values of `dtype`, distinct enough that a value moved to the
    wrong key shows (never the positions themselves)."""
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return rng.standard_normal(n).astype(dt)
    info = np.iinfo(dt)
    return rng.integers(info.min, info.max, n, dtype=dt, endpoint=True)


def check_pairs(keys, values, algorithm="auto", descending=False, config=None, what=""):
    """sort_by_key (and argsort, stable) of host keys on the device against
    NumPy's stable order; the device inputs unchanged."""
    cupy = _cupy()
    k, v = cupy.asarray(keys), cupy.asarray(values)
    got_k, got_v = csk.sort_by_key(k, v, algorithm=algorithm, descending=descending)
    order = reference_argsort(keys, descending)
    label = f"{what} {keys.dtype}/{values.dtype} n={len(keys)} desc={descending} {algorithm}"
    assert_keys_equal(got_k, keys[order], f"{label}: keys")
    np.testing.assert_array_equal(got_v.get().view(np.uint8), values[order].view(np.uint8),
                                  err_msg=f"{label}: values")
    assert np.array_equal(k.get().view(np.uint8), keys.view(np.uint8)), f"{label}: keys modified"
    assert np.array_equal(v.get().view(np.uint8), values.view(np.uint8)), \
        f"{label}: values modified"


def check_argsort(keys, algorithm="auto", descending=False, index_dtype=np.int64, what=""):
    cupy = _cupy()
    got = csk.argsort(cupy.asarray(keys), algorithm=algorithm, descending=descending,
                      stable=True, index_dtype=index_dtype)
    assert got.dtype == np.dtype(index_dtype), what
    want = reference_argsort(keys, descending)
    np.testing.assert_array_equal(got.get().astype(np.int64), want,
                                  err_msg=f"{what} {keys.dtype} n={len(keys)} desc={descending}")


class _Config:
    """A plugin's config changed while the block runs (its size_config
    wrapped), the launch plans forgotten before and after."""

    def __init__(self, name, **settings):
        from cudasortkit.sdk import registry

        self.plugin = registry.plugins()[name]
        self.settings = settings

    def __enter__(self):
        cls, settings = type(self.plugin), self.settings
        self.original = cls.size_config
        original = self.original

        def size_config(plugin, config, dtype, value_bytes, n):
            return {**original(plugin, config, dtype, value_bytes, n), **settings}

        cls.size_config = size_config
        api.selector.forget()
        plans.forget()
        return self

    def __exit__(self, *exc):
        type(self.plugin).size_config = self.original
        api.selector.forget()
        plans.forget()


# ------------------------------------------------------------------ onesweep
@pytest.mark.parametrize("gather", [0, 1])
@pytest.mark.parametrize("dtype", ["uint32", "float32", "uint64", "float64", "int16"])
def test_onesweep_pairs_of_eight_byte_values_carried_or_gathered(gather, dtype, rng):
    """8-byte values carried through every pass (gather 0) or carried as
    positions and gathered in the last pass (gather 1), at sizes around the
    tiles, both orders."""
    with _Config("onesweep", gather_values=gather):
        for n in (2, 4097, 65521, 1000003):
            keys = make_keys("special" if n % 2 else "uniform", dtype, n, rng)
            for vdt in ("int64", "float64"):
                check_pairs(keys, _values(vdt, n, rng), "onesweep", bool(n % 3),
                            what=f"gather={gather}")


@pytest.mark.parametrize("dist", ["few_unique", "all_equal", "sorted", "reverse"])
def test_gathered_values_follow_ties_and_skipped_passes(dist, rng):
    """Few distinct keys (ties ordered by position), all equal (every pass
    skipped but one copy), sorted and reversed: gathered values stay with
    their keys."""
    with _Config("onesweep", gather_values=1):
        for dtype in ("uint32", "int64"):
            keys = make_keys(dist, dtype, 300007, rng)
            for descending in (False, True):
                check_pairs(keys, _values("int64", len(keys), rng), "onesweep", descending,
                            what=dist)


@pytest.mark.parametrize("batch", [0, 1])
@pytest.mark.parametrize("dtype", ["uint32", "float32", "uint64", "int16"])
def test_onesweep_values_loaded_in_a_batch_or_one_by_one(dtype, batch, rng):
    """batch_values 1 (the default: a tile's values in registers before
    they are staged) and 0 (each loaded and staged in turn): 4- and 8-byte
    values (carried or gathered), argsort positions of both index widths,
    at edge sizes and over many tiles whose last one ends inside a warp,
    both orders; the same results as NumPy's stable order."""
    for gather in (0, 1):
        with _Config("onesweep", batch_values=batch, gather_values=gather):
            for n in EDGE_SIZES:
                keys = make_keys("special" if n % 2 else "uniform", dtype, n, rng)
                for vdt in ("int32", "int64") if gather == 0 else ("float64",):
                    check_pairs(keys, _values(vdt, n, rng), "onesweep", bool(n % 3),
                                what=f"batch_values={batch} gather={gather}")
                if gather == 0:
                    for index_dtype in (np.int32, np.int64):
                        check_argsort(keys, "onesweep", bool(n % 2), index_dtype,
                                      f"batch_values={batch}")


@pytest.mark.parametrize("dtype", ["uint32", "float64", "int8"])
@pytest.mark.parametrize("index_dtype", [np.int64, np.int32])
def test_argsort_positions_staged_as_four_bytes(dtype, index_dtype, rng):
    """argsort carries 32-bit positions (staged as 4 bytes a key) and writes
    int64 or int32 indices; edge sizes, both orders."""
    for n in EDGE_SIZES:
        keys = make_keys("special", dtype, n, rng)
        check_argsort(keys, "onesweep", bool(n % 2), index_dtype, "onesweep")


@pytest.mark.parametrize("vdt", VALUE_DTYPES)
def test_edge_sizes_every_value_width(vdt, rng):
    for n in EDGE_SIZES:
        keys = make_keys("uniform", "float32", n, rng)
        check_pairs(keys, _values(vdt, n, rng), "onesweep", bool(n % 2), what="edge")
        check_pairs(keys, _values(vdt, n, rng), "auto", False, what="edge auto")


# ----------------------------------------------------------------- msd_local
def _msd_inputs(rng):
    """(route, keys) of N_MSD keys: uniform and standard-normal (MSD),
    small values and few distinct ones (LSD from the start), a group of
    3000 equal keys where the sampler does not look (MSD, then LSD)."""
    n = N_MSD
    normal = rng.standard_normal(n)
    normal[rng.integers(0, n, 50)] = np.nan
    normal[:4] = (-0.0, 0.0, np.inf, -np.inf)
    overflow = make_keys("uniform", "uint64", n, rng)
    stride = n // 2048
    spots = np.arange(n)
    spots = spots[spots % stride != 0]
    overflow[rng.choice(spots, 3000, replace=False)] = overflow[1]
    return [("msd", make_keys("uniform", "int64", n, rng)), ("msd", normal),
            ("lsd", rng.integers(-1000, 1000, n).astype(np.int64)),
            ("lsd", (rng.integers(0, 5000, n) / 7).astype(np.float64)),
            ("overflow", overflow)]


@pytest.mark.parametrize("vdt", ["int32", "float64"])
def test_msd_local_pairs_on_every_route(vdt, rng):
    """Pairs of 8-byte keys with 4- and 8-byte values (carried as they
    are by default), stable, on every route."""
    for route, keys in _msd_inputs(rng):
        for descending in (False, True):
            check_pairs(keys, _values(vdt, len(keys), rng), "msd_local", descending, what=route)


@pytest.mark.parametrize("vdt", ["int64", "float64"])
def test_msd_local_pairs_gathering_eight_byte_values_on_every_route(vdt, rng):
    """gather_values=1: the passes carry 32-bit positions and the local
    sort reads each 8-byte value from its position, stable, on every route."""
    with _Config("msd_local", gather_values=1):
        for route, keys in _msd_inputs(rng):
            for descending in (False, True):
                check_pairs(keys, _values(vdt, len(keys), rng), "msd_local", descending,
                            what=f"{route} gathered")


@pytest.mark.parametrize("index_dtype", [np.int64, np.int32])
def test_msd_local_argsort_on_every_route(index_dtype, rng):
    for route, keys in _msd_inputs(rng):
        for descending in (False, True):
            check_argsort(keys, "msd_local", descending, index_dtype, f"msd_local {route}")


def test_msd_local_stable_sort_and_small_pairs_by_name(rng):
    """Keys alone asked stable (the route is stable: same result); pairs
    and argsorts below 2^20 keys by name run onesweep's passes."""
    cupy = _cupy()
    keys = make_keys("special", "float64", (1 << 22) + 3, rng)
    got = csk.sort(cupy.asarray(keys), algorithm="msd_local", stable=True)
    assert_keys_equal(got, keys[reference_argsort(keys)])
    small = make_keys("few_unique", "uint64", 70001, rng)
    check_pairs(small, _values("int64", len(small), rng), "msd_local", True, what="small")
    check_argsort(small, "msd_local", False, np.int64, "small")


def test_auto_sorts_eight_byte_pairs_from_two_pow_20_with_msd_local(rng):
    cupy = _cupy()
    keys = cupy.asarray(make_keys("uniform", "uint64", 1 << 20, rng))
    values = cupy.asarray(_values("int64", 1 << 20, rng))
    assert csk.explain(keys, kind="pairs", values=values).name == "msd_local"
    assert csk.explain(keys, kind="argsort").name == "msd_local"
    assert csk.explain(keys[:-1], kind="argsort").name != "msd_local"


# ------------------------------------------------------------------ counting
@pytest.mark.parametrize("dtype", ["uint8", "int8", "uint16", "int16"])
def test_counting_replays_new_data_and_other_offsets(dtype, rng):
    """8- and 16-bit keys: counting's launch plan is recorded once and
    replayed (prepared calls, then graphs) for new keys, and for views at
    other 16-byte offsets of the same length, whose vectors the kernels
    find themselves."""
    cupy = _cupy()
    n = 100_003
    for call in range(4):
        h = make_keys("uniform" if call % 2 else "special", dtype, n + 16, rng)
        for skip in (0, 1, 3, 8):  # (int16 views stay aligned to their size)
            dev = cupy.asarray(h)[skip:skip + n]
            got = csk.sort(dev, algorithm="counting", descending=bool(call % 2))
            assert_keys_equal(got, h[skip:skip + n][reference_argsort(h[skip:skip + n],
                                                                      bool(call % 2))])
    assert api.prepared.find("sort", dev, True, False, "counting") is not None
    key = next(k for k, p in plans._plans.items()
               if type(p) is plans.LaunchPlan and k[3] == dtype and k[4] == n)
    assert key[-1] is None  # recorded without a key_range


def test_counting_does_not_replay_a_promise_or_wide_keys(rng):
    """A key_range promise is checked on every call (a broken one raises);
    32-bit keys read their range each call: neither is recorded."""
    cupy = _cupy()
    h = rng.integers(0, 200, 50_001).astype(np.uint8)
    for _ in range(3):
        got = csk.sort(cupy.asarray(h), algorithm="counting", key_range=(0, 200))
        assert_keys_equal(got, np.sort(h))
    with pytest.raises(ValueError, match="outside key_range"):
        csk.sort(cupy.asarray(h), algorithm="counting", key_range=(0, 100))
    for call in range(3):
        w = rng.integers(call * 1000, call * 1000 + 5000, 50_001).astype(np.int32)
        assert_keys_equal(csk.sort(cupy.asarray(w), algorithm="counting"), np.sort(w))


@pytest.mark.parametrize("dtype", ["uint8", "int16"])
def test_counting_pairs_and_argsorts_replay(dtype, rng):
    for call in range(3):
        keys = make_keys("uniform", dtype, 65_537, rng)
        check_pairs(keys, _values("int64", len(keys), rng), "counting", bool(call % 2))
        check_argsort(keys, "counting", bool(call % 2), np.int64, "counting")


def test_auto_sorts_large_narrow_keys_with_counting(rng):
    """The declarations (nothing measured): counting for 8- and 16-bit keys
    above 2^22 keys."""
    cupy = _cupy()
    for dtype in ("uint8", "int8", "uint16", "int16"):
        keys = cupy.asarray(make_keys("uniform", dtype, (1 << 22) + 1, rng))
        assert csk.explain(keys).name == "counting", dtype


# ------------------------------------------------------------ prepared pairs
def _served(keys, values, algorithm="auto"):
    return api.prepared.find_pairs(keys, values, False, algorithm) is not None


@pytest.mark.parametrize("n", [2, 1000, 65537, 1 << 20])
@pytest.mark.parametrize("vdt", ["int32", "int64", "float64"])
def test_repeated_sort_by_key_is_prepared_and_right(n, vdt, rng):
    """Repeated calls with new keys and values each time: the later ones
    replay (prepared), each right."""
    cupy = _cupy()
    for call in range(4):
        keys = make_keys("uniform" if call % 2 else "few_unique", "float32", n, rng)
        k, v = cupy.asarray(keys), cupy.asarray(_values(vdt, n, rng))
        vh = v.get()
        got_k, got_v = csk.sort_by_key(k, v)
        order = reference_argsort(keys)
        assert_keys_equal(got_k, keys[order])
        np.testing.assert_array_equal(got_v.get(), vh[order])
    if n >= 1000:
        assert _served(k, v)
        assert not _served(k, v.astype(np.uint16))  # a dtype no test prepares a call for
        assert not _served(k, cupy.asarray(vh)[::-1])  # not contiguous: general path


def test_prepared_sort_by_key_of_torch_tensors(rng):
    torch = pytest.importorskip("torch")
    for call in range(3):
        keys = make_keys("uniform", "int64", 70001, rng)
        values = _values("float32", 70001, rng)
        k, v = torch.from_numpy(keys).cuda(), torch.from_numpy(values).cuda()
        got_k, got_v = csk.sort_by_key(k, v, descending=True)
        assert isinstance(got_v, torch.Tensor) and got_v.dtype == torch.float32
        order = reference_argsort(keys, True)
        np.testing.assert_array_equal(got_k.cpu().numpy(), keys[order])
        np.testing.assert_array_equal(got_v.cpu().numpy(), values[order])
    assert api.prepared.find_pairs(k, v, True, "auto") is not None


def test_a_sort_by_key_plan_replays(rng):
    cupy = _cupy()
    n = 100_003
    # keys spread over the dtype: auto's choice reads no key range (not counting's)
    like_k = cupy.asarray(make_keys("uniform", "uint32", n, rng))
    like_v = cupy.empty(n, cupy.int64)
    p = csk.plan(like=like_k, op="sort_by_key", values_like=like_v)
    assert not p.path().startswith("general path")  # it replays from its second call
    for call in range(3):
        keys = make_keys("uniform", "uint32", n, rng)
        values = _values("int64", n, rng)
        got_k, got_v = p(cupy.asarray(keys), cupy.asarray(values))
        order = reference_argsort(keys)
        assert_keys_equal(got_k, keys[order])
        np.testing.assert_array_equal(got_v.get(), values[order])
    assert p._call is not None and "replays" in p.path()


# --------------------------------------------------------- segmented, lexsort
def test_segmented_pairs_of_eight_byte_values(rng):
    """segmented_radix's packed sort gathers 8-byte values from positions."""
    cupy = _cupy()
    n = 200_003
    cuts = np.sort(rng.choice(np.arange(1, n), 40, replace=False))
    offsets = np.concatenate([[0], cuts, [n]]).astype(np.int64)
    keys = make_keys("special", "float32", n, rng)
    values = _values("int64", n, rng)
    got_k, got_v = csk.segmented_sort(cupy.asarray(keys), cupy.asarray(offsets),
                                      cupy.asarray(values), algorithm="segmented_radix")
    want_k, want_v = keys.copy(), values.copy()
    for lo, hi in zip(offsets[:-1], offsets[1:]):
        order = lo + reference_argsort(keys[lo:hi])
        want_k[lo:hi], want_v[lo:hi] = keys[order], values[order]
    assert_keys_equal(got_k, want_k)
    np.testing.assert_array_equal(got_v.get(), want_v)


def test_lexsort_of_device_keys_through_carried_passes(rng):
    cupy = _cupy()
    n = (1 << 20) + 7  # 80 bits of keys: packed sorts two words
    a = rng.integers(0, 50, n).astype(np.int32)
    b = rng.standard_normal(n).astype(np.float32)
    c = rng.integers(-5, 5, n).astype(np.int16)
    for algorithm in ("packed", "passes"):
        got = csk.lexsort([cupy.asarray(x) for x in (b, c, a)], algorithm=algorithm)
        np.testing.assert_array_equal(got.get(), np.lexsort((b, c, a)), err_msg=algorithm)


# ---------------------------------------------------------------------- slow
@slow
@pytest.mark.parametrize("dist", DISTRIBUTIONS)
@pytest.mark.parametrize("dtype", ["uint32", "float32", "int64", "float64", "uint16"])
@pytest.mark.parametrize("vdt", VALUE_DTYPES)
def test_every_distribution_auto_and_gathered(dist, dtype, vdt, rng):
    n = 1_000_003
    keys = make_keys(dist, dtype, n, rng)
    values = _values(vdt, n, rng)
    descending = bool(rng.integers(2))
    check_pairs(keys, values, "auto", descending, what=dist)
    with _Config("onesweep", gather_values=int(vdt in ("int64", "float64"))):
        check_pairs(keys, values, "onesweep", descending, what=dist)
    check_argsort(keys, "auto", descending, np.int64, dist)


@slow
@pytest.mark.parametrize("dist", DISTRIBUTIONS)
@pytest.mark.parametrize("dtype", ["uint64", "int64", "float64"])
def test_msd_local_every_distribution(dist, dtype, rng):
    keys = make_keys(dist, dtype, N_MSD, rng)
    descending = bool(rng.integers(2))
    for vdt in ("int32", "int64"):
        check_pairs(keys, _values(vdt, N_MSD, rng), "msd_local", descending, what=dist)
    check_argsort(keys, "msd_local", descending, np.int64, dist)


@slow
@pytest.mark.parametrize("n", [1 << 24, (1 << 24) + 1])
def test_large_pairs(n, rng):
    for dtype, vdt in (("uint32", "int64"), ("float64", "int64"), ("uint8", "int64"),
                       ("uint64", "int32")):
        check_pairs(make_keys("uniform", dtype, n, rng), _values(vdt, n, rng), "auto",
                    what="large")


@slow
@pytest.mark.parametrize("dtype", ["uint8", "int16"])
def test_counting_replays_at_large_sizes(dtype, rng):
    cupy = _cupy()
    for call in range(3):
        h = make_keys("uniform", dtype, (1 << 24) + 5, rng)
        got = csk.sort(cupy.asarray(h)[1:], algorithm="counting")
        assert_keys_equal(got, np.sort(h[1:]))
