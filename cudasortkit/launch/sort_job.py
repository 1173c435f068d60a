"""One in-core device sort of a piece of a host sort: the device bytes it
needs and its launch through the chosen plugin. The in-core host path
(cudasortkit/hostpipe.py) and the out-of-core one (cudasortkit/outofcore.py)
both sort their pieces with it."""
from __future__ import annotations

from . import plans as launchplan
from ..sdk import registry
from ..sdk.job import Job

#: Device bytes per key a sort of one piece needs: keys and values in and
#: out, and as much again for a plugin's temporaries.
DEVICE_COPIES = 3


def bytes_per_key(request) -> int:
    """Device bytes one key of the request needs in an in-core sort."""
    from ..dtypes import itemsize

    return DEVICE_COPIES * (itemsize(request.dtype) + request.value_bytes)


def reserve(budget: int) -> int:
    """Device bytes kept back from a budget for small temporaries."""
    return min(64 << 20, budget // 8)


def run_job(plugin, config, request, state, n, keys_in, keys_out, values_in, values_out,
            expected) -> None:
    """plugin sorts n keys keys_in -> keys_out (values too) on the state's
    stream. Its run() writes the outputs and returns None: anything else is
    a fault (PluginError, the plugin taken out of service)."""
    if n <= 1:
        from ..dtypes import itemsize

        if n:
            state.cuda.memcpy_dtod_async(keys_out, keys_in, itemsize(request.dtype), state.stream)
            if values_out:
                if values_in:
                    state.cuda.memcpy_dtod_async(values_out, values_in, request.value_bytes,
                                                 state.stream)
                else:
                    state.cuda.memset_d32_async(values_out, 0, request.value_bytes // 4,
                                                state.stream)
        return
    job = Job(plugin, state, dtype=request.dtype, n=n, keys_in=keys_in, keys_out=keys_out,
              values_in=values_in, values_out=values_out, value_bytes=request.value_bytes,
              descending=request.descending, config=config, request=request)
    try:
        with registry.guarded(plugin, "run", expected=expected):
            returned = launchplan.run(plugin, job)
        if returned is not None:  # its own arrays instead of job.keys_out: nothing to deliver
            raise registry.fault(plugin, f"run returned {type(returned).__name__}; a GPU plugin "
                                         "writes job.keys_out (and job.values_out) and returns None")
    finally:
        job.finish()
