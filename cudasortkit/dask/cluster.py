"""Which transport a GPU cluster should use, and whether a distributed Client
runs the sort.

UCX (NVLink, InfiniBand; device buffers sent without a host copy) where
distributed-ucxx is installed, else TCP, which copies every piece that leaves
a worker through host memory. A sort of device (CuPy) chunks on a TCP
cluster warns once, naming the fix.
"""
from __future__ import annotations

import importlib.util
import warnings

UCX_FIX = ("install distributed-ucxx-cu13 on every machine and start the cluster with "
           "protocol='ucx' (LocalCUDACluster(protocol='ucx'), dask scheduler --protocol ucx)")

_warned = False


def ucx_installed() -> bool:
    return importlib.util.find_spec("distributed_ucxx") is not None


def protocol(requested: str = "auto") -> str:
    """The protocol to start a GPU cluster with: "ucx" where distributed-ucxx
    is installed, else "tcp"; an explicit "ucx" or "tcp" is kept."""
    if requested not in ("auto", "ucx", "tcp"):
        raise ValueError(f"protocol={requested!r}: protocol is 'auto', 'ucx' or 'tcp'")
    if requested != "auto":
        return requested
    return "ucx" if ucx_installed() else "tcp"


def default_client():
    """The distributed Client that compute() would use, or None."""
    try:
        from distributed import default_client as get
    except ImportError:
        return None
    try:
        return get()
    except ValueError:
        return None


def transport(client) -> str:
    """The scheduler's protocol, "tcp", "ucx", "inproc", ..."""
    return str(client.scheduler.address).split("://")[0]


def check_transport(x) -> None:
    """Warn once per process when device (CuPy) chunks will be sorted on a
    cluster that talks TCP."""
    global _warned
    if _warned or type(x._meta).__module__.split(".")[0] != "cupy":
        return
    client = default_client()
    if client is None or transport(client) != "tcp":
        return
    _warned = True
    warnings.warn("cudasortkit.dask: this GPU cluster talks TCP, so every piece of the exchange is "
                  "copied through host memory; for device-to-device transfers " + UCX_FIX,
                  RuntimeWarning, stacklevel=4)
