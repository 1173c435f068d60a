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

from ..build.corekernels import OFFSET_BUCKETS as LENGTH_BUCKETS, offsets_check

#: Offsets dtypes accepted from callers.
OFFSET_DTYPES = (np.dtype(np.int32), np.dtype(np.int64))


class Segments:
    """How n keys split into segments (see the module docstring)."""

    __slots__ = ("count", "max_len", "uniform", "key", "by_length", "_offsets", "_lengths",
                 "_device", "_caller", "_state")

    def __init__(self, count: int, max_len: int, uniform: bool, offsets: np.ndarray | None,
                 lengths: np.ndarray | None = None, by_length: tuple | None = None):
        self.count = int(count)
        #: Every row's length (uniform), the longest segment's (ragged).
        self.max_len = int(max_len)
        self.uniform = bool(uniform)
        self._offsets = offsets
        self._lengths = lengths
        #: Ragged: (segments, keys) per length bucket, NumPy int64 arrays of
        #: LENGTH_BUCKETS: bucket b holds the lengths whose (length - 1) has
        #: bit length b (lengths 0 and 1 in bucket 0); see longer().
        self.by_length = by_length
        #: What the selector's decision cache keys on: kind, and segments and
        #: longest segment as ceil(log2) buckets (2^k belongs with the
        #: shorter ones, so a plugin's limit of 2^k keys never splits a bucket).
        self.key = ("rows" if uniform else "ragged", max(self.count - 1, 0).bit_length(),
                    max(self.max_len - 1, 0).bit_length())
        self._device = None
        #: The caller's own int64 device offsets, when they can be used as is.
        self._caller = None
        #: The device holding _device (offsets checked there), else None.
        self._state = None

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
        buckets = np.frexp(np.maximum(lengths - 1, 0).astype(np.float64))[1]
        by_length = (np.bincount(buckets, minlength=LENGTH_BUCKETS).astype(np.int64),
                     np.bincount(buckets, weights=lengths, minlength=LENGTH_BUCKETS).astype(np.int64))
        segments = cls(len(offsets) - 1, int(lengths.max()) if len(lengths) else 0, False,
                       offsets, lengths, by_length)
        segments._caller = _device_int64(given)
        return segments

    @classmethod
    def checked_on_device(cls, offsets, n: int, state, what: str = "offsets") -> "Segments":
        """Ragged segments of n keys on `state`'s device from CUB-style
        offsets (the rules of check_offsets), checked and measured there by
        one pass (corekernels.offsets_check) on its stream, which the caller
        has ordered after the caller's own work. Host offsets are uploaded,
        int32 device offsets widened on the device; int64 device offsets are
        used as they are. Raises as check_offsets does, before anything is
        sorted; the host reads back only the pass's statistics."""
        device = _device_array(offsets)
        if device is not None:
            cai = device.__cuda_array_interface__
            dtype, length = np.dtype(cai["typestr"]), int(cai["shape"][0])
        else:
            host = _host_form(offsets, what)
            dtype, length = np.dtype(np.int64), len(host)
        if length < 1:
            raise ValueError(f"{what} needs segments + 1 values (at least one: [0] for no segments)")
        caller = buf = None
        if device is not None and dtype == np.int64:
            caller, source, widened = device, int(cai["data"][0]), 0
        else:
            buf = state.allocate(length * 8, "segment offsets")
            widened = int(buf)
            if device is None:
                state.cuda.memcpy_htod_async(widened, host, state.stream)
                source, widened = widened, 0
            else:
                source = int(cai["data"][0])
        int64_at = int(cai["data"][0]) if caller is not None else int(buf)  # the int64 offsets
        stats = offsets_check(state, source, length - 1, dtype == np.int64, widened)
        if stats["first"] != 0:
            raise ValueError(f"{what}[0] must be 0, got {stats['first']}")
        if stats["last"] != n:
            raise ValueError(f"{what}[-1] must equal the number of keys ({n}), got {stats['last']}")
        if stats["bad"] is not None:
            s = stats["bad"]
            pair = np.empty(2, np.int64)
            state.cuda.memcpy_dtoh(pair, int64_at + 8 * s)
            raise ValueError(f"{what} must not decrease: {what}[{s}] = {pair[0]} > "
                             f"{what}[{s + 1}] = {pair[1]}")
        segments = cls(length - 1, stats["longest"], False, None,
                       by_length=(stats["segments"], stats["keys"]))
        segments._caller, segments._device, segments._state = caller, buf, state
        return segments

    @property
    def local_indices(self) -> bool:
        """True: argsort indices count from each segment's start (rows)."""
        return self.uniform

    @property
    def row_len(self) -> int:
        """Uniform rows: each row's length."""
        return self.max_len

    @property
    def offsets(self) -> np.ndarray | None:
        """Ragged: the validated int64 offsets on the host (count + 1 of
        them; read back from the device once when they were checked there)."""
        if self._offsets is None and not self.uniform:
            host = np.empty(self.count + 1, np.int64)
            state = self._state
            state.stream.synchronize()
            state.cuda.memcpy_dtoh(host, self.offsets_ptr(state))
            self._offsets = host
        return self._offsets

    @property
    def lengths(self) -> np.ndarray | None:
        """Ragged: every segment's length (int64, on the host)."""
        if self._lengths is None and not self.uniform:
            self._lengths = np.diff(self.offsets)
        return self._lengths

    def longer(self, lo: int, hi: int | None = None) -> tuple:
        """Ragged: (segments, keys) of the segments longer than `lo` and at
        most `hi` keys long (None: no upper bound); lo and hi are powers of
        two (bucket bounds)."""
        first = _bucket_bound(lo) + 1
        last = LENGTH_BUCKETS if hi is None else _bucket_bound(hi) + 1
        segs, keys = self.by_length
        return int(segs[first:last].sum()), int(keys[first:last].sum())

    def offsets_ptr(self, state) -> int:
        """Ragged: device address of the int64 offsets (uploaded once, on
        `state`'s stream, kept as long as this object)."""
        if self._caller is not None and _device_of(self._caller) in (state.ordinal, None):
            return int(self._caller.__cuda_array_interface__["data"][0])
        if self._device is None:
            buf = state.allocate(self._offsets.nbytes, "segment offsets")
            state.cuda.memcpy_htod_async(int(buf), self._offsets, state.stream)
            self._device = buf
        return int(self._device)

    def __repr__(self):
        kind = f"{self.count} rows of {self.max_len}" if self.uniform else \
            f"{self.count} ragged segments, the longest {self.max_len}"
        return f"Segments({kind})"


def _bucket_bound(length: int) -> int:
    """The bucket whose largest length is `length` (a power of two)."""
    if length < 1 or length & (length - 1):
        raise ValueError(f"segment length bounds are powers of two, got {length}")
    return max(length - 1, 0).bit_length()


def check_offsets(offsets, n: int, what: str = "offsets") -> tuple:
    """CUB-style offsets as validated int64 host values and the segments'
    lengths (both NumPy): a 1-D int32 or int64 array (NumPy, a list, or a
    device array, which is read back) of segments + 1 values, offsets[0] ==
    0, never decreasing, offsets[-1] == n. Anything else raises
    TypeError/ValueError before anything is sorted. Int64 offsets on the
    host are not copied (fresh megabyte-sized host arrays cost page faults)."""
    host = _host_form(offsets, what)
    if len(host) < 1:
        raise ValueError(f"{what} needs segments + 1 values (at least one: [0] for no segments)")
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


def _host_form(offsets, what: str) -> np.ndarray:
    """The offsets on the host as a contiguous 1-D int64 NumPy array (not
    copied when they are one); wrong shapes and dtypes raise."""
    host = _to_host(offsets, what)
    if host.ndim != 1:
        raise ValueError(f"{what} must be 1-D (segments + 1 values), got shape {host.shape}")
    if host.dtype not in OFFSET_DTYPES:
        raise TypeError(f"{what} must be int32 or int64, got {host.dtype}")
    return np.ascontiguousarray(host, dtype=np.int64)


def _device_array(offsets):
    """`offsets` if it is a contiguous 1-D int32/int64 device array with at
    least one value (read through its __cuda_array_interface__), else None."""
    if offsets is None or isinstance(offsets, np.ndarray):
        return None
    try:
        cai = offsets.__cuda_array_interface__
    except (AttributeError, RuntimeError, TypeError):
        return None
    if np.dtype(cai["typestr"]) not in OFFSET_DTYPES or len(cai["shape"]) != 1:
        return None
    itemsize = np.dtype(cai["typestr"]).itemsize
    if cai.get("strides") not in (None, (itemsize,)) or cai["data"][0] == 0:
        return None
    return offsets


def _device_int64(offsets):
    """`offsets` if it is a contiguous 1-D int64 device array, else None."""
    device = _device_array(offsets)
    if device is None or np.dtype(device.__cuda_array_interface__["typestr"]) != np.int64:
        return None
    return device


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
    rule = (f"{what} must be an int32 or int64 array (CUB-style: segments + 1 values from 0 "
            "to len(keys))")
    if offsets is None:
        raise TypeError(f"{rule}, got None")
    try:
        host = np.asarray(offsets)
    except Exception as exc:
        raise TypeError(f"{rule}, got {type(offsets).__name__}") from exc
    if host.size == 0 and host.ndim == 1:
        return host.astype(np.int64)  # [] : no values at all
    if host.dtype == object or host.dtype.kind not in "iu":
        raise TypeError(f"{rule}, got {host.dtype}")
    if host.dtype.kind == "i" and host.dtype not in OFFSET_DTYPES:
        host = host.astype(np.int64)  # a Python list of ints
    return host
