"""Large host (NumPy) arrays sorted by a GPU plugin at PCIe speed.

dispatch.execute.run hands a GPU plugin's host request here when `takes()` says so:
host keys (and values, and out=/values_out= targets) of at least
MIN_BYTES, or too many to sort on the device in one piece. The plugin and
config are the ones the selector chose; this module only moves the data.

- In core (the whole request fits the device budget): keys (and values)
  go up through the pipe (cudasortkit/host/transfer.py), the plugin sorts them in
  one Job, results come down through the pipe into the host result.
- Out of core: cudasortkit/host/outofcore.py (splitters, buckets, in-core sorts).

The device budget is the device's free memory, capped by
cudasortkit.host.memlimit (set_device_memory_limit, CUDASORTKIT_DEVICE_MEMORY_LIMIT).
"""
from __future__ import annotations


import numpy as np

from ..gpu.arrays import check_out
from .. import settings
from ..dtypes import INDEX_DTYPE
from .memlimit import device_memory_limit
from ..launch.outputs import free_all, index_buffer, poison, temporary
from ..launch.run import bytes_per_key, reserve, run_job
from .memory import Prefault
from .transfer import Pipe

#: Host requests of fewer bytes of keys keep execute's plain path (one
#: pageable copy each way): the pipeline's threads and events cost more than
#: they save there. CUDASORTKIT_HOST_PIPELINE_MIN overrides it.
MIN_BYTES = 8 << 20
#: Share of the device's free memory a host sort plans to use.
FREE_SHARE = 0.85


def min_bytes() -> int:
    return settings.host_pipeline_min() or MIN_BYTES


def device_budget(state) -> int:
    """Bytes of device memory a host sort may plan to use now."""
    free = int(state.free_memory() * FREE_SHARE)
    limit = device_memory_limit()
    return free if limit is None else min(free, limit)


def fits(request, n: int, budget: int) -> bool:
    return n * bytes_per_key(request) + reserve(budget) <= budget


def takes(request, keys, values, targets, state) -> bool:
    """True if this module sorts the request: one array (not segments),
    every array on the host, and large (MIN_BYTES of keys) or too large for
    the device in one piece."""
    if keys.on_device or (values is not None and values.on_device) or keys.n < 2:
        return False
    if request.segments is not None:  # rows or ragged segments: execute's own path
        return False
    if request.kind == "argsort" and request.value_bytes != INDEX_DTYPE.itemsize:
        return False  # int32 indices (n < 2^31): execute's own path
    if any(t is not None and t.on_device for t in targets.values()):
        return False
    if keys.nbytes >= min_bytes():
        return True
    return device_memory_limit() is not None and not fits(request, keys.n, device_budget(state))


def run(plugin, config, request, keys, values, targets, state, expected, progress=None):
    """Sort the host request with `plugin`; (keys result, values result) as
    dispatch.execute.run returns them. `expected` are the errors a plugin's run() may
    raise (sdk.plugin.RUN_ERRORS). `progress`: True for a tqdm bar."""
    progress = request.options.get("progress", False) if progress is None else progress
    outputs = Outputs(request, keys, values, targets)
    with outputs.prefault, Progress(progress, outputs.traffic(request, keys), request) as bar:
        budget = device_budget(state)
        if fits(request, keys.n, budget):
            try:
                with Pipe(state, progress=bar.update) as pipe:
                    sort_in_core(plugin, config, request, state, pipe,
                                 outputs.sources(keys, values), outputs, expected)
                    pipe.drain()
                return outputs.results(keys, values)
            except MemoryError:  # the plugin needed more than planned: go out of core
                state.pool.free_held()
                budget = min(budget, keys.n * bytes_per_key(request)) // 2
        from . import outofcore

        outofcore.sort(plugin, config, request, state, keys, values, outputs, budget, expected, bar)
    return outputs.results(keys, values)


class Outputs:
    """The host arrays a host sort writes: keys (None for argsort), values
    (indices for argsort, the caller's payload for pairs), fresh or the
    caller's out=/values_out=. Fresh ones are paged in from the start
    (`prefault`, cudasortkit/host/memory.py), while the keys go up."""

    def __init__(self, request, keys, values, targets):
        n = keys.n
        self.kind = request.kind
        self.keys = self.values = None
        self._key_target = self._value_target = None
        if request.kind != "argsort":
            self._key_target = targets.get("out")
            self.keys = self._array(self._key_target, n, keys.dtype, "out")
        if request.kind == "argsort":
            self.values = np.empty(n, INDEX_DTYPE)
        elif request.kind == "pairs":
            self._value_target = targets.get("values_out")
            self.values = self._array(self._value_target, n, values.dtype, "values_out")
        self.prefault = Prefault(self.keys if self._key_target is None else None,
                                 self.values if self._value_target is None else None)

    @staticmethod
    def _array(target, n, dtype, what):
        if target is None:
            return np.empty(n, dtype)
        check_out(target, n, dtype, what)
        # an out= of the other byte order is written through a native array
        # (results() converts into it, as NumPy would)
        return target.array if target.dtype == dtype else np.empty(n, dtype)

    def sources(self, keys, values):
        """(keys, values or None) as host arrays to upload."""
        return keys.array, (values.array if values is not None else None)

    @staticmethod
    def traffic(request, keys) -> int:
        """Bytes an in-core sort moves (up and down): what the bar counts."""
        from ..dtypes import itemsize

        kb, vb = itemsize(request.dtype), request.value_bytes
        up = keys.n * (kb + (vb if request.kind == "pairs" else 0))
        down = keys.n * ((kb if request.kind != "argsort" else 0) + vb)
        return up + down

    def results(self, keys, values):
        k = v = None
        if self.kind != "argsort":
            k = self._into(self._key_target, self.keys) if self._key_target is not None \
                else keys.wrap_own(self.keys)
        if self.kind == "argsort":
            v = keys.wrap_host(self.values)
        elif self.kind == "pairs":
            v = (self._into(self._value_target, self.values) if self._value_target is not None
                 else values.wrap_own(self.values))
        return k, v

    @staticmethod
    def _into(target, written):
        """The caller's out= array, holding `written` (converted into it
        where it is of the other byte order)."""
        if written is not target.array:
            target.write_host(written)
        return target.original


def sort_in_core(plugin, config, request, state, pipe, sources, outputs, expected, *,
                 index_start=None):
    """Sort the host arrays `sources` = (keys, values or None) on the device
    in one Job and queue the results' download into `outputs` (host arrays
    .keys / .values, either may be None: not wanted). index_start: argsort
    indices start there (a piece of a bigger array), else 0 and the plugin
    may make them itself. Returns when the downloads are queued."""
    from ..dtypes import itemsize

    host_keys, host_values = sources
    n = len(host_keys)
    kb, vb = itemsize(request.dtype), request.value_bytes
    bufs = []
    try:
        def who(what):
            return f"{plugin.name}: {what} of a host sort of {n:,} keys"

        keys_in = temporary(state, bufs, n * kb, who("keys"))
        keys_out = temporary(state, bufs, n * kb, who("sorted keys"))
        values_in = values_out = 0
        if vb:
            values_out = temporary(state, bufs, n * vb, who("sorted values"))
        pipe.upload(keys_in, host_keys)
        if request.kind == "pairs":
            values_in = temporary(state, bufs, n * vb, who("values"))
            pipe.upload(values_in, host_values)
        elif request.kind == "argsort" and (index_start is not None or not plugin.makes_indices):
            from .kernels import iota64_from

            values_in = index_buffer(state, bufs, n, who("indices"), iota64_from, vb,
                                     index_start or 0)
        poison(state, keys_out, n * kb, values_out, n * vb)
        run_job(plugin, config, request, state, n, keys_in, keys_out, values_in, values_out,
                expected)
        pipe.after_device_work()
        if outputs.keys is not None:
            pipe.download(outputs.keys, keys_out)
        if vb and outputs.values is not None:
            pipe.download(outputs.values, values_out)
        pipe.downloads_done_event()
    finally:
        # Downloads read the buffers on the pipe's other stream: wait for
        # them before the pool may hand the blocks to anyone.
        if bufs:
            pipe.settle()
        free_all(bufs)


class Progress:
    """A tqdm bar over the bytes a host sort moves, or nothing (progress=False)."""

    def __init__(self, enabled, total: int, request):
        self.bar = None
        if enabled:
            try:
                from tqdm import tqdm
            except ImportError:
                raise ImportError("progress=True needs the tqdm package: pip install tqdm "
                                  "(or pip install cudasortkit[tune])") from None
            self.bar = tqdm(total=total, unit="B", unit_scale=True,
                            desc=f"{request.kind} {request.n:,} {request.dtype}")

    def update(self, nbytes: int) -> None:
        if self.bar is not None:
            self.bar.update(nbytes)

    def set_total(self, total: int) -> None:
        if self.bar is not None:
            self.bar.total = total
            self.bar.refresh()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.close()
        return False
