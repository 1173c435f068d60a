"""cudasortkit.merge / merge_by_key on the GPU when the inputs are not sorted.

The result is always a permutation of the inputs, values moved with their
keys: merge_arrays checks the inputs' order as it merges and, when it finds a
pair out of order, merge_fallback writes the concatenation [a..., b...]
instead. Sorted inputs still give the stable merge (a's keys first on ties).
Result buffers are poisoned (conftest), so an output a kernel never writes
shows. Run under `compute-sanitizer --tool memcheck` to see any access out of
the inputs' bounds."""
import numpy as np
import pytest

import cudasortkit as csk
from helpers import reference_argsort

pytestmark = pytest.mark.gpu

cupy = pytest.importorskip("cupy")

SIZES = [0, 1, 5, 2049, 100_003, (1 << 20) + 7]
#: (len(a), len(b)): every size as a and as b, against itself or a smaller and a larger partner.
PAIRS = [(0, 0), (0, 5), (5, 0), (1, 1), (1, 2049), (5, 5), (2049, 2049), (2049, 100_003),
         (100_003, 1), (100_003, 100_003), (SIZES[-1], 100_003), (1, SIZES[-1])]
DTYPES = ["int32", "float32", "uint64"]
#: How a and b are built: each input sorted in the merge's order, moved out
#: of order by one element, sorted the other way, or not sorted at all.
KINDS = [("random", "random"), ("one_off", "sorted"), ("sorted", "one_off"),
         ("reverse", "reverse"), ("sorted", "random")]


def _bits(x: np.ndarray) -> np.ndarray:
    return x.view(f"u{x.itemsize}")


def _keys(dtype, n, rng) -> np.ndarray:
    dt = np.dtype(dtype)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return rng.integers(info.min, info.max, size=n, dtype=dt, endpoint=True)
    x = (rng.standard_normal(n) * 10.0 ** rng.integers(-3, 4, size=n)).astype(dt)
    special = np.array([np.nan, -np.nan, 0.0, -0.0, np.inf, -np.inf], dt)
    pick = rng.random(n) < 0.05
    x[pick] = rng.choice(special, size=int(pick.sum()))
    return x


def _is_sorted(x: np.ndarray, descending: bool) -> bool:
    """In the merge's order: a stable sort leaves a sorted array as it is."""
    return np.array_equal(reference_argsort(x, descending), np.arange(x.size))


def _build(kind, dtype, n, descending, rng) -> np.ndarray:
    x = _keys(dtype, n, rng)
    if kind == "random":
        return x
    x = x[reference_argsort(x, descending)]
    if kind == "reverse":
        return x[::-1].copy()
    if kind == "one_off" and n >= 2:
        # The last key (the largest in the merge's order) moved to a random earlier place.
        j = int(rng.integers(0, n - 1))
        x = np.concatenate([x[:j], x[-1:], x[j:-1]])
    return x


def _check_permutation(a: np.ndarray, b: np.ndarray, descending: bool, value_dtype):
    """merge and merge_by_key of a, b: a permutation of the inputs, values
    with their keys; the stable merge when both are sorted, else the
    concatenation."""
    both = np.concatenate([a, b])
    what = f"{a.size} + {b.size} {a.dtype} keys, descending={descending}"
    sorted_inputs = _is_sorted(a, descending) and _is_sorted(b, descending)
    expected = both[reference_argsort(both, descending)] if sorted_inputs else both
    da, db = cupy.asarray(a), cupy.asarray(b)

    got = csk.merge(da, db, descending=descending)
    assert isinstance(got, cupy.ndarray) and got.dtype == a.dtype and got.size == both.size
    got = got.get()
    assert np.array_equal(np.sort(_bits(got)), np.sort(_bits(both))), f"merge of {what}: not a permutation"
    assert np.array_equal(_bits(got), _bits(expected)), (
        f"merge of {what}: not the {'stable merge' if sorted_inputs else 'concatenation'}")

    ids = np.arange(both.size, dtype=value_dtype)  # each key's place in concat(a, b)
    ia, ib = cupy.asarray(ids[:a.size]), cupy.asarray(ids[a.size:])
    k, v = csk.merge_by_key(da, ia, db, ib, descending=descending)
    k, v = k.get(), v.get().astype(np.int64)
    assert np.array_equal(np.bincount(v, minlength=both.size), np.ones(both.size, np.int64)), (
        f"merge_by_key of {what}: values not a permutation")
    assert np.array_equal(_bits(k), _bits(both)[v]), f"merge_by_key of {what}: a value left its key"
    assert np.array_equal(_bits(k), _bits(expected)), f"merge_by_key of {what}: keys differ from merge"
    assert np.array_equal(_bits(da.get()), _bits(a)) and np.array_equal(_bits(db.get()), _bits(b)), "input modified"


@pytest.mark.parametrize("dtype", DTYPES)
def test_unsorted_inputs_give_a_permutation(dtype, rng):
    for na, nb in PAIRS:
        for kind_a, kind_b in KINDS:
            for descending, value_dtype in ((False, np.int64), (True, np.uint32)):
                a = _build(kind_a, dtype, na, descending, rng)
                b = _build(kind_b, dtype, nb, descending, rng)
                _check_permutation(a, b, descending, value_dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_sorted_inputs_still_merge_stably(dtype, rng):
    for na, nb in PAIRS:
        for descending in (False, True):
            a = _build("sorted", dtype, na, descending, rng)
            b = _build("sorted", dtype, nb, descending, rng)
            assert _is_sorted(a, descending) and _is_sorted(b, descending)
            if not descending:  # the reference the issue names, for the ascending merge
                order = np.argsort(np.concatenate([a, b]), kind="stable")
                assert np.array_equal(order, reference_argsort(np.concatenate([a, b])))
            _check_permutation(a, b, descending, np.uint32 if descending else np.int64)
            if na <= 100_003:  # ties across the inputs: a's keys come first
                _check_permutation(a, a.copy(), descending, np.int64)


def _tile() -> int:
    """merge_sort's tile at its defaults for int32 keys, as merge and merge_by_key run it."""
    from cudasortkit.sdk import registry

    plugin = registry.plugins()["merge_sort"]
    tiles = {plugin.tile(plugin.default_config("int32", vb)) for vb in (0, 8)}
    assert len(tiles) == 1, tiles
    return tiles.pop()


@pytest.mark.parametrize("which", ["a", "b"])
def test_one_key_out_of_order_near_run_boundaries(which):
    """Interleaved inputs split evenly: block k's runs start at a[k * TILE / 2]
    and b[k * TILE / 2]. One key moved up or down past its neighbour, at each
    place around the first boundaries, is found whether the pair out of order
    lies inside one block's run or straddles two (the check against the key
    just before a run): the result is the concatenation."""
    half = _tile() // 2
    n = 4 * half + 3
    evens = np.arange(0, 2 * n, 2, dtype=np.int32)
    odds = evens + 1
    for boundary in (half, 2 * half, 3 * half):
        for p in range(boundary - 3, boundary + 3):
            for delta in (-3, 3):  # now below its predecessor / above its successor
                a, b = evens.copy(), odds.copy()
                (a if which == "a" else b)[p] += delta
                assert not _is_sorted(a if which == "a" else b, False)
                _check_permutation(a, b, False, np.int64)
                _check_permutation(a[::-1].copy(), b[::-1].copy(), True, np.int64)
