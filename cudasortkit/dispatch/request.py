"""A call's arguments become a Request: the checks every public function
shares (flags, progress, index dtype, key range), the Request itself, and
the caller's device and stream (`caller_ordering`, gpu/streams.py's
Ordering). Nothing here runs a plugin."""
from __future__ import annotations

import numbers

import numpy as np

from ..dtypes import INDEX_DTYPE, INDEX_DTYPES, INT32_INDEX_LIMIT, key_name
from ..dtypes import value_bytes as _value_bytes
from ..gpu.arrays import Operand
from ..gpu.device import get_device
from ..gpu.streams import Ordering, handle_of
from ..sdk.plugin import Request


def check_flags(descending, stable, algorithm) -> None:
    """descending and stable are bools (stable=None was made False by the
    caller: NumPy's and PyTorch's default), algorithm a name."""
    if not isinstance(descending, (bool, np.bool_)):
        raise TypeError(f"descending must be True or False, got {descending!r}")
    if not isinstance(stable, (bool, np.bool_)):
        raise TypeError(f"stable must be True, False or None (the default), got {stable!r}")
    check_algorithm(algorithm)


def check_algorithm(algorithm) -> None:
    """Every call's rule: algorithm is a plugin's name or "auto" (a str)."""
    if not isinstance(algorithm, str):
        raise TypeError(f"algorithm must be a plugin name or 'auto' (a str), got {algorithm!r}")


def check_progress(progress) -> None:
    """One rule on every path, first call or repeat: progress is a bool, and
    True needs tqdm (the bar itself shows only while a host array takes the
    pipeline, docs/host.md)."""
    if not isinstance(progress, (bool, np.bool_)):
        raise TypeError(f"progress must be True or False, got {progress!r}")
    if progress:
        try:
            import tqdm  # noqa: F401
        except ImportError:
            raise ImportError("progress=True needs the tqdm package: pip install tqdm "
                              "(or pip install cudasortkit[tune])") from None




def check_index_dtype(index_dtype, n: int) -> np.dtype:
    """argsort's index_dtype as a NumPy dtype (int64 or int32); int32 needs
    n < 2^31. Errors name index_dtype."""
    try:
        dt = np.dtype(index_dtype)
    except TypeError:
        raise TypeError(f"index_dtype must be numpy.int64 or numpy.int32, got {index_dtype!r}") from None
    if dt not in INDEX_DTYPES.values():
        raise TypeError(f"index_dtype must be numpy.int64 or numpy.int32, got {dt}")
    if dt.itemsize == 4 and n >= INT32_INDEX_LIMIT:
        raise ValueError(f"index_dtype=int32 holds positions below 2^31; this array has {n} keys "
                         f"(use int64)")
    return dt


def check_key_range(key_range, dtype: np.dtype):
    """(lo, hi) as Python ints, or None; errors name key_range."""
    if key_range is None:
        return None
    if dtype.kind not in "biu":
        raise TypeError(f"key_range applies to integer keys only, not {dtype}")
    try:
        lo, hi = key_range
    except (TypeError, ValueError):
        raise TypeError(f"key_range must be a pair (lo, hi) of integers, got {key_range!r}") from None
    for bound in (lo, hi):
        if isinstance(bound, (bool, np.bool_)) or not isinstance(bound, numbers.Integral):
            raise TypeError(f"key_range must be a pair (lo, hi) of integers, got {key_range!r}")
    lo, hi = int(lo), int(hi)
    if lo > hi:
        raise ValueError(f"key_range=(lo, hi) needs lo <= hi, got {key_range!r}")
    return lo, hi


def make_request(kind, keys: Operand, values: Operand | None, descending, stable,
                 key_range=None, segments=None, index_dtype=INDEX_DTYPE, **options) -> Request:
    if kind == "sort":
        vbytes = 0
    elif kind == "argsort":
        vbytes = index_dtype.itemsize
    else:
        vbytes = _value_bytes(values.dtype)
    return Request.from_fields(kind=kind, dtype=key_name(keys.dtype), n=keys.n, stable=bool(stable),
                               descending=bool(descending), value_bytes=vbytes,
                               on_device=keys.on_device,
                               key_range=check_key_range(key_range, keys.dtype),
                               options=options, range_probe=RangeProbe(keys), segments=segments)


class RangeProbe:
    """Request.range_probe: (min, max) of integer keys, measured once on first
    call (NumPy for host arrays, one GPU reduction for device arrays)."""

    def __init__(self, keys: Operand):
        self.keys = keys
        self.done = False
        self.value = None

    def __call__(self):
        if not self.done:
            self.value = self._measure()
            self.done = True
        return self.value

    def _measure(self):
        keys = self.keys
        if keys.n == 0 or keys.key_dtype.kind not in "iu":
            return None
        if not keys.on_device:
            return int(keys.array.min()), int(keys.array.max())
        from ..build.corekernels import key_minmax

        state = get_device(keys.ordinal)
        return key_minmax(state, keys.device_ptr(state), keys.n, keys.key_dtype)


def caller_ordering(stream, operands):
    """(device state, Ordering) for a call that touches caller's device
    memory, or (None, None) for a host-only call: host inputs are read and
    host results written synchronously, so no stream needs to wait."""
    caller = handle_of(stream) if stream is not None else None
    on_device = [x for x in operands if x is not None and x.on_device]
    if not on_device:
        return None, None
    first = on_device[0]
    state = get_device(first.ordinal)
    for x in on_device[1:]:
        if x.ordinal is not None and first.ordinal is not None and x.ordinal != first.ordinal:
            raise ValueError(f"{first.what} and {x.what} are on different devices "
                             f"({first.ordinal}, {x.ordinal})")
    current = False
    if caller is None:
        # No stream= given: the caller's stream is the current one of the
        # arrays' library. PyTorch's is asked for on the tensors' device, so
        # torch results allocated there need not ask again (Ordering.allocate_on
        # is None). CuPy's is the current device's, which need not be the
        # arrays': its results ask on theirs.
        current = all(x.library == "torch" for x in on_device)
        caller = first.current_stream()
    if stream is not None:  # strided arrays' copies read them in the given stream's order
        for x in on_device:
            x.copy_in_order(caller)
    waits = [x.interface_stream for x in on_device if x.interface_stream is not None]
    return state, Ordering(state, caller, waits, current)

