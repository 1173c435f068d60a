"""How much device memory a host sort may use: a cap the user sets, read as
bytes with units ("1GiB", "512 MB", "2.5e9"; settings.parse_size).

The cap comes from `set_device_memory_limit(...)` if it was called (None
clears it), else from the environment variable CUDASORTKIT_DEVICE_MEMORY_LIMIT,
else there is none. A host sort never plans to use more than the cap nor more
than the device's free memory; a sort that does not fit runs out of core
(docs/host.md).
"""
from __future__ import annotations

from .. import settings
from ..settings import parse_size

ENV = settings.DEVICE_MEMORY_LIMIT

#: [limit] as set by set_device_memory_limit; empty: not set (the environment decides).
_set: list = []


def set_device_memory_limit(limit) -> None:
    """Cap the device memory a host (NumPy) sort may use, in bytes or as a
    string like "1GiB"; None removes the cap (then CUDASORTKIT_DEVICE_MEMORY_LIMIT,
    if set, applies again). Host arrays that do not fit are sorted out of core."""
    _set.clear()
    if limit is not None:
        _set.append(parse_size(limit, "set_device_memory_limit", positive=True))


def device_memory_limit() -> int | None:
    """The cap in bytes, or None: set_device_memory_limit's, else the environment's."""
    if _set:
        return _set[0]
    return settings.device_memory_limit()
