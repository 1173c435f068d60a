"""argsort(index_dtype=np.int32) on the device: every plugin that argsorts
1-D device arrays (onesweep and counting make the indices in their passes,
the others get an int32 iota from the core) against
numpy.argsort(kind="stable").astype(int32), ascending and descending, with
poisoned outputs ruled out by checking every index. Quick tier: onesweep
(auto's usual pick); the other plugins (their int32 kernels compile) slow."""
import numpy as np
import pytest

import cudasortkit as csk
from helpers import make_keys, reference_argsort

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("algorithm", ["onesweep"] + [pytest.param(a, marks=pytest.mark.slow) for a in
                                                      ("auto", "radix", "merge_sort", "counting")])
def test_int32_indices_match_numpy(algorithm, rng):
    cupy = pytest.importorskip("cupy")
    dtypes = ("uint32", "int16") if algorithm == "counting" else ("uint32", "float64", "int16")
    for dtype in dtypes:
        for n, dist in ((1, "uniform"), (2, "uniform"), (4097, "few_unique"), (300_007, "uniform")):
            a = make_keys(dist, dtype, n, rng)
            if algorithm == "counting":
                a = (a % 1000).astype(dtype)
            for descending in (False, True):
                got = csk.argsort(cupy.asarray(a), algorithm=algorithm, stable=True,
                                  descending=descending, index_dtype=np.int32)
                assert got.dtype == np.int32, f"{algorithm} {dtype}: {got.dtype}"
                want = reference_argsort(a, descending).astype(np.int32)
                assert np.array_equal(got.get(), want), f"{algorithm} {dtype} n={n} desc={descending}"
