"""Plans: one sort, argsort or sort_by_key of device arrays of one exact
kind, made once and called again (cudasortkit.plan, docs/api.md).

A plan binds the array type, shape, dtype, device and C-contiguity of
`like` (and `values_like`), checks the flags once and asks the selector
once which plugin and config serve the call (explain() shows it). Each call
checks its arrays against what the plan binds (TypeError for another type
or dtype, ValueError for another shape, device or layout) and then runs on
the caller's current stream:

* a plan that can replay (sort or argsort of CuPy or PyTorch arrays along
  their last axis, sort_by_key of 1-D ones, by a replayable plugin that
  does not decide on each call's key range) runs the general path once,
  which records the launch
  plan and prepares the call (calls/sort_prepared.py), and from then on replays
  that prepared call (one CUDA graph on repeat, launch/graphs.py) while the
  selector's decision stands; when it moves, the next call takes the
  general path again and prepares anew;
* any other plan runs the general path on each call, its flags already
  checked; explain() and repr say why.
"""
from __future__ import annotations

import numpy as np

from ..dispatch.request import check_flags, check_index_dtype, make_request
from ..dtypes import INDEX_DTYPE
from ..gpu.arrays import (Operand, c_strides, check_outputs_apart, library_of, memory_span,
                          numpy_to_torch_dtype, overlaps)
from ..gpu.device import keeps_current_device
from ..launch import plans as launchplan
from ..sdk import registry
from .axes import Along, normalize_axis, request_parts

OPS = ("sort", "argsort", "sort_by_key")
#: The array kinds a plan takes: device arrays.
DEVICE_LIBRARIES = ("cupy", "torch", "gpuarray", "cai")
_DEVICE_KINDS = ("CuPy arrays, CUDA torch.Tensors, pycuda GPUArrays or objects with "
                 "__cuda_array_interface__")
#: What a call's array is compared on, in this order.
_FIELDS = ("shape", "dtype", "device", "C-contiguity")


def _signature(a, library):
    """(shape, dtype, device, C-contiguous) of a device array of `library`,
    in that library's own terms (torch dtypes for tensors). device is None
    where it cannot be read cheaply (pycuda and interface objects)."""
    if library == "cupy":
        return a.shape, a.dtype, a.data.device_id, a.flags.c_contiguous
    if library == "torch":
        return tuple(a.shape), a.dtype, a.device, a.is_contiguous()
    cai = a.__cuda_array_interface__
    shape = tuple(cai["shape"])
    dtype = getattr(a, "dtype", None)
    dtype = np.dtype(cai["typestr"]) if dtype is None else np.dtype(dtype)
    strides = cai.get("strides")
    return shape, dtype, None, strides is None or tuple(strides) == c_strides(shape, dtype.itemsize)


def _cupy_quick(signature, itemsize):
    """What a CuPy array matching `signature` reads as, in the reads CuPy
    answers fastest: (shape, dtype, device, strides), its strides the C
    ones (a.flags builds an object: about 0.4 us of a call's 1). A CuPy
    array reading otherwise (C-contiguous with other strides on a length-1
    axis, say) is told apart by _signature."""
    shape, dtype, device = signature[:3]
    return shape, dtype, device, c_strides(shape, itemsize)


#: The address of a CuPy array or torch.Tensor (the libraries a plan replays for).
_POINTER = {"cupy": lambda x: x.data.ptr, "torch": lambda x: x.data_ptr()}


def _name(t) -> str:
    return f"{t.__module__}.{t.__name__}"


class Plan:
    """A reusable sort of one kind of device array: call it as p(a),
    p(a, out=b), or p(keys, values) for op="sort_by_key"."""

    def __init__(self, like, op, *, axis, descending, stable, algorithm, index_dtype, values_like,
                 prepared):
        """`prepared`: the public functions' PreparedCalls (calls/sort_prepared.py):
        their selector chooses, its general path runs a call and prepares
        its repeats."""
        if op not in OPS:
            raise ValueError(f"op must be one of {', '.join(map(repr, OPS))}, got {op!r}")
        library = library_of(like)
        if library not in DEVICE_LIBRARIES:
            raise TypeError(f"like: a plan is made for device arrays ({_DEVICE_KINDS}), got "
                            f"{_name(type(like))}; sort host arrays with cudasortkit.sort")
        if op == "sort_by_key":
            if values_like is None:
                raise ValueError("op='sort_by_key' needs values_like= (an array like the values)")
            if stable is False:
                raise ValueError("sort_by_key is always stable; pass stable=None or True")
            stable = True
        elif values_like is not None:
            raise ValueError(f"values_like= is for op='sort_by_key', not op={op!r}")
        if stable is None:
            stable = False
        check_flags(descending, stable, algorithm)
        self.op, self.library, self.type = op, library, type(like)
        self.descending, self.stable, self.algorithm = bool(descending), bool(stable), algorithm
        self._prepared = prepared
        self.signature = _signature(like, library)
        shape, dtype = self.signature[0], self.signature[1]
        if not self.signature[3]:
            raise ValueError("like: a plan binds C-contiguous arrays; pass a contiguous copy "
                             "(cupy.ascontiguousarray(a), a.contiguous())")
        self.axis = normalize_axis(axis, len(shape))
        last = self.axis is not None and self.axis == len(shape) - 1
        self.index_dtype = INDEX_DTYPE
        if op == "argsort" and index_dtype is not np.int64:
            n = int(np.prod(shape)) if self.axis is None else shape[self.axis]
            self.index_dtype = check_index_dtype(index_dtype, n)
        self.values_signature = None
        if values_like is not None:
            if type(values_like) is not self.type:
                raise TypeError(f"values_like: a {_name(type(values_like))}, the keys a "
                                f"{_name(self.type)}; pass arrays of one kind")
            self.values_signature = _signature(values_like, library)
            if self.values_signature[0] != shape:
                raise ValueError(f"values_like: shape {self.values_signature[0]}, the keys' "
                                 f"{shape}")
        self.kind = {"sort_by_key": "pairs"}.get(op, op)
        keys, vals, segments = request_parts(like, self.axis, values_like, None, algorithm,
                                             self.kind)
        request = make_request(self.kind, keys, vals, self.descending, self.stable, None,
                               segments, self.index_dtype)
        self.decision = prepared.selector.explain(request, algorithm)
        #: Whether deciding read the keys' range (a plugin that decides on it
        #: then decides on each call's keys: such a plan does not replay).
        probe = request.range_probe
        self._read_range = probe is not None and getattr(probe, "done", True)
        # The result's signature, which out= must have (argsort: the index dtype).
        out_dtype = dtype
        if op == "argsort":
            out_dtype = numpy_to_torch_dtype(self.index_dtype) if library == "torch" \
                else self.index_dtype
        self.out_signature = (self.signature if self.axis is not None else
                              ((int(np.prod(shape)),),) + self.signature[1:])
        self.out_signature = (self.out_signature[0], out_dtype) + self.out_signature[2:]
        self._axis_arg = -1 if last else self.axis
        # Bytes of the input and of the result: C-contiguous arrays of these
        # signatures span exactly [address, address + bytes), so out= is
        # told apart from the input by two addresses (CuPy, PyTorch).
        count = int(np.prod(shape))
        self._pointer = _POINTER.get(library)
        self._bytes = self._out_bytes = None
        if self._pointer is not None:
            itemsize = like.itemsize if library == "cupy" else like.element_size()
            out_itemsize = np.dtype(self.index_dtype).itemsize if op == "argsort" else itemsize
            self._bytes, self._out_bytes = count * itemsize, count * out_itemsize
        self._quick = self._quick_out = None
        if library == "cupy":
            self._quick = _cupy_quick(self.signature, itemsize)
            self._quick_out = _cupy_quick(self.out_signature, out_itemsize)
        self.why_general = self._why_general(last, shape, dtype)
        self._call = None  # the prepared call, once the general path has made it

    def _why_general(self, last, shape, dtype):
        """Why every call takes the general path, or None (the plan replays)."""
        if self.op == "sort_by_key" and len(shape) != 1:
            return ("sort_by_key of N-D arrays runs the general path each call (replays cover "
                    "1-D keys and values)")
        if not last:
            return (f"sorting along axis {self.axis} (not the last) runs the general path "
                    "each call")
        if self.library not in ("cupy", "torch"):
            return (f"{_name(self.type)} arrays run the general path each call (replays "
                    "cover CuPy and PyTorch arrays)")
        if shape[-1] < 2:
            return "fewer than 2 keys along the axis: nothing to replay"
        if "bfloat16" in str(dtype):  # NumPy's (ml_dtypes) and torch's
            return "bfloat16 keys run the general path each call"
        name = self.decision.name
        plugin = registry.plugins().get(name) if name is not None else None
        if plugin is None:
            return "no plugin can run here; each call takes the general path (and says why)"
        if not launchplan.replayable(type(plugin)):
            return f"{name} is not replayable: each call runs the general path"
        if plugin.decides_on_key_range and self._read_range:
            return f"{name} decides on each call's key range: each call runs the general path"
        if self.index_dtype != INDEX_DTYPE and not plugin.makes_indices:
            return f"{name} does not make int32 indices itself: each call runs the general path"
        return None

    # ------------------------------------------------------------------ calls
    def _matches(self, x, signature, quick=None) -> bool:
        """Whether `x` is of the plan's array type and `signature` (`quick`:
        its _cupy_quick form, for a CuPy plan)."""
        if type(x) is not self.type:
            return False
        if quick is not None and (x.shape, x.dtype, x.data.device_id, x.strides) == quick:
            return True
        return _signature(x, self.library) == signature

    def _check(self, x, signature, what: str, role: str = "", quick=None) -> None:
        """TypeError or ValueError naming how `x` differs from `signature`
        (`quick`: its _cupy_quick form, for a CuPy plan)."""
        if self._matches(x, signature, quick):
            return
        if type(x) is not self.type:
            raise TypeError(f"{what}: this plan{role} was made for {_name(self.type)}, got "
                            f"{_name(type(x))}; make another with cudasortkit.plan(like=...)")
        got = _signature(x, self.library)
        for field, want, have in zip(_FIELDS, signature, got):
            if want != have:
                if field == "C-contiguity":
                    raise ValueError(f"{what}: this plan{role} was made for C-contiguous arrays, "
                                     "got a non-contiguous one; pass a contiguous copy")
                error = TypeError if field == "dtype" else ValueError
                raise error(f"{what}: this plan{role} was made for {field} {want}, got {have}; "
                            "make another with cudasortkit.plan(like=...)")

    @keeps_current_device
    def __call__(self, a, values=None, *, out=None, values_out=None):
        """The sorted keys, argsort's indices, or (keys, values) for
        sort_by_key; in `out` (and `values_out`) when given."""
        call, pointer = self._call, self._pointer
        if (call is not None and pointer is not None and values is None and values_out is None
                and self.values_signature is None and self._matches(a, self.signature, self._quick)
                and (out is None or self._matches(out, self.out_signature, self._quick_out))):
            # The replay of CuPy or PyTorch arrays, each address read once;
            # anything else takes the path below, which says what is wrong.
            keys_in = pointer(a)
            out_at = None if out is None else pointer(out)
            if ((out_at is None or not overlaps(keys_in, self._bytes, out_at, self._out_bytes))
                    and self._prepared.holds(call, a, checked=True)):
                keys, indices = call(a, out, keys_in, out_at)
                return keys if self.op == "sort" else indices
        op = self.op
        if (call is not None and values is not None and out is None
                and values_out is None and self.values_signature is not None
                and self._matches(a, self.signature, self._quick)
                and self._matches(values, self.values_signature)):
            if self._prepared.holds(call, a, checked=True):
                return call(a, values=values)  # sort_by_key's replay
            self._call = None  # its decision moved: the general path decides and prepares anew
        self._check(a, self.signature, "a" if op != "sort_by_key" else "keys", "", self._quick)
        if op == "sort_by_key":
            if values is None:
                raise TypeError("a sort_by_key plan is called as p(keys, values)")
            self._check(values, self.values_signature, "values", " (values)")
            if out is not None:
                self._check(out, self.signature, "out")
            if values_out is not None:
                self._check(values_out, self.values_signature, "values_out", " (values)")
            if out is not None or values_out is not None:
                check_outputs_apart(a, values, out, values_out)
            record = self.why_general is None and self._call is None
            result = self._general(a, values, out, values_out)
            if record and out is None and values_out is None:
                self._call = self._prepared.find_pairs(a, values, self.descending,
                                                       self.algorithm)
            return result
        if values is not None or values_out is not None:
            raise TypeError(f"a {op} plan is called as p(a) or p(a, out=b)")
        apart = True
        if out is not None:
            self._check(out, self.out_signature, "out", " (its result)", self._quick_out)
            if self._bytes is not None:  # both checked C-contiguous: their addresses tell
                apart = not overlaps(self._pointer(a), self._bytes, self._pointer(out),
                                     self._out_bytes)
            else:
                apart = not overlaps(*memory_span(a), *memory_span(out))
        call = self._call
        if call is not None and apart:
            if self._prepared.holds(call, a, checked=True):
                keys, indices = call(a, out)
                return keys if op == "sort" else indices
            self._call = None  # its decision moved: the general path decides and prepares anew
        return self._run_general(a, out, apart)

    def _general(self, a, values=None, out=None, values_out=None):
        """The call through the public functions' general path (a plain call
        of `a` prepares its repeats): what they return for this op."""
        prepared = self._prepared
        if self._axis_arg == -1 and len(self.signature[0]) == 1:  # one 1-D sort
            keys = Operand(a, "a" if values is None else "keys")
            vals = None if values is None else Operand(values, "values", "values")
            k, v = prepared.run(self.kind, keys, vals, self.descending, self.stable,
                                self.algorithm, out, values_out, caller=a,
                                index_dtype=self.index_dtype)
        else:
            along = Along(self.kind, a, values, self._axis_arg, None, out, values_out,
                          self.algorithm, self.index_dtype)
            return along.sort(prepared, self.descending, self.stable, self.algorithm, out,
                              values_out, index_dtype=self.index_dtype)
        return {"sort": k, "argsort": v}.get(self.op, (k, v))

    def _run_general(self, a, out, apart):
        record = self.why_general is None and self._call is None
        if self.op == "sort" and (out is None or not (record and apart)):
            result = self._general(a, out=out)
            out = None  # written
        elif self.op == "sort":  # a plain call prepares the replay: then copy into out
            result = self._general(a)
        else:
            if out is not None and self.library not in ("cupy", "torch"):
                raise TypeError("an argsort plan takes out= for CuPy and PyTorch arrays only")
            result = self._general(a)
        if out is not None:
            if self.library == "torch":
                out.copy_(result)
            else:
                out[...] = result  # CuPy: on the current stream
            result = out
        if record:
            self._call = self._prepared.find(self.op, a, self.descending, self.stable,
                                             self.algorithm, self.index_dtype)
        return result

    # --------------------------------------------------------------- explain
    def path(self) -> str:
        if self.why_general is not None:
            return "general path: " + self.why_general
        if self._call is None:
            return ("replays one prepared launch plan (a CUDA graph on repeat) from its second "
                    "call; the first takes the general path, which records it")
        return "replays one prepared launch plan (a CUDA graph on repeat)"

    def _what(self) -> str:
        shape, dtype, device = self.signature[:3]
        where = "" if device is None else f" on {device if self.library == 'torch' else f'device {device}'}"
        return (f"{self.op} of {_name(self.type)} {shape} {dtype}{where}, axis {self.axis}, "
                f"{'descending' if self.descending else 'ascending'}"
                f"{', stable' if self.stable else ''}"
                f"{', int32 indices' if self.index_dtype != INDEX_DTYPE else ''}")

    def explain(self) -> str:
        """What the plan sorts, what the selector chose and why, and how each
        call runs (replay or general path, and why)."""
        return f"plan: {self._what()}\n{self.decision}\npath: {self.path()}"

    def __repr__(self) -> str:
        return f"<cudasortkit plan: {self._what()}; {self.path()}>"
