"""Kernel templates: a .cu file, the package that holds it, and its macros.

A KernelTemplate turns into prepared kernels, one per (context, key dtype,
value width, configuration, kernel name), compiled once and memoised in the
one kernel cache (`kernel`; cleared with the context, gpu.device)::

    SCAN = KernelTemplate("scan.cu", defines={"scan_count_bytes": 4})
    kernel = SCAN.kernel(state, "uint32", 0, {"block_size": 256, ...}, "csk_scan_tiles")

Rendering (cudasortkit/build/render.py: prelude + file text) is kept apart from
compiling (cudasortkit/build/compiler.py), so CI compiles `template.render(...)`,
the very text the runtime compiles, with plain nvcc. A kernel's pycuda
argument letters come from its own `__global__` prototype in that text
(cudasortkit/build/prototype.py), so nobody types them.

Plugins get their templates through Job.kernel (which asks `kernel` here);
the core's own primitives (scan, iota, min/max) hold KernelTemplates of
cudasortkit's kernels/. Both reach the same cache with the same key.
"""
from __future__ import annotations

import struct
import threading
from types import MappingProxyType
from typing import Any, Mapping

from .. import settings
from .compiler import compile_module, compile_only, driver_function, prepared_function
from ..errors import KernelError, describe
from ..gpu import caches, libcuda
from .prototype import argument_letters, overlapped
from .render import CORE_PACKAGE, include_dirs, render as render_source, template_path

#: Synchronize after every launch so an asynchronous fault names its kernel.
SYNC_EVERY_LAUNCH = settings.sync_launches()  # CUDASORTKIT_SYNC_LAUNCHES, read at import
#: Devices from which kernels marked overlapped (kernels/include/overlap.cuh)
#: may be launched overlapping the grid before them (programmatic dependent
#: launch: compute capability 9.0 and up).
OVERLAP_FROM = (9, 0)

_lock = threading.Lock()
#: (template, dtype, value_bytes, config, defines) -> rendered source. A render
#: reads the file (~50 us); sources do not depend on the context.
_sources: dict = {}
#: The one kernel cache (as PyCUDA's context_dependent_memoize): (device
#: ordinal, package, file, defines, kernel name, key dtype, value bytes,
#: config) -> Kernel, defines and config as their items in the order given.
#: A hit is one tuple and one dict lookup, paid by every sort: no sorting, no
#: KernelTemplate built. Emptied before a context goes away (forget_kernels).
_kernels: dict = {}


def kernel(state, package: str, file: str, defines: tuple, dtype: str, value_bytes: int,
           config: Mapping[str, Any], name: str, owner: str = "core") -> "Kernel":
    """Kernel `name` of template `file` in `package`, rendered with `defines`
    (a tuple of (macro, value) items) for (dtype, value_bytes, config),
    compiled and prepared once per device context. `owner` (a plugin's
    name, or "core") is who errors name."""
    key = (state.ordinal, package, file, defines, name, dtype, value_bytes, tuple(config.items()))
    found = _kernels.get(key)
    if found is None:
        found = KernelTemplate(file, package, dict(defines))._make(
            state, dtype, value_bytes, config, name, owner)
        with _lock:
            found = _kernels.setdefault(key, found)
    return found


def forget_kernels() -> None:
    """Drop every cached kernel (before the context goes away)."""
    with _lock:
        _kernels.clear()


caches.register(forget_kernels)


class Kernel:
    """A prepared kernel and what launching it needs: `signature` (pycuda's
    prepare() letters, one per parameter: launches check the count, launch
    plans find the pointers), its registers per thread and static shared
    memory (for occupancy), `shared_allowed`, the dynamic shared memory
    it may take without a further opt-in (raised as launches opt in), and
    `overlap_function`: the kernel as a CUfunction handle where it may be
    launched overlapping the grid before it (its prototype is marked and
    the device has OVERLAP_FROM), else None."""

    __slots__ = ("function", "name", "template", "signature", "registers", "static_shared",
                 "shared_allowed", "overlap_function", "_arguments")

    def __init__(self, function, name: str, template: str, signature: str = "", *,
                 registers: int = 0, static_shared: int = 0, shared_allowed: int = 0,
                 overlap_function: int | None = None):
        self.function, self.name, self.template = function, name, template
        self.signature = signature
        self.registers, self.static_shared = registers, static_shared
        self.shared_allowed = shared_allowed
        self.overlap_function = overlap_function
        # The parameter buffer's layout: the signature's letters are struct
        # letters, and native alignment lays them out as the C parameter list.
        self._arguments = struct.Struct(signature)

    def resident_blocks(self, limits, block_size: int, dynamic_shared: int = 0) -> int:
        """Blocks of this kernel one SM holds at once (DeviceLimits.resident_blocks)."""
        return limits.resident_blocks(block_size, self.registers,
                                      self.static_shared + dynamic_shared)

    def check(self, args, owner: str, dtype=None, config=None) -> None:
        """KernelError naming owner, kernel, dtype and config unless `args`
        match the kernel's parameters in number."""
        if len(args) != len(self.signature):
            raise KernelError(f"{describe(owner, self.name, dtype, config)}: launched with "
                              f"{len(args)} arguments, but the kernel takes "
                              f"{len(self.signature)} ({self.signature!r})")

    def pack(self, args) -> bytes:
        """The kernel's parameter buffer for `args` (launch plans keep it
        for a replay with the same buffers)."""
        return self._arguments.pack(*args)

    def launch(self, state, stream, grid: tuple, block: tuple, args, shared: int = 0, *,
               owner: str = "core", dtype=None, config=None) -> None:
        """Check `args` (check()) and queue the launch on `stream` unless
        the grid is empty (launch_packed)."""
        self.check(args, owner, dtype, config)
        if grid[0]:
            self.launch_packed(state, stream, grid, block, self.pack(args), shared,
                               owner, dtype, config)

    def launch_packed(self, state, stream, grid: tuple, block: tuple, packed: bytes,
                      shared: int, owner: str = "core", dtype=None, config=None, *,
                      overlap: bool = False) -> None:
        """The one launch of every kernel: one driver call with the
        parameters packed (pycuda's prepared_async_call packs and makes this
        same call), opting into more dynamic shared memory when `shared`
        needs it, and waiting for it when SYNC_EVERY_LAUNCH. `overlap`: the
        launch follows another kernel's and may overlap it, where the kernel
        allows (overlap_function). CUDA errors become KernelError naming
        owner, kernel, dtype, config and geometry."""
        try:
            if shared > self.shared_allowed:
                self._allow_shared(state, shared)
            if overlap and self.overlap_function is not None:
                libcuda.launch_overlapped(self.overlap_function, grid, block, shared,
                                          stream.handle, packed)
            else:
                self.function._launch_kernel(grid, block, packed, shared, stream)
            if SYNC_EVERY_LAUNCH:
                stream.synchronize()
        except (state.cuda.Error, libcuda.CudaError) as exc:
            raise KernelError.failed(owner, self.name, dtype, config,
                                     f"launch grid={grid} block={block} shared={shared}",
                                     exc) from exc

    def _allow_shared(self, state, shared: int) -> None:
        allowed = state.limits.shared_per_block - self.static_shared
        if shared > allowed:
            self.function.set_attribute(
                state.cuda.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, shared)
            if self.overlap_function is not None:
                libcuda.allow_dynamic_shared(self.overlap_function, shared)
            allowed = shared
        self.shared_allowed = allowed

    def __repr__(self):
        return f"Kernel({self.name!r}, {self.template!r}, {self.signature!r})"


class UnloadedKernel(Kernel):
    """A kernel compiled (its cubin on disk) but loaded nowhere, for a state
    that `compiles_only` (a plugin's run() that builds its kernels and
    launches nothing: tuning/prebuild.py): its launches do nothing."""

    __slots__ = ()

    def __init__(self, name: str, template: str, signature: str, *, shared_allowed: int):
        super().__init__(None, name, template, signature, shared_allowed=shared_allowed)

    def launch_packed(self, state, stream, grid, block, packed, shared, owner="core", dtype=None,
                      config=None, *, overlap=False) -> None:
        pass


class KernelTemplate:
    """A kernel template file in `package` (default cudasortkit's kernels/)
    with `defines`, macros it is always rendered with (besides the key
    dtype, value width and configuration that each kernel() call gives).
    Equal templates (same file, package and defines) share compiled kernels."""

    __slots__ = ("file", "package", "defines", "_items", "_key", "_hash")

    def __init__(self, file: str, package: str = CORE_PACKAGE,
                 defines: Mapping[str, Any] | None = None):
        self.file, self.package = file, package
        self.defines = MappingProxyType(dict(defines or {}))  # read-only: part of the key
        self._items = tuple(self.defines.items())  # as the kernel cache keys them
        self._key = (package, file, tuple(sorted(self.defines.items())))
        self._hash = hash(self._key)

    def __eq__(self, other):
        return isinstance(other, KernelTemplate) and self._key == other._key

    def __hash__(self):
        return self._hash

    def __repr__(self):
        extra = f", defines={dict(self.defines)!r}" if self.defines else ""
        return f"KernelTemplate({self.file!r}, {self.package!r}{extra})"

    @property
    def path(self) -> str:
        """The template file (FileNotFoundError if it is missing)."""
        return template_path(self.package, self.file)

    @property
    def include_dirs(self) -> list:
        """Include path of its compilation: the package's directory, then
        cudasortkit's shared headers (kernels/include/)."""
        return include_dirs(self.package)

    def render(self, dtype, value_bytes: int = 0, config: Mapping[str, Any] | None = None) -> str:
        """The source nvcc compiles for these settings (memoised)."""
        config = config or {}
        key = (self._key, str(dtype), int(value_bytes), tuple(sorted(config.items())))
        with _lock:
            source = _sources.get(key)
        if source is None:
            source = render_source(self.package, self.file, dtype, value_bytes, config,
                                   self.defines)
            with _lock:
                _sources[key] = source
        return source

    def signature(self, name: str, dtype, value_bytes: int = 0,
                  config: Mapping[str, Any] | None = None) -> str:
        """pycuda's argument letters of kernel `name`, read from its prototype
        in the rendered source (KernelSignatureError if they cannot be)."""
        return argument_letters(self.render(dtype, value_bytes, config), name, self.include_dirs)

    def kernel(self, state, dtype, value_bytes: int, config: Mapping[str, Any], name: str, *,
               owner: str = "core") -> Kernel:
        """Kernel `name` of this template rendered for (dtype, value_bytes,
        config), compiled and prepared once per device context. `owner` (a
        plugin's name) is who errors name."""
        return kernel(state, self.package, self.file, self._items, str(dtype), value_bytes,
                      config, name, owner)

    def _make(self, state, dtype, value_bytes, config, name, owner) -> Kernel:
        where = describe(owner, name, dtype, config) + f", template {self.file!r}"
        source = self.render(dtype, value_bytes, config)
        try:
            signature = argument_letters(source, name, self.include_dirs)
        except KernelError as exc:
            raise type(exc)(f"{where}: {exc}") from exc
        if getattr(state, "compiles_only", False):  # (tuning/prebuild.py: no device here)
            compile_only(state, source, self.include_dirs, where)
            return UnloadedKernel(name, self.file, signature,
                                  shared_allowed=state.limits.shared_per_block)
        module = compile_module(state, source, self.include_dirs, where)
        attribute = state.cuda.function_attribute
        try:
            function = prepared_function(module, name, signature)
            registers = function.get_attribute(attribute.NUM_REGS)
            static_shared = function.get_attribute(attribute.SHARED_SIZE_BYTES)
            overlap_function = None
            if (tuple(state.compute_capability) >= OVERLAP_FROM
                    and overlapped(source, name, self.include_dirs)):
                overlap_function = driver_function(state, source, self.include_dirs, name)
        except (state.cuda.Error, libcuda.CudaError) as exc:
            raise KernelError(f"{where}: {exc}") from exc
        return Kernel(function, name, self.file, signature, registers=registers,
                      static_shared=static_shared,
                      shared_allowed=state.limits.shared_per_block - static_shared,
                      overlap_function=overlap_function)
