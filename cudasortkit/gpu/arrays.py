"""Caller arrays in, results out: NumPy, pycuda, CuPy, PyTorch (CUDA or CPU)
or any object with ``__cuda_array_interface__``.

Device arrays are used zero-copy (same primary context); results come back as
an array of the caller's library (a CPU tensor for a CPU tensor), or written
into ``out``. The caller's input is never written unless it is also ``out``.
"""
from __future__ import annotations

import numbers

import numpy as np

from ..dtypes import (KEYS_RULE, VALUES_RULE, is_bfloat16, key_dtype, numpy_dtype,
                      unsupported_values, value_bytes)
from .streams import (LEGACY, cupy_stream, current_stream, interface_stream, library_stream,
                      torch_current_stream)

#: Tests set this to fill fresh result buffers with a poison byte before any
#: kernel writes them, so an element a plugin forgets to write shows up.
POISON_BYTE = None

SUPPORTED = ("numpy.ndarray", "pycuda GPUArray", "cupy.ndarray", "torch.Tensor (CUDA or CPU)",
             "objects with __cuda_array_interface__")

_UNREAD = object()

#: type -> library, for the types whose library the type alone decides.
_LIBRARY_OF_TYPE = {np.ndarray: "numpy"}
#: torch's tensor types seen so far (the tensor's is_cuda decides the library).
_TORCH_TYPES: set = set()


def shape_of(x) -> tuple:
    """The shape of any accepted array (NumPy, CuPy, torch, pycuda, a bare
    __cuda_array_interface__ object, nested lists)."""
    if hasattr(x, "__cuda_array_interface__") and not hasattr(x, "shape"):
        return tuple(int(d) for d in x.__cuda_array_interface__["shape"])
    shape = getattr(x, "shape", None)
    if shape is None:
        return np.shape(x)
    return tuple(int(d) for d in shape)


def library_of(a) -> str:
    """numpy, cupy, torch, torch-cpu, gpuarray, cai or other."""
    library = _LIBRARY_OF_TYPE.get(type(a))
    if library is not None:
        return library
    if type(a) in _TORCH_TYPES:
        return "torch" if a.is_cuda else "torch-cpu"
    module = type(a).__module__.split(".")[0]
    if isinstance(a, np.ma.MaskedArray):
        return "masked"
    if isinstance(a, np.ndarray):
        library = "numpy"
    elif module == "torch":
        _TORCH_TYPES.add(type(a))
        return "torch" if a.is_cuda else "torch-cpu"
    elif module == "cupy":
        library = "cupy"
    elif module == "pycuda":
        library = "gpuarray"
    elif hasattr(a, "__cuda_array_interface__"):
        return "cai"
    else:
        return "other"
    _LIBRARY_OF_TYPE[type(a)] = library
    return library


def ordinal_of(library: str, a) -> int | None:
    """The device ordinal of a CuPy or PyTorch GPU array `a` of `library`
    (library_of's name); None for any other."""
    if library == "cupy":
        return a.data.device_id
    if library == "torch":
        return a.device.index
    return None


def array_stream(a, stream):
    """library_stream for `a`'s own library and device: the library's
    operations on `a` issued to the caller's `stream` where `a` lives."""
    library = library_of(a)
    return library_stream(library, stream, ordinal_of(library, a))


def _cupy_interface_stream(a, named: int) -> int:
    """The stream CuPy array `a`'s interface means: CuPy names its current
    stream on the current device, so for an array of another device, that
    device's current stream (the one its work was queued on)."""
    import cupy

    device = a.data.device_id
    return named if device == cupy.cuda.runtime.getDevice() else current_stream("cupy", device)


def _unsupported_kind(what: str, a) -> TypeError:
    return TypeError(f"{what}: cannot sort {type(a).__module__}.{type(a).__name__}; "
                     f"pass one of {', '.join(SUPPORTED)}")


def not_an_array(what: str, a) -> TypeError:
    """out= / values_out= that is no array: a list would be converted to a
    new array, which the result could not reach."""
    return TypeError(f"{what} must be an array to write the result into (one of "
                     f"{', '.join(SUPPORTED)}), got {type(a).__module__}.{type(a).__name__}")


def _unsupported_dtype(what: str, dtype, role: str = "keys") -> TypeError:
    """`what`'s dtype refused, naming the dtypes its role (keys, values or
    out) takes."""
    if role == "values":
        return unsupported_values(what, dtype)
    if role == "out":
        return TypeError(f"{what}: dtype {dtype} is not supported")
    return TypeError(f"{what}: dtype {dtype} is not supported; {KEYS_RULE}")


def _unsupported_object(what: str, original, converted: np.ndarray, role: str) -> TypeError:
    """A non-array that NumPy converts to dtype object: a sequence or number
    it holds only as Python objects (integers beyond 64 bits, mixed types)
    has an unsupported dtype; anything else is no array at all."""
    if converted.ndim == 0 and not isinstance(original, numbers.Number):
        return _unsupported_kind(what, original)
    rule = VALUES_RULE if role == "values" else KEYS_RULE
    return TypeError(f"{what}: a {type(original).__name__} that NumPy converts to dtype object "
                     "(integers beyond 64 bits, or values of mixed types) is not supported; "
                     f"{rule}")


# ------------------------------------------------------------------ PyTorch
def _torch_dtypes() -> dict:
    import torch

    table = {torch.bool: np.dtype(np.bool_), torch.float16: np.dtype(np.float16),
             torch.float32: np.dtype(np.float32), torch.float64: np.dtype(np.float64)}
    # (complex: values only; float8 and complex32 have no NumPy dtype)
    for name in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                 "complex64", "complex128"):
        if hasattr(torch, name):
            table[getattr(torch, name)] = np.dtype(name)
    return table


_TORCH_DTYPES: dict = {}


def torch_to_numpy_dtype(tdtype, what: str = "a", role: str = "keys") -> np.dtype:
    """The NumPy dtype of a torch dtype; TypeError for ones without one."""
    dt = _TORCH_DTYPES.get(tdtype)
    if dt is not None:
        return dt
    import torch

    if not _TORCH_DTYPES:
        _TORCH_DTYPES.update(_torch_dtypes())
        dt = _TORCH_DTYPES.get(tdtype)
        if dt is not None:
            return dt
    if tdtype == torch.bfloat16:  # ml_dtypes' (TypeError without it): kept once made
        dt = _TORCH_DTYPES[tdtype] = numpy_dtype("bfloat16")
        return dt
    raise _unsupported_dtype(what, tdtype, role)


#: np.dtype -> torch dtype, filled as asked (the conversion reads the
#: dtype's name, microseconds; it depends on nothing else).
_TO_TORCH: dict = {}


def numpy_to_torch_dtype(dt: np.dtype):
    tdtype = _TO_TORCH.get(dt)
    if tdtype is None:
        import torch

        tdtype = torch.bool if dt == np.bool_ else getattr(torch, dt.name)
        _TO_TORCH[dt] = tdtype
    return tdtype


def _torch_interface(t, what: str, role: str = "keys") -> dict:
    """What __cuda_array_interface__ would say of a CUDA tensor, read from the
    tensor itself (PyTorch's interface refuses bfloat16 and float8)."""
    dt = torch_to_numpy_dtype(t.dtype, what, role)
    itemsize = dt.itemsize
    return {"shape": tuple(t.shape), "strides": tuple([s * itemsize for s in t.stride()]),
            "data": (t.data_ptr(), False), "dtype": dt}


def _torch_cpu_numpy(t, what: str, role: str = "keys") -> np.ndarray:
    """A NumPy view of a CPU tensor (bfloat16 through its bits)."""
    import torch

    t = t.detach().resolve_conj().resolve_neg()
    dt = torch_to_numpy_dtype(t.dtype, what, role)
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(dt)
    return t.numpy()


def _torch_cpu_tensor(result: np.ndarray):
    import torch

    if is_bfloat16(result.dtype):
        return torch.from_numpy(result.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(result)


# ------------------------------------------------------------------ Operand
class Operand:
    """One caller array, 1-D, on the host or on a device. `role`: "keys"
    (a key dtype), "values" (a value dtype: dtypes.value_bytes) or "out"
    (an array to write a result into; check_out checks its dtype)."""

    def __init__(self, a, what: str = "a", role: str = "keys"):
        self.what = what
        self.library = library = library_of(a)
        if library == "masked":
            raise TypeError(f"{what}: masked arrays are not supported (the mask would be lost); "
                            "sort a.compressed(), or use numpy.ma.sort")
        if library == "other":
            if role == "out":
                raise not_an_array(what, a)
            original = a
            try:
                a = np.asarray(a)
            except Exception as exc:
                raise _unsupported_kind(what, original) from exc
            if a.dtype == object:
                raise _unsupported_object(what, original, a, role)
            self.library = library = "numpy"
            self._converted = True  # a new array: never the caller's memory
        else:
            self._converted = False
        self.original = a
        #: The stream a __cuda_array_interface__ asks us to order after (None: nothing).
        self.interface_stream = None
        self._cai = None
        if library == "torch-cpu":
            a = _torch_cpu_numpy(a, what, role)
        elif library == "torch":
            a = a.detach()
            self._cai = _torch_interface(a, what, role)
        elif library in ("cupy", "gpuarray", "cai"):
            # Built anew by CuPy on every access (microseconds): read once,
            # reused by _contiguous and device_ptr.
            self._cai = dict(a.__cuda_array_interface__)
            self.interface_stream = interface_stream(self._cai)
            if library == "cupy" and self.interface_stream not in (None, LEGACY):
                self.interface_stream = _cupy_interface_stream(a, self.interface_stream)
        self.on_device = self._cai is not None
        if self.on_device:
            shape = tuple(self._cai["shape"])
            dtype = self._cai.get("dtype")
            if dtype is None:
                typestr = self._cai["typestr"]
                # CuPy's and pycuda's own dtype: the interface's typestr cannot
                # say bfloat16 (it is "<V2")
                dtype = getattr(a, "dtype", None) if library in ("cupy", "gpuarray") else None
                if dtype is None:
                    try:
                        dtype = np.dtype(typestr)
                    except TypeError:
                        raise _unsupported_dtype(what, typestr, role) from None
            self.dtype = np.dtype(dtype)
        else:
            shape, self.dtype = a.shape, a.dtype
        if len(shape) != 1:
            raise ValueError(f"{what}: only 1-D arrays are supported, got shape {shape}")
        #: The caller's dtype where it is not the one sorted: keys of the
        #: other byte order ('>f8' here) are sorted as a native copy, as NumPy
        #: sorts either order, and the results of their dtype given back in
        #: the caller's (wrap_own). Values and out= arrays are moved as bytes.
        self.caller_dtype = None
        if role == "keys" and not self.dtype.isnative:
            if self.on_device:
                raise TypeError(f"{what}: a device array of non-native byte order ({self.dtype}) "
                                "cannot be sorted; make it native first (NumPy: "
                                "a.astype(a.dtype.newbyteorder('=')))")
            self.caller_dtype = self.dtype
            a = a.astype(self.dtype.newbyteorder("="))
            self.dtype = a.dtype
            self._converted = True
        if role == "values":
            value_bytes(self.dtype, what)  # TypeError naming the value dtypes
        elif role == "keys" and not is_bfloat16(self.dtype) and (
                self.dtype.kind not in "biuf" or self.dtype.hasobject):
            raise _unsupported_dtype(what, self.dtype)
        self.n = int(shape[0])
        self._ordinal = _UNREAD
        self._upload = None
        #: A strided CuPy or PyTorch array, copied contiguous on the array's
        #: device and its library's current stream there (the caller's when
        #: no stream= is given; with one, copy_in_order copies it again).
        self.strided_source = None
        self.array = self._contiguous(a)

    def _contiguous(self, a):
        if not self.on_device:
            return np.ascontiguousarray(a)
        strides = self._cai.get("strides")
        if strides is None or self.n <= 1 or strides[0] == self.dtype.itemsize:
            return a
        if self.library not in ("cupy", "torch"):
            raise ValueError(f"{self.what}: non-contiguous {type(a).__name__} is not supported; "
                             "pass a contiguous array")
        self.strided_source = a
        return self._copy(a, None)

    def _copy(self, a, stream: int | None):
        """A contiguous copy of strided `a` made on its device, queued on
        `stream` (a handle; None: the library's current stream there)."""
        if self.library == "cupy":
            import cupy

            with cupy.cuda.Device(a.data.device_id), library_stream("cupy", stream):
                a = cupy.ascontiguousarray(a)
                self._cai = dict(a.__cuda_array_interface__)
            return a
        with library_stream("torch", stream, a.device.index):
            a = a.contiguous()
        self._cai = _torch_interface(a, self.what)
        return a

    def copy_in_order(self, stream: int) -> None:
        """Copy a strided array again, queued on `stream` (the call's given
        stream=, a handle), so that the copy reads it in the caller's order
        (the first copy ran on the library's current stream, which need not
        be that one). Once; other arrays are left as they are."""
        if self.strided_source is not None:
            self.array = self._copy(self.strided_source, stream)
            self.strided_source = None

    def sized(self, n: int) -> "Operand":
        """This operand's description with n elements: what a Result of
        another length is made like. A shallow copy made directly (the
        array is neither read nor copied)."""
        like = object.__new__(type(self))
        like.__dict__.update(self.__dict__)
        like.n = int(n)
        return like

    @property
    def is_copy(self) -> bool:
        """True when `array` is a contiguous copy, not the caller's memory."""
        if self._converted:
            return True
        if self.library == "torch-cpu":
            return not self.original.is_contiguous()
        if self.library == "torch":
            return self.array.data_ptr() != self.original.data_ptr() or not self.original.is_contiguous()
        return self.array is not self.original

    @property
    def key_dtype(self) -> np.dtype:
        return key_dtype(self.dtype)

    @property
    def ordinal(self) -> int | None:
        """The device of a CuPy or PyTorch array (None: others), read once
        (CuPy's `device` builds a Device object on every access)."""
        ordinal = self._ordinal
        if ordinal is _UNREAD:
            ordinal = self._ordinal = self._read_ordinal()
        return ordinal

    def _read_ordinal(self) -> int | None:
        return ordinal_of(self.library, self.array)

    def current_stream(self) -> int:
        """The caller's current stream as this array's library sees it, on
        the array's device."""
        if self.library == "torch":
            return torch_current_stream(self.array.device)
        return current_stream(self.library, self.ordinal)

    @property
    def nbytes(self) -> int:
        return self.n * self.dtype.itemsize

    def span(self) -> tuple:
        """(address, nbytes) of the caller's memory, host or device, without
        uploading anything (overlap checks)."""
        if self.on_device:
            return (int(self._cai["data"][0]) if self.n else 0), self.nbytes
        return self.array.__array_interface__["data"][0], self.nbytes

    def host(self, state=None) -> np.ndarray:
        """The data as a NumPy array (a download on `state`'s stream for
        device arrays, after the call's ordering has begun)."""
        if not self.on_device:
            return self.array
        from .device import get_device

        state = state or get_device(self.ordinal)
        out = np.empty(self.n, self.dtype)
        if self.n:
            state.cuda.memcpy_dtoh_async(out, self.device_ptr(state), state.stream)
            state.stream.synchronize()
        return out

    def device_ptr(self, state) -> int:
        """Device address of the data; host arrays are uploaded once."""
        if self.on_device:
            return int(self._cai["data"][0])
        if self._upload is None:
            self._upload = state.allocate(self.nbytes, f"upload of {self.what}")
            if self.n:
                state.cuda.memcpy_htod_async(int(self._upload), self.array, state.stream)
        return int(self._upload)

    def wrap_host(self, result: np.ndarray):
        """A host result as the caller's library would return it: C order
        with positive strides. (NumPy calls a reversed view of one key
        contiguous, as a plugin's descending sort may return it;
        torch.from_numpy refuses its negative stride.)"""
        if result.strides and result.strides[0] < 0:
            result = result.copy()
        if self.library == "numpy":
            return result
        if self.library == "torch-cpu":
            return _torch_cpu_tensor(result)
        if self.library == "cupy":
            import cupy

            with cupy.cuda.Device(self.ordinal):
                return cupy.asarray(result)
        if self.library == "torch":
            return _torch_cpu_tensor(result).to(self.array.device)
        from pycuda import gpuarray

        return gpuarray.to_gpu(result)

    def wrap_own(self, result: np.ndarray):
        """A host result of this array's own dtype (sorted keys, unique
        values) as the caller's library and byte order would return it."""
        if self.caller_dtype is not None:
            result = result.astype(self.caller_dtype)
        return self.wrap_host(result)

    def write_host(self, result: np.ndarray) -> None:
        """Copy a host result into this (host, contiguous) array."""
        self.array[...] = result


def check_out(target: Operand, n: int, dtype: np.dtype, what: str) -> None:
    """The one rule for out= arrays, host or device: 1-D, n elements of
    `dtype`, contiguous, writeable (never a copy of the caller's array)."""
    # (a host array of the other byte order takes the values: NumPy converts)
    if target.n != n or target.dtype != dtype and (
            target.on_device or target.dtype.newbyteorder("=") != dtype):
        raise ValueError(f"{what} must be a 1-D array of {n} {dtype}, got {target.n} {target.dtype}")
    if target.is_copy:
        raise ValueError(f"{what} must be contiguous (a strided {type(target.original).__name__} "
                         "cannot be written in place)")
    if not target.on_device and not target.array.flags.writeable:
        raise ValueError(f"{what} must be writeable")


#: A result cut to its first elements stays a view of its n-long buffer
#: where the part it leaves unused is at most this many bytes, however
#: short the cut: a copy costs an allocation, a launch and its run (the
#: values of a unique of 2^22 int32 keys, a quarter of them distinct: the
#: call's last 8.4 us of GPU time, on an H200, besides the host's part),
#: which 32 MiB held for longer are not worth.
VIEW_SLACK_BYTES = 32 << 20


def cut_is_view(count: int, n: int, itemsize: int) -> bool:
    """Whether the first `count` of a result made n long before its length
    was known (elements of `itemsize` bytes) are handed out as a view of it
    (else as a copy): where the view holds at most twice their memory, or
    at most VIEW_SLACK_BYTES more."""
    return 2 * count >= n or (n - count) * itemsize <= VIEW_SLACK_BYTES


class Result:
    """Where a GPU plugin writes one output, and how the caller gets it."""

    def __init__(self, like: Operand, dtype, state, out=None, what: str = "out", stream: int = 1,
                 own: bool = False):
        self.dtype = np.dtype(dtype)
        self.n = like.n
        self.state = state
        self._host = None  # Operand or None: where a host result is downloaded to
        self._wrap = None
        #: `own`: a result of like's own dtype (sorted keys): a host one comes
        #: back in the caller's byte order (Operand.wrap_own).
        self._own = own
        self._like, self._stream = like, stream  # finish_first's copy
        if out is not None:
            target = out if isinstance(out, Operand) else Operand(out, what, "out")
            check_out(target, self.n, self.dtype, what)
            self.value = target.original
            if target.on_device:
                self.ptr = target.device_ptr(state)
            else:
                self._host = target
                self._buf = state.allocate(self.n * self.dtype.itemsize, f"result buffer for {what}")
                self.ptr = int(self._buf)
            return
        if not like.on_device:
            self._host = np.empty(self.n, self.dtype)
            self._wrap = like
            self._buf = state.allocate(self.n * self.dtype.itemsize, "result buffer")
            self.ptr = int(self._buf)
        elif like.library == "cupy":
            self.value = state.allocating(_cupy_empty, self.n, self.dtype, like.ordinal, stream)
            self.ptr = int(self.value.data.ptr)
        elif like.library == "torch":
            self.value = state.allocating(_torch_empty, self.n, self.dtype, like.array.device, stream)
            self.ptr = int(self.value.data_ptr())
        else:
            from pycuda import gpuarray

            self.value = gpuarray.GPUArray(self.n, self.dtype,
                                           allocator=lambda nbytes: state.allocate(nbytes, "result array"))
            self.ptr = int(self.value.gpudata)

        if POISON_BYTE is not None and self.n:
            state.cuda.memset_d8_async(self.ptr, POISON_BYTE, self.n * self.dtype.itemsize, state.stream)

    def finish_first(self, count: int):
        """finish() of a device result made before its length was known, n
        long: its first `count` elements, a view, or a copy of them where
        the view would hold too much more than their memory (cut_is_view).
        The copy is a result of its own, written on the state's stream after
        the work queued there (the caller's stream joins it as it joins that
        work)."""
        value = self.finish()
        if count == self.n:
            return value
        if cut_is_view(count, self.n, self.dtype.itemsize):
            return value[:count]
        head = Result(self._like.sized(count), self.dtype, self.state, None, "result", self._stream)
        if count:
            self.state.cuda.memcpy_dtod_async(head.ptr, self.ptr, count * self.dtype.itemsize,
                                              self.state.stream)
        return head.finish()

    def finish(self):
        """After the work is queued: host results are downloaded (waiting for
        it); device results are returned at once, ready in stream order."""
        host = self._host
        if host is None:
            return self.value
        into = isinstance(host, Operand)  # out=: the caller's host array
        target = host.array if into and host.dtype == self.dtype else \
            np.empty(self.n, self.dtype) if into else host
        if self.n:
            self.state.cuda.memcpy_dtoh_async(target, self.ptr, self.state.stream)
            self.state.stream.synchronize()
        if into:
            if target is not host.array:  # the other byte order: NumPy converts
                host.write_host(target)
            return self.value
        return self._wrap.wrap_own(target) if self._own else self._wrap.wrap_host(target)


def _cupy_empty(n, dtype, ordinal, stream: int | None):
    """cupy.empty on the caller's device, allocated in the caller's stream's
    order (CuPy's pool hands out blocks per stream; None or LEGACY: CuPy's
    current stream, where it allocates anyway)."""
    import cupy

    with cupy.cuda.Device(ordinal):
        if stream is None or stream == LEGACY or stream == (cupy.cuda.get_current_stream().ptr
                                                            or LEGACY):
            return cupy.empty(n, dtype)
        with cupy_stream(stream):
            return cupy.empty(n, dtype)


def _torch_empty(n, dtype, device, stream: int | None):
    """torch.empty on the tensor's device, allocated in the caller's
    stream's order (None: PyTorch's current stream, the caller's)."""
    import torch

    tdtype = numpy_to_torch_dtype(dtype)
    if stream is None or stream == LEGACY or stream == torch_current_stream(device):
        return torch.empty(n, dtype=tdtype, device=device)
    with torch.cuda.stream(torch.cuda.ExternalStream(stream, device=device)):
        return torch.empty(n, dtype=tdtype, device=device)


def overlaps(ptr_a: int, nbytes_a: int, ptr_b: int, nbytes_b: int) -> bool:
    return nbytes_a > 0 and nbytes_b > 0 and ptr_a < ptr_b + nbytes_b and ptr_b < ptr_a + nbytes_a


def memory_span(x) -> tuple | None:
    """(lowest address, bytes up to the highest) of the memory a caller's
    array of any shape and strides spans, host or device; None for objects
    that are not arrays (a list is converted to a new array: never shared)."""
    library = library_of(x)
    if library == "other":
        return None
    if library in ("numpy", "masked"):
        ptr, shape, strides, itemsize = (x.__array_interface__["data"][0], x.shape, x.strides,
                                         x.itemsize)
    elif library in ("torch", "torch-cpu"):
        itemsize = x.element_size()
        ptr, shape = x.data_ptr(), tuple(x.shape)
        strides = tuple(s * itemsize for s in x.stride())
    else:
        cai = x.__cuda_array_interface__
        ptr, shape = int(cai["data"][0]), tuple(cai["shape"])
        itemsize = np.dtype(cai["typestr"]).itemsize
        strides = cai.get("strides") or c_strides(shape, itemsize)
    if 0 in shape:
        return ptr, 0
    low = sum((d - 1) * s for d, s in zip(shape, strides) if s < 0)
    high = sum((d - 1) * s for d, s in zip(shape, strides) if s > 0) + itemsize
    return ptr + low, high - low


def c_strides(shape, itemsize) -> tuple:
    strides, step = [], itemsize
    for dim in reversed(shape):
        strides.append(step)
        step *= dim
    return tuple(reversed(strides))


def check_outputs_apart(keys, values, out, values_out) -> None:
    """sort_by_key's rule, host and device, any shape: out may be the keys
    (in place) and values_out the values, but no output shares memory with
    the other output or the other input (the sort would overwrite what it
    still reads, or one result the other). Memory spans are compared, so
    outputs interleaved in one buffer count as overlapping."""
    for (what, x), (other, y) in ((("out", out), ("values_out", values_out)),
                                  (("out", out), ("the input values", values)),
                                  (("values_out", values_out), ("the input keys", keys))):
        if x is None or y is None:
            continue
        a, b = memory_span(x), memory_span(y)
        if a is not None and b is not None and overlaps(*a, *b):
            if other == "values_out":
                raise ValueError("out and values_out overlap: one result would overwrite the "
                                 "other; pass separate arrays")
            raise ValueError(f"{what} overlaps {other}, which the sort still reads; sort in "
                             "place (out=keys, values_out=values) or into separate arrays")
