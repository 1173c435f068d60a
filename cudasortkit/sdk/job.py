"""What a GPU plugin's run() gets: buffers, config, stream and three helpers.

`kernel` compiles (once) and prepares a kernel of the plugin's templates for
this job's dtype and config (build/template.py's kernel cache), `alloc` takes
temporaries from the device's memory pool (out of memory becomes MemoryError
naming plugin and size), and `launch` runs a prepared kernel on the job's
stream, turning CUDA errors and argument-count mistakes into KernelError
naming plugin, kernel and configuration. While a launch plan is being
recorded (cudasortkit/launch/plans.py), `recorder` sees every temporary,
memset, copy and launch the job issues.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

from . import registry
from ..dtypes import itemsize
from ..errors import KernelError, describe
from ..build import template as _template
from ..build.corekernels import key_minmax
from ..build.template import Kernel, kernel as template_kernel

if TYPE_CHECKING:  # HostJob's annotations only
    import numpy as np

    from .plugin import Request


class Job:
    """One plugin run: sort n keys of `dtype` from keys_in into keys_out.

    keys_in is never written (it may be the caller's array); keys_out has room
    for n keys. With values (value_bytes > 0) the same holds for values_in /
    values_out. Buffers are device pointers as ints.
    """

    def __init__(self, plugin, state, *, dtype, n, keys_in, keys_out,
                 values_in=0, values_out=0, value_bytes=0, descending=False,
                 config: Mapping[str, Any] = None, request=None):
        self.plugin = plugin
        self.state = state
        self.dtype = dtype = str(dtype)
        self.n = int(n)
        self.keys_in, self.keys_out = int(keys_in), int(keys_out)
        self.values_in, self.values_out = int(values_in), int(values_out)
        self.value_bytes = value_bytes = int(value_bytes)
        self.descending = bool(descending)
        self.config = dict(registry.default_config(plugin, dtype, value_bytes, self.n)
                           if config is None else config)
        self.request = request
        self.stream = state.stream
        self.key_bytes = itemsize(dtype)
        self._temporaries = []
        #: A launchplan.Recorder while this job's work is being recorded.
        self.recorder = None

    def rebound(self, keys_in: int, keys_out: int, values_in: int = 0,
                values_out: int = 0) -> "Job":
        """A job like this one on other buffers (ints), without temporaries:
        plugin, state, shape and config are this job's (the config shared,
        not copied). A prepared call's per-call job, made without
        __init__'s conversions and default_config lookup; it runs no plugin
        code (a launch plan's replay), which is why the config may be shared."""
        job = object.__new__(type(self))
        job.__dict__.update(self.__dict__)
        job.keys_in, job.keys_out, job.values_in, job.values_out = (keys_in, keys_out,
                                                                    values_in, values_out)
        job._temporaries = []
        return job

    # ----------------------------------------------------------- properties
    @property
    def key_bits(self) -> int:
        return 8 * self.key_bytes

    # The request's settings, by the names a CPU plugin's HostJob uses too.
    # They come from job.request: a replayable plugin must not decide on them.
    @property
    def kind(self) -> str:
        """"sort", "argsort" or "pairs"; without a request (a plugin's own
        sub-job), "pairs" when the job moves values, else "sort"."""
        if self.request is not None:
            return self.request.kind
        return "pairs" if self.value_bytes else "sort"

    @property
    def stable(self) -> bool:
        """Whether the caller asked for a stable order (False without a request)."""
        return self.request is not None and self.request.stable

    @property
    def segments(self):
        """The request's segments (cudasortkit/sdk/segments.py), None for one array."""
        return self.request.segments if self.request is not None else None

    @property
    def desc_mask(self) -> int:
        """Kernel argument for csk_encode/csk_decode: all ones if descending."""
        return (1 << self.key_bits) - 1 if self.descending else 0

    @property
    def where(self) -> str:
        return describe(self.plugin.name, None, self.dtype, self.config)

    @property
    def graphable(self) -> bool:
        """Whether a launch plan may capture this job's work into a CUDA
        graph (cudasortkit/launch/graphs.py): not while every launch waits."""
        return not _template.SYNC_EVERY_LAUNCH

    @property
    def limits(self):
        """The device's limits (cudasortkit.gpu.device.DeviceLimits)."""
        return self.state.limits

    # ------------------------------------------------------------- helpers
    def kernel(self, template: str, name: str, defines: Mapping[str, Any] = None,
               config: Mapping[str, Any] = None, value_bytes: int | None = None) -> Kernel:
        """Compile (cached) the plugin's `template` for this job and prepare
        kernel `name`; its argument types come from the kernel's prototype.

        `defines` adds macros that are not tunables (a kernel variant);
        `config` and `value_bytes` default to the job's: pass them to build
        a helper kernel with other settings (e.g. keys only).
        """
        return template_kernel(
            self.state, type(self.plugin).template_package, template,
            tuple(defines.items()) if defines else (), self.dtype,
            self.value_bytes if value_bytes is None else value_bytes,
            self.config if config is None else config, name, self.plugin.name)

    def alloc(self, nbytes: int):
        """A device temporary of nbytes from the pool, freed when the job ends."""
        buf = self.state.allocate(nbytes, self._temporaries_owner)
        self._temporaries.append(buf)
        if self.recorder is not None:
            self.recorder.temporary(int(nbytes), int(buf))
        return buf

    def _temporaries_owner(self) -> str:  # out-of-memory errors only: built on failure
        return f"{self.where}, temporaries for {self.n:,} keys"

    def alloc_parts(self, parts, align: int = 256) -> dict:
        """One temporary carved into named parts: parts is (name, nbytes)
        pairs in order; returns name -> device pointer, each part aligned to
        `align` bytes. One pool allocation instead of one per buffer."""
        offsets, size = {}, 0
        for name, nbytes in parts:
            offsets[name] = size
            size += -(-int(nbytes) // align) * align
        base = int(self.alloc(max(size, align)))
        return {name: base + offset for name, offset in offsets.items()}

    def launch(self, kernel: Kernel, grid, block, *args, shared: int = 0) -> None:
        """Launch a prepared kernel on the job's stream; errors name it. The
        arguments must match the kernel's parameters in number."""
        kernel.check(args, self.plugin.name, self.dtype, self.config)
        grid = (grid, 1) if isinstance(grid, int) else tuple(grid)
        block = (block, 1, 1) if isinstance(block, int) else tuple(block)
        if grid[0] == 0:
            return
        self.issue_packed(kernel, grid, block, kernel.pack(args), shared)
        if self.recorder is not None:
            self.recorder.launch(kernel, grid, block, args, shared)

    def issue_packed(self, kernel: Kernel, grid: tuple, block: tuple, packed: bytes,
                     shared: int, overlap: bool = False) -> None:
        """A launch with its parameters packed (Kernel.pack) on the job's
        stream, errors naming the job (Kernel.launch_packed): every launch
        of the job passes here, launch()'s and a launch plan's replay's.
        `overlap`: it follows a launch and may overlap it where the kernel
        allows (a launch plan's graph capture)."""
        kernel.launch_packed(self.state, self.stream, grid, block, packed, shared,
                             self.plugin.name, self.dtype, self.config, overlap=overlap)

    def copy(self, dst: int, src: int, nbytes: int) -> None:
        if nbytes:
            dst, src, nbytes = int(dst), int(src), int(nbytes)
            self.state.cuda.memcpy_dtod_async(dst, src, nbytes, self.stream)
            if self.recorder is not None:
                self.recorder.copy(dst, src, nbytes)

    def slot_bytes(self) -> tuple:
        """The sizes of keys_in, keys_out, values_in and values_out in bytes
        (a launch plan places pointers inside them): n keys, n values."""
        keys, values = self.n * self.key_bytes, self.n * self.value_bytes
        return keys, keys, values, values

    def memset32(self, dst: int, value: int, count: int) -> None:
        if count:
            dst, value, count = int(dst), int(value), int(count)
            self.state.cuda.memset_d32_async(dst, value, count, self.stream)
            if self.recorder is not None:
                self.recorder.memset32(dst, value, count)

    def keys_minmax(self) -> tuple | None:
        """(min, max) of the job's n integer input keys as Python ints, from
        one reduction pass of the core's kernel on the device's stream (waits
        for it); None when n == 0. Errors name this job's plugin."""
        return key_minmax(self.state, self.keys_in, self.n, self.dtype, owner=self.plugin.name)

    def one_block(self, items_per_thread: int, bytes_per_key: int, largest: int) -> int | None:
        """The smallest power-of-two block size from the config's block_size
        up to `largest` whose tile (block x items_per_thread keys, at
        bytes_per_key each) holds all n keys in one block's shared memory on
        this device; None when no such block does. A plugin sorts such an
        input in one launch: launches, not keys, are what small sorts cost."""
        block = int(self.config["block_size"])
        while block * items_per_thread < self.n:
            block *= 2
        limits = self.limits
        if (block > min(largest, limits.max_threads_per_block)
                or block * items_per_thread * bytes_per_key > limits.shared_per_block_optin):
            return None
        return block

    def blocks(self, items: int, per_block: int) -> int:
        """ceil(items / per_block): the grid size for a tiled pass."""
        return -(-int(items) // int(per_block))

    def finish(self) -> None:
        """Release the job's temporaries once its work is queued. The pool's
        blocks are only used on the job's stream, so the next user of a
        block is queued after this job's kernels: nothing waits here. With
        CUDASORTKIT_SYNC_LAUNCHES=1 it waits, so a fault names this job."""
        try:
            if _template.SYNC_EVERY_LAUNCH:
                self.stream.synchronize()
        except self.state.cuda.Error as exc:
            raise KernelError(f"{self.where}: a kernel failed while running: {exc}") from exc
        finally:
            self.release()

    def release(self) -> None:
        for buf in self._temporaries:
            buf.free()
        self._temporaries.clear()


class HostJob:
    """What a CPU plugin's run() gets: the keys (and values) as NumPy arrays
    and the request's settings, under the names a GPU plugin's Job uses for
    the same things (n, dtype, value_bytes, kind, descending, stable,
    config, segments, request). run() returns (sorted keys, sorted values or
    argsort's indices, or None): docs/plugins.md, "A CPU plugin's run(job)"."""

    __slots__ = ("request", "kind", "n", "dtype", "value_bytes", "descending", "stable",
                 "segments", "keys", "values", "config")

    def __init__(self, request: Request, keys: np.ndarray, values: np.ndarray | None,
                 config: dict):
        self.request = request
        self.kind, self.n, self.dtype = request.kind, request.n, request.dtype
        #: 0 for sort, the caller's index width for argsort (8: int64, 4: int32)
        self.value_bytes = request.value_bytes
        self.descending, self.stable = request.descending, request.stable
        #: The request's segments (cudasortkit/sdk/segments.py), None for one array.
        self.segments = request.segments
        self.keys, self.values, self.config = keys, values, config

    def __repr__(self):
        return (f"HostJob(kind={self.kind!r}, n={self.n}, dtype={self.dtype!r}, "
                f"value_bytes={self.value_bytes}, descending={self.descending}, "
                f"stable={self.stable}, config={self.config!r})")
