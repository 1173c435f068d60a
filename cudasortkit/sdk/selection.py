"""The selection plugin kind: top-k and partition, faster than a full sort.

A selection plugin is a subclass of `SelectPlugin` registered under the
entry-point group ``cudasortkit.selection`` (sdk/registry.py's KINDS). It
serves a `SelectRequest`: `rows` independent rows of `row_len` keys (the
selected axis moved last, C order), from each of which it picks `k` keys.

The result a plugin writes is defined exactly, whatever its algorithm, so
that every plugin (and the CPU one) returns the same arrays:

- op "topk": per row, the k keys that come first in the *selection order*,
  in that order, and their int64 positions in the row. The selection order
  for largest=True is: NaNs first, then keys descending; for largest=False:
  keys ascending, then NaNs (NaN counts as the largest key, as in
  torch.topk). -0.0 equals +0.0. Equal keys (NaNs among them) come lower
  index first: the order is that of a stable sort. `sorted=False` lets a
  plugin skip nothing: the results are the same (k keys in this order).
- op "partition": k == row_len; per row a permutation whose keys satisfy
  NumPy's partition property for the request's kth values (every key
  before position kth is <= the key at kth, every key after it >=, NaNs
  last). A stable ascending order satisfies it for every kth.

A GPU plugin's run(job) gets a `SelectJob` (sdk/select_job.py, an sdk.job.Job) and writes
job.keys_out (rows x k keys, the caller's bits: -0.0 and NaN payloads kept)
and job.values_out (rows x k int64 positions in the row). A CPU plugin's
run(job) gets a `HostSelectJob` and returns (keys, indices), both NumPy
arrays of shape (rows, k).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Mapping

from ..dtypes import KEY_DTYPES
from .declarations import (check_device, check_dtypes, check_implements, check_name,
                           check_subclass, check_tunables)
from .plugin import Tunable

#: What a SelectRequest asks for.
SELECT_OPS = ("topk", "partition")
#: The unsigned dtype of each key width's selection words (SelectJob.argsort_rows sorts them).
WORD_DTYPES = {1: "uint8", 2: "uint16", 4: "uint32", 8: "uint64"}
#: Blocks at most in a grid-stride pass of a selection kernel.
MAX_GRID = 65535


@dataclass(frozen=True)
class SelectRequest:
    """What the caller asked for, as selection plugins see it."""

    op: str
    dtype: str
    rows: int
    row_len: int
    k: int
    largest: bool = True
    sorted: bool = True
    on_device: bool = True
    #: partition only: the kth positions (0 <= kth < row_len), ascending.
    kth: tuple = ()

    @property
    def n(self) -> int:
        return self.rows * self.row_len

    @property
    def kind(self) -> str:  # Job.kind reads it
        return self.op

    @property
    def stable(self) -> bool:  # Job.stable reads it: every selection keeps the tie rule
        return True

    @property
    def segments(self):  # Job.segments reads it: rows are the plugin's own business
        return None

    @property
    def descending(self) -> bool:
        return self.largest

    def __str__(self) -> str:
        what = (f"top-{self.k} ({'largest' if self.largest else 'smallest'})"
                if self.op == "topk" else f"partition at kth={list(self.kth)}")
        return f"{what} of {self.rows} row(s) of {self.row_len} {self.dtype} keys"


class SelectPlugin:
    """Base class of every selection algorithm (see the module docstring).

    Declarations are checked when the registry loads the plugin
    (`check_declarations`), so a mistake shows in
    ``python -m cudasortkit list``.
    """

    entry_point_group: ClassVar[str] = "cudasortkit.selection"
    #: Unique name, the same as the entry point's name.
    name: ClassVar[str] = ""
    #: Key dtypes it selects from (a subset of cudasortkit.dtypes.KEY_DTYPES).
    dtypes: ClassVar[tuple] = ()
    #: The ops it serves: a subset of SELECT_OPS.
    ops: ClassVar[tuple] = ("topk",)
    #: "gpu" (run gets a SelectJob) or "cpu" (run gets a HostSelectJob).
    device: ClassVar[str] = "gpu"
    #: auto's order when nothing is measured: the lowest number wins.
    priority: ClassVar[int] = 100
    #: (max_rows, max_row_len, max_k, priority): first match wins (None: no limit).
    priorities: ClassVar[tuple] = ()
    tunables: ClassVar[Mapping[str, Tunable]] = {}
    templates: ClassVar[tuple] = ()
    template_package: ClassVar[str] = "cudasortkit.kernels"
    summary: ClassVar[str] = ""
    #: True if run() issues the same work for the same request (op, rows,
    #: row length, k, kth, largest, sorted), dtype and config whatever the
    #: keys and addresses, all through `job`: the core may record it once per
    #: shape and replay it (cudasortkit/launch/plans.py, as SortPlugin's).
    #: A sort through job.argsort_rows / sort_rows joins the recorded work
    #: when its sort plugin is replayable itself; otherwise no plan is kept,
    #: whatever this says.
    replayable: ClassVar[bool] = False
    # What listings (csk.algorithms()) show of a sort plugin, for the same columns.
    stable: ClassVar[bool] = True
    pairs: ClassVar[bool] = True
    segmented: ClassVar[bool] = True

    def unsupported(self, request: SelectRequest) -> str | None:
        """Why this plugin cannot serve `request`, or None if it can."""
        if request.dtype not in self.dtypes:
            return f"{self.name} does not select from {request.dtype} keys"
        if request.op not in self.ops:
            return f"{self.name} does not serve {request.op} (only {', '.join(self.ops)})"
        return None

    def priority_for(self, request: SelectRequest) -> tuple:
        """(priority, the rule that gave it) for `request`."""
        for max_rows, max_len, max_k, priority in self.priorities:
            if ((max_rows is None or request.rows <= max_rows)
                    and (max_len is None or request.row_len <= max_len)
                    and (max_k is None or request.k <= max_k)):
                return priority, (f"rows <= {max_rows}, row length <= {max_len}, "
                                  f"k <= {max_k}")
        return self.priority, "its default priority"

    def default_config(self, dtype: str | None = None, value_bytes: int = 0) -> dict:
        return {name: t.default for name, t in self.tunables.items()}

    def config_space(self) -> dict:
        return {name: t.values for name, t in self.tunables.items()}

    def run(self, job) -> Any:
        raise NotImplementedError

    @staticmethod
    def check_declarations(cls, entry_point_name: str | None = None) -> None:
        """Raise TypeError/ValueError saying what is wrong with `cls`."""
        check_subclass(cls, SelectPlugin)
        check_name(cls, entry_point_name)
        check_dtypes(cls)
        if not cls.ops or any(op not in SELECT_OPS for op in cls.ops):
            raise ValueError(f"{cls.name}: ops must be a non-empty subset of {SELECT_OPS}, "
                             f"got {cls.ops!r}")
        check_device(cls)
        check_tunables(cls, Tunable)
        for rule in cls.priorities:
            if not (isinstance(rule, tuple) and len(rule) == 4):
                raise ValueError(f"{cls.name}: priorities are (max_rows, max_row_len, max_k, "
                                 f"priority) tuples, got {rule!r}")
        check_implements(cls, SelectPlugin, "run")


class GeneralSelectPlugin(SelectPlugin):
    """A selection plugin that serves every request: every key dtype and
    both ops (SELECT_OPS), declared once here. The rule it keeps: such a
    plugin narrows nothing in its declarations; a request it cannot serve
    after all it declines in unsupported(), with the reason."""

    dtypes: ClassVar[tuple] = KEY_DTYPES
    ops: ClassVar[tuple] = SELECT_OPS


class HostSelectJob:
    """What a CPU selection plugin's run() gets: the request's settings
    and the keys as a NumPy array of shape (rows, row_len)."""

    __slots__ = ("request", "op", "rows", "row_len", "k", "largest", "sorted", "kth", "dtype",
                 "keys", "config")

    def __init__(self, request: SelectRequest, keys, config: dict):
        self.request, self.op, self.dtype = request, request.op, request.dtype
        self.rows, self.row_len, self.k = request.rows, request.row_len, request.k
        self.largest, self.sorted, self.kth = request.largest, request.sorted, request.kth
        self.keys, self.config = keys, config
