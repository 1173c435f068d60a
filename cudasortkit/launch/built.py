"""Which plugin configs have run in this process, and building a new one off
the caller's path.

A GPU plugin's first run of a config builds its kernels: nvcc compiles each
new module (0.3-4 s on a fresh machine), or a cubin on disk is read and
loaded (milliseconds, build/cubins.py). Which config a call runs follows
its size (a plugin's size_config, the tuned config of the nearest measured
size), so the first call of a new size often needs a config that has not
run yet: 3,000,000 float32 keys after a 2^24 sort took 0.33 s on an H200,
its second call 0.36 ms.

So a call never builds a config while another one can serve it: when the
config a call would run has not run here yet (`choose`), the call runs one
that has, of the same plugin (any plugin that serves the request, for
auto), and the config it was given is built in a background thread, by
running it once on a copy of the call's keys: exactly the kernels, launch
plan and temporaries the call itself would need. Calls run the stand-in
until that build is done, then the config they were given. A stand-in
sorts right (it is a config of a plugin that serves the request); only its
speed may differ, for the second or so a build takes.

What stays in the caller's path: the first run of anything in a process
(nothing has run to stand in), requests this does not cover (host arrays,
rows and segments, a key_range, plugin options, plugins that decide on the
keys' range), and a build whose copy of the keys and run would not fit in
the GPU's free memory. A build that fails is not tried again; the call
then runs its config itself, and fails or compiles there as before.

CUDASORTKIT_BUILD_ASIDE=0 turns this off: every call builds what it runs
(the test suite does, so that a call's outcome never depends on a build's
timing).

Builds run in ordinary (not daemon) threads: a process that exits while one
runs waits for it, rather than tearing the CUDA context down under it.
`wait()` waits for every build under way (bench and tune --check call it
before timing, so that they time the configs the calls were given).
"""
from __future__ import annotations

import threading

from .. import settings
from ..gpu import caches
from ..sdk import registry
from ..sdk.plugin import config_is_valid

#: A build needs the GPU's free memory to hold this many times the request's
#: keys and values: the keys' copy, the results, the plugin's temporaries.
BUILD_MEMORY_FACTOR = 6

_lock = threading.Lock()
#: (ordinal, plugin class, dtype, value_bytes) -> {config items: (plugin, config)}
_built: dict = {}
#: (ordinal, plugin class, dtype, value_bytes, config items) -> its build's thread
_building: dict = {}
_failed: set = set()  # such keys whose build failed: not built in the background again
_counts = {"stand_ins": 0, "builds": 0, "failed": 0}


def _items(config) -> tuple:
    """A config's key: its items in their order (a config reaches here from
    one place per plugin and size, the policy's or the defaults, so one
    config has one order; another order only builds it once more)."""
    return tuple(config.items())


def note(job) -> None:
    """Record that `job`'s plugin ran its config (the job's run finished)."""
    key = (job.state.ordinal, type(job.plugin), job.dtype, job.value_bytes)
    items = _items(job.config)
    configs = _built.get(key)
    if configs is None or items not in configs:
        with _lock:
            _built.setdefault(key, {})[items] = (job.plugin, dict(job.config))


def covers(plugin, request) -> bool:
    """Whether a call of `request` by `plugin` may stand in or be stood in
    for (see the module docstring): device keys of one array, no key_range
    or options, a GPU plugin that does not decide on the keys' range."""
    return (plugin.device == "gpu" and request.on_device and request.n >= 2
            and request.segments is None and request.key_range is None and not request.options
            and not plugin.decides_on_key_range)


def choose(plugin, config, request, keys_at, state, *, auto: bool) -> tuple:
    """(plugin, config, stood_in): what a call of `request` runs, given the
    (plugin, config) chosen for it (config None: its defaults for the
    request, filled in here for the requests this covers, as the job would
    fill them). stood_in: a config that ran here runs instead, while the
    chosen one is built (see the module docstring). `keys_at()` gives the
    call's keys' device address (the build copies them on the state's
    stream, which the call has ordered after the caller's work). `auto`:
    any plugin that serves the request may stand in, else only `plugin`."""
    if not covers(plugin, request):
        return plugin, config, False
    dtype, vb = request.dtype, request.value_bytes
    if config is None:
        config = registry.default_config(plugin, dtype, vb, request.n)
    if not _built:  # nothing ran yet: nothing to stand in
        return plugin, config, False
    items = _items(config)
    if items in _built.get((state.ordinal, type(plugin), dtype, vb), ()):
        return plugin, config, False
    key = (state.ordinal, type(plugin), dtype, vb, items)
    if key in _failed or not settings.build_aside():
        return plugin, config, False
    found = _candidate(plugin, request, state, auto)
    if found is None:
        return plugin, config, False
    with _lock:
        started = key in _building
    if not started and not _start(key, plugin, config, request, keys_at, state):
        return plugin, config, False
    with _lock:
        _counts["stand_ins"] += 1
    return (*found, True)


def _candidate(plugin, request, state, auto: bool):
    """A (plugin, config) that ran here and serves the request: `plugin`'s
    own first, then (auto) another plugin's."""
    dtype, vb, limits = request.dtype, request.value_bytes, state.limits
    with _lock:
        ran = [(cls, list(configs.values())) for (ordinal, cls, d, v), configs in _built.items()
               if ordinal == state.ordinal and d == dtype and v == vb]
    ran.sort(key=lambda entry: entry[0] is not type(plugin))  # its own plugin first
    working = registry.plugins()
    for cls, configs in ran:
        if cls is not type(plugin) and not auto:
            break
        for other, config in configs:
            if working.get(other.name) is not other:  # out of service since
                break
            try:
                if cls is not type(plugin) and (
                        other.decides_on_key_range
                        or registry.call(other, "unsupported", request) is not None):
                    break
                with registry.guarded(other, "valid_config"):
                    if config_is_valid(other, config, dtype, vb, limits):
                        return other, dict(config)
            except Exception:  # a plugin failing while asked is not asked again here
                break
    return None


def _start(key, plugin, config, request, keys_at, state) -> bool:
    """Copy the call's keys and start the build of `config` in a thread;
    False where the GPU's free memory would not hold it."""
    from ..dtypes import itemsize

    n, kb, vb = request.n, itemsize(request.dtype), request.value_bytes
    if state.free_memory() < BUILD_MEMORY_FACTOR * n * (kb + vb):
        return False
    try:
        keys = state.allocate(n * kb, f"{plugin.name}: copy of the keys to build a config with")
    except MemoryError:  # (the call runs its own config: building aside is never its failure)
        return False
    state.cuda.memcpy_dtod_async(int(keys), int(keys_at()), n * kb, state.stream)
    thread = threading.Thread(target=_build, args=(key, plugin, dict(config), request, keys, state),
                              name=f"csk-build-{plugin.name}")
    with _lock:
        _building[key] = thread
        _counts["builds"] += 1
    thread.start()
    return True


def _build(key, plugin, config, request, keys, state) -> None:
    """Run `config` of `plugin` once on `keys` (a copy: freed here) in this
    thread, as the call would run it; it is noted as run when it finishes
    (launch/run.run_job)."""
    from ..build.corekernels import iota64
    from ..dtypes import itemsize
    from ..sdk.plugin import RUN_ERRORS
    from .outputs import free_all, index_buffer, temporary
    from .run import run_job

    temps = [keys]
    try:
        state.activate()
        n, vb = request.n, request.value_bytes
        what = f"{plugin.name}: building a config"
        keys_out = temporary(state, temps, n * itemsize(request.dtype), what)
        values_in = values_out = 0
        if vb:
            values_out = temporary(state, temps, n * vb, what)
            if request.kind == "pairs":
                values_in = temporary(state, temps, n * vb, what)
            elif not plugin.makes_indices:
                values_in = index_buffer(state, temps, n, what, iota64, vb)
        run_job(plugin, config, request, state, n, int(keys), keys_out, values_in, values_out,
                RUN_ERRORS)
    except BaseException:  # the call that needs it runs it itself (and reports what fails)
        with _lock:
            _failed.add(key)
            _counts["failed"] += 1
    finally:
        try:
            free_all(temps)
        finally:
            with _lock:
                _building.pop(key, None)


def building() -> int:
    """Builds under way."""
    with _lock:
        return len(_building)


def wait(timeout: float | None = None) -> None:
    """Wait for every build under way (and those they lead to) to finish."""
    while True:
        with _lock:
            threads = list(_building.values())
        if not threads:
            return
        for thread in threads:
            thread.join(timeout)
        if timeout is not None:
            return


def counters() -> dict:
    """Calls that ran a stand-in, builds started and builds failed, in this process."""
    with _lock:
        return dict(_counts)


def forget() -> None:
    """Forget what ran (its kernels go with the context: gpu.caches)."""
    with _lock:
        _built.clear()
        _failed.clear()


caches.register(forget)
