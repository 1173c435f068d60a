"""Prepared calls: a repeated device sort, argsort or sort_by_key of one exact
shape, made again without the general path; and the general path itself as
the public functions and plans run it (`PreparedCalls.run`: dispatch, then
prepare).

The general path (api -> select -> execute) spends tens of microseconds of
Python per call reading the array interface, building a Request, choosing,
wrapping results and looking up the launch plan. When a call of CuPy or
PyTorch keys ran a replayable plugin through a recorded launch plan
(cudasortkit/launch/plans.py) on a decision its plugin need not make again
for each call's keys (not a range-deciding one such as counting), the
next call of the same (kind, array type, dtype, shape, flags, algorithm;
for sort_by_key the values' dtype too) needs none of that: it takes the
input's address, allocates the result in the caller's library on the
caller's current stream, and replays the plan. A sort_by_key call's values
must be arrays of the keys' type, shape and device, C-contiguous; its keys'
result is made ahead as a sort's is, its values' result each call.

A prepared call holds its decision's stamps (registry generation, policy
generation, selector epoch, launch plans' generation): when any of them
moves, the call takes the general path, which decides again. Each use asks
the selector to reuse the decision and calls its `observe`, as a memoised
choice does: a decision the keys' range made is still made again after its
reuses, and first-run measurement still learns from these calls. Anything
unusual (another device current, a non-contiguous array, ragged segments)
takes the general path. An N-D array sorted along its last axis is prepared
like a 1-D one: its rows are uniform, so their launch plan is recorded under
the rows' shape (launchplan.rows_of). What calls keep between calls (their
plan's temporaries, the next result made ahead) is calls/sort_kept.py's, shared
by the calls of one launch plan and result.
"""
from __future__ import annotations

import sys
from sys import getrefcount
from weakref import getweakrefcount

from ..build.corekernels import iota64
from ..launch import plans as launchplan
from ..launch.outputs import free_all, index_buffer, poison, temporary
from ..sdk import registry
from ..dtypes import is_bfloat16
from ..dtypes import INDEX_DTYPE, INDEX_DTYPES
from ..sdk.job import Job
from ..gpu.arrays import c_strides
from ..gpu.streams import LEGACY, current_stream
from .sort_kept import kept_for, sole_holders

_TORCH_INDEX = {INDEX_DTYPE: "int64", INDEX_DTYPES[4]: "int32"}  # argsort's index dtypes
#: Prepared calls kept at most (dropped all together past it, like decisions).
MAX_CALLS = 1024


class _CupyKeys:
    """What a prepared call needs of a CuPy array. Made once, when the first
    call of CuPy arrays is prepared (adapter_for): CuPy's functions are
    bound then, not looked up on each call (an `import cupy` inside a
    method costs a tenth of a microsecond each time)."""

    library = "cupy"

    def __init__(self):
        import cupy

        self._device = cupy.cuda.runtime.getDevice
        self._current_stream = cupy.cuda.get_current_stream
        self._ndarray = cupy.ndarray
        #: holders() of a result nothing else holds (calls/sort_kept.py takes such
        #: a result back for the next call); None, so that none is taken
        #: back, where the interpreter runs without its GIL (a free-threaded
        #: build, where this reading of reference counts is untested).
        self.alone = (sole_holders(self.holders, lambda: cupy.ndarray((1,), "uint8"))
                      if getattr(sys, "_is_gil_enabled", lambda: True)() else None)

    @staticmethod
    def holders(array) -> tuple:
        """Who holds a CuPy array: the references to it, to its memory
        pointer (`data`, which views and arrays made on it share) and to its
        memory (`data.mem`, which views' pointers share), and its weak
        references. (A CuPy array has no __dict__; DLPack and the buffer
        protocol hold the array itself.)"""
        data = array.data
        return getrefcount(array), getrefcount(data), getrefcount(data.mem), getweakrefcount(array)

    def ready(self, a, ordinal, strides) -> bool:
        """placed(a, ...) on `ordinal`, which is the current device."""
        return self.placed(a, ordinal, strides) and self._device() == ordinal

    @staticmethod
    def placed(a, ordinal, strides) -> bool:
        """Whether `a` is C-contiguous on device `ordinal`. `strides`: the
        C-contiguous strides of the call's shape (bytes), read before
        a.flags, which builds an object (~0.4 us)."""
        return (a.strides == strides or a.flags.c_contiguous) and a.data.device_id == ordinal

    def current(self, ordinal) -> bool:
        """Whether `ordinal` is CuPy's current device (ready() without the
        array's checks, which a plan made already)."""
        return self._device() == ordinal

    @staticmethod
    def pointer(a) -> int:
        return a.data.ptr

    def stream(self, a) -> int:
        # gpu.streams.current_stream("cupy", None), CuPy's function bound
        return self._current_stream().ptr or LEGACY

    def maker(self, shape, dtype):
        """make(a): a new C-contiguous array of `shape` and `dtype` on the
        current device (cupy.empty's own call: CuPy's allocator, ordered on
        the current stream), `a` unused."""
        ndarray = self._ndarray
        return lambda a: ndarray(shape, dtype)

    def values_maker(self, shape, dtype):
        """make(v): a new array like the values `v` (maker's)."""
        return self.maker(shape, dtype)

    @staticmethod
    def index_dtype(nbytes: int):
        """The index dtype of `nbytes` bytes (4: int32, 8: int64) as CuPy names it."""
        return INDEX_DTYPES[nbytes]


class _TorchKeys:
    """What a prepared call needs of a CUDA torch.Tensor (made once, as
    _CupyKeys)."""

    library = "torch"

    def __init__(self):
        import torch

        self._torch = torch
        self._index_dtypes = {dtype: getattr(torch, name) for dtype, name in _TORCH_INDEX.items()}

    @staticmethod
    def ready(a, ordinal, strides) -> bool:
        return a.is_contiguous() and a.device.index == ordinal

    placed = ready  # a tensor names its device: no current device to read

    @staticmethod
    def current(ordinal) -> bool:
        return True  # a tensor names its device: ready() reads no current device

    @staticmethod
    def pointer(a) -> int:
        return a.data_ptr()

    @staticmethod
    def stream(a) -> int:
        return current_stream("torch", a.device)

    def maker(self, shape, dtype):
        """make(a): a new contiguous tensor of `shape` and `dtype` (the
        keys' own, or an index dtype) on `a`'s device. Of `a`'s own shape (a
        sort's or argsort's result) it is empty_like(a), about half of
        torch.empty's host time (`a` is contiguous, so the result is too)."""
        torch = self._torch
        index_dtype = self._index_dtypes.get(dtype)

        def make(a):
            torch_dtype = a.dtype if index_dtype is None else index_dtype
            if a.shape == shape:
                return torch.empty_like(a, dtype=torch_dtype)
            return torch.empty(shape, dtype=torch_dtype, device=a.device)
        return make

    def values_maker(self, shape, dtype):
        """make(v): a new contiguous tensor like the values `v` (contiguous,
        of the call's shape), in their own dtype."""
        return self._torch.empty_like

    def index_dtype(self, nbytes: int):
        """The index dtype of `nbytes` bytes (4: int32, 8: int64) as torch names it."""
        return self._index_dtypes[INDEX_DTYPES[nbytes]]


#: The array libraries whose calls are prepared, by Operand.library.
ADAPTERS = {"cupy": _CupyKeys, "torch": _TorchKeys}
_adapters: dict = {}  # library -> its adapter, made on first use


def adapter_for(library: str):
    """The adapter of `library`'s arrays (one per process), or None where
    its calls are not prepared."""
    adapter = _adapters.get(library)
    if adapter is None and library in ADAPTERS:
        adapter = _adapters.setdefault(library, ADAPTERS[library]())
    return adapter


class PreparedCall:
    """One exact shape's sort or argsort (of a 1-D array, or along the last
    axis of a C-contiguous N-D one): plugin, config, launch plan."""

    __slots__ = ("adapter", "state", "plugin", "config", "plan", "kind", "dtype", "key_name",
                 "shape", "n", "value_bytes", "descending", "memo", "stamps", "iota",
                 "index_dtype", "key_bytes", "index_bytes", "job", "strides", "result_dtype",
                 "kept", "make_result", "value_strides", "make_values")

    def __init__(self, adapter, state, plugin, config, plan, kind, dtype, key_name, shape, n,
                 value_bytes, descending, memo, stamps, index_dtype=INDEX_DTYPE,
                 values_dtype=None):
        """`index_dtype`: argsort's; `values_dtype`: sort_by_key's values'."""
        self.adapter, self.state, self.plugin = adapter, state, plugin
        self.config, self.plan, self.kind = config, plan, kind
        self.dtype, self.key_name = dtype, key_name  # the caller's dtype; the kernels' key dtype
        self.shape, self.n, self.value_bytes = shape, n, value_bytes
        self.descending, self.memo, self.stamps = descending, memo, stamps
        self.iota = kind == "argsort" and not plugin.makes_indices
        self.index_dtype = index_dtype  # argsort's (int64, or int32 from a plugin making indices)
        self.key_bytes, self.index_bytes = n * dtype.itemsize, n * index_dtype.itemsize
        self.strides = c_strides(shape, dtype.itemsize)  # the keys' (bytes), for adapter.ready
        #: sort_by_key: the values' strides (for adapter.ready) and make_values(v),
        #: a new array for a call's sorted values; index_bytes their bytes.
        self.value_strides = self.make_values = None
        if values_dtype is not None:
            self.index_bytes = n * values_dtype.itemsize
            self.value_strides = c_strides(shape, values_dtype.itemsize)
            self.make_values = adapter.values_maker(shape, values_dtype)
        #: Each call's Job is this one rebound to the call's buffers (Job.rebound).
        self.job = Job(plugin, state, dtype=key_name, n=n, keys_in=0, keys_out=0,
                       value_bytes=value_bytes, descending=descending, config=config)
        #: The dtype of the array a call returns (sort's keys, argsort's
        #: indices), and what the calls of this launch plan and result keep
        #: between calls: temporaries and results made ahead (calls/sort_kept.py).
        self.result_dtype = dtype if kind != "argsort" else index_dtype
        self.kept = kept_for(state, plan, adapter, shape, self.result_dtype,
                             self.key_bytes if kind != "argsort" else self.index_bytes)
        #: make_result(a): a new array for a call's result (adapter.maker).
        self.make_result = adapter.maker(shape, self.result_dtype)

    def __call__(self, a, out=None, keys_in=None, out_at=None, values=None):
        """(sorted keys or None, argsort's indices or sort_by_key's sorted
        values or None), in the caller's library. `out`: the result's array instead of a new one
        (sort's keys, argsort's indices), checked by the caller
        (calls/sort_plan.py) to be of the result's type, shape, dtype and
        device, C-contiguous and apart from `a`. `keys_in`, `out_at`: the
        addresses of `a` and `out` where the caller read them already.
        `values`: sort_by_key's values (checked by the caller: find()).
        (A repeat call of 1,024 keys is mostly host time: this path keeps
        to the few calls it needs.)"""
        state = self.state.activate()
        adapter, kept = self.adapter, self.kept
        caller = adapter.stream(a)
        joins = state.joiner.join_caller(caller)
        temporaries = None
        try:
            if keys_in is None:
                keys_in = adapter.pointer(a)
            result = out
            if result is None:
                # the array made ahead for this stream, else one made now (out
                # of memory, once more after unused memory went back:
                # DeviceState.allocating, as every result of the general path)
                result = kept.made_ahead(caller)
                if result is None:
                    result = state.allocating(self.make_result, a)
                out_at = adapter.pointer(result)
            elif out_at is None:
                out_at = adapter.pointer(out)
            if self.kind == "sort":
                keys, indices, keys_out, values_in, values_out = result, None, out_at, 0, 0
            elif self.kind == "pairs":
                keys, keys_out, values_in = result, out_at, adapter.pointer(values)
                indices = state.allocating(self.make_values, values)
                values_out = adapter.pointer(indices)
            else:
                temporaries = []
                keys, indices, values_out = None, result, out_at
                keys_out = temporary(state, temporaries, self.key_bytes, "sorted keys of argsort")
                values_in = (index_buffer(state, temporaries, self.n, "argsort indices", iota64)
                             if self.iota else 0)
            poison(state, keys_out, self.key_bytes, values_out, self.index_bytes)
            # Buffers a replay had before (pools hand the same blocks back)
            # have a graph: launched with no Job of this call's own (nothing
            # to free: the temporaries are kept), on the legacy default
            # stream itself when that is the caller's (no crossing from our
            # stream into it: microseconds of GPU latency), else on ours.
            self.plan.run_on(self.job, (keys_in, keys_out, values_in, values_out), kept.used(),
                             LEGACY if caller == LEGACY else None)
        finally:
            if temporaries:
                free_all(temporaries)
            if joins:
                state.joiner.signal((caller,))
        if out is None and kept.ahead is not None:  # the GPU works meanwhile
            kept.hand_out(caller, result)  # (to take back once its caller drops it)
            kept.make_ahead(caller, self.make_result, a)
        observe = self.memo.observe
        if observe is not None:  # after the launches: the GPU works meanwhile
            observe()
        return keys, indices


class PreparedCalls:
    """The prepared calls of one Selector's decisions, by exact call shape,
    and the general path that makes them (`run`)."""

    def __init__(self, selector, execute):
        """`execute`: dispatch.execute.execute, the general path (passed in,
        so that a prepared call's module imports nothing above launch)."""
        self.selector = selector
        self._execute = execute
        self._calls: dict = {}
        self._types: set = set()  # array types some prepared call was made for

    def run(self, kind, keys, values, descending, stable, algorithm, out=None, values_out=None,
            key_range=None, stream=None, segments=None, progress=False, caller=None,
            index_dtype=INDEX_DTYPE):
        """The call through the general path (the selector chooses, auto
        chooses again if a plugin turns out broken). `caller`: the caller's
        array when the result takes its shape (1-D, or sorted along its last
        axis without a copy): a plain call of it is then prepared for
        repeats (note)."""
        done = self._execute(self.selector, kind, keys, values, descending, stable, algorithm,
                             out, values_out, key_range, stream, segments, progress, index_dtype)
        if (caller is not None and out is None and values_out is None and key_range is None
                and stream is None and (values is None) == (kind != "pairs")
                and not done.stand_in):
            self.note(kind, caller, keys, descending, stable, algorithm, done.request,
                      done.plugin, done.config, done.state, values)
        return done.result

    def stamps(self) -> tuple:
        return (registry.generation, self.selector.policy.generation, self.selector.epoch,
                launchplan.generation)

    def find(self, kind: str, a, descending, stable, algorithm, index_dtype=INDEX_DTYPE):
        """The prepared call for this exact call, or None (take the general path)."""
        if type(a) not in self._types or type(descending) is not bool or type(stable) is not bool:
            return None
        call = self._calls.get((kind, type(a), a.dtype, a.shape, descending, stable, algorithm,
                                index_dtype))
        if call is None or not self.holds(call, a):
            return None
        return call

    def find_pairs(self, keys, values, descending, algorithm):
        """The prepared sort_by_key call for these keys and values, or None:
        values of the keys' array type and shape, C-contiguous on the call's
        device (else the general path, which says what is wrong)."""
        if type(values) is not type(keys) or type(keys) not in self._types:
            return None
        call = self.find("pairs", keys, descending, True, algorithm, values.dtype)
        if (call is None or values.shape != call.shape
                or not call.adapter.ready(values, call.state.ordinal, call.value_strides)):
            return None
        return call

    def holds(self, call, a, checked: bool = False) -> bool:
        """Whether prepared `call` still serves this call of `a`: its stamps
        stand, `a` is ready for it, and the selector reuses its decision.
        checked: a plan's call, which bound its decision (a plan replays
        only plugins that do not decide on each call's key range, so the
        plugin serves any keys of the shape): `a` is known to be
        C-contiguous on the call's device, so only the current device is
        read, and a decision the keys' range made is not probed again."""
        ordinal = call.state.ordinal
        if call.stamps != self.stamps():
            return False
        if checked:
            return call.adapter.current(ordinal)
        return call.adapter.ready(a, ordinal, call.strides) and self.selector.reuse(call.memo)

    def note(self, kind: str, caller, keys, descending, stable, algorithm, request, plugin,
             config, state, values=None) -> None:
        """After the general path served a plain call (no out=, key_range or
        stream=) of device keys: prepare the shape if it can be. `caller` is
        the caller's array (its shape is the result's; `keys` its 1-D view:
        the array itself, or its rows along the last axis); `values`
        sort_by_key's values (an Operand: 1-D calls only)."""
        adapter = adapter_for(keys.library)
        if (adapter is None or keys.n < 2 or keys.is_copy
                or is_bfloat16(keys.dtype) or state is None
                or (request.segments is not None and not request.segments.uniform)
                or keys.interface_stream not in (None, keys.current_stream())):
            return
        if kind == "pairs":
            if (values is None or values.library != keys.library or values.is_copy
                    or request.segments is not None or is_bfloat16(values.dtype)
                    or values.interface_stream not in (None, values.current_stream())):
                return
        elif kind not in ("sort", "argsort"):
            return
        memo = self.selector.settled(request, algorithm)
        if memo is None or memo.plugin is not plugin:
            return
        if config is None:
            config = registry.default_config(plugin, request.dtype, request.value_bytes,
                                             request.n)
        plan = launchplan.recorded(state.ordinal, plugin, request.dtype, keys.n,
                                   request.value_bytes, config, request.descending,
                                   has_values_in=(kind == "pairs" or kind == "argsort"
                                                  and not plugin.makes_indices),
                                   has_values_out=kind != "sort",
                                   rows=launchplan.rows_of(request))
        # int32 indices only from a plugin that makes them (the call's iota is 64-bit).
        index_dtype = INDEX_DTYPES[request.value_bytes] if kind == "argsort" else INDEX_DTYPE
        if plan is None or (index_dtype != INDEX_DTYPE and not plugin.makes_indices):
            return
        values_dtype = values.dtype if kind == "pairs" else None  # (NumPy's)
        a = caller
        # sort_by_key's key ends in the values' dtype as their library names
        # it (find_pairs reads the caller's array: a torch dtype for tensors),
        # argsort's in the index dtype
        key = (kind, type(a), a.dtype, a.shape, descending, stable, algorithm,
               index_dtype if values_dtype is None else values.original.dtype)
        old = self._calls.get(key)
        if (old is not None and old.plugin is plugin and old.plan is plan and old.state is state
                and old.config == config):
            # Decided again, the same way (a decision the keys' range made is
            # made again every PROBE_REUSE calls): the same work, so the call
            # keeps its temporaries and the graphs captured on them.
            old.memo, old.stamps = memo, self.stamps()
            return
        if len(self._calls) >= MAX_CALLS:
            self._calls.clear()
        self._types.add(type(a))
        self._calls[key] = \
            PreparedCall(adapter, state, plugin, dict(config), plan, kind, keys.dtype,
                         request.dtype, tuple(a.shape), keys.n, request.value_bytes,
                         request.descending, memo, self.stamps(), index_dtype, values_dtype)

    def forget(self) -> None:
        self._calls.clear()
