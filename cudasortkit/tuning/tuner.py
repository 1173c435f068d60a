"""Measurements on the GPU: run a plugin's configs on fresh random inputs,
check each config's output once against NumPy, time the survivors with
cudasortkit.gpu.timing (CUDA events, warm-up, median, rotating inputs).

A config that fails to compile, fails to launch or sorts wrongly is rejected
(listed in the entry with its reason), never chosen; a plugin whose own
declarations (default_config, config_space, valid_config) fail is out of
service (registry.guarded: PluginError). The tuner runs plugins
with an explicit config through execute.run_plugin (the public call's path minus
selection), so it times what callers pay and cannot recurse into lazy tuning.
"""
from __future__ import annotations

import itertools
import time

import numpy as np

from .. import order as host_order
from ..sdk import registry
from ..dtypes import numpy_dtype
from ..sdk.plugin import config_is_valid
from .policy import OP_SHAPE

VALUE_DTYPES = {4: np.int32, 8: np.int64}

#: Prefer the default unless another config is faster by more than this (noise:
#: whole-call times of 0.1-0.3 ms vary by a few percent between runs on an H100).
NOISE = 0.03


class Rejected(Exception):
    """A config that must not be used: wrong result, compile or launch failure."""


def random_keys(dtype: str, n: int, rng) -> np.ndarray:
    """Uniform over the integer range, standard normal floats (as the bench)."""
    dt = numpy_dtype(dtype)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return rng.integers(info.min, info.max, size=n, dtype=dt, endpoint=True)
    return rng.standard_normal(n, dtype=np.float32 if dt.itemsize <= 4 else np.float64).astype(dt)


class Case:
    """Device inputs for one (op, dtype, n), shared by every plugin; with
    `row_len`, n keys in uniform rows of that length (a sort along the last
    axis, for the segmented plugins).

    Runs go through cudasortkit.dispatch.execute.run_plugin: the same path as a public
    call on a device array (result allocation, argsort's index setup, the
    final synchronization), so a plugin's host-side costs count in its time
    just as they count for the caller. Comparing plugins by device time
    alone had auto pick ones that lost by 1.4x at 2^16-2^18 keys.
    """

    def __init__(self, state, op: str, dtype: str, n: int, inputs: int = 3, rng=None,
                 row_len: int | None = None):
        from pycuda import gpuarray

        from ..sdk.segments import Segments

        self.state, self.op, self.dtype, self.n = state, op, dtype, int(n)
        self.row_len = row_len
        self.segments = None if row_len is None else Segments.rows(self.n // row_len, row_len)
        self.kind, self.value_bytes = OP_SHAPE[op]
        rng = rng or np.random.default_rng()
        self.hosts = [random_keys(dtype, self.n, rng) for _ in range(inputs)]
        self._bufs = []
        self.keys = [self._upload(gpuarray, h) for h in self.hosts]
        self.values = None
        if self.kind == "pairs":
            self.values = self._upload(gpuarray, np.arange(self.n, dtype=VALUE_DTYPES[self.value_bytes]))
        state.cuda.Context.synchronize()
        self._order = None
        self.result = None

    def _upload(self, gpuarray, host):
        buf = self.state.allocate(max(host.nbytes, 1), f"tuner inputs, {self.n:,} {self.dtype} keys")
        self._bufs.append(buf)
        arr = gpuarray.GPUArray(host.shape, host.dtype, gpudata=buf)
        if host.size:
            arr.set(host)
        return arr

    @property
    def order(self):
        """NumPy's stable order of input 0 (within each row, for rows)."""
        if self._order is None:
            h = self.hosts[0]
            if self.row_len is None:
                self._order = host_order.argsort(h)
            else:  # the tuner's keys hold no NaN: NumPy's own row order is cudasortkit's
                rows = np.argsort(h.reshape(-1, self.row_len), axis=-1, kind="stable")
                self._order = (rows + np.arange(0, self.n, self.row_len)[:, None]).reshape(-1)
        return self._order

    def run(self, plugin, config, i: int = 0) -> None:
        from ..dispatch.execute import run_plugin

        self.result = None  # the previous result's buffers go back to the pool first
        self.result = run_plugin(plugin, config, self.kind, self.keys[i], self.values,
                                 segments=self.segments)

    def check(self, plugin) -> str | None:
        """Why the last run (on input 0) is wrong, or None."""
        keys, values = self.result
        h = self.hosts[0]
        if self.kind == "argsort":
            v = values.get()
            if self.row_len is not None:  # indices within each row, as numpy.argsort(axis=-1)
                v = v + np.repeat(np.arange(0, self.n, self.row_len), self.row_len)
            if v.min(initial=0) < 0 or v.max(initial=0) >= self.n:
                return "indices out of range"
            got, want = h[v], h[self.order]
        elif self.kind == "pairs":
            got, v = keys.get(), values.get()
            want = h[self.order]
        elif self.row_len is not None:
            got, v, want = keys.get(), None, h[self.order]
        else:  # keys only: NumPy's sort is far cheaper than a stable argsort of n keys
            got, v, want = keys.get(), None, host_order.sort(h)
        eq = got == want
        if got.dtype.kind == "f":
            eq |= np.isnan(got) & np.isnan(want)
        if not eq.all():
            return f"keys differ from numpy.sort at index {int(np.argmax(~eq))}"
        if v is not None:
            if plugin.stable:
                if not np.array_equal(v, self.order):
                    return "values are not in stable order"
            elif not np.array_equal(h[v], want) or np.bincount(v, minlength=self.n).max(initial=0) > 1:
                return "values do not follow their keys"
        return None

    def free(self):
        self.result = None
        self.keys, self.values = [], None
        for buf in self._bufs:
            buf.free()
        self._bufs.clear()


def configs_quick(plugin, dtype: str, value_bytes: int, limits) -> list:
    """Default first, then each tunable varied alone (others at default)."""
    default = registry.call(plugin, "default_config", dtype, value_bytes)
    out = [default]
    for name, values in registry.call(plugin, "config_space").items():
        for v in values:
            cfg = dict(default, **{name: v})
            if cfg not in out:
                out.append(cfg)
    return [c for c in out if _valid(plugin, c, dtype, value_bytes, limits)]


def configs_full(plugin, dtype: str, value_bytes: int, limits) -> list:
    """Default first, then every combination of tunable values."""
    space = registry.call(plugin, "config_space")
    names = list(space)
    out = [registry.call(plugin, "default_config", dtype, value_bytes)]
    for combo in itertools.product(*(space[n] for n in names)):
        cfg = dict(zip(names, combo))
        if cfg not in out:
            out.append(cfg)
    return [c for c in out if _valid(plugin, c, dtype, value_bytes, limits)]


def _valid(plugin, config, dtype, value_bytes, limits) -> bool:
    """The plugin's valid_config() on a device with `limits`; if that fails,
    the plugin is out of service (PluginError), not the config invalid."""
    with registry.guarded(plugin, "valid_config"):
        return config_is_valid(plugin, config, dtype, value_bytes, limits)


def _short(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    return text.splitlines()[0][:200] if text else type(exc).__name__


class Tuner:
    """Times configs of plugins on Cases; `repeats`/`warmup` as cudasortkit.gpu.timing."""

    def __init__(self, state, *, repeats: int = 5, warmup: int = 2):
        self.state = state
        self.repeats = repeats
        self.warmup = warmup
        self._uncompilable: dict = {}  # (plugin, dtype, value_bytes, config) -> reason

    def measure(self, plugin, case: Case, config) -> float:
        """Median ms of one config; Rejected if it fails or sorts wrongly."""
        from ..errors import KernelCompileError

        key = (plugin.name, case.dtype, case.value_bytes, tuple(sorted(config.items())))
        if key in self._uncompilable:
            raise Rejected(self._uncompilable[key])
        try:
            return self._measure(plugin, case, config)
        except Rejected as exc:
            if isinstance(exc.__cause__, KernelCompileError):
                self._uncompilable[key] = str(exc)
            raise

    def verify(self, plugin, case: Case, config) -> None:
        """Run config once on input 0 (compiling it); Rejected if it fails or sorts wrongly."""
        try:
            case.run(plugin, config, 0)
        except Exception as exc:
            raise Rejected(_short(exc)) from exc
        wrong = case.check(plugin)
        if wrong:
            raise Rejected(f"wrong result: {wrong}")

    def _measure(self, plugin, case: Case, config) -> float:
        from ..gpu.timing import time_gpu

        self.verify(plugin, case, config)
        try:
            stats = time_gpu(lambda i: case.run(plugin, config, i), inputs=len(case.keys),
                             warmup=self.warmup, repeats=self.repeats)
        except Exception as exc:
            raise Rejected(_short(exc)) from exc
        return float(stats["median_ms"])

    def tune(self, plugin, case: Case, strategy: str = "quick", deadline: float | None = None) -> dict:
        """The cache entry of one (plugin, op, dtype, size): best config and its time.

        strategy "quick": default, each tunable alone, then the per-tunable
        winners combined; "full": every valid combination; "default": only the
        default. Past `deadline` (time.monotonic()) no further config is tried
        once one has been measured; the entry is then marked incomplete.
        """
        dtype, vb = case.dtype, case.value_bytes
        limits = self.state.limits
        if strategy == "full":
            configs = configs_full(plugin, dtype, vb, limits)
        elif strategy == "default":
            configs = configs_quick(plugin, dtype, vb, limits)[:1]
        else:
            configs = configs_quick(plugin, dtype, vb, limits)
        default = registry.call(plugin, "default_config", dtype, vb)
        tried, rejected = [], []
        complete = True
        t0 = time.monotonic()

        def attempt(cfg) -> bool:
            if deadline is not None and (tried or rejected) and time.monotonic() > deadline:
                return False
            try:
                tried.append((cfg, self.measure(plugin, case, cfg)))
            except Rejected as exc:
                rejected.append({"config": cfg, "reason": str(exc)})
            return True

        for cfg in configs:
            if not attempt(cfg):
                complete = False
                break
        if complete and strategy == "quick" and len(tried) > 2:
            combo = dict(default)
            for name in registry.call(plugin, "config_space"):
                alone = [(c, ms) for c, ms in tried
                         if all(c[k] == default[k] for k in c if k != name)]
                if alone:
                    combo[name] = min(alone, key=lambda t: t[1])[0][name]
            if combo not in [c for c, _ in tried] and _valid(plugin, combo, dtype, vb, limits):
                complete = attempt(combo)
        entry = {"n": case.n, "strategy": strategy, "complete": complete and strategy != "default",
                 "tried": len(tried), "seconds": round(time.monotonic() - t0, 3),
                 "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        if rejected:
            entry["rejected"] = rejected[:8]
            entry["rejected_count"] = len(rejected)
        if not tried:
            entry["failed"] = rejected[0]["reason"] if rejected else "no valid config"
            return entry
        default_ms = next((ms for c, ms in tried if c == default), None)
        best_cfg, best_ms = min(tried, key=lambda t: t[1])
        if default_ms is not None and best_cfg != default and best_ms < default_ms * (1 - NOISE):
            # Confirm: both again, in alternating rounds in this process (race);
            # only a config that still wins there replaces the default.
            try:
                won = race({"best": lambda i: case.run(plugin, best_cfg, i),
                            "default": lambda i: case.run(plugin, default, i)},
                           inputs=len(case.keys), rounds=3, repeats=self.repeats)
                best_ms, default_ms = won["best"], won["default"]
                entry["confirmed"] = True
            except Exception:  # the sweep's own numbers stand
                pass
        if default_ms is not None and best_ms >= default_ms * (1 - NOISE):
            best_cfg, best_ms = default, default_ms  # not faster beyond noise
        entry.update(ms=best_ms, config=best_cfg, default_ms=default_ms)
        return entry


def race(runners: dict, *, inputs: int, rounds: int = 3, repeats: int = 10,
         min_time_s: float = 0.02) -> dict:
    """name -> best median ms of runners (name -> run(i)) timed in alternating
    rounds, so that drift of clocks or host load between them favours none.
    Plugins within ~20% of each other at small sizes are only told apart
    reliably this way (the same process, interleaved)."""
    from ..gpu.timing import time_gpu

    best = {}
    for _ in range(rounds):
        for name, run in runners.items():
            ms = time_gpu(run, inputs=inputs, repeats=repeats, min_time_s=min_time_s)["median_ms"]
            best[name] = min(best.get(name, ms), ms)
    return best


# ------------------------------------------------------------ host overhead
def wall_ms(fn, min_s: float = 0.05, min_reps: int = 5, max_reps: int = 200) -> float:
    """Median wall-clock ms of fn() (host-side work: NumPy, or API calls that sync)."""
    fn()
    times = []
    start = time.perf_counter()
    while len(times) < min_reps or (time.perf_counter() - start < min_s and len(times) < max_reps):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1e3)
    return float(np.median(times))


def call_by_name(op: str, keys, values, algorithm: str):
    """A call of plugin `algorithm` (default config) on host arrays, through
    the public call's path (cudasortkit.dispatch.execute.run_plugin)."""
    from ..sdk import registry
    from ..dispatch.execute import run_plugin

    plugin = registry.plugins()[algorithm]
    kind, _ = OP_SHAPE[op]
    return lambda: run_plugin(plugin, None, kind, keys, values)


def measure_host(op: str, dtype: str, n: int, gpu_name: str, gpu_ms: float, rng=None) -> dict:
    """Host-input costs at n: the numpy plugin's wall time, and the extra a
    GPU plugin pays over its device-array time (uploads, downloads, allocation,
    launch latency), measured with `gpu_name` whose device-array time is `gpu_ms`."""
    rng = rng or np.random.default_rng()
    keys = random_keys(dtype, n, rng)
    _, vb = OP_SHAPE[op]
    values = np.arange(n, dtype=VALUE_DTYPES[vb]) if vb else None
    numpy_ms = wall_ms(call_by_name(op, keys, values, "numpy"))
    host_ms = wall_ms(call_by_name(op, keys, values, gpu_name))
    return {"numpy_ms": numpy_ms, "gpu_host_ms": host_ms,
            "extra_ms": max(host_ms - gpu_ms, 1e-4), "via": gpu_name, "n": n}
