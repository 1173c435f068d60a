"""msd_local (plugins/msd_local.py): 8-byte keys by MSD passes over the top
32 bits and on-chip sorts of the prefix groups, or by onesweep's LSD passes
where the device decides so. Each case names the route it takes; every
result is compared with NumPy's sort, and the input must stay untouched.

Quick tier: one size of each route (MSD, LSD from the start, LSD after a
group overflowed), ascending and descending; the LSD passes on a persistent
grid (onesweep_pass_persistent: each block takes tile after tile) at a size
with a partial last tile, on the device's grid and on grids of one block and
one block an SM. Slow: every distribution and dtype, 2^26 keys."""
import numpy as np
import pytest

import cudasortkit as csk
from cudasortkit.build.template import Kernel
from cudasortkit.launch import plans
from helpers import DISTRIBUTIONS, assert_keys_equal, make_keys, reference_sort

pytestmark = pytest.mark.gpu
slow = pytest.mark.slow
N = (1 << 22) + 5
#: A partial last tile (384 x 24 = 9216 keys a tile: 457 tiles), about two
#: tiles a block of the persistent LSD passes on an H100 (132 SMs x 2).
N_WAVES = (1 << 22) + 12345


def _cupy():
    return pytest.importorskip("cupy")


def _check(a, descending=False, what=""):
    cupy = _cupy()
    dev = cupy.asarray(a)
    got = csk.sort(dev, algorithm="msd_local", descending=descending)
    assert_keys_equal(got, reference_sort(a, descending), f"{what} desc={descending}")
    assert np.array_equal(dev.get().view(np.uint8), a.view(np.uint8)), "input was modified"


@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("dtype", ["uint64", "float64", "int64"])
def test_msd_route(dtype, descending, rng):
    """Uniform integers, standard-normal floats: the top digits vary and
    sampled prefixes do not repeat, so the MSD route runs (groups of a few keys)."""
    a = make_keys("uniform", dtype, N, rng) if dtype != "float64" else rng.standard_normal(N)
    if dtype == "float64":
        a[rng.integers(0, N, 50)] = np.nan
        a[:3] = (-0.0, 0.0, np.inf)
    _check(a, descending, f"{dtype} uniform")


@pytest.mark.parametrize("descending", [False, True])
def test_lsd_route_from_the_start(descending, rng):
    """Small values (top digits all zero) and few distinct ones (the sample
    repeats a prefix): plain LSD passes from the caller's keys."""
    _check(rng.integers(-1000, 1000, N).astype(np.int64), descending, "small int64")
    _check(rng.integers(0, 5000, N).astype(np.float64) / 7, descending, "few unique float64")


@pytest.mark.parametrize("descending", [False, True])
def test_lsd_route_after_an_overflow(descending, rng):
    """3000 copies of one key placed where the sampler does not look (it
    reads every (n // 2048)-th key): the sample finds no repeat, the MSD
    route runs, the group is longer than a chunk's window, and the LSD
    passes sort the caller's keys instead."""
    a = make_keys("uniform", "uint64", N, rng)
    stride = N // 2048
    spots = np.arange(N)
    spots = spots[spots % stride != 0]
    a[rng.choice(spots, 3000, replace=False)] = a[1]
    _check(a, descending, "uint64 with a group of 3000")


def _special(a, rng):
    """NaNs (both signs), -0.0 and +0.0, infinities among float keys."""
    spots = rng.choice(len(a), 400, replace=False)
    a[spots[:100]] = np.nan
    a[spots[100:150]] = -np.nan
    a[spots[150:250]] = -0.0
    a[spots[250:350]] = 0.0
    a[spots[350:375]] = np.inf
    a[spots[375:]] = -np.inf
    return a


def _overflowing(n, rng):
    """Uniform uint64 keys with 3000 copies of one key where the sampler
    (every (n // 2048)-th key) does not look: MSD route, then LSD."""
    a = make_keys("uniform", "uint64", n, rng)
    spots = np.arange(n)
    spots = spots[spots % (n // 2048) != 0]
    a[rng.choice(spots, 3000, replace=False)] = a[1]
    return a


def _sampled_pairs(n, rng):
    """Uniform uint64 keys where 40 pairs of neighbouring sampled keys
    (every (n // 2048)-th key) share their top 32 bits and differ below:
    the sample suggests groups of a few keys, so the MSD route runs with
    groups of two to rank."""
    a = make_keys("uniform", "uint64", n, rng)
    stride = n // 2048
    for k in range(0, 80, 2):
        high, low = a[k * stride] >> np.uint64(32), rng.integers(0, 1 << 32, dtype=np.uint64)
        a[(k + 1) * stride] = (high << np.uint64(32)) | low
    return a


#: Inputs of each route at n keys: (what, route, keys).
ROUTE_INPUTS = {
    "uint64 uniform": ("MSD", lambda n, rng: make_keys("uniform", "uint64", n, rng)),
    "int64 uniform": ("MSD", lambda n, rng: make_keys("uniform", "int64", n, rng)),
    "float64 normal, NaN, -0.0": ("MSD", lambda n, rng: _special(rng.standard_normal(n), rng)),
    "uint64 below 2^32": ("LSD", lambda n, rng: rng.integers(0, 1 << 32, n, dtype=np.uint64)),
    "float64 few unique, NaN, -0.0": (
        "LSD", lambda n, rng: _special(rng.integers(-3000, 3000, n).astype(np.float64) / 7, rng)),
    "uint64 long group": ("MSD then LSD", _overflowing),
    "uint64 sampled pairs": ("MSD", _sampled_pairs),
}


@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("what", sorted(ROUTE_INPUTS))
def test_every_route_with_a_partial_last_tile(what, descending, rng):
    """Each route at N_WAVES keys: the MSD passes' last tile and the
    persistent LSD passes' (a block takes a second tile) are partial."""
    route, make = ROUTE_INPUTS[what]
    _check(make(N_WAVES, rng), descending, f"{what} ({route}) n={N_WAVES}")


@pytest.fixture
def persistent_blocks_per_sm(monkeypatch):
    """Set how many blocks of onesweep_pass_persistent the plugin thinks an
    SM holds (0: a grid of one block), with launch plans recorded afresh
    (a plan keeps the grid of its first run)."""
    real = Kernel.resident_blocks

    def patch(blocks):
        def resident_blocks(self, limits, block_size, dynamic_shared=0):
            if self.name == "onesweep_pass_persistent":
                return blocks
            return real(self, limits, block_size, dynamic_shared)

        monkeypatch.setattr(Kernel, "resident_blocks", resident_blocks)
        plans.forget()

    yield patch
    monkeypatch.undo()
    plans.forget()


@pytest.mark.parametrize("blocks_per_sm", [0, 1])
@pytest.mark.parametrize("what", ["uint64 below 2^32", "float64 few unique, NaN, -0.0",
                                  "uint64 long group", "float64 normal, NaN, -0.0"])
def test_lsd_passes_on_small_persistent_grids(what, blocks_per_sm, persistent_blocks_per_sm, rng):
    """The LSD passes with far fewer blocks than tiles: one block taking all
    457 tiles of each pass in turn, or one block an SM taking ~3.5 each.
    Every tile's look-back still finds its predecessors' prefixes (no
    deadlock, no tile taken twice or missed), and on the MSD route the
    skipped passes stay skipped."""
    persistent_blocks_per_sm(blocks_per_sm)
    route, make = ROUTE_INPUTS[what]
    a = make(N_WAVES, rng)
    for descending in (False, True):
        _check(a, descending, f"{what} ({route}), {blocks_per_sm} persistent blocks an SM")


def test_auto_picks_it_for_large_eight_byte_keys(rng):
    """Keys alone from 2^22 keys, stable ones too (the sort is stable);
    argsorts and pairs from 2^20 (tests/test_pairs_gpu.py sorts them)."""
    cupy = _cupy()
    keys = cupy.asarray(make_keys("uniform", "uint64", N, rng))  # a wide range: not counting's
    assert csk.explain(keys).name == "msd_local"
    assert csk.explain(keys, stable=True).name == "msd_local"
    assert csk.explain(keys, kind="argsort").name == "msd_local"
    assert csk.explain(keys[: 1 << 20], kind="pairs", values=keys[: 1 << 20]).name == "msd_local"
    assert csk.explain(keys[: (1 << 20) - 1], kind="argsort").name != "msd_local"
    assert csk.explain(keys[: (1 << 22) - 1]).name != "msd_local"
    assert csk.explain(keys.view(cupy.uint32)).name != "msd_local"


def test_by_name_below_its_size_runs_onesweep(rng):
    a = make_keys("uniform", "float64", 100_003, rng)
    _check(a, False, "100003 float64")


@slow
@pytest.mark.parametrize("dist", DISTRIBUTIONS)
@pytest.mark.parametrize("dtype", ["uint64", "int64", "float64"])
def test_every_distribution(dist, dtype, rng):
    _check(make_keys(dist, dtype, N + 1000, rng), bool(rng.integers(2)), f"{dtype} {dist}")


@slow
def test_two_pow_26_keys(rng):
    cupy = _cupy()
    for a in (make_keys("uniform", "uint64", 1 << 26, rng), rng.standard_normal(1 << 26)):
        dev = cupy.asarray(a)
        got = csk.sort(dev, algorithm="msd_local")
        assert bool(cupy.array_equal(got, cupy.sort(dev))), f"2^26 {a.dtype}"
