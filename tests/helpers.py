"""Test data of many distributions and the NumPy references results must match."""
from __future__ import annotations

import contextlib

import numpy as np

from cudasortkit.dtypes import KEY_DTYPES, numpy_dtype
from cudasortkit.gpu.device import DeviceLimits

INT_DTYPES = [d for d in KEY_DTYPES if d[0] in "iu"]
FLOAT_DTYPES = [d for d in KEY_DTYPES if "float" in d]


def _numpy_sorts_descending() -> bool:
    try:
        np.argsort(np.zeros(2), descending=True, stable=True)
        return True
    except TypeError:
        return False


#: NumPy 2.5 and later define descending order: references use NumPy's own.
NUMPY_DESCENDING = _numpy_sorts_descending()


def as_dtype(dtype) -> np.dtype:
    """np.dtype, bfloat16 included (ml_dtypes; tests needing it skip without it)."""
    if str(dtype) == "bfloat16":
        import pytest

        pytest.importorskip("ml_dtypes")
    return numpy_dtype(dtype) if isinstance(dtype, str) else np.dtype(dtype)


def is_bf16(dt) -> bool:
    return np.dtype(dt).name == "bfloat16" and np.dtype(dt).kind == "V"


def comparable(keys: np.ndarray) -> np.ndarray:
    """Keys NumPy can order and compare (bfloat16 widened exactly to float32)."""
    return keys.astype(np.float32) if is_bf16(keys.dtype) else keys


def finfo(dt):
    if is_bf16(dt):
        import ml_dtypes

        return ml_dtypes.finfo(dt)
    return np.finfo(dt)

#: Sizes that catch off-by-one and tiling bugs (plus 2^24 in the slow set).
EDGE_SIZES = [0, 1, 2, 3, 5, 31, 32, 33, 255, 256, 257, 1023, 1024, 1025, 2047, 2049,
              4095, 4097, 7919, 65535, 65536, 65537, 104729]
LARGE_SIZES = [10**6 + 3, 1 << 24]

def small_key_dtypes():
    """The key dtypes of at most 4 bytes the row kernels' GPU tests run:
    four in the quick tier, the other five in the slow one (pytest.param)."""
    import pytest

    slow = pytest.mark.slow
    return (["uint32", "float32", "int8", "bfloat16"]
            + [pytest.param(d, marks=slow) for d in ("float16", "int16", "uint8", "int32", "uint16")])


DISTRIBUTIONS = ["uniform", "few_unique", "all_equal", "sorted", "reverse",
                 "entropy_reduced", "special"]


def uniform(dtype, n, rng) -> np.ndarray:
    dt = as_dtype(dtype)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return rng.integers(info.min, info.max, size=n, dtype=dt, endpoint=True)
    if dt.kind == "b":
        return rng.integers(0, 2, size=n).astype(bool)
    x = rng.standard_normal(n) * 10.0 ** rng.integers(-3, 4, size=n)
    return x.astype(dt)


def make_keys(dist: str, dtype, n: int, rng) -> np.ndarray:
    """n keys of `dtype` drawn from distribution `dist` (see DISTRIBUTIONS)."""
    dt = as_dtype(dtype)
    if dist == "uniform":
        return uniform(dt, n, rng)
    if dist == "few_unique":
        return rng.choice(uniform(dt, 7, rng), size=n)
    if dist == "all_equal":
        return np.full(n, uniform(dt, 1, rng)[0], dt)
    if dist == "sorted":
        return reference_sort(uniform(dt, n, rng))
    if dist == "reverse":
        return reference_sort(uniform(dt, n, rng))[::-1].copy()
    if dist == "entropy_reduced":
        bits = uniform(dt, n, rng).view(f"u{dt.itemsize}") if dt.kind != "b" else uniform(dt, n, rng)
        for _ in range(int(rng.integers(1, 3))):
            bits = bits & uniform(dt, n, rng).view(bits.dtype)
        return bits.view(dt)
    if dist == "special":
        x = uniform(dt, n, rng)
        if dt.kind == "f" or is_bf16(dt):
            fi = finfo(dt)
            tiny = float(fi.smallest_subnormal)
            pool = np.array([np.nan, -np.nan, 0.0, -0.0, np.inf, -np.inf, tiny, -tiny,
                             float(fi.max), float(fi.min)], np.float64).astype(dt)
        elif dt.kind in "iu":
            info = np.iinfo(dt)
            pool = np.array([info.min, info.max, 0, 1, info.max - 1], dt)
        else:
            return x
        mask = rng.random(n) < 0.3
        x[mask] = rng.choice(pool, size=int(mask.sum()))
        return x
    raise ValueError(dist)


def dense_rank(keys: np.ndarray) -> np.ndarray:
    """Rank of each key under NumPy's order (NaNs equal and last, -0 == +0)."""
    keys = comparable(keys)
    order = np.argsort(keys, kind="stable")
    s = keys[order]
    if keys.dtype.kind == "f":
        same = (s[1:] == s[:-1]) | (np.isnan(s[1:]) & np.isnan(s[:-1]))
    else:
        same = s[1:] == s[:-1]
    ranks_sorted = np.concatenate([[0], np.cumsum(~same)]) if len(s) else np.zeros(0, np.int64)
    rank = np.empty(len(keys), np.int64)
    rank[order] = ranks_sorted
    return rank


def reference_argsort(keys: np.ndarray, descending: bool = False) -> np.ndarray:
    """Stable argsort in NumPy 2.5's order: NaNs last both ways, and a
    descending sort keeps equal keys in input order. NumPy's own where it
    has descending=True; the same rule spelled with lexsort otherwise."""
    c = comparable(keys)
    if not descending:
        return np.argsort(c, kind="stable")
    if NUMPY_DESCENDING:
        return np.argsort(c, descending=True, stable=True)
    return lexsort_descending(c)


def lexsort_descending(keys: np.ndarray) -> np.ndarray:
    """Descending stable order: non-NaNs by falling value, then NaNs, ties
    in input order (what NumPy 2.5's argsort(descending=True, stable=True) does)."""
    keys = comparable(keys)
    nan = np.isnan(keys) if keys.dtype.kind == "f" else np.zeros(len(keys), bool)
    return np.lexsort((np.arange(len(keys)), -dense_rank(keys), nan))


def reference_sort(keys: np.ndarray, descending: bool = False) -> np.ndarray:
    return keys[reference_argsort(keys, descending)]


def to_numpy(x) -> np.ndarray:
    if isinstance(x, np.ndarray):
        return x
    if hasattr(x, "get"):
        return x.get()
    if hasattr(x, "cpu"):
        import torch

        x = x.detach().cpu()
        if x.dtype == torch.bfloat16:
            return x.view(torch.int16).numpy().view(as_dtype("bfloat16"))
        return x.numpy()
    raise TypeError(type(x))


def assert_keys_equal(got, expected, what="keys"):
    """Equal as values: NaN == NaN and -0.0 == +0.0 (radix-family sorts
    canonicalise both), every other bit pattern exact."""
    got, expected = to_numpy(got), np.asarray(expected)
    assert got.dtype == expected.dtype, f"{what}: dtype {got.dtype} != {expected.dtype}"
    assert got.shape == expected.shape, f"{what}: shape {got.shape} != {expected.shape}"
    got, expected = comparable(got), comparable(expected)
    if expected.dtype.kind == "f":
        ok = (got == expected) | (np.isnan(got) & np.isnan(expected))
    else:
        ok = got == expected
    if not ok.all():
        bad = np.flatnonzero(~ok)
        raise AssertionError(f"{what}: {len(bad)} of {len(ok)} differ, first at {bad[:5]}: "
                             f"got {got[bad[:5]]}, expected {expected[bad[:5]]}")


def assert_valid_argsort(order, keys: np.ndarray, descending=False, stable=False):
    """`order` sorts `keys`: exactly the reference when stable, else any
    permutation that puts the keys in order."""
    order = to_numpy(order)
    assert order.dtype == np.int64, order.dtype
    expected = reference_argsort(keys, descending)
    if stable:
        if not np.array_equal(order, expected):
            bad = np.flatnonzero(order != expected)
            raise AssertionError(f"argsort differs from stable reference at {bad[:5]}: "
                                 f"got {order[bad[:5]]}, expected {expected[bad[:5]]}")
        return
    assert np.array_equal(np.sort(order), np.arange(len(keys))), "argsort is not a permutation"
    assert_keys_equal(keys[order], keys[expected], "keys[argsort]")


def to_device(a: np.ndarray):
    """A CUDA copy of host keys: CuPy, or a torch tensor for bfloat16 (CuPy
    has no bfloat16)."""
    import pytest

    if is_bf16(a.dtype):
        torch = pytest.importorskip("torch")
        return torch.from_numpy(a.view(np.int16)).cuda().view(torch.bfloat16)
    cupy = pytest.importorskip("cupy")
    return cupy.asarray(a)


def write_dist_info(site, name: str, version: str, entry_points: dict) -> None:
    """A NAME-VERSION.dist-info in directory `site` (METADATA and
    entry_points.txt): what importlib.metadata reads to discover entry points,
    so tests "install" plugins without pip. entry_points: group -> {name: target}."""
    import os
    import re

    info = os.path.join(str(site), f"{re.sub(r'[-_.]+', '_', name)}-{version}.dist-info")
    os.makedirs(info)
    with open(os.path.join(info, "METADATA"), "w") as f:
        f.write(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    with open(os.path.join(info, "entry_points.txt"), "w") as f:
        for group, points in entry_points.items():
            f.write(f"[{group}]\n")
            f.writelines(f"{ep} = {target}\n" for ep, target in points.items())


def sorts_one_array(plugin) -> bool:
    """True for a GPU plugin that serves plain 1-D requests of any length
    (not one that sorts rows and segments, and 1-D arrays only as short as
    one row: tests/test_small_sorts_gpu.py has those): the 1-D tests run these."""
    from cudasortkit.sdk.plugin import Request

    return (plugin.device == "gpu" and getattr(plugin, "one_array_up_to", None) is None
            and plugin.unsupported(Request("sort", plugin.dtypes[0], 1000)) is None)


class FakeState:
    """A device state without a GPU, with an H100's limits, for CPU tests of
    tuning and selection (see fake_device)."""

    name = "Fake GPU 9000"
    compute_capability = (9, 0)
    sm_count = 132
    ordinal = 0
    limits = DeviceLimits.sm90()

    def free_memory(self):
        return 80 << 30


def fake_device(tmp_path, monkeypatch, *also_gpu_available) -> FakeState:
    """Make the code see one FakeState GPU with an empty tuning cache in
    tmp_path: gpu_available() (also in the modules `also_gpu_available`,
    which imported it by name), get_device() and current_limits()."""
    from cudasortkit.gpu import device
    from cudasortkit.tuning import cache, runtime

    state = FakeState()
    monkeypatch.setenv(cache.ENV_DIR, str(tmp_path))
    for module in (device, *also_gpu_available):
        monkeypatch.setattr(module, "gpu_available", lambda: True)
    monkeypatch.setattr(device, "get_device", lambda ordinal=None: state)
    monkeypatch.setattr(device, "current_limits", lambda: state.limits)
    runtime.reset()
    return state


def joiner_standin(own: int = 7, wait_for=None, signal=None):
    """A device's stream Joiner (cudasortkit/gpu/streams.py) for CPU tests:
    it joins callers' streams as the real one does, the driver's events
    stood in for by wait_for(handles) and signal(handles)."""
    import types

    from cudasortkit.gpu.streams import LEGACY

    wait_for = wait_for or (lambda handles: None)

    def join_caller(caller):
        if caller == LEGACY or caller == own:
            return False
        wait_for((caller,))
        return True

    return types.SimpleNamespace(own=own, join_caller=join_caller, wait_for=wait_for,
                                 signal=signal or (lambda handles: None))


def sorted_keys(dist, dtype, n, rng) -> np.ndarray:
    """make_keys(dist, dtype, n), sorted stably (bfloat16 through float32)."""
    keys = make_keys(dist, dtype, n, rng)
    order = np.argsort(keys.astype(np.float32) if is_bf16(keys.dtype) else keys, kind="stable")
    return keys[order]


def numpy_searchsorted(a, v, side, sorter=None) -> np.ndarray:
    """numpy.searchsorted, bfloat16 through float32."""
    if is_bf16(a.dtype):
        a, v = a.astype(np.float32), v.astype(np.float32)
    return np.searchsorted(a, v, side, sorter)


def on_thread_ranks(size, body) -> list:
    """body(comm, rank) on `size` threads joined by one of the collective
    sort's ThreadComms (cudasortkit/dask/comm.py); their results, or the
    first rank's error (the others then abort)."""
    import threading

    from cudasortkit.dask import comm

    uid, out, errors = comm.new_id("threads"), [None] * size, []

    def run(rank):
        c = comm.ThreadComm(uid, size, rank)
        try:
            out[rank] = body(c, rank)
        except BaseException as e:     # noqa: BLE001 - reported below
            errors.append(e)
            c.abort()

    threads = [threading.Thread(target=run, args=(r,)) for r in range(size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return out


@contextlib.contextmanager
def thread_cluster_client(n_workers: int):
    """A distributed Client of a LocalCluster of `n_workers` thread workers
    (one thread each, no dashboard), its start-up warnings silenced."""
    import warnings

    import distributed

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with distributed.LocalCluster(processes=False, n_workers=n_workers, threads_per_worker=1,
                                      dashboard_address=None) as cluster:
            with distributed.Client(cluster) as client:
                yield client


_spin_kernel = []


def spin(ms: float) -> None:
    """Keep CuPy's current stream (on the current device) busy for about
    `ms` milliseconds: stream-ordering tests queue work behind it."""
    import cupy

    if not _spin_kernel:
        _spin_kernel.append(cupy.RawKernel(r'''
        extern "C" __global__ void spin(long long cycles) {
            long long t0 = clock64();
            while (clock64() - t0 < cycles) { }
        }''', "spin"))
    rate_khz = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.runtime.getDevice())["clockRate"]
    _spin_kernel[0]((1,), (1,), (np.int64(ms * rate_khz),))
