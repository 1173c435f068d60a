"""cudasortkit.plan on a GPU: results equal NumPy's on fresh data each call
(a stale launch plan or address shows as a wrong result), out= written in
place over poisoned buffers, the caller's busy stream ordered, and
mismatched inputs refused."""
import numpy as np
import pytest

import cudasortkit as csk
from helpers import assert_valid_argsort

pytestmark = pytest.mark.gpu

SIZES = [1, 2, 1000, (1 << 20) + 3]
DTYPES = ["uint32", "float32", "int64", "float64"]


def _cupy():
    return pytest.importorskip("cupy")


def _keys(rng, n, dtype, shape=None):
    h = rng.standard_normal(n) * 1000 if dtype[0] == "f" else \
        rng.integers(0 if dtype[0] == "u" else -1000, 1000, n)
    h = h.astype(dtype)
    return h if shape is None else h.reshape(shape)


def _want_sort(h, descending):
    s = np.sort(h, axis=-1)
    return s[..., ::-1] if descending else s


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("descending", [False, True])
def test_sort_plan_equals_numpy_on_fresh_data(n, dtype, descending):
    cupy = _cupy()
    rng = np.random.default_rng(n)
    p = csk.plan(like=cupy.empty(n, dtype), descending=descending)
    for _ in range(3):  # the first call records, the later ones replay
        h = _keys(rng, n, dtype)
        np.testing.assert_array_equal(p(cupy.asarray(h)).get(), _want_sort(h, descending))


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("index_dtype", [np.int64, np.int32])
@pytest.mark.parametrize("descending", [False, True])
def test_stable_argsort_plan_is_numpys(n, index_dtype, descending):
    cupy = _cupy()
    rng = np.random.default_rng(n + 7)
    p = csk.plan(like=cupy.empty(n, "float32"), op="argsort", stable=True,
                 descending=descending, index_dtype=index_dtype)
    for _ in range(3):
        h = np.round(_keys(rng, n, "float32") / 100)  # ties: stability shows
        got = p(cupy.asarray(h))
        assert got.dtype == np.dtype(index_dtype)
        assert_valid_argsort(got.get().astype(np.int64), h, descending=descending, stable=True)


@pytest.mark.parametrize("n", SIZES)
def test_sort_by_key_plan(n):
    cupy = _cupy()
    rng = np.random.default_rng(n + 1)
    p = csk.plan(like=cupy.empty(n, "uint32"), op="sort_by_key",
                 values_like=cupy.empty(n, "int64"))
    assert "general path" in p.explain()
    for _ in range(2):
        k = _keys(rng, n, "uint32") % 50
        v = np.arange(n, dtype=np.int64)
        ks, vs = p(cupy.asarray(k), cupy.asarray(v))
        order = np.argsort(k, kind="stable")
        np.testing.assert_array_equal(ks.get(), k[order])
        np.testing.assert_array_equal(vs.get(), v[order])


@pytest.mark.parametrize("op", ["sort", "argsort"])
def test_out_is_written_in_place_over_poison(op):
    cupy = _cupy()
    n, rng = 100_003, np.random.default_rng(3)
    p = csk.plan(like=cupy.empty(n, "float32"), op=op)
    out = cupy.empty(n, "float32" if op == "sort" else "int64")
    for _ in range(3):
        out.view(cupy.uint8).fill(0xA5)
        h = _keys(rng, n, "float32")
        got = p(cupy.asarray(h), out=out)
        assert got is out
        if op == "sort":
            np.testing.assert_array_equal(out.get(), np.sort(h))
        else:
            assert_valid_argsort(out.get(), h)


def test_in_place_sort_plan():
    cupy = _cupy()
    rng = np.random.default_rng(4)
    p = csk.plan(like=cupy.empty(5000, "int64"))
    for _ in range(3):
        h = _keys(rng, 5000, "int64")
        a = cupy.asarray(h)
        assert p(a, out=a) is a
        np.testing.assert_array_equal(a.get(), np.sort(h))


@pytest.mark.parametrize("descending", [False, True])
def test_sort_plan_along_the_last_axis_of_2d(descending):
    cupy = _cupy()
    rng = np.random.default_rng(5)
    p = csk.plan(like=cupy.empty((64, 1000), "float32"), descending=descending)
    q = csk.plan(like=cupy.empty((64, 1000), "float32"), op="argsort", stable=True)
    for _ in range(3):
        h = _keys(rng, 64 * 1000, "float32", (64, 1000))
        np.testing.assert_array_equal(p(cupy.asarray(h)).get(), _want_sort(h, descending))
        np.testing.assert_array_equal(q(cupy.asarray(h)).get(),
                                      np.argsort(h, axis=-1, kind="stable"))


def test_sort_plan_along_axis_0_runs_the_general_path():
    cupy = _cupy()
    rng = np.random.default_rng(6)
    p = csk.plan(like=cupy.empty((300, 7), "uint32"), axis=0)
    assert "not the last" in p.explain()
    h = _keys(rng, 2100, "uint32", (300, 7))
    np.testing.assert_array_equal(p(cupy.asarray(h)).get(), np.sort(h, axis=0))


@pytest.mark.parametrize("op", ["sort", "argsort"])
def test_torch_plan(op):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA torch")
    rng = np.random.default_rng(8)
    n = (1 << 20) + 3
    p = csk.plan(like=torch.empty(n, dtype=torch.float32, device="cuda"), op=op, stable=True)
    out = torch.empty(n, dtype=torch.float32 if op == "sort" else torch.int64, device="cuda")
    for _ in range(3):
        h = _keys(rng, n, "float32")
        got = p(torch.from_numpy(h).cuda())
        want = np.sort(h) if op == "sort" else np.argsort(h, kind="stable")
        np.testing.assert_array_equal(got.cpu().numpy(), want)
        assert p(torch.from_numpy(h).cuda(), out=out) is out
        np.testing.assert_array_equal(out.cpu().numpy(), want)


def test_busy_caller_stream_is_ordered():
    """Keys written by slow work queued on the caller's stream just before
    each call are the keys sorted."""
    cupy = _cupy()
    n, rng = 1 << 20, np.random.default_rng(9)
    p = csk.plan(like=cupy.empty(n, "uint32"))
    a = cupy.empty(n, "uint32")
    with cupy.cuda.Stream(non_blocking=True):
        for _ in range(3):
            h = _keys(rng, n, "uint32")
            a.fill(0)
            for _ in range(20):  # keep the stream busy before the write lands
                a += 0
            a.set(h, stream=cupy.cuda.get_current_stream())
            got = p(a)
            np.testing.assert_array_equal(got.get(), np.sort(h))


def test_mismatched_inputs_are_refused():
    cupy = _cupy()
    p = csk.plan(like=cupy.empty(1000, "float32"))
    with pytest.raises(ValueError, match="shape"):
        p(cupy.empty(999, "float32"))
    with pytest.raises(TypeError, match="dtype"):
        p(cupy.empty(1000, "float64"))
    with pytest.raises(ValueError, match="C-contiguous"):
        p(cupy.empty(2000, "float32")[::2])
    with pytest.raises(TypeError, match="numpy.ndarray"):
        p(np.zeros(1000, np.float32))
    with pytest.raises(ValueError, match="shape"):
        p(cupy.empty(1000, "float32"), out=cupy.empty(10, "float32"))
    if cupy.cuda.runtime.getDeviceCount() > 1:
        with cupy.cuda.Device(1):
            with pytest.raises(ValueError, match="device"):
                p(cupy.empty(1000, "float32"))


@pytest.mark.parametrize("n", [1000, 1 << 16, 1 << 20, (1 << 22) + 3])
def test_kept_temporaries_serve_many_calls_and_come_back(n):
    """A replaying plan keeps its temporaries (kept.OWN_TEMPORARIES_SHARE):
    many calls on fresh keys, into out= and not, each equal to NumPy's,
    before and after the context caches give them back, and after memory
    running short takes them back (caches.release_kept) with calls queued."""
    cupy = _cupy()
    from cudasortkit.gpu import caches

    rng = np.random.default_rng(n)
    p = csk.plan(like=cupy.empty(n, "float32"))
    out = cupy.empty(n, "float32")
    for i in range(40):
        if i == 20:
            caches.clear_all()
        if i == 30:
            caches.release_kept()
        h = _keys(rng, n, "float32")
        x = cupy.asarray(h)
        got = p(x, out=out) if i % 2 else p(x)
        np.testing.assert_array_equal(got.get(), np.sort(h))
    assert "replays" in p.path()
