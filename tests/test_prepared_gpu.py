"""Prepared calls (cudasortkit/calls/sort_prepared.py): a repeated device call of one
exact shape skips the general path. Each test makes a call twice or more so
the later ones are prepared, with new data each time (a stale plan or a
stale address shows as a wrong result) and checks the prepared path served."""
import numpy as np
import pytest

import cudasortkit as csk
from cudasortkit import api
from cudasortkit.calls.sort_kept import AHEAD_RESULT_BYTES
from helpers import assert_valid_argsort

pytestmark = pytest.mark.gpu

SIZES = [2, 3, 1000, 4097, 65537, 1 << 20]


def _cupy():
    return pytest.importorskip("cupy")


def _served_prepared(kind, a, descending=False, stable=False):
    return api.prepared.find(kind, a, descending, stable, "auto") is not None


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", ["float32", "uint64", "int16"])
def test_repeated_sorts_of_new_data_are_right(n, dtype):
    cupy = _cupy()
    rng = np.random.default_rng(n)
    for descending in (False, True):
        for call in range(3):
            h = (rng.standard_normal(n) * 1000) if dtype == "float32" else \
                rng.integers(0 if dtype[0] == "u" else -1000, 1000, n)
            h = h.astype(dtype)
            got = csk.sort(cupy.asarray(h), descending=descending).get()
            want = np.sort(h)[::-1] if descending else np.sort(h)
            np.testing.assert_array_equal(got, want)
        if n >= 1000:  # (a tiny shape's plan may not be replayable: then nothing is prepared)
            assert _served_prepared("sort", cupy.asarray(h), descending)


@pytest.mark.parametrize("n", [3, 5000, 70001])
def test_repeated_stable_argsorts_are_numpys(n):
    cupy = _cupy()
    rng = np.random.default_rng(7)
    for call in range(3):
        h = rng.integers(0, 50, n).astype(np.int32)
        got = csk.argsort(cupy.asarray(h), stable=True).get()
        np.testing.assert_array_equal(got, np.argsort(h, kind="stable"))
    assert _served_prepared("argsort", cupy.asarray(h), stable=True)
    for call in range(2):  # unstable argsort: any order of ties
        h = rng.standard_normal(n).astype(np.float64)
        assert_valid_argsort(csk.argsort(cupy.asarray(h)).get(), h)


@pytest.mark.parametrize("library", ["cupy", "torch"])
@pytest.mark.parametrize("n", [70001, 1 << 20])
def test_repeated_int32_argsorts_are_prepared_and_keep_their_dtype(library, n):
    """int32 indices repeat through the prepared path (auto picks onesweep
    here, which makes its indices) under their own key: the int64 argsort
    of the same array is not served their call."""
    if library == "cupy":
        as_device, to_host = _cupy().asarray, lambda a: a.get()
    else:
        torch = pytest.importorskip("torch")
        as_device, to_host = (lambda h: torch.from_numpy(h).cuda()), (lambda a: a.cpu().numpy())
    rng = np.random.default_rng(n)
    for call in range(3):
        h = rng.integers(0, 1 << 20, n).astype(np.uint32)
        for dtype in (np.int32, np.int64):
            got = to_host(csk.argsort(as_device(h), stable=True, index_dtype=dtype))
            assert got.dtype == dtype
            np.testing.assert_array_equal(got, np.argsort(h, kind="stable"))
    a = as_device(h)
    int32_call = api.prepared.find("argsort", a, False, True, "auto", np.dtype(np.int32))
    assert int32_call is not None and int32_call.index_dtype == np.int32
    assert api.prepared.find("argsort", a, False, True, "auto").index_dtype == np.int64


@pytest.mark.parametrize("shape", [(1000, 1000), (500, 2000), (2000, 500), (1, 4099), (4096, 16)])
def test_rows_along_the_last_axis_repeat_through_the_prepared_path(shape):
    """Shapes of one size but other rows each get their own plan; the
    argsort's indices are per row, as numpy.argsort's."""
    cupy = _cupy()
    rng = np.random.default_rng(shape[0])
    for call in range(3):
        h = rng.integers(-50, 50, shape).astype(np.float32)
        np.testing.assert_array_equal(csk.sort(cupy.asarray(h)).get(), np.sort(h, axis=-1))
        got = csk.argsort(cupy.asarray(h), stable=True)
        assert got.shape == shape and got.dtype == np.int64
        np.testing.assert_array_equal(got.get(), np.argsort(h, axis=-1, kind="stable"))
    assert _served_prepared("sort", cupy.asarray(h))
    assert _served_prepared("argsort", cupy.asarray(h), stable=True)
    transposed = cupy.asarray(h).T  # not C-contiguous: the general path
    assert not _served_prepared("sort", transposed)
    np.testing.assert_array_equal(csk.sort(transposed).get(), np.sort(h.T, axis=-1))


def test_torch_rows_repeat_through_the_prepared_path():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    for call in range(3):
        h = rng.standard_normal((300, 700)).astype(np.float32)
        got = csk.argsort(torch.from_numpy(h).cuda(), stable=True)
        assert isinstance(got, torch.Tensor) and tuple(got.shape) == (300, 700)
        np.testing.assert_array_equal(got.cpu().numpy(), np.argsort(h, axis=-1, kind="stable"))
    assert _served_prepared("argsort", torch.from_numpy(h).cuda(), stable=True)


def test_torch_tensors_repeat_through_the_prepared_path():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    for call in range(3):
        h = rng.standard_normal(10007).astype(np.float32)
        t = torch.from_numpy(h).cuda()
        got = csk.sort(t)
        assert isinstance(got, torch.Tensor) and got.is_cuda
        np.testing.assert_array_equal(got.cpu().numpy(), np.sort(h))
    assert _served_prepared("sort", t)


def test_a_strided_view_of_a_prepared_shape_takes_the_general_path():
    cupy = _cupy()
    h = np.random.default_rng(5).standard_normal(8000).astype(np.float32)
    for call in range(2):
        csk.sort(cupy.asarray(h[:4000]))
    strided = cupy.asarray(h)[::2]
    assert not _served_prepared("sort", strided)
    np.testing.assert_array_equal(csk.sort(strided).get(), np.sort(h[::2]))


def test_prepared_calls_keep_the_callers_stream_order():
    cupy = _cupy()
    from test_streams_gpu import spin

    n = 1 << 16
    rng = np.random.default_rng(11)
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        x = cupy.empty(n, np.float32)
        for call in range(3):
            h = rng.standard_normal(n).astype(np.float32)
            spin()  # the stream is busy: the copy below lands late
            x.set(h, stream=stream)
            got = csk.sort(x)
            back = got.get(stream=stream)
            np.testing.assert_array_equal(back, np.sort(h))
        assert _served_prepared("sort", x)


def test_a_new_decision_drops_the_prepared_call():
    cupy = _cupy()
    x = cupy.asarray(np.random.default_rng(2).standard_normal(3000).astype(np.float32))
    for call in range(2):
        csk.sort(x)
    assert _served_prepared("sort", x)
    api.selector.forget()
    assert not _served_prepared("sort", x)
    np.testing.assert_array_equal(csk.sort(x).get(), np.sort(x.get()))


@pytest.mark.parametrize("non_blocking", [False, True])
def test_sorts_replayed_as_graphs_read_new_data_and_write_every_key(non_blocking):
    """The same buffers sorted again and again: from the third call the plan
    runs as a CUDA graph (cudasortkit/launch/graphs.py); each call has new keys,
    written on the caller's stream just before, and a poisoned output."""
    from cudasortkit.launch import plans as launchplan

    cupy = _cupy()
    n = (1 << 20) + 3
    rng = np.random.default_rng(n)
    keys, out = cupy.empty(n, cupy.uint32), cupy.empty(n, cupy.uint32)
    stream = cupy.cuda.Stream(non_blocking=non_blocking)
    with stream:
        for _ in range(5):
            h = rng.integers(0, 1 << 32, n, dtype=np.uint32)
            keys.set(h, stream=stream)
            out.fill(0x5A5A5A5A)
            csk.sort(keys, out=out)
            np.testing.assert_array_equal(out.get(stream=stream), np.sort(h))
    assert launchplan.graphs_held() >= 1


def test_one_prepared_shape_from_the_legacy_stream_and_a_side_stream_keeps_order():
    """Arrays of one shape sorted alternately on the legacy default stream
    (the prepared call launches its graph there) and on a non-blocking
    stream (its graph on our stream, joined to it): one prepared call, one
    set of kept temporaries, so a call that did not wait for the other's
    work would corrupt its result. Both streams are busy before each call."""
    cupy = _cupy()
    from test_streams_gpu import spin

    n = (1 << 18) + 5
    rng = np.random.default_rng(21)
    side = cupy.cuda.Stream(non_blocking=True)
    x, y = cupy.empty(n, cupy.float32), cupy.empty(n, cupy.float32)
    for call in range(6):
        hx, hy = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
        with side:
            spin()
            y.set(hy, stream=side)
            sorted_y = csk.sort(y)
        spin()
        x.set(hx)
        sorted_x = csk.sort(x)
        np.testing.assert_array_equal(sorted_y.get(stream=side), np.sort(hy))
        np.testing.assert_array_equal(sorted_x.get(), np.sort(hx))
    assert _served_prepared("sort", x)


@pytest.mark.parametrize("n", [4099, (1 << 18) + 5])
def test_calls_of_one_launch_plan_share_their_kept_temporaries_and_keep_order(n):
    """auto's call and one naming its plugin, and a stable one choosing the
    same kernels, replay one launch plan on one set of kept temporaries
    (calls/sort_kept.py). Called in turn from a busy non-blocking stream and the
    legacy default stream, each result is NumPy's: a call that did not wait
    for the other's kernels would sort over the shared temporaries."""
    cupy = _cupy()
    from test_streams_gpu import spin

    rng = np.random.default_rng(n)
    side = cupy.cuda.Stream(non_blocking=True)
    x = cupy.asarray(rng.standard_normal(n).astype(np.float32))
    for _ in range(3):  # the decision settles, and its call is prepared
        csk.sort(x)
    chosen = api.prepared.find("sort", x, False, False, "auto")
    assert chosen is not None
    plugin = chosen.plugin.name
    calls = [dict(), dict(algorithm=plugin), dict(stable=True)]
    for round_ in range(4):
        pending = []  # checked after the round: no call waits for the one before
        for i, flags in enumerate(calls):
            h = rng.standard_normal(n).astype(np.float32)
            stream = side if (round_ + i) % 2 else cupy.cuda.Stream.null
            with stream:
                x = cupy.asarray(h)
                spin()
                pending.append((csk.sort(x, **flags), h, stream))
        for got, h, stream in pending:
            np.testing.assert_array_equal(got.get(stream=stream), np.sort(h))
    by_name = api.prepared.find("sort", x, False, False, plugin)
    assert by_name is not None and by_name.kept is chosen.kept


@pytest.mark.parametrize("n", [4099, 300_007])
@pytest.mark.parametrize("library", ["cupy", "torch"])
@pytest.mark.parametrize("kind", ["sort", "argsort"])
def test_results_made_ahead_are_new_arrays_on_the_callers_stream(library, kind, n):
    """Prepared calls make their next result ahead (kept.AHEAD_RESULT_BYTES;
    300,007 keys: a big result, made ahead beside the kept temporaries):
    calls alternating between a busy non-blocking stream and the default
    one, results kept alive and then written over, each one right, none
    sharing memory with another."""
    from test_streams_gpu import spin

    rng = np.random.default_rng(31)
    if library == "cupy":
        cupy = _cupy()
        side, default = cupy.cuda.Stream(non_blocking=True), cupy.cuda.Stream.null
        to_dev, to_host, busy = cupy.asarray, (lambda r: r.get()), spin
        pointer = lambda r: r.data.ptr  # noqa: E731
    else:
        torch = pytest.importorskip("torch")
        side, default = torch.cuda.Stream(), torch.cuda.default_stream()
        to_dev, to_host = (lambda h: torch.from_numpy(h).cuda()), (lambda r: r.cpu().numpy())
        busy = lambda: torch.cuda._sleep(10_000_000)  # noqa: E731 - torch's current stream
        pointer = lambda r: r.data_ptr()  # noqa: E731
    kept, want = [], []
    for call in range(8):
        h = rng.standard_normal(n).astype(np.float32)
        stream = side if call % 3 == 1 else default
        ctx = stream if library == "cupy" else torch.cuda.stream(stream)
        with ctx:
            x = to_dev(h)
            busy()
            got = csk.sort(x) if kind == "sort" else csk.argsort(x, stable=True)
            kept.append(got)
            want.append(np.sort(h) if kind == "sort" else np.argsort(h, kind="stable"))
    for got, expected in zip(kept, want):
        np.testing.assert_array_equal(to_host(got), expected)
    assert len({pointer(r) for r in kept}) == len(kept)
    for r in kept:
        r.fill_(0) if library == "torch" else r.fill(0)
    h = rng.standard_normal(n).astype(np.float32)
    later = csk.sort(to_dev(h)) if kind == "sort" else csk.argsort(to_dev(h), stable=True)
    np.testing.assert_array_equal(to_host(later),
                                  np.sort(h) if kind == "sort" else np.argsort(h, kind="stable"))


def _kept_arrays(kind, x, stream):
    """The results the prepared call of `x` keeps (calls/sort_kept.py: to take
    back, and made ahead) for `stream` (its pointer)."""
    kept = api.prepared.find(kind, x, False, kind == "argsort", "auto").kept
    return [array for on, array in (kept.returned or []) + (kept.ahead or []) if on == stream]


def _counting_makes(kind, x, made):
    """Count in `made` each result array the prepared call of `x` makes (a
    result taken back is not made); returns a function restoring its maker."""
    call = api.prepared.find(kind, x, False, kind == "argsort", "auto")
    make = call.make_result
    call.make_result = lambda a: (made.append(1), make(a))[1]
    return lambda: setattr(call, "make_result", make)


def _sorter(cupy, kind):
    """(run(x), want(h)) of a sort or a stable argsort."""
    if kind == "sort":
        return (lambda x: csk.sort(x)), (lambda h: np.sort(h))
    return (lambda x: csk.argsort(x, stable=True)), (lambda h: np.argsort(h, kind="stable"))


@pytest.mark.parametrize("n", [1000, 4099, 300_007])
@pytest.mark.parametrize("kind", ["sort", "argsort"])
def test_a_dropped_cupy_result_is_taken_back_after_the_work_queued_on_it(kind, n):
    """A small CuPy result its caller dropped comes back as a later call's
    result on the same stream (calls/sort_kept.py): no array is made, and the
    work the caller queued on it before dropping it, behind a busy stream,
    still reads the old values; a call on another stream never gets it. A
    big one (300,007 4-byte keys: past AHEAD_RESULT_BYTES) is made each
    call."""
    from test_streams_gpu import spin

    cupy = _cupy()
    rng = np.random.default_rng(n + len(kind))
    side = cupy.cuda.Stream(non_blocking=True)
    run, want = _sorter(cupy, kind)
    big = n * (4 if kind == "sort" else 8) > AHEAD_RESULT_BYTES
    for stream in (cupy.cuda.Stream.null, side):
        with stream:
            for _ in range(3):  # prepared, and results kept on this stream
                run(cupy.asarray(rng.standard_normal(n).astype(np.float32)))
            doubled, made = [], []
            restore = _counting_makes(kind, cupy.asarray(np.zeros(n, np.float32)), made)
            try:
                for call in range(4):
                    h = rng.standard_normal(n).astype(np.float32)
                    x = cupy.asarray(h)
                    spin()
                    got = run(x)
                    doubled.append((got * 2, want(h) * 2))  # queued behind the spin, then dropped
                    del got
            finally:
                restore()
            assert len(made) == (4 if big else 0)
            for twice, expected in doubled:
                np.testing.assert_array_equal(twice.get(stream=stream), expected)
    with side:
        run(cupy.asarray(rng.standard_normal(n).astype(np.float32)))
    h = rng.standard_normal(n).astype(np.float32)
    x = cupy.asarray(h)
    side_kept = _kept_arrays(kind, x, side.ptr)
    assert side_kept  # (held here, so none of them is taken back: the ahead one could be)
    with cupy.cuda.Stream.null:
        other = run(x)
    assert all(other is not array for array in side_kept)
    np.testing.assert_array_equal(other.get(), want(h))


@pytest.mark.parametrize("kind", ["sort", "argsort"])
def test_a_loop_assigning_each_cupy_result_cycles_through_three_arrays(kind):
    """`got = csk.sort(x)` in a loop, with work queued on each result behind
    a busy stream before the next call: once prepared, each call's result is
    one taken back (calls/sort_kept.py, RETURNED_KEPT), none is made, three
    arrays take turns, and every result and the work queued on it are
    right."""
    from test_streams_gpu import spin

    cupy = _cupy()
    rng = np.random.default_rng(5 + len(kind))
    n = 4099
    run, want = _sorter(cupy, kind)
    got = None
    for _ in range(4):  # prepared, and three results kept
        got = run(cupy.asarray(rng.standard_normal(n).astype(np.float32)))
    queued, ids, made = [], [], []
    restore = _counting_makes(kind, cupy.asarray(np.zeros(n, np.float32)), made)
    try:
        for call in range(6):
            h = rng.standard_normal(n).astype(np.float32)
            x = cupy.asarray(h)
            spin()
            got = run(x)
            ids.append(id(got))
            queued.append((got + 1, want(h) + 1))
    finally:
        restore()
    for plus_one, expected in queued:
        np.testing.assert_array_equal(plus_one.get(), expected)
    assert not made and ids[3:] == ids[:3] and len(set(ids)) == 3


@pytest.mark.parametrize("holder", ["pointer", "view", "torch", "finalizer"])
def test_a_cupy_result_still_held_some_other_way_is_never_taken_back(holder):
    """Dropping the array while holding its memory pointer, a view, a torch
    tensor on it or a finalizer keeps it from being taken back: its values
    stand through the next calls (a finalizer's array is freed, not handed
    out again)."""
    import weakref

    cupy = _cupy()
    rng = np.random.default_rng(7)
    n = 4099
    run = lambda: csk.sort(cupy.asarray(rng.standard_normal(n).astype(np.float32)))  # noqa: E731
    run()
    run()  # prepared, its results taken back from now on
    h = rng.standard_normal(n).astype(np.float32)
    got = csk.sort(cupy.asarray(h))
    if holder == "pointer":
        held = got.data
        read = lambda: cupy.ndarray((n,), np.float32, memptr=held).get()  # noqa: E731
    elif holder == "view":
        held = got[1:]
        read = lambda: np.concatenate([np.sort(h)[:1], held.get()])  # noqa: E731
    elif holder == "torch":
        torch = pytest.importorskip("torch")
        held = torch.as_tensor(got, device="cuda")
        read = lambda: held.cpu().numpy()  # noqa: E731
    else:
        held = weakref.finalize(got, lambda: None)
        read = None
    del got
    for _ in range(3):
        run()
    cupy.cuda.Device().synchronize()
    if read is None:
        assert not held.alive
    else:
        np.testing.assert_array_equal(read(), np.sort(h))
