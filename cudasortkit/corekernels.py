"""Kernels the core launches itself (argsort's index payload), compiled and
launched through the same Job machinery as plugins so errors read the same."""
from __future__ import annotations

from .job import Job
from .plugin import SortPlugin, Tunable

IOTA_BLOCK = 256


class CoreKernels(SortPlugin):
    """Not an algorithm and not registered: a home for kernels/util.cu."""

    name = "core"
    dtypes = ("uint32",)
    tunables = {"block_size": Tunable(IOTA_BLOCK)}
    templates = ("util.cu",)

    def run(self, job):  # pragma: no cover - never sorts
        raise NotImplementedError


_CORE = CoreKernels()


def iota64(state, ptr: int, n: int) -> None:
    """Fill n int64 at ptr with 0..n-1 on the device's stream."""
    job = Job(_CORE, state, dtype="uint32", n=n, keys_in=0, keys_out=0)
    kernel = job.kernel("util.cu", "csk_iota64", "Pq")
    grid = min(job.blocks(n, IOTA_BLOCK), 65535)
    job.launch(kernel, grid, IOTA_BLOCK, ptr, n)
