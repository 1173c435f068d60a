"""SegmentedSortPlugin: the base of plugins that sort segmented requests
only (rows of an N-D array sorted along an axis, ragged segments; see
cudasortkit/sdk/segments.py), in-tree or third-party.

A subclass declares its limits as data and writes run(); this class turns
the declarations into unsupported() reasons and auto's priority, and gives
run() the request's segments and the `mode` its kernels take::

    from cudasortkit.sdk.segmented import SegmentedSortPlugin

    class MySegmented(SegmentedSortPlugin):
        name = "my_segmented"
        dtypes = ("float32",)
        max_row = 1024            # longest segment (uniform rows and ragged)
        segment_priorities = ((1024, 10),)
        def run(self, job):
            segments = self.segments_of(job)
            mode = self.value_mode(job, segments)
            ...
"""
from __future__ import annotations

from typing import ClassVar

from ..build.render import VALUE_MODES
from .plugin import SortPlugin
from .segments import Segments

#: The `mode` argument of the segmented kernels: what the values are. Keys
#: only; argsort, int64 index in the segment (rows); argsort, int64 position
#: in the whole array (ragged); pairs, the caller's values. The numbers are
#: build.render's VALUE_MODES, which every kernel gets as CSK_MODE_* macros.
MODE_KEYS, MODE_LOCAL, MODE_GLOBAL, MODE_PAIRS = (
    VALUE_MODES[f"CSK_MODE_{m}"] for m in ("KEYS", "LOCAL", "GLOBAL", "PAIRS"))


class SegmentedSortPlugin(SortPlugin):
    """A plugin for segmented requests only; see the module docstring."""

    stable = True
    pairs = True
    makes_indices = True
    segmented = True
    #: Serves only segmented requests: checked by the batched tests instead
    #: of the 1-D conformance suite.
    conformance_exempt: ClassVar[bool] = True
    #: Longest uniform row the plugin sorts (None: any length).
    max_row: ClassVar[int | None] = None
    #: Longest ragged segment (None: any length).
    max_segment: ClassVar[int | None] = None
    #: Most keys in one request (None: any number); `max_ragged_keys`: in a
    #: ragged request (positions it carries as 32-bit words, say).
    max_keys: ClassVar[int | None] = None
    max_ragged_keys: ClassVar[int | None] = None
    #: auto's priority for ragged requests (None: by the longest segment, as
    #: for rows: `segment_priorities`, then `priority`).
    ragged_priority: ClassVar[int | None] = None
    #: A 1-D request of at most this many keys is sorted as one row (None:
    #: rows and segments only). Its priority is `priorities`, then `priority`.
    one_array_up_to: ClassVar[int | None] = None

    def unsupported(self, request):
        reason = super().unsupported(request)
        if reason is not None:
            return reason
        segments = request.segments
        if segments is None:
            most = self.one_array_up_to
            if most is not None and request.n <= most:
                return None  # one row (segments_of)
            if most is not None:
                return (f"{self.name} sorts rows, segments and arrays of at most {most:,} keys, "
                        f"not {request.n:,}")
            return f"{self.name} sorts rows and segments only (one array goes to the 1-D plugins)"
        longest = self.max_row if segments.uniform else self.max_segment
        if longest is not None and segments.max_len > longest:
            what = "rows" if segments.uniform else "segments"
            return (f"{self.name} sorts {what} of at most {longest} keys; the longest here has "
                    f"{segments.max_len}")
        most = self.max_keys if segments.uniform else self.max_ragged_keys or self.max_keys
        if most is not None and request.n > most:
            return f"{self.name} carries 32-bit positions: at most {most:,} keys, not {request.n:,}"
        return None

    def priority_for_segments(self, segments) -> int:
        if not segments.uniform and self.ragged_priority is not None:
            return self.ragged_priority
        return super().priority_for_segments(segments)

    def segments_of(self, job) -> Segments:
        """The request's segments; run directly (the tuner times plugins on
        one array), one row of job.n keys, within max_row."""
        segments = job.request.segments if job.request is not None else None
        if segments is not None:
            return segments
        if self.max_row is not None and job.n > self.max_row:
            raise ValueError(f"{self.name} sorts at most {self.max_row} keys in one row, not {job.n}")
        return Segments.rows(1, job.n)

    @staticmethod
    def value_mode(job, segments) -> int:
        """The kernels' `mode` for this job (MODE_*)."""
        if job.request is not None and job.request.kind == "argsort":
            return MODE_LOCAL if segments.local_indices else MODE_GLOBAL
        return MODE_PAIRS if job.value_bytes else MODE_KEYS
