"""cudasortkit's settings: the one place that reads its environment
variables, the one parser of sizes (command-line sizes and byte counts),
and the one way a command line declares an on/off switch (add_switch).

Every CUDASORTKIT_* variable, its default, and when it is read (a function
here, called by the module named, at that moment):

- CUDASORTKIT_DEVICE: device ordinal sorts run on (default 0); every call (gpu/device.py).
- CUDASORTKIT_SYNC_LAUNCHES: 1 waits after every launch so a fault names its kernel (default 0); once, at import (build/template.py).
- CUDASORTKIT_AUTOTUNE: 0/off/false/no turns first-run measurement off (default on); every selection that would measure (tuning/runtime.py).
- CUDASORTKIT_CACHE_DIR: the tuning cache's directory (default platformdirs' user cache dir); every lookup (tuning/cache.py).
- CUDASORTKIT_BUILD_ASIDE: 0/off/false/no has a call build a config that has not run yet itself instead of running one that has while it is built in the background (default on); every call that would run a stand-in (launch/built.py).
- CUDASORTKIT_KERNEL_CACHE_DIR: the compiled kernels' directory (default "kernels" in platformdirs' user cache dir, whatever CUDASORTKIT_CACHE_DIR says); every lookup of a module not loaded yet (build/cubins.py).
- CUDASORTKIT_DEVICE_MEMORY_LIMIT: bytes of device memory a host sort may use (default no cap); every host sort, unless set_device_memory_limit() was called (host/memlimit.py).
- CUDASORTKIT_HOST_PIPELINE_MIN: bytes of keys from which a host sort is pipelined (default 8MiB); every host sort (host/pipeline.py).
- CUDASORTKIT_HOST_TRANSFER: auto, staged or registered host transfers (default auto); every host sort (host/transfer.py).
- CUDASORTKIT_HOST_PIECE: bytes of one staged transfer piece (default adaptive); every transfer (host/transfer.py).
- CUDASORTKIT_COPY_THREADS: host-copy worker threads (default the CPUs less two, 2..12); when asked (host/transfer.py; the pool is made once).
- CUDASORTKIT_PINNED_LIMIT: bytes of page-locked staging memory (default 512MiB); when a pinned pool is made (host/pinned.py).
- CUDASORTKIT_DASK_COLLECTIVE: how a Dask collective sort runs on its workers, comma-separated key=value items (default: all "auto"; dask/options.py lists them); every collective sort, on every worker (dask/collective.py: all workers must agree).

Byte counts take a unit (parse_size). Users' docs: docs/api.md, docs/host.md,
docs/tuning.md.
"""
from __future__ import annotations

import os
import re

DEVICE = "CUDASORTKIT_DEVICE"
SYNC_LAUNCHES = "CUDASORTKIT_SYNC_LAUNCHES"
AUTOTUNE = "CUDASORTKIT_AUTOTUNE"
CACHE_DIR = "CUDASORTKIT_CACHE_DIR"
KERNEL_CACHE_DIR = "CUDASORTKIT_KERNEL_CACHE_DIR"
BUILD_ASIDE = "CUDASORTKIT_BUILD_ASIDE"
DEVICE_MEMORY_LIMIT = "CUDASORTKIT_DEVICE_MEMORY_LIMIT"
HOST_PIPELINE_MIN = "CUDASORTKIT_HOST_PIPELINE_MIN"
HOST_TRANSFER = "CUDASORTKIT_HOST_TRANSFER"
HOST_PIECE = "CUDASORTKIT_HOST_PIECE"
COPY_THREADS = "CUDASORTKIT_COPY_THREADS"
PINNED_LIMIT = "CUDASORTKIT_PINNED_LIMIT"
DASK_COLLECTIVE = "CUDASORTKIT_DASK_COLLECTIVE"

_UNITS = {"": 1, "b": 1,
          "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9, "gb": 10**9,
          "t": 10**12, "tb": 10**12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
_POWER = re.compile(r"^\s*([0-9]+)\s*\^\s*([0-9]+)\s*$")
_SIZE = re.compile(r"^\s*(.*?)\s*([A-Za-z]*)\s*$")  # a number (float() reads it), a unit


def parse_size(text, what: str = "size", positive: bool = False) -> int:
    """A size from an int or a string: a power "2^24", or a number ("1000000",
    "1e6", "1.5") with an optional unit: B, kB, MB, GB, TB (powers of 1000)
    or KiB, MiB, GiB, TiB (powers of 1024), any case. `positive` (byte
    counts) refuses 0. Errors name `what` and the accepted forms."""
    if isinstance(text, bool):
        raise TypeError(f"{what} must be a number of bytes or a string like '1GiB', got {text!r}")
    if isinstance(text, int):
        value = text
    else:
        power, m = _POWER.match(str(text)), _SIZE.match(str(text))
        try:
            if power:
                value = int(power.group(1)) ** int(power.group(2))
            else:
                value = int(float(m.group(1)) * _UNITS[m.group(2).lower()])
        except (ValueError, KeyError):
            raise ValueError(f"{what}: cannot read {text!r} as a size; write a number with an "
                             "optional unit or a power, e.g. 1GiB, 512MiB, 2GB, 1e9, 2^24") from None
    if positive and value <= 0:
        raise ValueError(f"{what} must be a positive number of bytes, got {text!r}")
    return int(value)


def add_switch(parser, flag: str, help: str | None = None, on: bool = False) -> None:
    """Declare the on/off switch `flag` on the argparse `parser`. The rule
    it keeps: a switch that is on by default (`on`) can always be turned
    off, by its --no- form (BooleanOptionalAction); one that is off is
    turned on by naming it (store_true)."""
    import argparse  # (only the command lines need it: not loaded with the package)

    if on:
        parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=True, help=help)
    else:
        parser.add_argument(flag, action="store_true", help=help)


def _text(name: str) -> str:
    return os.environ.get(name, "").strip()


def _bytes(name: str) -> int | None:
    text = _text(name)
    return parse_size(text, name, positive=True) if text else None


def device_ordinal() -> int:
    """CUDASORTKIT_DEVICE, else 0."""
    return int(os.environ.get(DEVICE, "0"))


def sync_launches() -> bool:
    """CUDASORTKIT_SYNC_LAUNCHES set to anything but "" or "0"."""
    return os.environ.get(SYNC_LAUNCHES, "") not in ("", "0")


def autotune() -> bool:
    """CUDASORTKIT_AUTOTUNE is not 0/off/false/no (unset: on)."""
    return os.environ.get(AUTOTUNE, "1").strip().lower() not in ("0", "off", "false", "no")


def build_aside() -> bool:
    """CUDASORTKIT_BUILD_ASIDE is not 0/off/false/no (unset: on)."""
    return os.environ.get(BUILD_ASIDE, "1").strip().lower() not in ("0", "off", "false", "no")


def cache_dir() -> str | None:
    """CUDASORTKIT_CACHE_DIR as given, or None."""
    return os.environ.get(CACHE_DIR)


def kernel_cache_dir() -> str | None:
    """CUDASORTKIT_KERNEL_CACHE_DIR as given, or None (unset or blank)."""
    return _text(KERNEL_CACHE_DIR) or None


def device_memory_limit() -> int | None:
    """CUDASORTKIT_DEVICE_MEMORY_LIMIT in bytes, or None (unset or blank)."""
    return _bytes(DEVICE_MEMORY_LIMIT)


def host_pipeline_min() -> int | None:
    """CUDASORTKIT_HOST_PIPELINE_MIN in bytes, or None."""
    return _bytes(HOST_PIPELINE_MIN)


def host_transfer() -> str:
    """CUDASORTKIT_HOST_TRANSFER, stripped ("" when unset); host/transfer.py
    checks the mode."""
    return _text(HOST_TRANSFER)


def host_piece() -> int | None:
    """CUDASORTKIT_HOST_PIECE in bytes, or None."""
    return _bytes(HOST_PIECE)


def copy_threads() -> int | None:
    """CUDASORTKIT_COPY_THREADS as an int, or None."""
    text = _text(COPY_THREADS)
    return int(text) if text else None


def pinned_limit() -> int | None:
    """CUDASORTKIT_PINNED_LIMIT in bytes, or None."""
    return _bytes(PINNED_LIMIT)


def dask_collective() -> str:
    """CUDASORTKIT_DASK_COLLECTIVE, stripped ("" when unset); dask/options.py
    reads its items."""
    return _text(DASK_COLLECTIVE)
