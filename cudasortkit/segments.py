"""Segments: how a segmented request splits its n keys, as plugins see it.

A segmented request sorts independent runs of keys, each on its own:
- uniform rows (`Segments.rows(count, length)`): segment s is keys
  [s * length, (s + 1) * length), the rows of an N-D array whose sorted
  axis was moved last; argsort indices count from each row's start, as
  numpy.argsort(axis=...) does;
- ragged segments (`Segments.ragged(offsets)`): CUB-style offsets,
  segment s is keys [offsets[s], offsets[s + 1]), empty segments allowed;
  argsort indices are positions in the whole key array.

Plugins read `count`, `max_len`, `uniform`, `local_indices` and, for
ragged segments, `lengths` (int64 on the host) and `offsets_ptr(state)`:
the offsets as int64 on the device.
"""
from __future__ import annotations

import numpy as np

#: Offsets dtypes accepted from callers.
OFFSET_DTYPES = (np.dtype(np.int32), np.dtype(np.int64))


class Segments:
    """How n keys split into segments (see the module docstring)."""

    __slots__ = ("count", "max_len", "uniform", "offsets", "lengths", "key", "_device", "_caller")

    def __init__(self, count: int, max_len: int, uniform: bool, offsets: np.ndarray | None,
                 lengths: np.ndarray | None = None):
        self.count = int(count)
        #: Every row's length (uniform), the longest segment's (ragged).
        self.max_len = int(max_len)
        self.uniform = bool(uniform)
        #: Ragged: the validated int64 offsets on the host (count + 1 of them).
        self.offsets = offsets
        #: Ragged: every segment's length (int64, on the host).
        self.lengths = lengths
        #: What the selector's decision cache keys on: kind, and segments and
        #: longest segment as ceil(log2) buckets (2^k belongs with the
        #: shorter ones, so a plugin's limit of 2^k keys never splits a bucket).
        self.key = ("rows" if uniform else "ragged", max(self.count - 1, 0).bit_length(),
                    max(self.max_len - 1, 0).bit_length())
        self._device = None
        #: The caller's own int64 device offsets, when they can be used as is.
        self._caller = None

    @classmethod
    def rows(cls, count: int, length: int) -> "Segments":
        return cls(count, length, True, None)

    @classmethod
    def ragged(cls, offsets: np.ndarray, given=None, lengths: np.ndarray | None = None) -> "Segments":
        """From validated int64 host offsets and their lengths (check_offsets;
        computed when not given); `given`: the caller's offsets, whose device
        copy is used when it is contiguous int64 on the device (no second upload)."""
        if lengths is None:
            lengths = np.diff(offsets)
        segments = cls(len(offsets) - 1, int(lengths.max()) if len(lengths) else 0, False,
                       offsets, lengths)
        segments._caller = _device_int64(given)
        return segments

    @property
    def local_indices(self) -> bool:
        """True: argsort indices count from each segment's start (rows)."""
        return self.uniform

    @property
    def row_len(self) -> int:
        """Uniform rows: each row's length."""
        return self.max_len

    def offsets_ptr(self, state) -> int:
        """Ragged: device address of the int64 offsets (uploaded once, on
        `state`'s stream, kept as long as this object)."""
        if self._caller is not None and _device_of(self._caller) == state.ordinal:
            return int(self._caller.__cuda_array_interface__["data"][0])
        if self._device is None:
            buf = state.allocate(self.offsets.nbytes, "segment offsets")
            state.cuda.memcpy_htod_async(int(buf), self.offsets, state.stream)
            self._device = buf
        return int(self._device)

    def __repr__(self):
        kind = f"{self.count} rows of {self.max_len}" if self.uniform else \
            f"{self.count} ragged segments, the longest {self.max_len}"
        return f"Segments({kind})"


def check_offsets(offsets, n: int, what: str = "offsets") -> tuple:
    """CUB-style offsets as validated int64 host values and the segments'
    lengths (both NumPy): a 1-D int32 or int64 array (NumPy, a list, or a
    device array, which is read back) of segments + 1 values, offsets[0] ==
    0, never decreasing, offsets[-1] == n. Anything else raises
    TypeError/ValueError before anything is sorted. Int64 offsets on the
    host are not copied (fresh megabyte-sized host arrays cost page faults)."""
    host = _to_host(offsets, what)
    if host.ndim != 1:
        raise ValueError(f"{what} must be 1-D (segments + 1 values), got shape {host.shape}")
    if host.dtype not in OFFSET_DTYPES:
        raise TypeError(f"{what} must be int32 or int64, got {host.dtype}")
    if len(host) < 1:
        raise ValueError(f"{what} needs segments + 1 values (at least one: [0] for no segments)")
    host = np.ascontiguousarray(host, dtype=np.int64)
    if host[0] != 0:
        raise ValueError(f"{what}[0] must be 0, got {host[0]}")
    if host[-1] != n:
        raise ValueError(f"{what}[-1] must equal the number of keys ({n}), got {host[-1]}")
    steps = np.diff(host)
    if len(steps) and steps.min() < 0:
        s = int(np.argmax(steps < 0))
        raise ValueError(f"{what} must not decrease: {what}[{s}] = {host[s]} > "
                         f"{what}[{s + 1}] = {host[s + 1]}")
    return host, steps


def _device_int64(offsets):
    """`offsets` if it is a contiguous int64 device array (read through its
    __cuda_array_interface__), else None."""
    if offsets is None or isinstance(offsets, np.ndarray):
        return None
    try:
        cai = offsets.__cuda_array_interface__
    except (AttributeError, RuntimeError, TypeError):
        return None
    if np.dtype(cai["typestr"]) != np.dtype(np.int64) or len(cai["shape"]) != 1:
        return None
    if cai.get("strides") not in (None, (8,)) or cai["data"][0] == 0:
        return None
    return offsets


def _device_of(array):
    """The CUDA device ordinal of a CuPy or PyTorch array, else None."""
    device = getattr(array, "device", None)
    for name in ("id", "index"):
        ordinal = getattr(device, name, None)
        if isinstance(ordinal, int):
            return ordinal
    return None


def _to_host(offsets, what: str) -> np.ndarray:
    if isinstance(offsets, np.ndarray):
        return offsets
    module = type(offsets).__module__.split(".")[0]
    if module == "torch":
        return offsets.detach().cpu().numpy()
    if module == "cupy":
        return offsets.get()
    if module == "pycuda":
        return offsets.get()
    if hasattr(offsets, "__cuda_array_interface__"):
        try:
            import cupy
        except ImportError:
            raise TypeError(f"{what}: a __cuda_array_interface__ object needs CuPy to be read; "
                            "pass a NumPy, CuPy or PyTorch array") from None
        return cupy.asarray(offsets).get()
    try:
        host = np.asarray(offsets)
    except Exception as exc:
        raise TypeError(f"{what} must be an int32 or int64 array, got {type(offsets).__name__}") from exc
    if host.size == 0 and host.ndim == 1:
        return host.astype(np.int64)  # [] : no values at all
    if host.dtype == object or host.dtype.kind not in "iu":
        raise TypeError(f"{what} must be an int32 or int64 array, got {host.dtype}")
    if host.dtype.kind == "i" and host.dtype not in OFFSET_DTYPES:
        host = host.astype(np.int64)  # a Python list of ints
    return host
