"""SearchPlugin: the plugin kind of searchsorted (entry-point group
``cudasortkit.search``), next to sorts' SortPlugin.

A search plugin finds, for every query of v, its insertion point in the
sorted keys a, as numpy.searchsorted: `run(job, query)` gets a Job (keys_in
is a, keys_out the int64 result) and a SearchQuery with every pointer and
size. cudasortkit/calls/search.py checks the caller's arrays, asks every
plugin `unsupported(query)` and `estimate(query)` and runs the cheapest (or
the one named by algorithm=); `explain` says why.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..dtypes import KEY_DTYPES
from .declarations import (check_device, check_dtypes, check_implements, check_name,
                           check_subclass)
from .job import Job


#: The estimates' unit is one dependent global load of one query as the
#: device streams many: about 7 ps on an H200 ("binary" searched 2^24
#: float32 queries into 2^24 keys, 15 units a query, in 1.78 ms). A search
#: of few queries is bound instead by its chain of dependent loads, each
#: waiting a load's whole latency (about 0.5 us from L2 or DRAM): a plugin
#: adds ROUND_UNITS for each load on its critical path, so that with few
#: queries the shortest chain wins and with many the least traffic does.
ROUND_UNITS = 70_000
#: A launch that waits for the grid before it (a build pass, a sort of the
#: queries first): about 2 us on the device between the two.
LAUNCH_UNITS = 280_000


@dataclass
class SearchQuery:
    """One searchsorted call as the device sees it. `rows` independent
    searches: row r's n sorted keys at a + r*n (with `sorter`, the row's k-th
    key is a[r*n + sorter[r*n + k]]), its m queries at v + r*m, its m int64
    answers at out + r*m. Pointers are device addresses (0: none)."""

    dtype: str
    n: int
    m: int
    rows: int
    right: bool
    a: int = 0
    sorter: int = 0
    v: int = 0
    out: int = 0
    #: int64 positions putting row 0's queries in sorted order, for plugins
    #: that declare `needs_query_order` (calls/search.py sorts them first).
    query_order: int = 0


class SearchPlugin:
    """Base class of searchsorted plugins; see the module docstring."""

    entry_point_group: ClassVar[str] = "cudasortkit.search"
    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    device: ClassVar[str] = "gpu"
    dtypes: ClassVar[tuple] = KEY_DTYPES
    templates: ClassVar[tuple] = ()
    template_package: ClassVar[str] = "cudasortkit.kernels"
    #: Whether run() needs query.query_order (row 0's queries argsorted).
    needs_query_order: ClassVar[bool] = False
    #: Whether run() issues the same work for the same query shape (dtype,
    #: n, m, rows, side, sorter or not) whatever the data and addresses, so
    #: that a repeated call replays its recorded launches
    #: (cudasortkit/launch/plans.py) without calling run() again. Its
    #: temporaries come from job.alloc and every pointer it launches with
    #: is one of the query's or such a temporary.
    replayable: ClassVar[bool] = False
    #: The macros the templates are built with.
    config: ClassVar[dict] = {"block_size": 256}

    def default_config(self, dtype=None, value_bytes: int = 0) -> dict:
        return dict(self.config)

    def unsupported(self, query: SearchQuery) -> str | None:
        """Why this plugin cannot serve `query` (None: it can)."""
        return None

    def estimate(self, query: SearchQuery) -> float:
        """Declared cost of `query` (auto runs the lowest), counted in
        dependent global loads of one query, so that plugins compare, with
        ROUND_UNITS for every load of the critical path (and LAUNCH_UNITS
        for every launch that waits for another)."""
        raise NotImplementedError

    def note(self, query: SearchQuery) -> str:
        """What the estimate counts for `query`, in words (explain prints it)."""
        return ""

    def run(self, job, query: SearchQuery) -> None:
        raise NotImplementedError

    @staticmethod
    def check_declarations(cls, entry_point_name: str | None = None) -> None:
        """Raise TypeError/ValueError saying what is wrong with `cls`."""
        check_subclass(cls, SearchPlugin)
        check_name(cls, entry_point_name)
        check_dtypes(cls)
        check_device(cls, devices=("gpu",))
        if "block_size" not in cls.config:
            raise ValueError(f"{cls.name}: config must set block_size")
        check_implements(cls, SearchPlugin, "run", "estimate")


class SearchJob(Job):
    """The Job of one search: keys_in is a, keys_out the int64 result,
    values_in v and values_out the sorter (0: none), so that a launch
    plan's slots (cudasortkit/launch/plans.py) are the query's four arrays,
    sized as the query's shape says."""

    def __init__(self, plugin, state, query: SearchQuery, config):
        super().__init__(plugin, state, dtype=query.dtype, n=query.rows * query.m,
                         keys_in=query.a, keys_out=query.out, values_in=query.v,
                         values_out=query.sorter, config=config)
        self.a_keys = query.rows * query.n

    def slot_bytes(self) -> tuple:
        """a's bytes, the result's (int64), v's and the sorter's (int64)."""
        return (self.a_keys * self.key_bytes, self.n * 8, self.n * self.key_bytes,
                self.a_keys * 8 if self.values_out else 0)
