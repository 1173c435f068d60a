"""Running one chosen plugin on operands that are already checked: a CPU
plugin on NumPy arrays (its results checked, then delivered as the caller's
kind or into out=), or a GPU plugin on device buffers through a Job: the
result buffers, argsort's indices, and an in-place sort's backup (restored
if anything fails). dispatch/execute.py decides which of the two runs.

`run_job` is the one launch of a plugin on device buffers: the in-core
host path (host/pipeline.py) and the out-of-core one (host/outofcore.py)
sort their pieces with it too."""
from __future__ import annotations

import numpy as np

from ..dtypes import INDEX_DTYPES, itemsize
from ..gpu.arrays import Operand, Result, check_out, overlaps
from ..sdk import registry
from ..sdk.job import HostJob, Job
from ..sdk.plugin import RUN_ERRORS
from . import built, plans as launchplan
from ..build.corekernels import iota64
from .outputs import free_all, index_buffer, temporary


def run_host(plugin, config, request, keys, values, targets, state):
    job = HostJob(request, keys.host(state), None if values is None else values.host(state),
                  config or registry.default_config(plugin, request.dtype,
                                                    request.value_bytes, request.n))
    # out= and values_out= are checked before the plugin runs and its results
    # before either is written: the caller's arrays are written whole or not at all.
    if request.kind != "argsort" and targets["out"] is not None:
        check_out(targets["out"], keys.n, keys.dtype, "out")
    if request.kind == "pairs" and targets["values_out"] is not None:
        check_out(targets["values_out"], values.n, values.dtype, "values_out")
    with registry.guarded(plugin, "run", expected=RUN_ERRORS):
        result = plugin.run(job)
    sorted_keys, sorted_values = _host_results(plugin, job, result)
    k = v = None
    if request.kind != "argsort":
        k = deliver_host(keys, sorted_keys, targets["out"], "out", state)
    if request.kind == "argsort":
        v = keys.wrap_host(np.ascontiguousarray(sorted_values, INDEX_DTYPES[request.value_bytes]))
    elif request.kind == "pairs":
        v = deliver_host(values, sorted_values, targets["values_out"], "values_out", state)
    return k, v


def _host_results(plugin, job: HostJob, result) -> tuple:
    """(keys, values) from what a CPU plugin's run(job) returned, checked
    against the contract (docs/plugins.md): a pair of 1-D NumPy arrays of
    job.n, keys of job.keys' dtype (sort, pairs), values of job.values'
    dtype (pairs), argsort's indices of an integer dtype; the part a kind
    does not use is not looked at. Anything else is the plugin's fault: it
    is taken out of service (registry.fault) and PluginError names it."""
    if not (isinstance(result, (tuple, list)) and len(result) == 2):
        raise registry.fault(plugin, f"run returned {type(result).__name__}, "
                                     "not a (keys, values) pair")
    keys, values = result
    if job.kind != "argsort":
        _check_result(plugin, job, keys, "keys", job.keys.dtype)
    if job.kind == "argsort":
        _check_result(plugin, job, values, "argsort indices", None)
    elif job.kind == "pairs":
        _check_result(plugin, job, values, "values", job.values.dtype)
    return keys, values


def _check_result(plugin, job, array, what: str, dtype) -> None:
    """One result of a CPU plugin: a NumPy array of shape (job.n,), of
    `dtype` (None: any integer dtype)."""
    if not isinstance(array, np.ndarray):
        problem = f"{what} as {type(array).__name__}, not a NumPy array"
    elif array.shape != (job.n,):
        problem = f"{what} of shape {array.shape} for {job.n} keys"
    elif dtype is None and array.dtype.kind not in "iu":
        problem = f"{what} of dtype {array.dtype}, not an integer dtype"
    elif dtype is not None and array.dtype != dtype:
        problem = f"{what} of dtype {array.dtype} for {dtype} {what}"
    else:
        return
    raise registry.fault(plugin, f"run returned {problem}")


def deliver_host(like: Operand, result: np.ndarray, target: Operand | None, what: str, state):
    """A host result as the caller's kind, or written into `target` (out=)."""
    result = np.ascontiguousarray(result, like.dtype)
    if target is None:
        return like.wrap_own(result)
    check_out(target, len(result), like.dtype, what)
    if target.on_device:
        if len(result):
            state.cuda.memcpy_htod_async(target.device_ptr(state), result, state.stream)
            state.stream.synchronize()  # `result` is pageable host memory
    else:
        target.write_host(result)
    return target.original


def run_device(plugin, config, request, keys, values, out, values_out, state, caller):
    temps = []  # this job's pool buffers, freed together once it is queued (or failed)
    try:
        return _run_device(plugin, config, request, keys, values, out, values_out, state,
                           caller, temps)
    finally:
        free_all(temps)


def _run_device(plugin, config, request, keys, values, out, values_out, state, caller, temps):
    n = keys.n
    keys_in = keys.device_ptr(state)
    if request.kind == "argsort":
        key_result = None
        keys_out = temporary(state, temps, keys.nbytes, f"{plugin.name}: sorted keys of argsort")
    else:
        key_result = Result(keys, keys.dtype, state, out, "out", caller, own=True)
        keys_out = key_result.ptr
    values_in = values_out_ptr = 0
    value_result = None
    saved = []  # (pointer, backup buffer, nbytes) for in-place outputs
    if request.kind == "argsort":
        index_dtype = INDEX_DTYPES[request.value_bytes]
        if not plugin.makes_indices:
            values_in = index_buffer(state, temps, n, f"{plugin.name}: argsort indices", iota64,
                                     index_dtype.itemsize)
        value_result = Result(keys, index_dtype, state, stream=caller)
        values_out_ptr = value_result.ptr
    elif request.kind == "pairs":
        values_in = values.device_ptr(state)
        value_result = Result(values, values.dtype, state, values_out, "values_out", caller)
        values_out_ptr = value_result.ptr

    # In place (out overlaps the input): sort from a backup, restore it on failure.
    def detach(src, dst, nbytes, what):
        if not overlaps(src, nbytes, dst, nbytes):
            return src
        backup = temporary(state, temps, nbytes,
                           f"{plugin.name}: copy of {what} for an in-place sort")
        state.cuda.memcpy_dtod_async(backup, src, nbytes, state.stream)
        saved.append((dst, backup, nbytes))
        return backup

    keys_in = detach(keys_in, keys_out, keys.nbytes, "keys")
    if values is not None:
        values_in = detach(values_in, values_out_ptr, values.nbytes, "values")
    try:
        run_job(plugin, config, request, state, n, keys_in, keys_out, values_in, values_out_ptr,
                RUN_ERRORS)
    except BaseException:
        for dst, backup, nbytes in saved:
            state.cuda.memcpy_dtod_async(dst, backup, nbytes, state.stream)
        raise
    k = key_result.finish() if key_result is not None else None
    v = value_result.finish() if value_result is not None else None
    return k, v


#: Device bytes per key a sort of one piece needs: keys and values in and
#: out, and as much again for a plugin's temporaries.
DEVICE_COPIES = 3


def bytes_per_key(request) -> int:
    """Device bytes one key of the request needs in an in-core sort."""
    return DEVICE_COPIES * (itemsize(request.dtype) + request.value_bytes)


def reserve(budget: int) -> int:
    """Device bytes kept back from a budget for small temporaries."""
    return min(64 << 20, budget // 8)


def run_job(plugin, config, request, state, n, keys_in, keys_out, values_in, values_out,
            expected, recorder=None) -> None:
    """plugin sorts n keys keys_in -> keys_out (values too) on the state's
    stream. Its run() writes the outputs and returns None: anything else is
    a fault (PluginError, the plugin taken out of service). `recorder`: the
    launch plan being recorded of a job this sort is part of (a selection
    plugin's sort through the core): the sort's work joins that plan as if
    that job had issued it (its temporaries the plan's), so a replay of the
    plan issues it too, within the same graph; a plugin that cannot be
    replayed keeps the plan from being kept."""
    if recorder is not None and (n <= 1 or not launchplan.replayable(type(plugin))):
        recorder.refuse(f"its sort through {plugin.name} cannot be replayed")
        recorder = None
    if n <= 1:
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
            if recorder is None:
                returned = launchplan.run(plugin, job)
            else:
                with launchplan.recording(job, recorder):
                    returned = plugin.run(job)
        if returned is not None:  # its own arrays instead of job.keys_out: nothing to deliver
            raise registry.fault(plugin, f"run returned {type(returned).__name__}; a GPU plugin "
                                         "writes job.keys_out (and job.values_out) and returns None")
        built.note(job)  # its kernels are built: a later call of another size may stand in with it
    finally:
        job.finish()
