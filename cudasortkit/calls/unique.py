"""unique: numpy.unique (NumPy 2.x) of host and device arrays.

axis=None flattens the input. Host inputs (NumPy, PyTorch CPU, lists) are
NumPy's own np.unique. Device inputs (CuPy, PyTorch CUDA, pycuda) take one
sort through the caller's `prepared` calls (so auto chooses it): of the
keys alone for plain unique and return_counts (a repeated shape's sort is
a prepared call), of (keys, positions) where first indices or the inverse
need the order (positions int32 below 2^31 keys, else int64). Then the
kernels of kernels/unique.cu, over tiles of the sorted keys: one pass
counts the run starts of every tile, the core's device scan turns the
counts into the tiles' offsets (and u, the number of unique values, read
back: the one host wait, DeviceState.read_back), and one pass writes the
values, first indices, sorted run starts (counts) and run ids or the
inverse (queued during the read-back into results made n long and cut to
u after it, between EARLY_FROM and EARLY_UP_TO keys). The (keys,
positions) sort and the inverse's sort are prepared pair calls for a
repeated shape. Integer and bool keys sorted alone (no first indices, no
inverse) take one pass instead of the count, scan and write:
csk_unique_compact finds each tile's offset by look-back and writes the
values (and the runs' starts) n long, cut to u after the wait. The inverse
(inverse[order[i]] = run of i) is, from
INVERSE_SORT_MIN keys on, a second sort of (order, run ids) by order, whose
values are the run ids in input order (csk_unique_inverse widens them): a
radix sort's coalesced passes instead of one random 8-byte write per key
(see inverse_by_sort).

NumPy's rules kept: values sorted (NaNs last); -0.0 == +0.0 and the value
kept is the first occurrence's (the stable sort puts it first, as NumPy's
return_index path; after a keys-only sort, which may canonicalise zeros and
NaNs, a pass finds the input's first zero and first NaN where such runs
exist); equal_nan=True makes every NaN one value (counted together, the
first NaN kept), False keeps each NaN (from the stable sort, so each keeps
its bits); return_index gives first occurrences; return_inverse has the
input's shape (axis=None); results are int64. With any return_* the result
is a tuple.

axis=0 of a 2-D array is unique rows (cudasortkit.calls.unique_rows); any
other axis of a NumPy, CuPy or PyTorch array is moved first and the rows of
the rest compared, as NumPy does. An axis of a 1-D array is axis=None, as in
NumPy (the NaNs of equal_nan=True are one value).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..build.corekernels import iota64
from ..build.render import CORE_PACKAGE
from ..dispatch.request import caller_ordering
from ..dtypes import KIND_FLOAT, is_bfloat16, key_kind, key_name
from ..gpu.arrays import Operand, Result, library_of, shape_of
from ..sdk.scan import DeviceScan
from .axes import Rows, normalize_axis
from .sort_prepared import adapter_for

UNIQUE_BLOCK = 256
#: Sorted keys a thread of csk_unique_tile_counts and csk_unique_write takes.
UNIQUE_ITEMS = 8
#: Keys a block of those takes: the tiles whose run starts are counted first.
UNIQUE_TILE = UNIQUE_BLOCK * UNIQUE_ITEMS
#: The macros kernels/unique.cu is built with.
UNIQUE_CONFIG = {"block_size": UNIQUE_BLOCK, "items_per_thread": UNIQUE_ITEMS}
#: csk_unique_compact's tiles: bigger than the other kernels', since its
#: look-back walks the tiles still running 32 at a time (one H200 run, int32,
#: 2,048-key tiles: 97 us at 2^24 keys, 370 at 2^26, 181 GKeys/s: the
#: look-back's pace, not memory's).
COMPACT_CONFIG = {"block_size": 512, "items_per_thread": 16}
COMPACT_TILE = COMPACT_CONFIG["block_size"] * COMPACT_CONFIG["items_per_thread"]
#: Blocks per SM the grid-stride kernels launch at most.
BLOCKS_PER_SM = 16
#: From this many keys the inverse is a sort of (order, run ids) by order, not
#: the scatter inverse[order[i]] = id. The scatter is one launch; the sort a few
#: (onesweep: a count and 3 passes of 8 bytes a key at 2^24, fewer below),
#: and through the general path tens of microseconds of host time, that only
#: pay off once the scatter's random 8-byte writes reach DRAM (a 32-byte
#: sector each): up to 2^22 keys its inverse (32 MB) stays in an H100's or
#: H200's 50 MB L2, where the writes merge. (At 2^24 on an H200 the scatter's
#: writes cost about 1.0 ms, the sort about 0.35 ms; 2^21 and 2^22 follow the
#: L2 rule, not a measurement.)
INVERSE_SORT_MIN = 1 << 23
#: From more than EARLY_FROM to EARLY_UP_TO keys the results are made n long
#: before the number of unique values u is known, and cut to u after the one
#: wait (a view, or a copy: gpu.arrays.cut_is_view), so that their host work
#: runs while the GPU sorts and the wait is for u alone. One H200 process,
#: early over made-after-u times (int32 uniform and in [0, 2^20), normal
#: float64; plain and with inverse and counts): 2^22 0.86-0.99 (1.25 where
#: a copy was made, then on the caller's stream), 2^24 0.89-0.97; at 2^20
#: 1.06-1.11, where the sort is shorter than the host's part. Beyond 2^24
#: n-long results would hold up to three times n x 8 bytes at once.
EARLY_FROM, EARLY_UP_TO = 1 << 20, 1 << 24
#: Integer and bool keys sorted alone take the one pass (csk_unique_compact)
#: up to this many keys. It writes the values and the runs' starts before u
#: is known, n long; beyond this that could hold up to 16 bytes a key beside
#: the sort's buffers, so larger calls count, scan and write u-long results.
ONE_PASS_UP_TO = 1 << 28
#: Below this many keys positions, flags, run ids and starts are 32-bit
#: (int32 arrays: every library has them, and as keys of the inverse sort
#: positions below 2^31 sort as unsigned words would).
NARROW_LIMIT = 1 << 31


def count_bytes_for(n: int) -> int:
    """Width of the positions, flags, run ids and starts of n keys."""
    return 4 if n < NARROW_LIMIT else 8


def inverse_by_sort(n: int) -> bool:
    """Whether return_inverse of n keys sorts (order, run ids) instead of
    scattering: from INVERSE_SORT_MIN keys on, while the positions are
    32-bit (the sort's keys are the int32 order)."""
    return INVERSE_SORT_MIN <= n < NARROW_LIMIT


class _Core:
    """The owner a unique Job names in errors; its kernels are the core's."""

    name = "unique"
    template_package = CORE_PACKAGE


def unique(prepared, a, return_index=False, return_inverse=False, return_counts=False,
           axis=None, equal_nan=True, stream=None):
    """numpy.unique(a, ...) of the same semantics; see the module docstring."""
    flags = (bool(return_index), bool(return_inverse), bool(return_counts))
    if axis is not None and len(shape_of(a)) == 1:
        # NumPy's rule: an axis of a 1-D array is axis=None (NaNs merge
        # under equal_nan), once the axis is checked
        normalize_axis(axis, 1)
        axis = None
    if axis is not None:
        return _unique_axis(a, axis, flags, bool(equal_nan), stream)
    rows = Rows(a, None, "a", stream)
    op = Operand(rows.flat, "a")
    op.key_dtype  # TypeError naming the supported dtypes
    if not op.on_device:
        results = _host_unique(op.array, flags, bool(equal_nan))
        if flags[1]:
            inverse_at = 1 + flags[0]
            results = (*results[:inverse_at], results[inverse_at].reshape(rows.shape),
                       *results[inverse_at + 1:])
        # as the caller's library returns them; the values in the keys' byte order
        results = (op.wrap_own(results[0]), *(op.wrap_host(r) for r in results[1:]))
        return results if any(flags) else results[0]
    state, ordering = caller_ordering(stream, [op])
    ordering.begin()
    try:
        results = _unique_device(prepared, op, flags, bool(equal_nan), state, ordering.caller,
                                 stream, rows.flat)
    finally:
        ordering.end()
    if flags[1]:
        inverse_at = 1 + flags[0]
        results = (*results[:inverse_at], results[inverse_at].reshape(rows.shape),
                   *results[inverse_at + 1:])
    return results if any(flags) else results[0]


def _host_unique(a: np.ndarray, flags, equal_nan: bool) -> tuple:
    """np.unique's tuple (values first) of flat host keys. bfloat16 through
    float32, so its NaNs follow the float rules as on the device (NumPy does
    not see ml_dtypes' bfloat16 NaNs as NaN); values are a's own keys."""
    if not is_bfloat16(a.dtype):
        found = np.unique(a, *flags, equal_nan=equal_nan)
        found = found if any(flags) else (found,)
        if a.dtype.kind == "f" and not flags[0]:
            _first_bits(a.reshape(-1), found[0], equal_nan)
        return found
    _, index, *rest = np.unique(a.astype(np.float32), True, flags[1], flags[2],
                                equal_nan=equal_nan)
    return (a[index], *((index,) if flags[0] else ()), *rest)


def _first_bits(flat: np.ndarray, values: np.ndarray, equal_nan: bool) -> None:
    """Give np.unique's float `values` (in place) the bits of their first
    occurrences in `flat`, as its return_index path does: its unstable sort
    may keep another zero (-0.0 or +0.0) or NaN payload. Only zeros and
    NaNs have equal values of other bits: the zero (one value), and the NaNs
    at the end (the first one under equal_nan, else every one in input order)."""
    if values.size == 0:
        return
    bits = np.dtype(f"u{flat.itemsize}")
    zero = np.flatnonzero(values == 0)
    if zero.size:
        values.view(bits)[zero] = flat.view(bits)[np.argmax(flat == 0)]
    if np.isnan(values[-1]):
        nans = flat.view(bits)[np.isnan(flat)]
        values.view(bits)[values.size - (1 if equal_nan else nans.size):] = \
            nans[:1] if equal_nan else nans


def _unique_device(prepared, op: Operand, flags, equal_nan: bool, state, caller: int, stream,
                   flat=None):
    """(values, [index], [inverse 1-D], [counts]) of device keys `op`
    (`flat`: the caller's array it reads, for a prepared sort)."""
    return_index, return_inverse, return_counts = flags
    n = op.n
    index64 = np.dtype(np.int64)
    if n == 0:
        empty = [Result(op.sized(0), op.dtype, state, None, "unique", caller).finish()]
        empty += [Result(op.sized(0), index64, state, None, "unique", caller).finish()
                  for f in flags if f]
        return tuple(empty)
    count_bytes = count_bytes_for(n)
    count_dtype = np.dtype(np.int32 if count_bytes == 4 else np.int64)  # kernels: unsigned
    by_order = needs_order(flags, key_kind(op.dtype) == KIND_FLOAT, equal_nan)
    by_sort = return_inverse and inverse_by_sort(n)
    pointer = _pointers(op.library, state)
    order = None
    if by_order:
        # One stable sort of (keys, 0 1 2 ...), chosen by auto: the sorted
        # keys and the order; stable, so the first key of every run is its
        # first occurrence.
        positions = Result(op.sized(n), count_dtype, state, None, "unique positions", caller)
        iota64(state, positions.ptr, n, owner="unique", index_bytes=count_bytes)
        sorted_keys, order = _sorted_pairs(prepared, op, flat, positions.finish(), "positions",
                                           stream)
    else:
        sorted_keys = _sorted_keys(prepared, op, flat, stream)
    sorted_ptr = pointer(sorted_keys, "sorted keys")
    order_ptr = 0 if order is None else pointer(order, "order", "values")
    keys_ptr = op.device_ptr(state)
    job = unique_job(state, op.dtype, n, keys_ptr)
    try:
        kernels = unique_kernels(job, op.dtype, n, flags, equal_nan)
        tiles = job.blocks(n, UNIQUE_TILE)
        if kernels.compact is None:
            offsets, first, total_ptr = queue_offsets(job, kernels.tiles, sorted_ptr, keys_ptr, n,
                                                      equal_nan)
        cap = counts_grid_cap(state)

        def count_runs(starts: int, length: int):
            """The counts result, `length` long, and its kernel queued: from
            the runs' sorted starts and u on the device."""
            counts = Result(op.sized(length), index64, state, None, "unique counts", caller)
            queue_counts(job, kernels.counts, cap, starts, total_ptr, n, length, counts.ptr)
            return counts

        def write(length: int) -> tuple:
            """The results, `length` long where u's are (u or n), and the
            work that writes them queued: (values, index, inverse, counts)."""
            values = Result(op.sized(length), op.dtype, state, None, "unique", caller)
            index = Result(op.sized(length), index64, state, None, "unique index", caller) \
                if return_index else None
            inverse = Result(op.sized(n), index64, state, None, "unique inverse", caller) \
                if return_inverse else None
            starts = int(job.alloc(length * count_bytes)) if return_counts else 0
            # The run ids are an array of the caller's library when the
            # inverse sort takes them as its values.
            ids = Result(op.sized(n), count_dtype, state, None, "unique run ids", caller) \
                if by_sort else None
            queue_write(job, kernels.write, tiles, keys_ptr, sorted_ptr, order_ptr, first, offsets,
                        n, equal_nan, values.ptr, 0 if index is None else index.ptr, starts,
                        0 if ids is None else ids.ptr,
                        0 if inverse is None or by_sort else inverse.ptr)
            counts = count_runs(starts, length) if return_counts else None
            if by_sort:
                # inverse[order[i]] = ids[i]: sorting (order, ids) by order
                # puts the ids in input order (order's keys are 0 .. n-1, so
                # a radix sort skips the digits above n's on the device).
                _, run_ids = _sorted_pairs(prepared, Operand(order, "order"), order,
                                           ids.finish(), "run ids", stream)
                job.launch(kernels.inverse, min(job.blocks(n, UNIQUE_BLOCK), cap), UNIQUE_BLOCK,
                           pointer(run_ids, "run ids", "values"), n, inverse.ptr)
                del run_ids  # alive until the work reading it is queued
            return values, index, inverse, counts

        if kernels.compact is not None:
            # The values (and the runs' starts) are written before u is known:
            # n long, cut to u after the one wait; the counts, u long, after it.
            values = Result(op.sized(n), op.dtype, state, None, "unique", caller)
            starts = int(job.alloc(n * count_bytes)) if return_counts else 0
            total_ptr = queue_compact(job, kernels.compact, sorted_ptr, n, equal_nan, values.ptr,
                                      starts)
            u = state.read_back(total_ptr, count_bytes)
            results = (values, None, None, count_runs(starts, u) if return_counts else None)
        else:
            # The one wait: u, the results' length. From EARLY_FROM to
            # EARLY_UP_TO keys the results are made n long and their work
            # queued while u is copied (the host's part runs while the GPU
            # sorts; the wait is for the copy alone), then cut to u; beyond
            # it they are made once u is known.
            early = EARLY_FROM < n <= EARLY_UP_TO
            made = []
            u = state.read_back(total_ptr, count_bytes,
                                (lambda: made.append(write(n))) if early else None)
            results = made[0] if early else write(u)
    finally:
        job.finish()
    sorted_keys = order = None  # alive until the work reading them is queued
    values, index, inverse, counts = results
    return tuple(r.finish() if r is inverse else r.finish_first(u)
                 for r in (values, index, inverse, counts) if r is not None)


def unique_job(state, dtype, n: int, keys_in: int = 0):
    """The Job unique's kernels run under for n keys of `dtype` (errors name
    "unique"; keys_in: the input keys, which float keys' specials read)."""
    from ..sdk.job import Job

    return Job(_Core(), state, dtype=key_name(dtype), n=n, keys_in=keys_in, keys_out=0,
               config=UNIQUE_CONFIG)


def unique_defines(dtype, n: int) -> dict:
    """The macros every kernel of unique.cu is built with for n keys of
    `dtype` (besides the config): its counts' width, and whether the keys
    are bools."""
    return {"unique_count_bytes": count_bytes_for(n),
            "unique_bool": int(np.dtype(dtype) == np.bool_)}


class UniqueKernels(NamedTuple):
    """The kernels of unique.cu one call runs (None: not run), chosen and
    compiled by unique_kernels, once for a prepared unique."""

    compact: object  # the one pass: integer and bool keys sorted alone
    tiles: tuple     # queue_offsets' (tile counts, first zero and NaN or None)
    write: object    # csk_unique_write, after queue_offsets
    counts: object   # csk_unique_counts, for return_counts
    inverse: object  # csk_unique_inverse, for the inverse by sort


def unique_kernels(job, dtype, n: int, flags, equal_nan: bool) -> UniqueKernels:
    """The kernels a unique of n keys of `dtype` with `flags` runs, of the
    job's key dtype. Keys sorted alone (needs_order) take the one pass
    where they are integers or bools, up to ONE_PASS_UP_TO keys; floats
    sorted alone find their first zero and NaN in the input; everything
    else counts the tiles' runs, scans and writes."""
    defines = unique_defines(dtype, n)
    floats = key_kind(dtype) == KIND_FLOAT
    by_order = needs_order(flags, floats, equal_nan)

    def kernel(name: str, wanted: bool = True):
        return job.kernel("unique.cu", name, defines) if wanted else None

    if not by_order and not floats and n <= ONE_PASS_UP_TO:
        compact = job.kernel("unique.cu", "csk_unique_compact", defines, COMPACT_CONFIG)
        tiles = write = None
    else:
        compact = None
        tiles = (kernel("csk_unique_tile_counts"),
                 kernel("csk_unique_first_special", floats and not by_order))
        write = kernel("csk_unique_write")
    return UniqueKernels(compact, tiles, write, kernel("csk_unique_counts", flags[2]),
                         kernel("csk_unique_inverse", flags[1] and inverse_by_sort(n)))


def counts_grid_cap(state) -> int:
    """The most blocks csk_unique_counts and csk_unique_inverse launch
    (grid-stride kernels): BLOCKS_PER_SM a streaming multiprocessor."""
    return state.limits.sm_count * BLOCKS_PER_SM


def queue_write(job, kernel, tiles: int, keys_ptr: int, sorted_ptr: int, order_ptr: int,
                first: int, offsets: int, n: int, equal_nan: bool, values: int, index: int,
                starts: int, ids: int, inverse: int) -> None:
    """csk_unique_write (`kernel`) over the `tiles` of n sorted keys, after
    queue_offsets (`first`, `offsets`): the values, and where their
    addresses are not 0 the first indices, the runs' starts, the run ids
    and the scattered inverse."""
    job.launch(kernel, tiles, UNIQUE_BLOCK, keys_ptr, sorted_ptr, order_ptr, first, offsets, n,
               int(equal_nan), values, index, starts, ids, inverse)


def queue_counts(job, kernel, cap: int, starts: int, total_ptr: int, n: int, length: int,
                 counts: int) -> None:
    """csk_unique_counts (`kernel`): the u counts of n keys' runs from
    their sorted starts, into `counts` (`length` long, u or more; u read on
    the device at total_ptr), at most `cap` blocks."""
    job.launch(kernel, min(job.blocks(length, UNIQUE_BLOCK), cap), UNIQUE_BLOCK, starts,
               total_ptr, n, counts)


def offsets_parts(n: int) -> list:
    """The temporaries queue_offsets takes for n keys, as Job.alloc_parts
    parts: the tiles' counts (then offsets), the specials (2 x 8 bytes of
    first positions, then the word of runs seen) and the scan's level sums."""
    tiles, count_bytes = -(-n // UNIQUE_TILE), count_bytes_for(n)
    return [("tiles", tiles * count_bytes), ("special", 32),
            ("scan", DeviceScan.buffer_bytes(tiles, count_bytes))]


def queue_offsets(job, kernels, sorted_ptr: int, keys_ptr: int, n: int, equal_nan: bool,
                  parts: dict | None = None) -> tuple:
    """The runs before each UNIQUE_TILE tile of n sorted keys, queued on the
    job's stream: the tiles' run starts counted (`kernels`: UniqueKernels.tiles),
    then scanned into their offsets. Where the keys were sorted alone and
    are floats (kernels[1] given), zeros and NaNs take their bits from the
    input's first zero and first NaN: the tile counts clear the bits of a
    word for the runs they see, and csk_unique_first_special finds those
    runs' first positions in the input. `parts`: offsets_parts(n)'s
    temporaries, allocated by the caller (None: here). Returns (offsets,
    first positions or 0, the address of u: the scan's total) for
    csk_unique_write."""
    tiles = job.blocks(n, UNIQUE_TILE)
    count_bytes = count_bytes_for(n)
    tile_counts, first_special = kernels
    if parts is None:
        parts = job.alloc_parts(offsets_parts(n))
    first, specials = (parts["special"], parts["special"] + 16) if first_special else (0, 0)
    if first_special:
        job.memset32(first, 0xFFFFFFFF, 5)
    job.launch(tile_counts, tiles, UNIQUE_BLOCK, sorted_ptr, n, int(equal_nan), parts["tiles"],
               specials)
    if first_special:
        job.launch(first_special, tiles, UNIQUE_BLOCK, keys_ptr, n, specials, first)
    scan = DeviceScan(job, tiles, count_bytes, buffer=parts["scan"])
    scan(parts["tiles"], parts["tiles"], inclusive=False)  # the tiles' offsets; u the total
    return parts["tiles"], first, scan.total_ptr


def offsets_total_at(n: int) -> tuple:
    """Where queue_offsets of n keys leaves u among offsets_parts(n): (part,
    byte offset in it), the scan's total."""
    return "scan", DeviceScan.total_offset(-(-n // UNIQUE_TILE), count_bytes_for(n))


def compact_parts(n: int) -> list:
    """The temporaries queue_compact takes for n keys, as Job.alloc_parts
    parts: its tiles' look-back status words and ticket, and u."""
    return [("status", (-(-n // COMPACT_TILE) + 1) * 8), ("total", 8)]


def queue_compact(job, kernel, sorted_ptr: int, n: int, equal_nan: bool, values_ptr: int,
                  starts_ptr: int, parts: dict | None = None) -> int:
    """The one pass over n sorted keys, queued on the job's stream: its
    tiles' look-back status words and ticket (compact_parts(n), allocated
    by the caller, else here; zeroed first), then `kernel`
    (UniqueKernels.compact) writing the values (and the runs' starts, where
    starts_ptr is not 0) n long. Returns the address of u, the number of
    unique values, once the pass has run."""
    tiles = job.blocks(n, COMPACT_TILE)
    if parts is None:
        parts = job.alloc_parts(compact_parts(n))
    status = parts["status"]
    job.memset32(status, 0, 2 * (tiles + 1))  # the status words, then the ticket
    job.launch(kernel, tiles, COMPACT_CONFIG["block_size"], sorted_ptr, n, int(equal_nan),
               status, status + tiles * 8, values_ptr, starts_ptr, parts["total"])
    return parts["total"]


def needs_order(flags, floats: bool, equal_nan: bool) -> bool:
    """Whether unique sorts (keys, positions) rather than the keys alone:
    for first indices and the inverse, and for float keys without
    equal_nan, whose every NaN is a value of its own (its bits the input's,
    NaN by NaN in input order)."""
    return bool(flags[0] or flags[1] or (floats and not equal_nan))


def _pointers(library: str, state):
    """pointer(array, what, role): the device address of a result array the
    sort handed back (the adapter's direct read for CuPy and PyTorch)."""
    adapter = adapter_for(library)
    if adapter is not None:
        return lambda array, what, role="keys": adapter.pointer(array)
    return lambda array, what, role="keys": Operand(array, what, role).device_ptr(state)


def _sorted_keys(prepared, op: Operand, flat, stream):
    """The keys sorted alone (auto; unstable: equal keys are alike bit for
    bit but for zeros and NaNs, which come from the input), through the
    prepared call of a repeated shape where there is one."""
    if flat is not None and stream is None:
        call = prepared.find("sort", flat, False, False, "auto")
        if call is not None:
            return call(flat)[0]
    keys, _ = prepared.run("sort", op, None, False, False, "auto", stream=stream,
                           caller=flat if stream is None else None)
    return keys


def _sorted_pairs(prepared, op: Operand, flat, values, what: str, stream):
    """(sorted keys, values in their order) of a stable sort of `op` (the
    caller's array `flat`, or an array of ours) carrying `values` (an array
    of op's library, `what`), through the prepared call of a repeated
    shape where there is one."""
    if flat is not None and stream is None:
        call = prepared.find_pairs(flat, values, False, "auto")
        if call is not None:
            return call(flat, values=values)
    return prepared.run("pairs", op, Operand(values, what, "values"), False, True, "auto",
                        stream=stream, caller=flat if stream is None else None)


# ----------------------------------------------------------------- axis=int
def _unique_axis(a, axis, flags, equal_nan: bool, stream):
    """numpy.unique(a, axis=axis): the 2-D rows of cudasortkit.calls.unique_rows;
    another axis (or N-D) of a NumPy, CuPy or PyTorch array is moved first
    and the rest of each slice compared as one row, as NumPy does."""
    library = library_of(a)
    if library == "other":
        a = np.asarray(a)
        library = "numpy"
    shape = tuple(int(x) for x in (a.shape if hasattr(a, "shape")
                                   else a.__cuda_array_interface__["shape"]))
    if not shape:
        raise ValueError("unique: axis must be None for a 0-d array (numpy.AxisError in NumPy)")
    ax = normalize_axis(axis, len(shape))
    from .unique_rows import unique_rows

    def call(rows2d):
        return unique_rows(rows2d, return_index=flags[0], return_inverse=flags[1],
                           return_counts=flags[2], equal_nan=equal_nan, stream=stream)

    if len(shape) == 2 and ax == 0:
        return call(a)
    if library not in ("numpy", "cupy", "torch", "torch-cpu"):
        raise ValueError(f"unique: axis={axis} of a {len(shape)}-D {type(a).__name__} is not "
                         "supported; axis=0 of a 2-D array or axis=None is, and any axis of a "
                         "NumPy, CuPy or PyTorch array")
    rest = shape[:ax] + shape[ax + 1:]
    moved = _moveaxis(a, library, ax, 0)
    rows2d = moved.reshape(shape[ax], int(np.prod(rest, dtype=np.int64)))
    result = call(rows2d)
    values = result[0] if any(flags) else result
    values = _moveaxis(values.reshape((values.shape[0],) + rest), library, 0, ax)
    return (values, *result[1:]) if any(flags) else values


def _moveaxis(a, library: str, source: int, destination: int):
    """a with axis `source` moved to `destination`, C-contiguous, same library."""
    if source == destination:
        return a
    if library == "numpy":
        return np.ascontiguousarray(np.moveaxis(a, source, destination))
    if library == "cupy":
        import cupy

        return cupy.ascontiguousarray(cupy.moveaxis(a, source, destination))
    import torch

    if a.dtype == torch.bool:
        # torch's copy of a bool tensor writes its truth values (a byte 2
        # becomes 1): moved as bytes, so the rows keep their own bytes
        return a.view(torch.uint8).movedim(source, destination).contiguous().view(torch.bool)
    return a.movedim(source, destination).contiguous()
