"""Caller arrays in, results out: NumPy, pycuda, CuPy, PyTorch or any object
with ``__cuda_array_interface__``.

Device arrays are used zero-copy (same primary context); results come back as
an array of the caller's library, or written into ``out``. The caller's input
is never written unless it is also ``out``.
"""
from __future__ import annotations

import numpy as np

from .dtypes import key_dtype

#: Tests set this to fill fresh result buffers with a poison byte before any
#: kernel writes them, so an element a plugin forgets to write shows up.
POISON_BYTE = None

SUPPORTED = ("numpy.ndarray", "pycuda GPUArray", "cupy.ndarray", "torch CUDA tensor",
             "objects with __cuda_array_interface__")


_UNREAD = object()

#: type -> library, for the types whose library the type alone decides.
_LIBRARY_OF_TYPE = {np.ndarray: "numpy"}


def library_of(a) -> str:
    library = _LIBRARY_OF_TYPE.get(type(a))
    if library is not None:
        return library
    module = type(a).__module__.split(".")[0]
    if isinstance(a, np.ndarray):
        library = "numpy"
    elif module == "torch":
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


class Operand:
    """One caller array, 1-D and contiguous, on the host or on a device."""

    def __init__(self, a, what: str = "a"):
        self.what = what
        self.library = library_of(a)
        if self.library in ("other", "torch-cpu"):
            if self.library == "torch-cpu":
                a = a.numpy()
            else:
                try:
                    a = np.asarray(a)
                except Exception as exc:
                    raise TypeError(f"{what}: cannot sort {type(a).__name__}; pass one of {', '.join(SUPPORTED)}") from exc
                if a.dtype == object:
                    raise TypeError(f"{what}: cannot sort {type(a).__name__}; pass one of {', '.join(SUPPORTED)}")
            self.library = "numpy"
        if self.library == "torch":
            a = a.detach()
        self.original = a
        self.on_device = self.library != "numpy"
        self._cai = None
        if self.on_device:
            # Built anew by CuPy and PyTorch on every access (microseconds):
            # read once, reused by _contiguous and device_ptr.
            cai = self._cai = a.__cuda_array_interface__
            shape, typestr = tuple(cai["shape"]), cai["typestr"]
            self.dtype = np.dtype(typestr) if "V" not in typestr else None
            if self.dtype is None:
                raise TypeError(f"{what}: dtype {getattr(a, 'dtype', typestr)} is not supported")
        else:
            shape, self.dtype = a.shape, a.dtype
        if len(shape) != 1:
            raise ValueError(f"{what}: only 1-D arrays are supported, got shape {shape}")
        if self.dtype.kind == "c" or self.dtype.hasobject or self.dtype.kind in "SUVMm":
            raise TypeError(f"{what}: dtype {self.dtype} is not supported; keys must be bool, "
                            "signed or unsigned integers or floats (float16/32/64)")
        self.n = int(shape[0])
        self.array = self._contiguous(a)
        self._upload = None
        self._ordinal = _UNREAD

    def _contiguous(self, a):
        if self.library == "numpy":
            return np.ascontiguousarray(a)
        strides = self._cai.get("strides")
        if strides is None or self.n <= 1 or strides[0] == self.dtype.itemsize:
            return a
        self._cai = None  # a contiguous copy follows: its own interface
        if self.library == "cupy":
            import cupy

            return cupy.ascontiguousarray(a)
        if self.library == "torch":
            return a.contiguous()
        raise ValueError(f"{self.what}: non-contiguous {type(a).__name__} is not supported; "
                         "pass a contiguous array")

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
        if self.library == "cupy":
            return self.array.data.device_id
        if self.library == "torch":
            return self.array.device.index
        return None

    @property
    def nbytes(self) -> int:
        return self.n * self.dtype.itemsize

    def host(self) -> np.ndarray:
        """The data as a NumPy array (a download for device arrays)."""
        if not self.on_device:
            return self.array
        if self.library == "cupy":
            return self.array.get()
        if self.library == "torch":
            return self.array.cpu().numpy()
        if self.library == "gpuarray":
            return self.array.get()
        from .device import get_device

        state = get_device()
        out = np.empty(self.n, self.dtype)
        state.cuda.memcpy_dtoh(out, self.device_ptr(state))
        return out

    def device_ptr(self, state) -> int:
        """Device address of the data; host arrays are uploaded once."""
        if self.on_device:
            if self._cai is None:
                self._cai = self.array.__cuda_array_interface__
            return int(self._cai["data"][0])
        if self._upload is None:
            self._upload = state.allocate(self.nbytes, f"upload of {self.what}")
            if self.n:
                state.cuda.memcpy_htod_async(int(self._upload), self.array, state.stream)
        return int(self._upload)

    def wrap_host(self, result: np.ndarray):
        """A host result as the caller's library would return it."""
        if self.library == "numpy":
            return result
        if self.library == "cupy":
            import cupy

            with cupy.cuda.Device(self.ordinal):
                return cupy.asarray(result)
        if self.library == "torch":
            import torch

            return torch.from_numpy(result).to(self.array.device)
        from pycuda import gpuarray

        return gpuarray.to_gpu(result)


class Result:
    """Where a GPU plugin writes one output, and how the caller gets it."""

    def __init__(self, like: Operand, dtype, state, out=None, what: str = "out"):
        self.dtype = np.dtype(dtype)
        self.n = like.n
        self.state = state
        self._host = None
        if out is not None:
            target = Operand(out, what)
            if target.n != self.n or target.dtype != self.dtype:
                raise ValueError(f"{what} must be a 1-D array of {self.n} {self.dtype}, "
                                 f"got {target.n} {target.dtype}")
            if target.array is not target.original and target.on_device:
                raise ValueError(f"{what} must be contiguous")
            self.value = out
            if target.on_device:
                self.ptr = target.device_ptr(state)
            else:
                if not (isinstance(out, np.ndarray) and out.flags.c_contiguous and out.flags.writeable):
                    raise ValueError(f"{what} must be a writeable, contiguous numpy array")
                self._host = out
                self._buf = state.allocate(self.n * self.dtype.itemsize, f"result buffer for {what}")
                self.ptr = int(self._buf)
            return
        if like.library == "numpy":
            self._host = np.empty(self.n, self.dtype)
            self._buf = state.allocate(self.n * self.dtype.itemsize, "result buffer")
            self.ptr = int(self._buf)
            self.value = self._host
        elif like.library == "cupy":
            import cupy

            if cupy.cuda.runtime.getDevice() == like.ordinal:
                self.value = cupy.empty(self.n, self.dtype)
            else:
                with cupy.cuda.Device(like.ordinal):
                    self.value = cupy.empty(self.n, self.dtype)
            self.ptr = int(self.value.data.ptr)
        elif like.library == "torch":
            import torch

            self.value = torch.empty(self.n, dtype=_torch_dtype(self.dtype), device=like.array.device)
            self.ptr = int(self.value.data_ptr())
        else:
            from pycuda import gpuarray

            self.value = gpuarray.GPUArray(self.n, self.dtype,
                                           allocator=lambda nbytes: state.allocate(nbytes, "result array"))
            self.ptr = int(self.value.gpudata)

        if POISON_BYTE is not None and self.n:
            state.cuda.memset_d8_async(self.ptr, POISON_BYTE, self.n * self.dtype.itemsize, state.stream)

    def finish(self):
        """After the stream is done: download host results, return the value."""
        if self._host is not None and self.n:
            self.state.cuda.memcpy_dtoh(self._host, self.ptr)
        return self.value


def _torch_dtype(dt: np.dtype):
    import torch

    return {np.dtype(np.bool_): torch.bool}.get(dt) or getattr(torch, dt.name)


def overlaps(ptr_a: int, nbytes_a: int, ptr_b: int, nbytes_b: int) -> bool:
    return nbytes_a > 0 and nbytes_b > 0 and ptr_a < ptr_b + nbytes_b and ptr_b < ptr_a + nbytes_a
