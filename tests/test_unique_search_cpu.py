"""csk.unique and csk.searchsorted without a GPU: the host path (NumPy's
results, shapes and types), the API's rules and bad input, the search
plugin kind's registration and auto's declared choice (explain)."""
import numpy as np
import pytest

import cudasortkit as csk
from cudasortkit.sdk import registry
from cudasortkit.sdk.search import SearchPlugin

FLAGS = [(False, False, False), (True, False, False), (False, True, False),
         (False, False, True), (True, True, True)]


def _assert_same(got, expected):
    if not isinstance(expected, tuple):
        got, expected = (got,), (expected,)
    assert isinstance(got, tuple) and len(got) == len(expected)
    for g, e in zip(got, expected):
        assert type(g) is type(e) and g.dtype == e.dtype and g.shape == e.shape
        assert np.array_equal(g, e, equal_nan=g.dtype.kind == "f")


# ------------------------------------------------------------------ unique
@pytest.mark.parametrize("flags", FLAGS)
@pytest.mark.parametrize("equal_nan", [True, False])
def test_unique_host_is_numpys(flags, equal_nan):
    a = np.array([[3.0, np.nan, -0.0], [1.0, 0.0, np.nan], [3.0, 1.0, 2.0]])
    got = csk.unique(a, *flags, equal_nan=equal_nan)
    _assert_same(got, np.unique(a, *flags, equal_nan=equal_nan))


def test_unique_inverse_has_the_inputs_shape():
    a = np.arange(24).reshape(2, 3, 4) % 5
    values, inverse = csk.unique(a, return_inverse=True)
    assert inverse.shape == a.shape
    assert np.array_equal(values[inverse], a)


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint16", "int64", "float16", "float32"])
def test_unique_host_dtypes_empty_and_lists(dtype):
    for a in (np.zeros(0, dtype), np.ones(5, dtype), np.array([1, 0, 1, 1], dtype)):
        _assert_same(csk.unique(a, True, True, True), np.unique(a, True, True, True))
    assert np.array_equal(csk.unique([3, 1, 3]), [1, 3])


@pytest.mark.parametrize("equal_nan", [True, False])
def test_unique_host_bfloat16_nans_are_floats(equal_nan):
    """bfloat16 follows the float rules (as on the device): NumPy itself
    does not see ml_dtypes' bfloat16 NaNs as NaN."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    a = np.array([np.nan, 1.0, -0.0, np.nan, 0.0, 1.0], np.float32)
    got = csk.unique(a.astype(ml_dtypes.bfloat16), True, True, True, equal_nan=equal_nan)
    expected = np.unique(a, True, True, True, equal_nan=equal_nan)
    assert got[0].dtype == ml_dtypes.bfloat16
    assert np.array_equal(got[0].astype(np.float32), expected[0], equal_nan=True)
    assert np.array_equal(np.signbit(got[0].astype(np.float32)), np.signbit(a[expected[1]]))
    for g, e in zip(got[1:], expected[1:]):
        assert np.array_equal(g, e)
    values, counts = csk.unique(a.astype(ml_dtypes.bfloat16), return_counts=True,
                                equal_nan=equal_nan)
    assert np.array_equal(counts, expected[3])


@pytest.mark.parametrize("flags", FLAGS)
@pytest.mark.parametrize("equal_nan", [True, False])
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_unique_host_keeps_the_first_occurrences_bits(dtype, equal_nan, flags):
    """Every flag combination keeps what return_index's path keeps: the
    first occurrence of -0.0 / +0.0 and of the NaNs (their payloads), bit
    for bit; without equal_nan every NaN, in input order."""
    rng = np.random.default_rng(5)
    bits = np.dtype(f"u{np.dtype(dtype).itemsize}")
    for n in (1, 2, 5, 17, 300, 5000):
        a = _special_floats(dtype, n, rng)
        got = csk.unique(a, *flags, equal_nan=equal_nan)
        values = got[0] if any(flags) else got
        _, index, *_ = np.unique(a, True, equal_nan=equal_nan)
        assert np.array_equal(values.view(bits), a[index].view(bits)), n
        _assert_same(got, np.unique(a, *flags, equal_nan=equal_nan))


def test_unique_non_contiguous_host():
    a = np.arange(40)[::-3] % 7
    _assert_same(csk.unique(a, True, True, True), np.unique(a, True, True, True))


def test_unique_torch_cpu_gives_tensors():
    torch = pytest.importorskip("torch")
    t = torch.tensor([3, 1, 3, 2])
    values, counts = csk.unique(t, return_counts=True)
    assert isinstance(values, torch.Tensor) and values.tolist() == [1, 2, 3]
    assert counts.tolist() == [1, 1, 2]


def test_unique_refuses_unsupported_dtypes():
    with pytest.raises(TypeError, match="supported"):
        csk.unique(np.array(["a", "b"]))
    with pytest.raises(TypeError, match="supported"):
        csk.unique(np.array([1 + 2j]))


def test_unique_axis_of_a_0d_array():
    with pytest.raises(ValueError, match="axis must be None"):
        csk.unique(np.float64(3.0), axis=0)


def test_unique_axis_bad_axis():
    pytest.importorskip("cudasortkit.calls.unique_rows")
    with pytest.raises(Exception, match="axis"):
        csk.unique(np.zeros((2, 3)), axis=2)


@pytest.mark.parametrize("axis", [0, -1])
@pytest.mark.parametrize("equal_nan", [True, False])
@pytest.mark.parametrize("flags", FLAGS)
def test_unique_axis_of_a_1d_array_is_axis_none(axis, equal_nan, flags):
    """NumPy treats an axis of a 1-D array as axis=None: with equal_nan the
    NaNs are one value, for every dtype and for lists too."""
    rng = np.random.default_rng(11)
    for dtype in ("float16", "float32", "float64", "int32", "bool"):
        a = rng.integers(0, 4, 40).astype(dtype)
        if a.dtype.kind == "f":
            a[::7] = np.nan
        expected = np.unique(a, *flags, axis=axis, equal_nan=equal_nan)
        _assert_same(csk.unique(a, *flags, axis=axis, equal_nan=equal_nan), expected)
        _assert_same(csk.unique(a.tolist(), *flags, axis=axis, equal_nan=equal_nan),
                     np.unique(a.tolist(), *flags, axis=axis, equal_nan=equal_nan))
    with pytest.raises(np.exceptions.AxisError):
        csk.unique(np.arange(3.0), axis=1)


@pytest.mark.parametrize("flags", FLAGS)
def test_unique_axis0_rows(flags):
    pytest.importorskip("cudasortkit.calls.unique_rows")
    a = np.array([[1, 2], [0, 5], [1, 2], [0, 4]], np.uint8)
    _assert_same(csk.unique(a, *flags, axis=0), np.unique(a, *flags, axis=0))


@pytest.mark.parametrize("axis", [1, -1, 2])
def test_unique_other_axis_moves_it_first(axis):
    pytest.importorskip("cudasortkit.calls.unique_rows")
    a = np.random.default_rng(0).integers(0, 2, size=(3, 4, 2)).astype(np.int16)
    _assert_same(csk.unique(a, True, True, True, axis=axis),
                 np.unique(a, True, True, True, axis=axis))


# ------------------------------------------------------------ searchsorted
@pytest.mark.parametrize("side", ["left", "right"])
def test_searchsorted_host_is_numpys(side):
    a = np.array([-np.inf, -1.0, -0.0, 0.0, 0.0, 2.0, np.inf, np.nan, np.nan])
    v = np.array([[np.nan, 0.0], [-0.0, 5.0], [-np.inf, 2.0]])
    got = csk.searchsorted(a, v, side)
    expected = np.searchsorted(a, v, side)
    assert got.dtype == np.int64 and got.shape == v.shape
    assert np.array_equal(got, expected)


def test_searchsorted_host_bfloat16_nans_last():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    a = np.array([-1.0, 0.0, 2.0, np.nan, np.nan], np.float32)
    v = np.array([np.nan, 2.0, -0.0], np.float32)
    bf = ml_dtypes.bfloat16
    for side in ("left", "right"):
        assert np.array_equal(csk.searchsorted(a.astype(bf), v.astype(bf), side),
                              np.searchsorted(a, v, side))


def test_searchsorted_scalar_and_sorter():
    a = np.array([5, 1, 4, 1, 3])
    s = np.argsort(a, kind="stable")
    got = csk.searchsorted(a, 4, sorter=s)
    assert type(got) is np.int64 and got == np.searchsorted(a, 4, sorter=s)
    assert np.array_equal(csk.searchsorted(a, [0, 1, 6], "right", s),
                          np.searchsorted(a, [0, 1, 6], "right", s))


def test_searchsorted_batched_rows():
    rng = np.random.default_rng(1)
    a = np.sort(rng.integers(0, 9, size=(2, 3, 7)), axis=-1)
    v = rng.integers(-1, 10, size=(2, 3, 5))
    got = csk.searchsorted(a, v, side="right")
    assert got.shape == v.shape and got.dtype == np.int64
    for i in range(2):
        for j in range(3):
            assert np.array_equal(got[i, j], np.searchsorted(a[i, j], v[i, j], "right"))
    s = np.argsort(a[..., ::-1], axis=-1)  # sorter of a reversed copy, row by row
    rev = a[..., ::-1].copy()
    got = csk.searchsorted(rev, v, sorter=s)
    for i in range(2):
        for j in range(3):
            assert np.array_equal(got[i, j], np.searchsorted(rev[i, j], v[i, j], sorter=s[i, j]))


def test_searchsorted_empty():
    assert np.array_equal(csk.searchsorted(np.zeros(0), [1.0, 2.0]), [0, 0])
    assert csk.searchsorted([1, 2], np.zeros(0)).shape == (0,)


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(side="middle"), ValueError, "'left' or 'right'"),
    (dict(sorter=[0]), ValueError, "sorter.size must equal a.size"),
    (dict(sorter=[0.0, 1.0, 2.0]), TypeError, "integers"),
])
def test_searchsorted_bad_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        csk.searchsorted([1, 2, 3], 2, **kwargs)


def test_searchsorted_bad_shapes():
    with pytest.raises(ValueError, match="at least one dimension"):
        csk.searchsorted(np.float64(1.0), 1.0)
    with pytest.raises(ValueError, match=r"v must have shape \(2,\) \+ \(m,\)"):
        csk.searchsorted(np.zeros((2, 3)), np.zeros((3, 1)))
    with pytest.raises(ValueError, match="v must have shape"):
        csk.searchsorted(np.zeros((2, 3)), np.zeros(3))
    with pytest.raises(ValueError, match=r"sorter must have a's shape \(2, 3\)"):
        csk.searchsorted(np.zeros((2, 3)), np.zeros((2, 1)), sorter=np.zeros(6, np.int64))
    with pytest.raises(ValueError, match="sorter.size must equal a.size: 5 != 6"):
        csk.searchsorted(np.zeros((2, 3)), np.zeros((2, 1)), sorter=np.zeros(5, np.int64))


def test_searchsorted_unknown_algorithm_on_the_host_too():
    with pytest.raises(ValueError, match="no search plugin named 'nope'"):
        csk.searchsorted([1, 2, 3], 2, algorithm="nope")


def test_unique_accepts_numpys_sorted_flag():
    assert np.array_equal(csk.unique([3, 1, 3], sorted=False), [1, 3])


def test_searchsorted_torch_cpu():
    torch = pytest.importorskip("torch")
    got = csk.searchsorted(torch.tensor([1, 2, 3]), torch.tensor([2, 4]))
    assert isinstance(got, torch.Tensor) and got.tolist() == [1, 3]


class _OnDevice:
    """A device array by __cuda_array_interface__ only (never dereferenced:
    explain_searchsorted reads shapes and dtypes)."""

    def __init__(self, shape, dtype=np.float64):
        self.__cuda_array_interface__ = {"shape": tuple(shape), "typestr": np.dtype(dtype).str,
                                         "data": (0x1000, False), "version": 3, "strides": None}


@pytest.mark.parametrize("gpu", [False, True])
def test_a_named_search_plugin_for_host_arrays_raises_as_sort_does(gpu, monkeypatch):
    """Host arrays are searched by NumPy: a search plugin named for them
    raises ValueError saying why (without a GPU: that it needs one, as sort
    and topk say) in searchsorted and explain_searchsorted alike; auto runs
    NumPy, and explain says so."""
    from cudasortkit.calls import search

    monkeypatch.setattr(search, "gpu_available", lambda: gpu)
    a, v = np.arange(10.0), np.array([3.0, 4.5])
    for name in ("tree", "binary", "merge"):
        why = "searches device arrays" if gpu else f"{name} needs a GPU"
        for call in (csk.searchsorted, csk.explain_searchsorted):
            with pytest.raises(ValueError, match=f"algorithm {name!r} cannot search.*{why}.*NumPy"):
                call(a, v, algorithm=name)
        assert csk.explain_searchsorted(_OnDevice((10,)), _OnDevice((2,)),
                                        algorithm=name).plugin == name
    assert csk.searchsorted(a, v).tolist() == [3, 5]
    auto = str(csk.explain_searchsorted(a, v))
    assert "host arrays: NumPy's searchsorted runs" in auto
    assert ("there is no GPU here" in auto) != gpu


# ------------------------------------------------- search plugins and auto
def test_search_plugins_are_registered():
    entries = registry.entries(SearchPlugin.entry_point_group)
    assert {"binary", "merge", "tree"} <= set(entries)
    assert all(entries[n].ok for n in ("binary", "merge", "tree")), entries


def test_search_plugin_declarations_checked():
    class NoEstimate(SearchPlugin):
        name = "no_estimate"
        templates = ("search.cu",)

        def run(self, job, query):
            pass

    with pytest.raises(TypeError, match="estimate"):
        registry.check_class(NoEstimate, SearchPlugin.entry_point_group)


def test_explain_searchsorted_declared_choice():
    long_v = csk.explain_searchsorted(np.zeros(1 << 24, np.float32), np.zeros(1 << 24, np.float32))
    assert long_v.plugin == "tree" and "estimate" in str(long_v)
    # merge (measured 2.2x binary there) is declared dearer than binary
    assert long_v.estimates["merge"] > long_v.estimates["binary"] > long_v.estimates["tree"]
    text = str(long_v)
    assert "4 global reads a query (fanout 8) after a 4,096-entry top in shared memory" in text
    assert "about 14 dependent global loads a query" in text
    short_v = csk.explain_searchsorted(np.zeros(1 << 24, np.float32), np.zeros(100, np.float32))
    # building the tree reads every 8th key of a; kary waits on 5 loads, binary on 15
    assert short_v.plugin == "kary"
    assert short_v.estimates["tree"] > short_v.estimates["binary"] > short_v.estimates["kary"]
    batched = csk.explain_searchsorted(np.zeros((4, 1 << 20)), np.zeros((4, 1 << 20)))
    assert batched.plugin == "binary" and {"merge", "tree"} <= set(batched.skipped)
    assert "searches one row" in str(batched)
    with_sorter = csk.explain_searchsorted(np.zeros(1 << 20), np.zeros(1 << 20),
                                           sorter=np.arange(1 << 20))
    assert with_sorter.plugin == "binary" and "without sorter" in with_sorter.skipped["tree"]
    named = csk.explain_searchsorted(_OnDevice((10,)), _OnDevice((10,)), algorithm="merge")
    assert named.plugin == "merge"
    with pytest.raises(ValueError, match="no search plugin named 'nope'"):
        csk.explain_searchsorted(np.zeros(10), np.zeros(10), algorithm="nope")
    with pytest.raises(ValueError, match="no search plugin serves"):
        csk.explain_searchsorted(_OnDevice((2, 10)), _OnDevice((2, 3)), algorithm="merge")


# ------------------------------------------ launches match kernel prototypes
class _Kernel(tuple):
    """(template, name), with what a plugin asks of a prepared kernel."""

    def resident_blocks(self, limits, block_size, dynamic_shared=0):
        return limits.resident_blocks(block_size, 64, 16 * 1024 + dynamic_shared)


class _RecordingJob:
    """What a search plugin's run() uses of a Job, recording launches."""

    def __init__(self, plugin):
        from cudasortkit.gpu.device import DeviceLimits

        self.config = plugin.default_config("float32")
        self.limits = DeviceLimits.sm90()
        self.key_bytes = 4
        self.launches = []
        self.allocated = []

    def kernel(self, template, name):
        return _Kernel((template, name))

    def alloc(self, nbytes):
        self.allocated.append(nbytes)
        return 0x100000 * len(self.allocated)

    def blocks(self, items, per_block):
        return -(-int(items) // int(per_block))

    def launch(self, kernel, grid, block, *args, shared=0):
        self.launches.append((kernel, grid, block, args))


@pytest.mark.parametrize("name, n, launches", [("binary", 1000, 1), ("merge", 1000, 1),
                                               ("tree", 1000, 1), ("tree", 100000, 2),
                                               ("kary", 100000, 1)])
def test_search_plugins_launch_with_their_kernels_arguments(name, n, launches):
    """run() passes as many arguments as its kernel's prototype declares
    (what Job.launch checks on the GPU), with a grid that covers the work
    (tree: a build launch first when a has more keys than its top)."""
    from cudasortkit.build.template import KernelTemplate
    from cudasortkit.sdk.search import SearchQuery

    plugin = registry.plugins(SearchPlugin.entry_point_group)[name]
    job = _RecordingJob(plugin)
    query = SearchQuery("float32", n=n, m=300, rows=1, right=True, a=0x1000, v=0x2000,
                        out=0x3000, query_order=0x4000)
    plugin.run(job, query)
    assert len(job.launches) == launches
    for (template, kernel), grid, block, args in job.launches:
        letters = KernelTemplate(template, plugin.template_package).signature(
            kernel, "float32", 0, job.config)
        assert len(args) == len(letters)
        assert grid >= 1 and block == job.config["block_size"]


#: The arguments calls/unique.py launches each kernel of kernels/unique.cu
#: with (the emulated driver below checks every launch against these).
UNIQUE_ARITY = {"csk_unique_tile_counts": 5, "csk_unique_first_special": 4,
                "csk_unique_write": 12, "csk_unique_inverse": 3, "csk_unique_counts": 4, "csk_unique_compact": 8}


def test_unique_kernels_prototypes():
    """The kernels declare as many parameters as calls/unique.py passes."""
    assert _unique_kernel_arity() == UNIQUE_ARITY


def _unique_kernel_arity() -> dict:
    from cudasortkit.build.template import KernelTemplate
    from cudasortkit.calls.unique import UNIQUE_CONFIG

    template = KernelTemplate("unique.cu", defines={"unique_count_bytes": 4, "unique_bool": 0})
    return {k: len(template.signature(k, "float32", 0, UNIQUE_CONFIG)) for k in UNIQUE_ARITY}


def test_unique_inverse_size_rule():
    """The inverse is sorted from INVERSE_SORT_MIN keys on and scattered
    below it; 32-bit positions (and the inverse sort) below 2^31 keys."""
    from cudasortkit.calls import unique as u

    assert u.INVERSE_SORT_MIN == 1 << 23
    assert not u.inverse_by_sort(0) and not u.inverse_by_sort(u.INVERSE_SORT_MIN - 1)
    assert u.inverse_by_sort(u.INVERSE_SORT_MIN) and u.inverse_by_sort(1 << 24)
    assert u.inverse_by_sort((1 << 31) - 1) and not u.inverse_by_sort(1 << 31)
    assert u.count_bytes_for((1 << 31) - 1) == 4 and u.count_bytes_for(1 << 31) == 8


# ---------------------------------------------- the device driver, emulated
# calls/unique.py's _unique_device run against NumPy stand-ins for the device:
# memory addressed by the host arrays' own addresses, the sorts (a stable
# argsort of (keys, positions), a keys-only sort) canonicalising zeros and
# NaNs as onesweep's output does, and each kernel of kernels/unique.cu (and
# the scan, the iota) written again in NumPy, rule for rule, tile by tile. It
# checks the driver's plumbing (which buffer goes to which parameter,
# widths, the sorts it asks for, both inverse paths, the specials) and the
# kernels' index math against np.unique; the GPU tests check the CUDA itself.
_POISON = 0xA5


class _Memory:
    def __init__(self):
        self.arrays = {}

    def add(self, a: np.ndarray) -> int:
        a = np.ascontiguousarray(a)
        ptr = a.__array_interface__["data"][0] if a.nbytes else 1 + len(self.arrays)
        self.arrays[ptr] = a
        return ptr

    def view(self, ptr: int, dtype) -> np.ndarray:
        """The memory from ptr on (inside any array added) as `dtype`."""
        for base, a in self.arrays.items():
            if base <= ptr < base + max(a.nbytes, 1):
                return a.view(np.uint8)[ptr - base:].view(dtype)
        raise AssertionError(f"no buffer at {ptr:#x}")


def _bits_dtype(dtype) -> np.dtype:
    return np.dtype(f"u{np.dtype(dtype).itemsize}")


def _inf_bits(dtype) -> int:
    """keys.cuh's CSK_INF_BITS."""
    if np.dtype(dtype).name == "bfloat16":
        return 0x7F80
    return {2: 0x7C00, 4: 0x7F800000, 8: 0x7FF0000000000000}[np.dtype(dtype).itemsize]


def _ordered(bits: np.ndarray, kind: str, dtype=None) -> np.ndarray:
    """keys.cuh's csk_to_ordered of key bits (`kind`: u, i, f) of `dtype`."""
    t = bits.dtype.type
    sign = t(1) << t(8 * bits.itemsize - 1)
    if kind == "u":
        return bits
    if kind == "i":
        return bits ^ sign
    inf = _inf_bits(dtype)
    magnitude = bits & ~sign
    x = np.where(magnitude == 0, t(0), bits)
    u = np.where(x & sign, ~x, x | sign)
    return np.where(magnitude > t(inf), ~t(0), u).astype(bits.dtype)


def _kind(dtype) -> str:
    if np.dtype(dtype).name == "bfloat16":
        return "f"
    return "u" if np.dtype(dtype).kind in "bu" else np.dtype(dtype).kind


def _special(bits: np.ndarray, dtype) -> np.ndarray:
    """csk_unique_special: 1 for a zero, 2 for a NaN (float keys), else 0."""
    if _kind(dtype) != "f":
        return np.zeros(bits.shape, np.uint32)
    t = bits.dtype.type
    magnitude = bits & ~(t(1) << t(8 * bits.itemsize - 1))
    return np.where(magnitude == 0, 1, np.where(magnitude > t(_inf_bits(dtype)), 2, 0))


class _Device:
    """The state, prepared calls, Job, Result, Operand, iota and scan that
    _unique_device uses, over _Memory."""

    def __init__(self, monkeypatch):
        from cudasortkit.calls import unique as u
        from cudasortkit.gpu import arrays as gpu_arrays
        import cudasortkit.sdk.job as job_module

        self.memory, self.launches, self.sorts, self.waits = _Memory(), [], [], 0
        self.arity = _unique_kernel_arity()
        self.tile = u.UNIQUE_TILE
        device = self

        class Limits:
            sm_count = 2

        class Stream:
            def synchronize(self):
                device.waits += 1

        class Cuda:
            def memcpy_dtoh_async(self, host, ptr, stream):
                host[...] = device.memory.view(ptr, host.dtype)[:host.size]

            def memcpy_dtod_async(self, dst, src, nbytes, stream):
                device.memory.view(dst, np.uint8)[:nbytes] = device.memory.view(src, np.uint8)[:nbytes]

        class Joiner:
            def join_caller(self, caller):
                return False

        class State:
            limits, stream, cuda, joiner = Limits(), Stream(), Cuda(), Joiner()

            def activate(self):
                return self

            def allocating(self, make, *args):
                return make(*args)

            def read_back(self, ptr, nbytes, then=None):
                if then is not None:
                    then()
                device.waits += 1
                return int(device.memory.view(ptr, np.dtype(f"u{nbytes}"))[0])

        self.state = State()

        class Operand:
            library = "emulated"
            sized = gpu_arrays.Operand.sized

            def __init__(self, a, what="a", role="keys"):
                self.array, self.what, self.n, self.dtype = a, what, a.size, a.dtype
                self.key_dtype = np.dtype(np.uint8) if a.dtype == np.bool_ else a.dtype

            def device_ptr(self, state):
                return device.memory.add(self.array)

        class Result:
            def __init__(self, like, dtype, state, out=None, what="out", stream=1):
                self.value = np.full(like.n * np.dtype(dtype).itemsize, _POISON,
                                     np.uint8).view(dtype)
                self.ptr = device.memory.add(self.value)

            def finish(self):
                return self.value

            def finish_first(self, count):
                return self.value[:count]

        class Scan:
            """The scan's totals: one word, at the start of its buffer."""

            @staticmethod
            def buffer_bytes(n, count_bytes=4):
                return count_bytes

            @staticmethod
            def total_offset(n, count_bytes=4):
                return 0

            def __init__(self, job, n, count_bytes, buffer=None):
                self.dtype = np.dtype(f"u{count_bytes}")
                self.total_ptr = (device.memory.add(np.zeros(1, self.dtype)) if buffer is None
                                  else buffer)

            def __call__(self, src, dst, inclusive=False):
                counts = device.memory.view(src, self.dtype)[:device.tiles].copy()
                sums = np.cumsum(counts, dtype=self.dtype)
                out = device.memory.view(dst, self.dtype)
                out[:device.tiles] = sums if inclusive else sums - counts
                device.memory.view(self.total_ptr, self.dtype)[0] = sums[-1]

        class Job:
            graphable = False  # no driver: a prepared unique issues its kernels

            def __init__(self, plugin, state, *, dtype, n, keys_in, keys_out, config):
                self.dtype = dtype

            def blocks(self, items, per_block):
                return -(-int(items) // int(per_block))

            def alloc_parts(self, parts):
                return {name: device.memory.add(np.full(nbytes, _POISON, np.uint8))
                        for name, nbytes in parts}

            def alloc(self, nbytes):
                return device.memory.add(np.full(max(nbytes, 1), _POISON, np.uint8))

            def memset32(self, dst, value, count):
                device.memory.view(dst, np.uint32)[:count] = value

            def kernel(self, template, name, defines, config=None):
                assert template == "unique.cu"
                assert (config is not None) == (name == "csk_unique_compact"), name
                return name, defines["unique_count_bytes"], defines["unique_bool"]

            def launch(self, kernel, grid, block, *args):
                name, count_bytes, bools = kernel
                assert len(args) == device.arity[name], name
                device.launches.append(name)
                device.bools = bools
                getattr(device, name)(np.dtype(f"u{count_bytes}"), grid, *args)

            def finish(self):
                pass

            def rebound(self, keys_in, keys_out):
                return self

        def iota64(state, ptr, n, owner="core", index_bytes=8):
            self.memory.view(ptr, np.dtype(f"i{index_bytes}"))[:n] = np.arange(n)

        for name, value in (("Operand", Operand), ("Result", Result), ("DeviceScan", Scan),
                            ("iota64", iota64)):
            monkeypatch.setattr(u, name, value)
        monkeypatch.setattr(job_module, "Job", Job)
        self.Operand = Operand

    # the sorts, as prepared.run asks for them: zeros and NaNs canonical
    def run(self, kind, keys, values, descending, stable, algorithm, stream=None, caller=None):
        assert kind in ("pairs", "sort") and not descending and algorithm == "auto"
        assert (kind == "pairs") == (values is not None) and (kind == "sort" or stable)
        a = keys.array
        bits = a.view(_bits_dtype(a.dtype)) if a.dtype != np.bool_ else a.view(np.uint8)
        u = _ordered(bits, _kind(a.dtype), a.dtype)
        order = np.argsort(u, kind="stable")
        out = bits[order].copy()
        if _kind(a.dtype) == "f":
            t = out.dtype.type
            sign = t(1) << t(8 * out.itemsize - 1)
            out[(out & ~sign) == 0] = 0
            out[u[order] == ~t(0)] = t(_inf_bits(a.dtype) | (_inf_bits(a.dtype) >> 1))
        self.sorts.append((kind, keys.what, a.dtype, None if values is None else
                           values.array.dtype))
        if kind == "sort":
            return out.view(a.dtype), None
        return out.view(a.dtype), values.array[order].copy()

    def find(self, *args):
        return None

    find_pairs = find

    # the kernels of kernels/unique.cu
    def _starts(self, sorted_ptr, n, equal_nan):
        kind = _kind(self.key_dtype)
        u = _ordered(self.memory.view(sorted_ptr, self.bits)[:n], kind, self.key_dtype)
        if self.bools:  # UNIQUE_BOOL: bools are equal by truth value (any nonzero byte)
            u = u != 0
        same = u[1:] == u[:-1]
        if kind == "f" and not equal_nan:
            same &= u[:-1] != ~u.dtype.type(0)
        return np.concatenate([[True], ~same])

    def csk_unique_tile_counts(self, count, grid, sorted_ptr, n, equal_nan, tiles, specials):
        assert grid == -(-n // self.tile)
        self.tiles = grid
        starts = self._starts(sorted_ptr, n, equal_nan)
        counts = np.add.reduceat(starts.astype(np.int64), np.arange(0, n, self.tile))
        self.memory.view(tiles, count)[:grid] = counts
        if specials:
            x = self.memory.view(sorted_ptr, self.bits)[:n][starts]
            seen = np.bitwise_or.reduce(_special(x, self.key_dtype).astype(np.uint32))
            self.memory.view(specials, np.uint32)[0] &= ~np.uint32(seen)

    def csk_unique_first_special(self, count, grid, keys, n, specials, first):
        need = ~int(self.memory.view(specials, np.uint32)[0]) & 3
        kinds = _special(self.memory.view(keys, self.bits)[:n], self.key_dtype)
        out = self.memory.view(first, np.uint64)
        for k in (1, 2):
            at = np.flatnonzero(kinds == k)
            if need & k and len(at):
                out[k - 1] = min(int(out[k - 1]), int(at[0]))

    def csk_unique_write(self, count, grid, keys, sorted_ptr, order, first, offsets, n,
                         equal_nan, values, index, starts, ids, inverse):
        m = self.memory
        start = self._starts(sorted_ptr, n, equal_nan)
        tile_of = np.arange(n) // self.tile
        within = np.cumsum(start) - np.concatenate([[0], np.cumsum(start)])[tile_of * self.tile]
        run = m.view(offsets, count)[:grid].astype(np.int64)[tile_of] + within - 1
        at = m.view(order, count)[:n].astype(np.int64) if order else np.zeros(n, np.int64)
        x = m.view(sorted_ptr, self.bits)[:n][start]
        kinds = _special(x, self.key_dtype)
        if kinds.any():
            assert order or first, "a zero or NaN run without its input positions"
            source = at[start] if order else \
                m.view(first, np.uint64)[:2].astype(np.int64)[np.maximum(kinds, 1) - 1]
            x = np.where(kinds != 0, m.view(keys, self.bits)[source], x)
        m.view(values, self.bits)[run[start]] = x
        if index:
            m.view(index, np.int64)[run[start]] = at[start]
        if starts:
            m.view(starts, count)[run[start]] = np.flatnonzero(start)
        if ids:
            m.view(ids, count)[:n] = run
        if inverse:
            m.view(inverse, np.int64)[at] = run

    def csk_unique_compact(self, count, grid, sorted_ptr, n, equal_nan, status, ticket, values,
                           starts, total):
        from cudasortkit.calls.unique import COMPACT_TILE

        assert grid == -(-n // COMPACT_TILE) and ticket == status + 8 * grid
        m = self.memory
        # the look-back's status words and the ticket start at zero
        assert not m.view(status, np.uint64)[:grid + 1].any()
        start = self._starts(sorted_ptr, n, equal_nan)
        x = m.view(sorted_ptr, self.bits)[:n][start]
        assert not _special(x, self.key_dtype).any(), "a float key in the one-pass kernel"
        u = int(start.sum())
        m.view(values, self.bits)[:u] = x
        if starts:
            m.view(starts, count)[:u] = np.flatnonzero(start)
        m.view(total, count)[0] = u

    def csk_unique_inverse(self, count, grid, run_ids, n, inverse):
        self.memory.view(inverse, np.int64)[:n] = self.memory.view(run_ids, count)[:n]

    def csk_unique_counts(self, count, grid, starts, total, n, counts):
        u = int(self.memory.view(total, count)[0])
        s = np.append(self.memory.view(starts, count)[:u].astype(np.int64), n)
        self.memory.view(counts, np.int64)[:u] = np.diff(s)

    def unique(self, a: np.ndarray, equal_nan: bool, flags=(True, True, True)):
        from cudasortkit.calls import unique as u

        self.key_dtype = a.dtype
        self.bits = _bits_dtype(a.dtype)
        op = self.Operand(a)
        return u._unique_device(self, op, flags, equal_nan, self.state, 1, None)


def _special_floats(dtype, n, rng):
    pool = np.array([np.nan, -np.nan, 0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, 2.5], dtype)
    a = pool[rng.integers(0, len(pool), n)]
    nan_bits = a.view(_bits_dtype(dtype))
    payload = nan_bits.dtype.type(1)  # NaNs of other payloads than the quiet one
    odd = np.isnan(a) & (rng.random(n) < 0.5)
    nan_bits[odd] |= payload
    return a


def _emulated_input(dtype, n, rng):
    if dtype == "bool":  # bytes other than 0 and 1 too: NumPy compares truth values
        a = rng.integers(0, 4, n).astype(np.uint8) * rng.integers(0, 2, n).astype(np.uint8)
        return a.view(bool)
    if dtype == "bfloat16":
        ml_dtypes = pytest.importorskip("ml_dtypes")
        a = _special_floats(np.float32, n, rng).astype(ml_dtypes.bfloat16)
        a.view(np.uint16)[np.isnan(a.astype(np.float32)) & (rng.random(n) < 0.5)] |= 1
        return a
    if dtype.startswith("float"):
        return _special_floats(dtype, n, rng)
    return rng.integers(-5, 9, n).astype(dtype) if dtype[0] == "i" else \
        rng.integers(0, 9, n).astype(dtype)


#: Around the tile (2048 keys): one tile, a partial one, several.
EMULATED_SIZES = (1, 2, 7, 300, 2047, 2048, 2049, 5000)
EMULATED_DTYPES = ["bool", "int8", "uint16", "int32", "int64", "float16", "bfloat16", "float32",
                   "float64"]


@pytest.mark.parametrize("early", [True, False])
@pytest.mark.parametrize("by_sort", [False, True])
@pytest.mark.parametrize("narrow", [True, False])
@pytest.mark.parametrize("dtype", EMULATED_DTYPES)
@pytest.mark.parametrize("equal_nan", [True, False])
def test_unique_device_driver_emulated(dtype, by_sort, narrow, equal_nan, early, monkeypatch):
    """_unique_device, with its kernels emulated in NumPy, gives np.unique's
    values (bit for bit the first occurrence: -0.0, NaN payloads), first
    indices, inverse and counts, through the inverse sort and the scatter,
    with 32- and 64-bit positions, with results made n long before the wait
    and cut (early) or made after it; every result element written; one
    wait; the inverse sort takes the first sort's order as its keys."""
    from cudasortkit.calls import unique as u

    monkeypatch.setattr(u, "INVERSE_SORT_MIN", 1 if by_sort else 1 << 40)
    monkeypatch.setattr(u, "EARLY_FROM", 0 if early else 1 << 40)
    if not narrow:  # 64-bit positions, counts and ids (n >= 2^31 on the device)
        monkeypatch.setattr(u, "NARROW_LIMIT", 1)
    rng = np.random.default_rng(7)
    for n in EMULATED_SIZES:
        a = _emulated_input(dtype, n, rng)
        device = _Device(monkeypatch)
        values, index, inverse, counts = device.unique(a, equal_nan)
        ref = a.astype(np.float32) if dtype == "bfloat16" else a  # NumPy's NaNs for bfloat16
        ev, ei, einv, ec = np.unique(ref, True, True, True, equal_nan=equal_nan)
        bits = _bits_dtype(a.dtype) if dtype != "bool" else np.uint8
        assert np.array_equal(values.view(bits), a[ei].view(bits)), (n, "values")
        for got, expected, what in ((index, ei, "index"), (inverse, einv.reshape(-1), "inverse"),
                                    (counts, ec, "counts")):
            assert got.dtype == np.int64 and np.array_equal(got, expected), (n, what)
        assert device.waits == 1
        inverse_sort = by_sort and narrow
        assert [s[0] for s in device.sorts] == ["pairs"] * (1 + inverse_sort)
        assert device.sorts[0][3] == (np.int32 if narrow else np.int64)
        if inverse_sort:
            assert device.sorts[1] == ("pairs", "order", np.dtype(np.int32), np.dtype(np.int32))
            assert device.launches[-1] == "csk_unique_inverse"
        else:
            assert "csk_unique_inverse" not in device.launches
        assert "csk_unique_first_special" not in device.launches  # the order has the bits


@pytest.mark.parametrize("counts", [False, True])
@pytest.mark.parametrize("narrow", [True, False])
@pytest.mark.parametrize("dtype", EMULATED_DTYPES)
@pytest.mark.parametrize("equal_nan", [True, False])
def test_unique_device_keys_only_emulated(dtype, counts, narrow, equal_nan, monkeypatch):
    """Plain unique and return_counts sort the keys alone (floats with
    equal_nan=False excepted: each NaN's bits come from the stable order):
    values bit for bit the first occurrence's (the first zero and NaN of
    the input, found where such runs exist), counts NumPy's; one wait."""
    from cudasortkit.calls import unique as u

    if not narrow:
        monkeypatch.setattr(u, "NARROW_LIMIT", 1)
    rng = np.random.default_rng(11)
    floats = dtype.startswith("float") or dtype == "bfloat16"
    for n in EMULATED_SIZES:
        a = _emulated_input(dtype, n, rng)
        if floats and n > 100:  # runs of zeros and NaNs absent, present late
            a = np.where(np.isnan(a.astype(np.float32)) | (a == 0), a.dtype.type(1.5), a)
            if n > 2048:
                a[-3:] = np.array([-0.0, np.nan, 0.0], np.float32).astype(a.dtype)
        device = _Device(monkeypatch)
        got = device.unique(a, equal_nan, (False, False, counts))
        ref = a.astype(np.float32) if dtype == "bfloat16" else a
        ev, ei, ec = np.unique(ref, True, False, True, equal_nan=equal_nan)
        bits = _bits_dtype(a.dtype) if dtype != "bool" else np.uint8
        assert len(got) == 1 + counts
        assert np.array_equal(got[0].view(bits), a[ei].view(bits)), (n, "values")
        if counts:
            assert got[1].dtype == np.int64 and np.array_equal(got[1], ec), n
        assert device.waits == 1
        by_order = floats and not equal_nan
        assert [s[0] for s in device.sorts] == ["pairs" if by_order else "sort"]
        assert ("csk_unique_first_special" in device.launches) == (floats and not by_order)
        # integer and bool keys alone: one pass, no count, scan and write
        assert ("csk_unique_compact" in device.launches) == (not floats)
        assert ("csk_unique_write" in device.launches) == floats


class _EmulatedAdapter:
    """What a prepared unique asks of the caller's library (the adapters of
    calls/sort_prepared.py), over _Memory: new arrays are poisoned."""

    library = "emulated"

    def __init__(self, device):
        self.device = device

    def stream(self, a):
        return 1

    def pointer(self, a):
        return self.device.memory.add(a)

    def maker(self, shape, dtype):
        return lambda like: np.full(int(np.prod(shape)) * np.dtype(dtype).itemsize, _POISON,
                                    np.uint8).view(dtype).reshape(shape)


#: Flags of the prepared uniques emulated: plain, counts alone, all three,
#: the inverse alone.
PREPARED_FLAGS = [(False, False, False), (False, False, True), (True, True, True),
                  (False, True, False)]


@pytest.mark.parametrize("equal_nan", [True, False])
@pytest.mark.parametrize("flags", PREPARED_FLAGS)
@pytest.mark.parametrize("dtype", ["bool", "int8", "uint16", "int32", "int64", "uint64",
                                   "float16", "float32", "float64"])
def test_prepared_unique_emulated(dtype, flags, equal_nan, monkeypatch):
    """A prepared unique (calls/unique_prepared.py): the keys' sort (or the
    (keys, positions) sort where the flags or NaNs need the order), then,
    with the kernels and job the first call made, the one pass (integer and
    bool keys sorted alone) or the tile counts, scan and write, and the
    counts; results made n long and cut to u (a view, or a copy where u is
    under half of n: no slack is allowed here, so that these small calls
    copy too; the inverse n long): np.unique's results, values bit for bit
    the first occurrences', one wait; the same object serves calls of other
    keys."""
    from cudasortkit.calls import unique as u
    from cudasortkit.calls.unique_prepared import PreparedUnique
    from cudasortkit.gpu import arrays

    monkeypatch.setattr(arrays, "VIEW_SLACK_BYTES", 0)

    rng = np.random.default_rng(13)
    floats = dtype.startswith("float")
    by_order = u.needs_order(flags, floats, equal_nan)
    for n in (2, 7, 300, 2047, 2048, 2049, 5000):
        device = _Device(monkeypatch)
        device.key_dtype, device.bits = np.dtype(dtype), _bits_dtype(dtype)
        job = u.unique_job(device.state, dtype, n)
        kernels = u.unique_kernels(job, dtype, n, flags, equal_nan)
        positions = np.arange(n, dtype=np.int32) if by_order else None

        def sort(a, values=None):
            assert (values is None) == (not by_order)
            return device.run("pairs" if by_order else "sort", device.Operand(a),
                              None if values is None else device.Operand(values, "positions"),
                              False, by_order, "auto")

        call = PreparedUnique(sort, device.state, _EmulatedAdapter(device), job, kernels, dtype, n,
                              flags, equal_nan, positions)
        for narrow in (True, False):  # few values (a copy), then many (a view)
            a = _emulated_input(dtype, n, rng)
            if narrow and dtype != "bool":
                with np.errstate(invalid="ignore"):  # NaN % 3 is NaN
                    a = (a % 3).astype(dtype)
            device.waits, device.launches = 0, []
            got = call(a)
            got = got if any(flags) else (got,)
            ev, ei, einv, ec = np.unique(a, True, True, True, equal_nan=equal_nan)
            bits = _bits_dtype(a.dtype) if dtype != "bool" else np.uint8
            assert len(got) == 1 + sum(flags)
            assert got[0].dtype == a.dtype and got[0].shape == ev.shape, (n, narrow)
            assert np.array_equal(got[0].view(bits), a[ei].view(bits)), (n, narrow)
            wanted = [r for f, r in zip(flags, (ei, einv, ec)) if f]
            for g, e in zip(got[1:], wanted):
                assert g.dtype == np.int64 and np.array_equal(g, e), (n, narrow)
            assert device.waits == 1
            one_pass = not by_order and not floats
            expected = (["csk_unique_compact"] if one_pass else
                        ["csk_unique_tile_counts"]
                        + ["csk_unique_first_special"] * (floats and not by_order)
                        + ["csk_unique_write"])
            assert device.launches == expected + ["csk_unique_counts"] * flags[2]
            assert [s[0] for s in device.sorts][-1] == ("pairs" if by_order else "sort")


class _NoteState:
    """The state note() reads of a prepared sort (positions made on it)."""

    ordinal = 0

    class limits:
        sm_count = 2

    def __init__(self):
        self.synchronized = 0
        outer = self

        class Stream:
            def synchronize(self):
                outer.synchronized += 1

        self.stream = Stream()

    def allocating(self, make, *args):
        return make(*args)


class _NoteAdapter:
    library = "cupy"

    @staticmethod
    def maker(shape, dtype):
        return lambda like: np.zeros(shape, dtype)

    @staticmethod
    def index_dtype(nbytes):
        return np.dtype(f"i{nbytes}")

    @staticmethod
    def pointer(a):
        return a.__array_interface__["data"][0]


def test_prepared_unique_is_made_only_for_what_it_serves(monkeypatch):
    """note() prepares 1-D device keys of integer, bool or float dtypes
    whose sort is prepared, with the kernels of their kind and flags: from
    2 to ONE_PASS_UP_TO keys sorted alone, below INVERSE_SORT_MIN where
    they sort (keys, positions); the positions are views of one array a
    device and library keep, filled once and made again only longer;
    nothing for host arrays, other shapes or sizes, or an unprepared sort."""
    from cudasortkit.calls import unique_prepared as p

    state = _NoteState()

    class Sort:
        pass

    Sort.state = state

    class Job:
        def blocks(self, items, per_block):
            return -(-items // per_block)

        def kernel(self, template, name, defines, config=None):
            return name

    class Prepared:
        sort = Sort()

        def __init__(self):
            self.asked = []

        def find(self, kind, a, descending, stable, algorithm, index_dtype=None):
            self.asked.append((kind, stable, index_dtype))
            return self.sort

    filled = []
    made = {}
    monkeypatch.setattr(p, "_calls", made)
    monkeypatch.setattr(p, "_types", set())
    monkeypatch.setattr(p, "_positions", {})
    monkeypatch.setattr(p, "library_of", lambda a: "cupy" if a.dtype != np.uint32 else "numpy")
    monkeypatch.setattr(p, "adapter_for",
                        lambda library: _NoteAdapter() if library == "cupy" else None)
    monkeypatch.setattr(p.uniques, "unique_job", lambda state, dtype, n: Job())
    monkeypatch.setattr(p.uniques, "ONE_PASS_UP_TO", 100)
    monkeypatch.setattr(p.uniques, "INVERSE_SORT_MIN", 51)
    monkeypatch.setattr(p, "iota64", lambda state, ptr, n, owner, index_bytes: filled.append(
        (n, index_bytes)))
    prepared = Prepared()
    everything = (True, True, True)
    for a, flags, equal_nan in ((np.zeros(10, np.int16), (False,) * 3, True),
                                (np.zeros(2, np.bool_), (False, False, True), True),
                                (np.zeros(100, np.float32), (False,) * 3, True),
                                (np.zeros(30, np.int32), everything, True),
                                (np.zeros(50, np.float64), (False,) * 3, False),
                                (np.zeros(20, np.uint8), (False, True, False), True)):
        prepared.asked.clear()
        p.note(prepared, a, flags, equal_nan)
        call = made.pop(p._key(a, flags, equal_nan))
        floats = a.dtype.kind == "f"
        by_order = any(flags[:2]) or floats and not equal_nan
        assert call.n == a.size and call.sort is prepared.sort and call.flags == flags
        assert prepared.asked == [("pairs", True, np.dtype(np.int32)) if by_order
                                  else ("sort", False, None)]
        one_pass = not by_order and not floats
        assert call.kernels.compact == ("csk_unique_compact" if one_pass else None)
        assert call.kernels.tiles == (None if one_pass else (
            "csk_unique_tile_counts", "csk_unique_first_special" if floats and not by_order
            else None))
        assert call.kernels.counts == ("csk_unique_counts" if flags[2] else None)
        assert call.kernels.inverse is None
        if by_order:
            assert call.positions.dtype == np.int32 and call.positions.shape == (a.size,)
        else:
            assert call.positions is None
    # positions: one array made for 30 keys, again for 50, a view for 20
    assert filled == [(30, 4), (50, 4)] and state.synchronized == 2
    for a, flags in ((np.zeros(10, np.uint32), (False,) * 3),       # a host array (numpy)
                     (np.zeros((2, 5), np.int16), (False,) * 3),    # not 1-D
                     (np.zeros(1, np.int16), (False,) * 3),         # fewer than 2 keys
                     (np.zeros(101, np.int16), (False,) * 3),       # past ONE_PASS_UP_TO
                     (np.zeros(51, np.int16), everything),          # from INVERSE_SORT_MIN
                     (np.zeros(10, np.complex64), (False,) * 3)):   # no unique.cu kernels
        p.note(prepared, a, flags, True)
    prepared.sort = None                     # the sort is not prepared
    p.note(prepared, np.zeros(10, np.int16))
    p.note(prepared, np.zeros(10, np.int16), everything)
    assert not made


def test_prepared_unique_serves_direct_calls_only(monkeypatch):
    """unique(): a call with axis=None and no stream= takes the prepared
    unique of its flags and equal_nan where one is found; every other call
    the general path, and only direct calls are noted for preparing."""
    from cudasortkit.calls import unique_prepared as p

    seen = []
    monkeypatch.setattr(p, "find", lambda prepared, a, flags, equal_nan: (
        lambda a: seen.append(("prepared", flags, equal_nan)) or "prepared"))
    monkeypatch.setattr(p, "note", lambda prepared, a, flags, equal_nan: seen.append(
        ("note", flags, equal_nan)))
    monkeypatch.setattr(p.uniques, "unique", lambda *args: seen.append(("general",)) or "general")
    a = np.zeros(4)
    assert p.unique(None, a) == "prepared" and seen == [("prepared", (False,) * 3, True)]
    seen.clear()
    assert p.unique(None, a, True, False, True, equal_nan=False) == "prepared"
    assert seen == [("prepared", (True, False, True), False)]
    for kwargs in ({"axis": 0}, {"stream": 1}, {"return_counts": True, "axis": 0}):
        seen.clear()
        assert p.unique(None, a, **kwargs) == "general" and seen == [("general",)], kwargs
    monkeypatch.setattr(p, "find", lambda prepared, a, flags, equal_nan: None)
    seen.clear()
    assert p.unique(None, a, return_inverse=True) == "general"
    assert seen == [("general",), ("note", (False, True, False), True)]


def test_prepared_unique_is_found_only_with_its_sort(monkeypatch):
    """find() gives the prepared unique of the call's (type, dtype, shape,
    flags, equal_nan) only while its prepared sort (of the keys, or of
    (keys, positions)) is the one it was made with (a sort prepared anew, or
    none: the general path, which prepares it again)."""
    from cudasortkit.calls import unique_prepared as p

    a = np.zeros(16, np.int32)
    made, other = object(), object()
    positions = np.arange(16, dtype=np.int32)
    everything = (True, True, True)

    class Call:
        def __init__(self, positions):
            self.sort, self.positions = made, positions

    class Prepared:
        def __init__(self, sort):
            self.sort = sort

        def find(self, kind, keys, descending, stable, algorithm, index_dtype=None):
            assert keys is a or keys.size != 16 or keys.dtype != np.int32
            assert (kind, descending, stable, algorithm, index_dtype) in (
                ("sort", False, False, "auto", None), ("pairs", False, True, "auto", np.int32))
            return self.sort

    calls = {p._key(a, (False,) * 3, True): Call(None), p._key(a, everything, True):
             Call(positions)}
    monkeypatch.setattr(p, "_calls", calls)
    monkeypatch.setattr(p, "_types", {np.ndarray})
    for flags in ((False,) * 3, everything):
        assert p.find(Prepared(made), a, flags) is calls[p._key(a, flags, True)]
        assert p.find(Prepared(other), a, flags) is None
        assert p.find(Prepared(None), a, flags) is None
        assert p.find(Prepared(made), a.astype(np.int64), flags) is None  # another dtype
        assert p.find(Prepared(made), np.zeros(17, np.int32), flags) is None  # another length
        assert p.find(Prepared(made), a, flags, False) is None  # another equal_nan
    assert p.find(Prepared(made), a, (False, False, True)) is None  # other flags


@pytest.mark.parametrize("counts", [False, True])
@pytest.mark.parametrize("dtype", ["int32", "bool", "uint64"])
def test_unique_past_the_one_pass_counts_scans_and_writes(dtype, counts, monkeypatch):
    """Integer keys of more than ONE_PASS_UP_TO keys take the count, scan
    and write (u-long results made after the wait), with NumPy's results."""
    from cudasortkit.calls import unique as u

    rng = np.random.default_rng(12)
    monkeypatch.setattr(u, "ONE_PASS_UP_TO", 2048)
    for n in (2048, 2049, 7919):
        a = _emulated_input(dtype, n, rng)
        device = _Device(monkeypatch)
        got = device.unique(a, True, (False, False, counts))
        ev, ei, ec = np.unique(a, True, False, True)
        bits = _bits_dtype(a.dtype) if dtype != "bool" else np.uint8
        assert np.array_equal(got[0].view(bits), a[ei].view(bits)), (n, "values")
        if counts:
            assert np.array_equal(got[1], ec), n
        one_pass = n <= 2048
        assert ("csk_unique_compact" in device.launches) == one_pass, n
        assert ("csk_unique_write" in device.launches) == (not one_pass), n
        assert device.waits == 1


def test_unique_device_driver_emulated_flags(monkeypatch):
    """Without return_inverse no inverse sort; without counts no counts
    kernel; without index or inverse (integer keys) no positions sorted."""
    from cudasortkit.calls import unique as u

    monkeypatch.setattr(u, "INVERSE_SORT_MIN", 1)
    a = np.array([3, 1, 3, 2, 1], np.int16)
    for flags in ((False, False, False), (True, False, True), (False, True, False),
                  (False, False, True)):
        device = _Device(monkeypatch)
        got = device.unique(a, True, flags)
        expected = np.unique(a, *flags)
        expected = expected if isinstance(expected, tuple) else (expected,)
        assert len(got) == len(expected)
        for g, e in zip(got, expected):
            assert np.array_equal(g, e)
        assert [s[0] for s in device.sorts] == (["pairs"] * (1 + flags[1]) if flags[0] or flags[1]
                                                 else ["sort"])
        assert ("csk_unique_counts" in device.launches) == flags[2]


def test_unique_needs_the_order_only_for_index_inverse_or_distinct_nans():
    from cudasortkit.calls.unique import needs_order

    assert not needs_order((False, False, False), True, True)
    assert not needs_order((False, False, True), True, True)
    assert not needs_order((False, False, True), False, False)
    assert needs_order((False, False, False), True, False)
    assert needs_order((True, False, False), False, True)
    assert needs_order((False, True, False), False, True)


def test_a_cut_result_is_a_view_unless_it_would_hold_much_more():
    """cut_is_view: a view where it holds at most twice the elements kept,
    or at most VIEW_SLACK_BYTES past them; else a copy."""
    from cudasortkit.gpu.arrays import VIEW_SLACK_BYTES, cut_is_view

    assert cut_is_view(5, 10, 8) and cut_is_view(10, 10, 8) and cut_is_view(0, 0, 4)
    slack_keys = VIEW_SLACK_BYTES // 4
    assert cut_is_view(1, slack_keys + 1, 4)  # 32 MiB left unused: a view
    assert not cut_is_view(1, slack_keys + 2, 4)  # one key more: a copy
    assert not cut_is_view(1 << 22, 1 << 24, 8)  # a quarter, 96 MiB past it: a copy
    assert cut_is_view(1 << 23, 1 << 24, 8)  # half: a view
