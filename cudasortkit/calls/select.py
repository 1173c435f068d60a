"""topk, partition and argpartition: the calls behind the public functions.

The selected axis is moved last (calls/axes.py's Rows: a contiguous copy
made by the array's own library on the caller's stream, none when the axis
is already last and the array contiguous), the keys become rows x row_len,
a selection plugin (sdk/selection.py, chosen by dispatch/selection.py)
picks k keys per row, and the (rows, k) results take the input's shape
with k along the axis, in the caller's kind of array.

A GPU plugin runs through a SelectJob in the caller's stream (Ordering);
plugins that sort get `argsort_rows`, the core's stable argsort of rows of
unsigned words, from here: the sort machinery stays above the plugins.
"""
from __future__ import annotations

import operator

import numpy as np

from ..build.corekernels import iota64, key_minmax
from ..dispatch import selection as choosing
from ..dispatch.request import caller_ordering, check_algorithm
from ..dtypes import INDEX_DTYPE, key_name
from ..errors import PluginError
from ..gpu.arrays import Operand, library_of, not_an_array, torch_to_numpy_dtype
from ..gpu.device import get_device
from ..gpu.streams import LEGACY, cupy_stream, torch_current_stream
from ..launch import plans as launchplan
from ..launch.outputs import poison
from ..launch.run import run_job
from ..sdk import registry
from ..sdk.plugin import RUN_ERRORS, Request
from ..sdk.segments import Segments
from ..sdk.select_job import SelectJob
from ..sdk.selection import HostSelectJob, SelectRequest
from ..tuning import runtime
from ..tuning.kinds import SELECTION
from .axes import Rows
from .select_prepared import PreparedSelects

#: Default configs kept at most (dropped all together past it).
MAX_CONFIGS = 256
#: Requests kept at most (dropped all together past it).
MAX_REQUESTS = 4096


def _check_bool(name: str, value) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def _check_int(name: str, value) -> int:
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an integer, got {value!r}") from None


def check_kth(kth, row_len: int, empty: bool = False) -> tuple:
    """NumPy's kth, read as numpy.asarray(kth) reads it: an integer or a
    1-D sequence of them (a bool is a ValueError; anything else, an empty
    list among them, a TypeError), each in [-row_len, row_len) (negative
    counts from the end) unless the array is `empty` (NumPy checks no
    bounds then: there is nothing to partition); sorted, as 0..row_len-1."""
    if type(kth) is int:
        values = (kth,)
    else:
        try:
            found = np.asarray(kth)
        except ValueError:
            found = None
        if found is None or found.ndim > 1:
            raise ValueError(f"kth must be an integer or a 1-D sequence of integers, got {kth!r}")
        if found.dtype == np.bool_:
            raise ValueError("Booleans unacceptable as partition index (kth: pass integers)")
        if found.dtype.kind not in "iu":
            raise TypeError(f"Partition index must be integer (kth: an integer or a sequence of "
                            f"integers), got {kth!r}")
        values = [int(k) for k in found.reshape(-1)]
    if empty:
        return ()
    for k in values:
        if not -row_len <= k < row_len:
            raise ValueError(f"kth(={k}) out of bounds ({row_len})")
    return tuple(sorted({k % row_len for k in values}))


class SelectCalls:
    """The selection calls of one sort Selector (whose plugins argsort_rows uses)."""

    def __init__(self, selector):
        self.selector = selector
        #: auto's choice per request shape, memoised (dispatch/selection.py's
        #: Choices: keyed on the registry's and the measured tables' generations).
        self.choices = choosing.Choices(SELECTION.choose, runtime.generation)
        #: (plugin, default_config's arguments) -> its answer, asked once (a
        #: new plugin object after a registry change asks again).
        self._configs: dict = {}
        #: SelectRequest per its fields (the keys' NumPy dtype for its name).
        self._requests: dict = {}
        #: Plain device calls made again from their launch plans (calls/select_prepared.py).
        self.prepared = PreparedSelects()

    # ------------------------------------------------------------- public
    def topk(self, a, k, axis, largest, sorted_, out, stream, algorithm):
        # a plain call (exact types: True is no k) of a shape prepared before
        call_key = None
        if (out is None and stream is None and type(k) is int and type(axis) is int
                and type(largest) is bool and type(sorted_) is bool and type(algorithm) is str):
            call_key = ("topk", k, axis, largest, sorted_, algorithm)
            call = self.prepared.find(a, call_key)
            if call is not None:
                return call(a)
        largest, sorted_ = _check_bool("largest", largest), _check_bool("sorted", sorted_)
        rows = self._rows(a, axis, stream, "topk")  # a 0-d array: one key along axis -1 or 0
        k = _check_int("k", k)
        if not 0 <= k <= rows.row_len:
            raise ValueError(f"k must be in [0, {rows.row_len}] (the length of axis "
                             f"{rows.axis}), got {k}")
        if rows.zero_d:  # torch.topk of a 0-d tensor: the key itself, for k 0 or 1
            k = 1
        keys = Operand(rows.flat, "a")
        request = self._request("topk", keys, rows, k, largest, sorted_)
        targets = _check_outs(out, rows, k, keys.dtype)
        # (a 0-d array's results are reshaped below: no prepared call of it)
        note = (a, call_key) if call_key is not None and rows.in_place_rows \
            and not rows.zero_d else None
        values, indices = self._select(request, keys, rows, algorithm, stream, _shaped(rows, k),
                                       note)
        if rows.zero_d:  # 0-d results, as torch's
            values, indices = values.reshape(()), indices.reshape(())
        return (rows.write_result(targets[0], _restore(values, rows)),
                rows.write_result(targets[1], _restore(indices, rows)))

    def partition(self, a, kth, axis, algorithm, stream, want_indices: bool):
        """numpy.partition (want_indices False) or numpy.argpartition."""
        call_key = None
        if stream is None and type(kth) is int and type(axis) is int and type(algorithm) is str:
            call_key = ("partition", kth, axis, algorithm)
            call = self.prepared.find(a, call_key)
            if call is not None:
                return call(a)[1 if want_indices else 0]
        # argpartition sees a 0-d array as one key along axis -1, 0 or None
        # (NumPy's); partition takes it with axis=None only
        rows = self._rows(a, axis, stream, "argpartition" if want_indices else "partition")
        kths = check_kth(kth, rows.row_len, rows.n == 0)
        keys = Operand(rows.flat, "a")
        request = self._request("partition", keys, rows, rows.row_len, False, True, kths)
        note = (a, call_key) if call_key is not None and rows.in_place_rows else None
        values, indices = self._select(request, keys, rows, algorithm, stream, rows.moved_shape,
                                       note)
        return _restore(indices if want_indices else values, rows)

    def explain(self, a, kind, k, kth, axis, largest, algorithm):
        """The Decision for a topk (k) or partition (kth) of `a`."""
        rows = self._rows(a, axis, None, kind)
        keys = Operand(rows.flat, "a")
        if kind == "topk":
            k = _check_int("k", k)
            request = SelectRequest("topk", key_name(keys.dtype), rows.rows, rows.row_len, k,
                                    _check_bool("largest", largest), True, keys.on_device)
        else:
            request = SelectRequest("partition", key_name(keys.dtype), rows.rows, rows.row_len,
                                    rows.row_len, False, True, keys.on_device,
                                    check_kth(0 if kth is None else kth, rows.row_len,
                                              rows.n == 0))
        return choosing.explain(request, algorithm, SELECTION.choose)

    # ----------------------------------------------------------- the work
    def _request(self, op: str, keys: Operand, rows: Rows, k: int, largest: bool,
                 sorted_: bool, kth: tuple = ()) -> SelectRequest:
        """The SelectRequest of checked arguments, made once per its fields
        (a frozen dataclass takes microseconds to make)."""
        key = (op, keys.dtype, rows.rows, rows.row_len, k, largest, sorted_, keys.on_device, kth)
        request = self._requests.get(key)
        if request is None:
            request = SelectRequest(op, key_name(keys.dtype), rows.rows, rows.row_len, k,
                                    largest, sorted_, keys.on_device, kth)
            if len(self._requests) >= MAX_REQUESTS:
                self._requests.clear()
            self._requests[key] = request
        return request

    @staticmethod
    def _rows(a, axis, stream, what):
        if not isinstance(axis, (type(None), int, np.integer)) or isinstance(axis, bool):
            raise TypeError(f"axis must be an integer{' or None' if what != 'topk' else ''}, "
                            f"got {axis!r}")
        if axis is None and what == "topk":
            raise TypeError("topk needs an integer axis (as torch.topk's dim), got None")
        # topk and argpartition see a 0-d array as one key (torch's, NumPy's rule)
        return Rows(a, axis, "a", stream, zero_d_as_1d=what in ("topk", "argpartition"))

    def _select(self, request: SelectRequest, keys: Operand, rows: Rows, algorithm, stream,
                shape: tuple, note=None):
        """(values, int64 indices), each of `shape` (rows * k elements: the
        result's shape with the axis last, _shaped), the caller's kind.
        `note`: (the caller's array, its call key) of a plain call to
        prepare once a device plugin served it (PreparedSelects.note)."""
        check_algorithm(algorithm)
        while True:
            plugin, _ = self.choices.choose(request, algorithm,
                                            keys.ordinal if keys.on_device else None)
            if request.rows * request.k == 0:  # nothing to select: no plugin runs
                return (keys.wrap_own(np.empty(shape, keys.dtype)),
                        keys.wrap_host(np.empty(shape, INDEX_DTYPE)))
            try:
                if plugin.device == "cpu":
                    return self._run_host(plugin, request, keys, shape)
                return self._run_device(plugin, request, keys, stream, shape, note)
            except PluginError:
                if algorithm != "auto":
                    raise
                # auto: that plugin is out of service now; choose again

    def _config(self, plugin, *args) -> dict:
        """plugin.default_config(*args) (guarded), a new dict per job; asked
        once per plugin and arguments."""
        config = self._configs.get((plugin, args))
        if config is None:
            config = registry.call(plugin, "default_config", *args)
            if len(self._configs) >= MAX_CONFIGS:
                self._configs.clear()
            self._configs[(plugin, args)] = config
        return dict(config)

    def _run_host(self, plugin, request, keys: Operand, shape: tuple):
        state = get_device(keys.ordinal) if keys.on_device else None
        host = keys.host(state).reshape(request.rows, request.row_len)
        job = HostSelectJob(request, host, self._config(plugin, request.dtype))
        with registry.guarded(plugin, "run", expected=RUN_ERRORS):
            result = plugin.run(job)
        want = (request.rows, request.k)
        if not (isinstance(result, (tuple, list)) and len(result) == 2
                and all(isinstance(x, np.ndarray) and x.shape == want for x in result)
                and result[0].dtype == keys.dtype and result[1].dtype.kind in "iu"):
            raise registry.fault(plugin, f"run returned no (keys, indices) pair of NumPy arrays "
                                         f"of shape {want}")
        values = np.ascontiguousarray(result[0]).reshape(shape)
        indices = np.ascontiguousarray(result[1], INDEX_DTYPE).reshape(shape)
        return keys.wrap_own(values), keys.wrap_host(indices)

    def _run_device(self, plugin, request, keys: Operand, stream, shape: tuple, note=None):
        state, ordering = caller_ordering(stream, (keys,))
        if state is None:  # a host array for a GPU plugin: uploaded, results downloaded
            state = get_device(None)
        if ordering is not None:
            ordering.begin()
        try:
            count = request.rows * request.k
            outputs = _Outputs(keys, shape, count, state,
                               ordering.allocate_on if ordering is not None else None)
            values, indices = outputs.ptrs
            poison(state, values, count * keys.dtype.itemsize, indices, count * 8)
            # as Job would make it (registry.default_config: indices are 8-byte
            # values), unless the plugin's config depends on the size
            config = None if hasattr(plugin, "size_config") else \
                self._config(plugin, request.dtype, 8)
            job = SelectJob(plugin, state, request, keys_in=keys.device_ptr(state),
                            keys_out=values, indices_out=indices, config=config,
                            argsort_rows=self._argsort_rows)
            try:
                with registry.guarded(plugin, "run", expected=RUN_ERRORS):
                    returned = launchplan.run(plugin, job, launchplan.select_key(plugin, job))
                if returned is not None:
                    raise registry.fault(plugin, f"run returned {type(returned).__name__}; a GPU "
                                                 "selection plugin writes job.keys_out and "
                                                 "job.values_out and returns None")
            finally:
                job.finish()
            if note is not None:
                self.prepared.note(*note, keys, plugin, job, shape, count)
            return outputs.finish()
        finally:
            if ordering is not None:
                ordering.end()

    def _argsort_rows(self, job, words: int, word_dtype: str, rows: int, row_len: int,
                      order: bool = True, values: int = 0):
        """SelectJob.argsort_rows (order) and sort_rows (not order): a stable
        ascending argsort of each of `rows` rows of `row_len` unsigned words
        (positions count from each row's start), or the sorted words (with
        `values`, 4-byte values sorted along: (sorted words, sorted values)),
        through a sort plugin auto picks (rows as uniform segments), its
        buffers the job's temporaries. While the job is recorded (a launch plan), the
        sort's work joins the job's plan (run_job's recorder), chosen
        without reading the words' range, so that the choice holds for
        every replay's words."""
        state, n = job.state, rows * row_len
        segments = Segments.rows(rows, row_len) if rows > 1 else None
        recorder = job.recorder
        kind = "argsort" if order else "pairs" if values else "sort"
        value_bytes = {"argsort": 8, "pairs": 4, "sort": 0}[kind]   # positions, values, none
        request = Request.from_fields(
            kind=kind, dtype=word_dtype, n=n, stable=True, descending=False,
            value_bytes=value_bytes, on_device=True, key_range=None, options={}, segments=segments,
            range_probe=None if recorder is not None else _WordsRange(state, words, n, word_dtype))
        # the sorted positions (argsort) or values (pairs)
        positions = int(job.alloc(max(n, 1) * value_bytes)) if value_bytes else 0
        sorted_words = int(job.alloc(max(n, 1) * np.dtype(word_dtype).itemsize))
        while True:
            plugin, config = self.selector.choose(request, "auto")
            if plugin.device != "gpu":  # device words need a GPU sort plugin
                raise ValueError(f"no GPU sort plugin can sort the rows of {job.plugin.name}: "
                                 f"auto chose {plugin.name}")
            values_in = values
            if order and not plugin.makes_indices:
                values_in = int(job.alloc(max(n, 1) * 8))
                iota64(state, values_in, n)
                if recorder is not None:  # a core kernel of its own: no replay would issue it
                    recorder.refuse("its argsort's indices are made outside the job")
            try:
                run_job(plugin, config, request, state, n, words, sorted_words, values_in,
                        positions, RUN_ERRORS, recorder)
            except PluginError:
                continue  # that sort plugin is out of service now: auto chooses again
            return positions if order else (sorted_words, positions) if values else sorted_words


class _WordsRange:
    """Request.range_probe of device words: (min, max) measured once, on
    first call (a range-limited sort plugin asks), `done` once it was."""

    def __init__(self, state, words: int, n: int, word_dtype: str):
        self.state, self.words, self.n, self.dtype = state, words, n, np.dtype(word_dtype)
        self.done, self.value = False, None

    def __call__(self):
        if not self.done:
            self.value = key_minmax(self.state, self.words, self.n, self.dtype)
            self.done = True
        return self.value


class _Outputs:
    """The (values, int64 indices) of one device run, rows * k elements
    each in `shape`: new arrays of the caller's device library (CuPy,
    PyTorch) allocated in the order of `allocate_on` (Ordering.allocate_on:
    None for the library's current stream), or pool buffers that finish()
    downloads and wraps as the caller's kind (host arrays, other
    __cuda_array_interface__ objects)."""

    def __init__(self, like: Operand, shape: tuple, count: int, state, allocate_on):
        self.like, self.shape, self.count, self.state = like, shape, count, state
        self._bufs = ()
        if like.library == "cupy":
            self.values, self.indices = _cupy_empty(like, shape, allocate_on)
            self.ptrs = (int(self.values.data.ptr), int(self.indices.data.ptr))
        elif like.library == "torch":
            self.values, self.indices = _torch_empty(like, shape, allocate_on)
            self.ptrs = (int(self.values.data_ptr()), int(self.indices.data_ptr()))
        else:
            bufs = []
            for dtype in (like.dtype, INDEX_DTYPE):
                bufs.append(state.allocate(max(count, 1) * dtype.itemsize, "selection result"))
            self._bufs = tuple(bufs)
            self.ptrs = tuple(int(buf) for buf in bufs)

    def finish(self) -> tuple:
        """(values, indices) as the caller gets them: device arrays at once
        (ready in stream order), pool buffers downloaded (waiting) and freed."""
        if not self._bufs:
            return self.values, self.indices
        state, results = self.state, []
        try:
            for dtype, ptr, wrap in zip((self.like.dtype, INDEX_DTYPE), self.ptrs,
                                        (self.like.wrap_own, self.like.wrap_host)):
                host = np.empty(self.count, dtype)
                state.cuda.memcpy_dtoh_async(host, ptr, state.stream)
                state.stream.synchronize()
                results.append(wrap(host.reshape(self.shape)))
        finally:
            for buf in self._bufs:
                buf.free()
        return tuple(results)


def _cupy_empty(like: Operand, shape: tuple, allocate_on) -> tuple:
    """New CuPy (values, int64 indices) arrays of `shape` on the keys'
    device, allocated in the order of `allocate_on` (the caller's stream;
    None or LEGACY: CuPy's current stream, where CuPy allocates anyway)."""
    import cupy

    with cupy.cuda.Device(like.ordinal):
        if allocate_on is None or allocate_on == LEGACY or \
                allocate_on == (cupy.cuda.get_current_stream().ptr or LEGACY):
            return cupy.empty(shape, like.dtype), cupy.empty(shape, INDEX_DTYPE)
        with cupy_stream(allocate_on):
            return cupy.empty(shape, like.dtype), cupy.empty(shape, INDEX_DTYPE)


def _torch_empty(like: Operand, shape: tuple, allocate_on) -> tuple:
    """New torch (values, int64 indices) tensors of `shape` on the keys'
    device (values of the keys' own torch dtype), allocated in the order of
    `allocate_on` as _cupy_empty's (PyTorch's current stream on that device
    asked for only where a stream other than LEGACY was given)."""
    import torch

    tensor = like.array
    device, dtype = tensor.device, tensor.dtype
    if allocate_on is None or allocate_on == LEGACY or \
            allocate_on == torch_current_stream(device):
        return (torch.empty(shape, dtype=dtype, device=device),
                torch.empty(shape, dtype=torch.int64, device=device))
    with torch.cuda.stream(torch.cuda.ExternalStream(allocate_on, device=device)):
        return (torch.empty(shape, dtype=dtype, device=device),
                torch.empty(shape, dtype=torch.int64, device=device))


# ------------------------------------------------------------ shapes, out=
def _shaped(rows: Rows, k: int) -> tuple:
    """The shape of a topk's results with the axis last: rows x k, as the
    input's with the axis moved last and k along it ((k,) for axis=None)."""
    return rows.moved_shape[:-1] + (k,)


def _restore(shaped, rows: Rows):
    """A result of _shaped's shape (the axis last) in the input's shape
    with k along the axis, the caller's kind."""
    if not rows.moves:
        return shaped
    lib = library_of(shaped)
    if lib == "numpy":
        return np.ascontiguousarray(np.moveaxis(shaped, -1, rows.axis))
    if lib == "cupy":
        import cupy

        with rows.stream_context():
            return cupy.ascontiguousarray(cupy.moveaxis(shaped, -1, rows.axis))
    with rows.stream_context():
        return shaped.movedim(-1, rows.axis).contiguous()


def _result_shape(rows: Rows, k: int) -> tuple:
    if rows.zero_d:  # topk of a 0-d array: 0-d results (torch's)
        return ()
    shape = list(rows.shape)
    shape[rows.axis] = k
    return tuple(shape)


def _check_outs(out, rows: Rows, k: int, dtype) -> tuple:
    """topk's out=(values, indices), as torch.topk's: arrays of the input's
    kind, the result's shape, dtypes (the input's, int64), writeable;
    checked before anything runs. Returns (values target, indices target)."""
    if out is None:
        return None, None
    if not (isinstance(out, (tuple, list)) and len(out) == 2):
        raise TypeError(f"out must be a pair (values, indices) of arrays, got {type(out).__name__}")
    shape = _result_shape(rows, k)
    for target, want, what in ((out[0], np.dtype(dtype), "out[0] (values)"),
                               (out[1], INDEX_DTYPE, "out[1] (indices)")):
        lib = library_of(target)
        if lib == "other":
            raise not_an_array(what, target)
        if lib != rows.library:
            raise ValueError(f"{what} must be the same kind of array as the input "
                             f"({rows.library}), got {type(target).__name__}")
        tshape = tuple(int(x) for x in target.shape)
        tdtype = torch_to_numpy_dtype(target.dtype, what, "out") if lib.startswith("torch") \
            else np.dtype(target.dtype)
        if tshape != shape or tdtype != want:
            raise ValueError(f"{what} must be an array of shape {shape} and dtype {want}, got "
                             f"shape {tshape} and dtype {tdtype}")
        if lib == "numpy" and not target.flags.writeable:
            raise ValueError(f"{what} must be writeable")
    if _same_memory(out[0], out[1]):
        raise ValueError("out[0] and out[1] must be different arrays")
    return out[0], out[1]


def _same_memory(x, y) -> bool:
    if library_of(x) == "numpy":
        return np.shares_memory(x, y)
    return x is y

