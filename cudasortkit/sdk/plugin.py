"""The plugin API: what an algorithm declares and the one method it implements.

Every algorithm, built in or third party, is a subclass of `SortPlugin`
registered under the entry-point group ``cudasortkit.algorithms``. The core
validates the declaration, renders and compiles the plugin's kernel templates
for each key dtype and configuration, and calls `run` with a `Job` that holds
device buffers, the configuration, a stream and the helpers for temporaries
and launches (cudasortkit/sdk/job.py).
"""
from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Mapping

from ..errors import KernelError
from .declarations import (check_device, check_dtypes, check_implements, check_name,
                           check_subclass, check_tunables)


@dataclass(frozen=True)
class Tunable:
    """One knob of a plugin: its default and the values the tuner may try.

    In kernel templates a tunable is a macro named after it, upper-cased
    (``block_size`` -> ``BLOCK_SIZE``).
    """

    default: Any
    values: tuple = ()
    doc: str = ""

    def __post_init__(self):
        if not self.values:
            object.__setattr__(self, "values", (self.default,))
        object.__setattr__(self, "values", tuple(self.values))
        if self.default not in self.values:
            raise ValueError(f"default {self.default!r} is not among {self.values!r}")


#: The knob of kernels/include/peers.cuh's digit ranking (WARP_MATCH), declared
#: by every plugin whose kernels rank digits with it (one with other values:
#: dataclasses.replace(WARP_MATCH, values=...)).
WARP_MATCH = Tunable(0, (0, 1, 2, 3, 4), "every k-th key finds its digit peers with "
                     "__match_any_sync, the rest with ballots (0: never)")


def tile_tunables(block_size: tuple, items_per_thread: tuple) -> dict:
    """The two knobs of a tile of BLOCK_SIZE x ITEMS_PER_THREAD keys, each a
    (default, values) pair: ``{"block_size": ..., "items_per_thread": ...}``, in
    that order, for a plugin's tunables (``{**tile_tunables(...), ...}``)."""
    return {"block_size": Tunable(*block_size, "threads per block"),
            "items_per_thread": Tunable(*items_per_thread, "keys per thread in a tile")}


#: What a Request asks for: keys only, int64 indices, or the caller's values.
REQUEST_KINDS = ("sort", "argsort", "pairs")


@dataclass(frozen=True)
class Request:
    """What the caller asked for, as plugins see it when deciding support.

    kind is "sort" (keys only), "argsort" (int64 indices as values) or "pairs"
    (caller's values). `key_range`, when known, is the (min, max) of the keys.
    `range_probe` measures (min, max) on demand (integer keys; filled in by the
    API, runs at most once per call); plugins ask through `keys_range()`.
    """

    kind: str
    dtype: str
    n: int
    stable: bool = False
    descending: bool = False
    value_bytes: int = 0
    on_device: bool = True
    key_range: tuple | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    #: None: one array of n keys. Otherwise a cudasortkit.sdk.segments.Segments:
    #: the n keys are independent segments (rows of an N-D array along an
    #: axis, or ragged CUB-style offsets), each sorted on its own; only
    #: plugins that declare `segmented = True` serve such requests.
    segments: Any = field(default=None, compare=False)
    range_probe: Callable[[], tuple | None] | None = field(default=None, compare=False, repr=False)

    @classmethod
    def from_fields(cls, **fields) -> "Request":
        """A Request from every one of its fields by name, built without the
        frozen dataclass's object.__setattr__ per field (a microsecond; every
        public call makes a Request). Nothing is defaulted or checked."""
        request = object.__new__(cls)
        request.__dict__.update(fields)
        return request

    @property
    def needs_values(self) -> bool:
        return self.kind != "sort"

    def keys_range(self) -> tuple | None:
        """(min, max) of the keys: the caller's key_range, else measured by
        range_probe (a pass over the keys, so ask only when it matters), else
        None (no keys, or nothing can measure them)."""
        if self.key_range is not None:
            return self.key_range
        return self.range_probe() if self.range_probe is not None else None


class SortPlugin:
    """Base class of every sorting algorithm.

    Subclasses declare the class attributes below and implement `run`.
    Declarations are checked when the registry loads the plugin, so a
    mistake shows in ``python -m cudasortkit list`` instead of at sort time.
    """

    #: The entry-point group plugins of this kind register under.
    entry_point_group: ClassVar[str] = "cudasortkit.algorithms"
    #: Unique name, the same as the entry point's name.
    name: ClassVar[str] = ""
    #: Key dtypes the plugin sorts (a subset of cudasortkit.dtypes.KEY_DTYPES).
    dtypes: ClassVar[tuple] = ()
    #: True if equal keys always keep their input order.
    stable: ClassVar[bool] = False
    #: True if the plugin moves a value payload (argsort, sort_by_key).
    pairs: ClassVar[bool] = False
    #: True if, for argsort, the plugin writes the indices 0 .. n-1 itself
    #: (its first pass makes them up instead of loading values): the API then
    #: passes no values_in and skips the pass that would write them.
    makes_indices: ClassVar[bool] = False
    #: True if run() issues the same allocations, memsets, copies and launches
    #: for the same (dtype, n, value_bytes, config, descending, values_in given
    #: or not, the request's key_range, and for uniform rows the request's
    #: kind and rows), makes no data- or pointer-dependent host decisions (no
    #: `ptr % 16` checks, nothing else read from job.request) and no host
    #: reads or syncs, or else refuses the recording (job.recorder.refuse,
    #: where job.recorder is not None: then that shape runs run() each time), issues
    #: all its work through `job` itself (no Job of its own), and passes
    #: pointers only inside a buffer (not one past its end). Ragged segments
    #: are never replayed.
    #: The core may then record its work once per shape and replay it
    #: (cudasortkit/launch/plans.py), which skips run()'s Python on later calls.
    #: A subclass that overrides run() must say it again (it is not inherited
    #: past a new run()).
    replayable: ClassVar[bool] = False
    #: True if the plugin verifies a caller's key_range promise itself (and
    #: raises ValueError when keys lie outside it); otherwise the core checks
    #: the promise before running the plugin.
    checks_key_range: ClassVar[bool] = False
    #: auto's order when nothing is measured on this device: among the
    #: plugins that can serve a request, the lowest number wins. A plugin
    #: that declines what it cannot serve well (through unsupported) may
    #: take a low one.
    priority: ClassVar[int] = 100
    #: (max_keys, priority) pairs that override `priority` for requests of at
    #: most max_keys keys, first match wins (e.g. one tile: one launch).
    priorities: ClassVar[tuple] = ()
    #: True if the plugin sorts host keys exactly as cudasortkit.order.sort
    #: does (the CPU plugin): for repeated tiny host sorts that auto gives it,
    #: the API may call cudasortkit.order.sort directly.
    host_sort_is_numpy: ClassVar[bool] = False
    #: True if the plugin implements merge(job, a, a_values, na, b, b_values,
    #: nb): a stable merge of two sorted device arrays into job.keys_out /
    #: job.values_out. cudasortkit.merge uses such a plugin.
    merges: ClassVar[bool] = False
    #: True if unsupported() may read the keys' range (request.keys_range(),
    #: a pass over the keys) to decide. A memoised choice of such a plugin
    #: asks its unsupported() about each call's keys again (the next keys may
    #: not fit); a choice of another plugin that the range made is reused for
    #: a while (select.Selector.PROBE_REUSE, doubling while the answer stays).
    decides_on_key_range: ClassVar[bool] = False
    #: True if the plugin sorts segmented requests (request.segments not
    #: None: rows of an N-D array or ragged segments, see
    #: cudasortkit/sdk/segments.py); a plugin without it never sees one.
    segmented: ClassVar[bool] = False
    #: For segmented requests: (max_row_len, priority) pairs, first match on
    #: the longest segment wins; else `priority`.
    segment_priorities: ClassVar[tuple] = ()
    #: "gpu" (run gets device buffers) or "cpu" (run gets NumPy arrays).
    device: ClassVar[str] = "gpu"
    #: Tunables by name; every GPU plugin has at least "block_size".
    tunables: ClassVar[Mapping[str, Tunable]] = {}
    #: Kernel template file names, found in `template_package`.
    templates: ClassVar[tuple] = ()
    #: Importable package whose directory holds the templates. Its directory
    #: and cudasortkit's kernels/include/ (keys.cuh, scan.cuh, ...) are on the
    #: include path.
    template_package: ClassVar[str] = "cudasortkit.kernels"
    #: One-line description for listings.
    summary: ClassVar[str] = ""

    def unsupported(self, request: Request) -> str | None:
        """Why this plugin cannot serve `request`, or None if it can.

        The default checks the declarations; override to add limits (and call
        super). Selection skips a plugin that returns a reason; asking for it
        by name raises ValueError with the reason.
        """
        if request.dtype not in self.dtypes:
            return f"{self.name} does not sort {request.dtype} keys"
        if request.needs_values and not self.pairs:
            return f"{self.name} sorts keys only (no argsort or key-value pairs)"
        if request.stable and not self.stable:
            return f"{self.name} is not stable"
        if request.segments is not None and not self.segmented:
            return f"{self.name} sorts one array only (no rows or segments)"
        return None

    def priority_for(self, n: int) -> int:
        """The declared priority for a request of n keys (`priorities`, then `priority`)."""
        row = row_up_to(self.priorities, n)
        return self.priority if row is None else row[1]

    def priority_for_request(self, request) -> int:
        """The declared priority for a one-array request: priority_for(n).
        A plugin whose standing depends on more than the size (the key
        type, the payload) overrides this."""
        return self.priority_for(request.n)

    def priority_for_segments(self, segments) -> int:
        """The declared priority for a segmented request (`segment_priorities`
        by the longest segment, then `priority`)."""
        row = row_up_to(self.segment_priorities, segments.max_len)
        return self.priority if row is None else row[1]

    def default_config(self, dtype: str | None = None, value_bytes: int = 0) -> dict:
        """The documented defaults; a plugin may override this to default
        differently per key dtype and payload (value_bytes 0: keys only).
        dtype None: the tunables' own defaults."""
        return {name: t.default for name, t in self.tunables.items()}

    def size_config(self, config: dict, dtype: str, value_bytes: int, n: int) -> dict:
        """The default config for a job of n keys (all rows together): the
        defaults for dtype and payload (`config`, from default_config),
        adjusted for the size, e.g. smaller tiles where few keys would leave
        most SMs idle. The core asks it wherever no tuned config exists.
        Default: `config` unchanged."""
        return config

    def config_space(self) -> dict:
        """Values the tuner sweeps, per tunable."""
        return {name: t.values for name, t in self.tunables.items()}

    def valid_config(self, config: Mapping[str, Any], dtype: str, value_bytes: int,
                     limits) -> bool:
        """False for tunable combinations that cannot work on a device with
        `limits` (a cudasortkit.gpu.device.DeviceLimits: shared memory per block
        and per SM, registers, threads, SMs), e.g. a tile that needs more
        shared memory than a block may have; the tuner skips them. The core
        passes the current device's limits, DeviceLimits.sm90() where there
        is no device. Default: all combinations."""
        return True

    def run(self, job) -> None:
        """Sort job.n keys from job.keys_in into job.keys_out (and values).

        GPU plugins get a cudasortkit.sdk.job.Job; CPU plugins a HostJob.
        """
        raise NotImplementedError

    @staticmethod
    def check_declarations(cls, entry_point_name: str | None = None) -> None:
        """Raise TypeError/ValueError saying what is wrong with plugin class
        `cls`'s declarations (the registry calls it as the kind's base class's
        rule, SortPlugin.check_declarations(cls, name), so a plugin cannot
        loosen it; every plugin kind's base class has one)."""
        check_plugin_class(cls, entry_point_name)


def row_up_to(rows, n: int):
    """The first of `rows`, tuples (bound, ...) by rising bound, whose bound
    is at least n; None past the last. A plugin's tables by size read this
    way: `priorities`, `segment_priorities`, size_config's tiles."""
    for row in rows:
        if n <= row[0]:
            return row
    return None


def config_is_valid(plugin, config, dtype: str, value_bytes: int, limits) -> bool:
    """plugin.valid_config(config, dtype, value_bytes, limits); a plugin
    written before valid_config took the device's limits (three parameters)
    is called without them, so it keeps working."""
    if _valid_config_takes_limits(type(plugin)):
        return bool(plugin.valid_config(config, dtype, value_bytes, limits))
    return bool(plugin.valid_config(config, dtype, value_bytes))


@functools.lru_cache(maxsize=None)
def _valid_config_takes_limits(cls) -> bool:
    params = list(inspect.signature(cls.valid_config).parameters.values())
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params):
        return True
    return len(params) >= 5  # self, config, dtype, value_bytes, limits


def check_plugin_class(cls, entry_point_name: str | None = None) -> None:
    """Raise TypeError/ValueError describing what is wrong with a plugin class."""
    check_subclass(cls, SortPlugin)
    check_name(cls, entry_point_name)
    check_dtypes(cls)
    check_device(cls)
    check_tunables(cls, Tunable)
    check_implements(cls, SortPlugin, "run")


#: What a plugin's run() may raise as part of its contract (the caller's
#: input, the GPU's memory, a kernel that fails for this config); anything
#: else takes the plugin out of service (registry.guarded).
RUN_ERRORS = (MemoryError, KernelError, ValueError)
