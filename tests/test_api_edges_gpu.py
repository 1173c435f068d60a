"""API edges with CuPy arrays and CUDA tensors: the
same rules as tests/test_api_edges_cpu.py on every device path, including the
prepared path a repeated call of one shape takes (cudasortkit/calls/sort_prepared.py)."""
import numpy as np
import pytest

import cudasortkit as csk

pytestmark = pytest.mark.gpu


def _device_arrays(host):
    """(library name, device array, to_numpy) for CuPy and torch, where installed."""
    found = []
    try:
        import cupy
    except ImportError:
        cupy = None
    if cupy is not None:
        found.append(("cupy", cupy.asarray(host), cupy.asnumpy))
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None and torch.cuda.is_available():
        found.append(("torch", torch.from_numpy(host).cuda(), lambda t: t.cpu().numpy()))
    if not found:
        pytest.skip("neither CuPy nor a CUDA torch is installed")
    return found


# ------------------------------------------------------------ 1. stable=None
@pytest.mark.parametrize("algorithm", ["auto", "radix"])
def test_stable_none_on_device_arrays(algorithm):
    host = np.array([5, 3, 9, 1, 3, 7, 0, 2], np.int32)
    for name, a, to_numpy in _device_arrays(host):
        for _ in range(3):  # repeats take the prepared path where auto prepares one
            assert to_numpy(csk.sort(a, stable=None, algorithm=algorithm)).tolist() == \
                sorted(host.tolist()), name
            order = to_numpy(csk.argsort(a, stable=None, algorithm=algorithm))
            assert host[order].tolist() == sorted(host.tolist()), name
        grid = a.reshape(2, 4)
        assert to_numpy(csk.sort(grid, axis=0, stable=None)).tolist() == \
            np.sort(host.reshape(2, 4), axis=0).tolist(), name
        offsets = np.array([0, 3, 8])
        assert to_numpy(csk.segmented_sort(a, offsets, stable=None)).tolist() == \
            sorted(host[:3].tolist()) + sorted(host[3:].tolist()), name
        order = to_numpy(csk.segmented_argsort(a, offsets, stable=None))
        assert host[order].tolist() == sorted(host[:3].tolist()) + sorted(host[3:].tolist())


# ------------------------------------------------------------ 2. 0-d arrays
@pytest.mark.parametrize("axis", [-1, 0, 1, None])
def test_zero_d_device_arrays_follow_numpy(axis):
    host = np.array(0.5, np.float32)
    for name, a, to_numpy in _device_arrays(host):
        try:
            want = np.sort(host, axis=axis)
        except np.exceptions.AxisError:
            with pytest.raises(np.exceptions.AxisError):
                csk.sort(a, axis=axis)
            with pytest.raises(np.exceptions.AxisError):
                csk.sort_by_key(a, a, axis=axis)
        else:
            got = csk.sort(a, axis=axis)
            assert type(got) is type(a) and to_numpy(got).tolist() == want.tolist() == [0.5], name
        try:
            want = np.argsort(host, axis=axis)  # [0] for axis -1, 0 and None
        except np.exceptions.AxisError:
            with pytest.raises(np.exceptions.AxisError):
                csk.argsort(a, axis=axis)
        else:
            got = csk.argsort(a, axis=axis)
            assert type(got) is type(a) and to_numpy(got).tolist() == want.tolist() == [0], name


# ------------------------------------------- 3. one key, descending: layout
@pytest.mark.parametrize("shape, axis", [((1,), -1), ((1, 1), -1), ((1,), None), ((1, 1), None)])
@pytest.mark.parametrize("algorithm", ["auto", "numpy", "radix"])
def test_one_key_descending_on_device_arrays(shape, axis, algorithm):
    host = np.full(shape, 5.0, np.float32)
    for name, a, to_numpy in _device_arrays(host):
        for stable in (False, True):
            got = csk.sort(a, axis=axis, descending=True, stable=stable, algorithm=algorithm)
            assert type(got) is type(a) and to_numpy(got).flatten().tolist() == [5.0], name
            order = csk.argsort(a, axis=axis, descending=True, stable=stable, algorithm=algorithm)
            assert to_numpy(order).flatten().tolist() == [0], name


# ------------------------------------------- 4. outputs that share memory
def test_sort_by_key_overlapping_device_outputs_are_refused():
    k = np.array([3, 1, 2, 0], np.int64)
    for name, keys, to_numpy in _device_arrays(k):
        values = keys * 10
        with pytest.raises(ValueError, match="out and values_out overlap"):
            csk.sort_by_key(keys, values, out=keys, values_out=keys)
        with pytest.raises(ValueError, match="out overlaps the input values"):
            csk.sort_by_key(keys, values, out=values, algorithm="radix")
        with pytest.raises(ValueError, match="out and values_out overlap"):
            csk.sort_by_key(keys.reshape(2, 2), values.reshape(2, 2), axis=0,
                            out=keys.reshape(2, 2), values_out=keys.reshape(2, 2))
        assert to_numpy(keys).tolist() == [3, 1, 2, 0], name
        ko, vo = csk.sort_by_key(keys, values, out=keys, values_out=values, algorithm="radix")
        assert to_numpy(ko).tolist() == [0, 1, 2, 3] and to_numpy(vo).tolist() == [0, 10, 20, 30]


# ----------------------------------- 5. int32 indices along a 1-D array's axis
@pytest.mark.parametrize("axis", [-1, 0, None])
def test_int32_indices_of_device_arrays_along_their_one_axis(axis):
    host = np.array([5, 3, 9, 1, 3, 7, 0, 2], np.uint32)
    want = np.argsort(host, kind="stable").tolist()
    for name, a, to_numpy in _device_arrays(host):
        for _ in range(3):  # repeats take the prepared path where one is made
            got = csk.argsort(a, axis=axis, stable=True, index_dtype=np.int32, algorithm="radix")
            got = to_numpy(got)
            assert got.dtype == np.int32 and got.tolist() == want, name


# ------------------------------------------------ 6. and 8. progress=, one rule
def test_progress_is_checked_on_the_device_paths_every_time(monkeypatch):
    import sys

    host = np.array([5, 3, 9, 1, 3, 7, 0, 2], np.int32)
    for name, a, _ in _device_arrays(host):
        for _ in range(3):  # the first call prepares the shape; the next take the prepared path
            csk.sort(a, algorithm="radix")
            csk.argsort(a, algorithm="radix")
            with pytest.raises(TypeError, match="progress must be True or False"):
                csk.sort(a, algorithm="radix", progress="yes")
            with pytest.raises(TypeError, match="progress must be True or False"):
                csk.argsort(a, algorithm="radix", progress="yes")
            with pytest.raises(TypeError, match="progress must be True or False"):
                csk.sort_by_key(a, a, progress="yes")
        monkeypatch.setitem(sys.modules, "tqdm", None)  # import tqdm raises ImportError
        with pytest.raises(ImportError, match="tqdm"):
            csk.sort(a, algorithm="radix", progress=True)
        with pytest.raises(ImportError, match="tqdm"):
            csk.argsort(a.reshape(2, 4), axis=0, progress=True)
        monkeypatch.undo()


# ------------------------------------------------------------ 7. messages
@pytest.mark.parametrize("algorithm", ["auto", "radix", "numpy"])
def test_complex64_values_on_device_arrays(algorithm):
    keys = np.array([3, 1, 2, 1, 0], np.int32)
    values = np.array([3 + 1j, 1 - 1j, 2j, 4, -5j], np.complex64)
    want = values[np.argsort(keys, kind="stable")].tolist()
    for (name, k, to_numpy), (_, v, _) in zip(_device_arrays(keys), _device_arrays(values)):
        ko, vo = csk.sort_by_key(k, v, algorithm=algorithm)
        assert type(vo) is type(v) and to_numpy(vo).dtype == np.complex64, name
        assert to_numpy(vo).tolist() == want, name
        assert to_numpy(ko).tolist() == sorted(keys.tolist()), name
    k, v = csk.sort_by_key(keys, values, algorithm=algorithm)  # host arrays through the GPU
    assert v.tolist() == want


def test_device_values_and_out_messages():
    keys = np.array([3, 1, 2], np.int32)
    for (name, k, _), (_, v, _) in zip(_device_arrays(keys), _device_arrays(keys.astype(np.int16))):
        with pytest.raises(TypeError, match="values: dtype .*int16.* values must be"):
            csk.sort_by_key(k, v)
        with pytest.raises(TypeError, match="^out must be an array"):
            csk.sort(k, out=[0, 0, 0])
        with pytest.raises(TypeError, match="^values_out must be an array"):
            csk.sort_by_key(k, k, values_out=[0, 0, 0])


# ------------------------------------------------ non-native byte order keys
@pytest.mark.parametrize("algorithm", ["onesweep", "radix", "merge_sort"])
def test_non_native_host_keys_on_gpu_plugins_as_numpy(algorithm):
    """A host array of the other byte order sorted by a GPU plugin: NumPy's
    answer in its own dtype, out= of that dtype too; device arrays of it
    are refused saying how to make them native."""
    rng = np.random.default_rng(9)
    a = (rng.standard_normal(100_003) * 100).astype(">f8")
    a[::97] = np.nan
    got = csk.sort(a, algorithm=algorithm)
    assert got.dtype == a.dtype and np.array_equal(got, np.sort(a), equal_nan=True)
    out = np.empty_like(a)
    assert csk.sort(a, algorithm=algorithm, out=out) is out
    assert np.array_equal(out, np.sort(a), equal_nan=True)
    order = csk.argsort(a, algorithm=algorithm, stable=True)
    assert order.dtype == np.int64 and np.array_equal(order, np.argsort(a, kind="stable"))
    keys, values = csk.sort_by_key(a, np.arange(a.size, dtype=">i8"), algorithm=algorithm)
    assert keys.dtype == a.dtype and values.dtype == np.dtype(">i8")
    assert np.array_equal(values, np.argsort(a, kind="stable"))
    top, _ = csk.topk(a[~np.isnan(a)], 5)
    assert top.dtype == a.dtype and np.array_equal(top, np.sort(a[~np.isnan(a)])[::-1][:5])


def test_non_native_device_arrays_are_refused_saying_what_to_do():
    class Swapped:  # a device array whose interface says big-endian float64
        def __init__(self, like):
            cai = dict(like.__cuda_array_interface__)
            cai["typestr"] = ">f8"
            self.__cuda_array_interface__ = cai

    cupy = pytest.importorskip("cupy")
    with pytest.raises(TypeError, match=r"non-native byte order.*newbyteorder"):
        csk.sort(Swapped(cupy.zeros(8, cupy.float64)))


# ------------------------------------------------------- selection edges
def test_selection_edges_of_device_arrays_are_numpys_and_torchs():
    """topk of a 0-d device array: 0-d results (torch's); argpartition of
    one: [0]; partition of an empty one takes any integer kth; kth=[] is
    NumPy's TypeError."""
    for name, a, to_numpy in _device_arrays(np.array([3.0, 1.0, 2.0])):
        zero_d = a[1]
        for k in (0, 1):
            values, indices = csk.topk(zero_d, k)
            assert tuple(values.shape) == () and tuple(indices.shape) == (), name
            assert float(to_numpy(values)) == 1.0 and int(to_numpy(indices)) == 0, name
        assert to_numpy(csk.argpartition(zero_d, 0)).tolist() == [0], name
        assert tuple(csk.partition(a[:0], 0).shape) == (0,), name
        with pytest.raises(TypeError, match="Partition index must be integer"):
            csk.partition(a, [])
