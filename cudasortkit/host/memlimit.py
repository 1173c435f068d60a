"""How much device memory a host sort may use: a cap the user sets, read as
bytes with units ("1GiB", "512 MB", "2.5e9").

The cap comes from `set_device_memory_limit(...)` if it was called (None
clears it), else from the environment variable CUDASORTKIT_DEVICE_MEMORY_LIMIT,
else there is none. A host sort never plans to use more than the cap nor more
than the device's free memory; a sort that does not fit runs out of core
(docs/host.md).
"""
from __future__ import annotations

import os
import re

ENV = "CUDASORTKIT_DEVICE_MEMORY_LIMIT"

_UNITS = {"": 1, "b": 1,
          "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9, "gb": 10**9,
          "t": 10**12, "tb": 10**12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*$")

#: [limit] as set by set_device_memory_limit; empty: not set (the environment decides).
_set: list = []


def parse_bytes(text, what: str = ENV) -> int:
    """A byte count from an int or a string with an optional unit: B, kB, MB,
    GB, TB (powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024), any case.
    ValueError names `what` and the accepted forms."""
    if isinstance(text, bool):
        raise TypeError(f"{what} must be a number of bytes or a string like '1GiB', got {text!r}")
    if isinstance(text, int):
        value = text
    else:
        m = _SIZE.match(str(text))
        unit = m.group(2).lower() if m else None
        if m is None or unit not in _UNITS:
            raise ValueError(f"{what}: cannot read {text!r} as a size; write bytes with an "
                             "optional unit, e.g. 1GiB, 512MiB, 2GB, 1e9")
        value = int(float(m.group(1)) * _UNITS[unit])
    if value <= 0:
        raise ValueError(f"{what} must be a positive number of bytes, got {text!r}")
    return int(value)


def set_device_memory_limit(limit) -> None:
    """Cap the device memory a host (NumPy) sort may use, in bytes or as a
    string like "1GiB"; None removes the cap (then CUDASORTKIT_DEVICE_MEMORY_LIMIT,
    if set, applies again). Host arrays that do not fit are sorted out of core."""
    _set.clear()
    if limit is not None:
        _set.append(parse_bytes(limit, "set_device_memory_limit"))


def device_memory_limit() -> int | None:
    """The cap in bytes, or None: set_device_memory_limit's, else the environment's."""
    if _set:
        return _set[0]
    text = os.environ.get(ENV, "").strip()
    return parse_bytes(text) if text else None
