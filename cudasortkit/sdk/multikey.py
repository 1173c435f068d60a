"""Multi-key order plugins: the stable order of several keys at once.

A plugin of this kind (entry-point group ``cudasortkit.multikey``) returns
the stable int64 order of n rows by several 1-D keys of length n, the first
key most significant (SQL's ORDER BY; lexsort reverses its keys into this
order), each ascending or descending in NumPy 2.5's order (NaNs last both
ways, -0.0 == +0.0). Built-in: ``numpy_lexsort`` (host keys), ``packed`` (keys whose
widths add up to at most 128 bits, radix-sorted as one packed key) and
``passes`` (any keys: one stable sort per key, least significant first).

`run(job)` gets a `MultikeyJob`. Host plugins read `job.host_keys()`;
device plugins launch their kernels on `job.state.stream` and sort through
`job.argsort` / `job.sort_pairs`, which run the library's stable sorts
(selected as for any sort) in the same stream.
"""
from __future__ import annotations

import numpy as np

from ..build.template import KernelTemplate
from ..dtypes import key_dtype, key_name
from .declarations import check_implements, check_name, check_subclass


def key_bits(dtype) -> int:
    """Bits of a key's field in a packed key: 1 for bool, else its width."""
    dt = np.dtype(dtype)
    return 1 if dt == np.bool_ else 8 * key_dtype(dt).itemsize


#: kernels/multikey.cu: csk_pack (the packed key), csk_gather, csk_gather_keys, and unique
#: rows' csk_row_starts, csk_unique_scatter and csk_unique_rows.
MULTIKEY = KernelTemplate("multikey.cu")
BLOCK = 256
_CONFIG = {"block_size": BLOCK}


def launch(owner: str, state, dtype, name: str, n: int, args) -> None:
    """Kernel `name` of multikey.cu rendered for key dtype `dtype`, over n
    keys, on the device's stream; errors name `owner`."""
    kernel = MULTIKEY.kernel(state, key_name(dtype), 0, _CONFIG, name, owner=owner)
    if n <= 0:
        return
    grid = max(1, min(-(-int(n) // BLOCK), state.limits.sm_count * 16))
    kernel.launch(state, state.stream, (grid, 1), (BLOCK, 1, 1), args, owner=owner,
                  dtype=key_name(dtype))


def device_ptr(a) -> int:
    """Device address of a device array (cupy, torch, pycuda, the CAI)."""
    from ..gpu.arrays import Operand

    return Operand(a, "temporary", "out").device_ptr(None)


def gather(owner: str, job, src, dtype, order, as_sorted_keys: bool = False) -> object:
    """A new device array (the keys' library) of src[order]: src holds
    job.n elements of `dtype` (any of 1, 2, 4 or 8 bytes), order job.n
    int64 positions. The elements' own bits; with as_sorted_keys (src:
    keys of a key dtype) as every sort returns its keys: float zeros
    +0.0, NaNs the one quiet NaN (csk_gather_keys)."""
    dtype = np.dtype(dtype)
    dst, dst_ptr = job.empty(job.n, dtype)
    if job.n:
        # csk_gather moves the elements' bits; csk_gather_keys reads the keys' kind
        kernel = ("csk_gather_keys", dtype) if as_sorted_keys else \
            ("csk_gather", np.dtype(f"u{dtype.itemsize}"))
        launch(owner, job.state, kernel[1], kernel[0], job.n,
               (device_ptr(src), device_ptr(order), job.n, int(dst_ptr)))
    return dst


class MultikeyJob:
    """One multi-key order: `keys` (most significant first; Operands for
    device keys, each n keys; NumPy arrays of one shape for host keys,
    ordered along `axis`), `descending` (one bool per key), and for device work `state`
    (the device) and three callables the calling layer provides:
    argsort(array, descending) -> int64 order (a stable sort, an array of
    the keys' library), sort_pairs(keys, values, descending) -> (keys,
    values) stable, empty(n, dtype) -> (array, device pointer)."""

    def __init__(self, keys, descending, n, state=None, argsort=None, sort_pairs=None, empty=None,
                 axis=-1):
        self.keys = list(keys)
        self.axis = axis
        self.descending = tuple(bool(d) for d in descending)
        self.n = int(n)
        self.state = state
        self.argsort, self.sort_pairs, self.empty = argsort, sort_pairs, empty

    @property
    def on_device(self) -> bool:
        return any(getattr(k, "on_device", False) for k in self.keys)

    @property
    def bits(self) -> int:
        """The packed key's width: the sum of every key's field."""
        return sum(key_bits(k.dtype) for k in self.keys)

    def host_keys(self) -> list:
        """The keys as NumPy arrays (downloaded for device keys)."""
        return [k.host(self.state) if hasattr(k, "host") else k for k in self.keys]


class MultikeyPlugin:
    """Base class of multi-key order plugins (see the module docstring)."""

    entry_point_group = "cudasortkit.multikey"
    name: str = ""
    summary: str = ""
    #: "cpu" plugins take host keys, "gpu" plugins device keys.
    device: str = "gpu"
    #: auto takes the working plugin of lowest priority that supports a job.
    priority: int = 100

    def supports(self, job: MultikeyJob) -> bool:
        """Whether this plugin can order `job`'s keys."""
        return (job.on_device == (self.device == "gpu"))

    def run(self, job: MultikeyJob):
        """The stable int64 order of the job's rows (NumPy for host keys,
        an array of the keys' library for device keys)."""
        raise NotImplementedError

    @staticmethod
    def check_declarations(cls, entry_point_name: str | None = None) -> None:
        check_subclass(cls, MultikeyPlugin)
        check_name(cls, entry_point_name)
        if cls.device not in ("cpu", "gpu"):  # templates: multikey.cu is the core's own
            raise ValueError(f"{cls.name}: device must be 'cpu' or 'gpu', got {cls.device!r}")
        check_implements(cls, MultikeyPlugin, "run")
