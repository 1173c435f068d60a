"""How a collective sort runs on its workers (collective.py): the items of
CUDASORTKIT_DASK_COLLECTIVE (settings.py), comma-separated key=value, read
on every worker at every sort. The workers of one sort must agree (the
checkpoint compares their fingerprints and fails the sort if they differ).

    exchange   auto | nccl | ipc     how the sorted pieces move between GPUs:
                                     nccl: grouped ncclSend/ncclRecv; ipc: the
                                     GPUs map each other's buffers (CUDA IPC)
                                     and copy engines move the pieces;
                                     auto: ipc where every worker could map
                                     every other's memory, else nccl
    runs       auto | chunks | joined
                                     chunks: each run of a worker's chunks
                                     that are adjacent in the global order is
                                     sorted on its own (no concatenation; ties
                                     go by run order = global index order);
                                     joined: a worker concatenates its chunks
                                     and sorts them as one run; auto: chunks
    direction  pull | push           ipc: receivers copy from the senders'
                                     buffers, or senders into the receivers'
    order      all | ring            ipc: every peer's pieces at once (a
                                     stream each), or one peer at a time in
                                     ring order (rank r + 1, r + 2, ...)
    streams    N                     ipc: copy streams (0: one per peer)
    split      BYTES                 ipc: copies of at most this many bytes
                                     (0: one copy per piece)
    keep       0 | 1                 ipc: keep the send buffer exported and
                                     the peers' mappings open between sorts
    merge      auto | pairs | sort   the received runs: merged pairwise, or
                                     sorted as one array; auto: pairs up to
                                     PAIRS_MAX runs
    method     auto | merge | partition
                                     merge: every worker sorts its chunks,
                                     the sorted pieces move and receivers
                                     merge them (collective.py); partition:
                                     every worker cuts its chunks into
                                     buckets of key ranges, the buckets move
                                     and receivers sort each as it lands
                                     (partition.py); auto: merge
    segments   N                     partition: buckets per receiver besides
                                     the brackets around its boundaries (0:
                                     partition.segments_per_receiver's, 8 for
                                     large sorts; 256 buckets in all at most)
    align      0 | 1                 partition: the receivers' bucket splitters
                                     on the top byte's boundaries where that
                                     keeps them apart

Nothing here knows Dask; tests/test_dask_collective_cpu.py reads options.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass, fields

from .. import settings

CHOICES = {
    "exchange": ("auto", "nccl", "ipc"),
    "runs": ("auto", "chunks", "joined"),
    "direction": ("pull", "push"),
    "order": ("all", "ring"),
    "merge": ("auto", "pairs", "sort"),
    "method": ("auto", "merge", "partition"),
}
NUMBERS = ("streams", "split", "keep", "segments", "align")
#: merge=auto merges up to this many received runs pairwise (log2 of it
#: passes over the data), more are sorted as one array (stably: the runs lie
#: in global index order).
PAIRS_MAX = 16


@dataclass(frozen=True)
class Options:
    exchange: str = "auto"
    runs: str = "auto"
    direction: str = "pull"
    order: str = "all"
    streams: int = 0
    split: int = 0
    keep: int = 0
    merge: str = "auto"
    method: str = "auto"
    segments: int = 0
    align: int = 1

    @property
    def text(self) -> str:
        """The options as CUDASORTKIT_DASK_COLLECTIVE items, every key named."""
        return ",".join(f"{f.name}={getattr(self, f.name)}" for f in fields(self))

    @property
    def fingerprint(self) -> int:
        """A number the workers of one sort compare (equal options, equal numbers)."""
        return zlib.crc32(self.text.encode())

    def joined(self) -> bool:
        return self.runs == "joined"

    def partition(self) -> bool:
        return self.method == "partition"


def parse(text: str) -> Options:
    """Options from CUDASORTKIT_DASK_COLLECTIVE's text; ValueError naming
    the setting, the item and what is accepted."""
    values = {}
    for item in (p.strip() for p in text.split(",")):
        if not item:
            continue
        key, sep, value = (s.strip() for s in item.partition("="))
        if not sep or key not in CHOICES and key not in NUMBERS:
            raise ValueError(f"{settings.DASK_COLLECTIVE}: cannot read {item!r}; write key=value items, "
                             f"keys {', '.join([*CHOICES, *NUMBERS])}")
        if key in CHOICES:
            if value not in CHOICES[key]:
                raise ValueError(f"{settings.DASK_COLLECTIVE}: {key}={value!r}, not one of {CHOICES[key]}")
            values[key] = value
        else:
            number = settings.parse_size(value, f"{settings.DASK_COLLECTIVE} {key}")
            if number < 0 or (key in ("keep", "align") and number > 1):
                raise ValueError(f"{settings.DASK_COLLECTIVE}: {key}={value!r} is out of range")
            values[key] = number
    return Options(**values)


def current() -> Options:
    """The options this worker's environment asks for."""
    return parse(settings.dask_collective())
