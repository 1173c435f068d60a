"""Measurements on the GPU: run plugins' configs on random inputs, check
each config's output once against NumPy, time the survivors with
cudasortkit.timing (CUDA events, warm-up, median, rotating inputs).

A config that fails to compile, fails to launch or sorts wrongly is rejected
(listed in the entry with its reason), never chosen; a plugin whose own
declarations (default_config, config_space, valid_config) fail is out of
service (registry.guarded: PluginError). The tuner runs plugins
with an explicit config through execute.run_plugin (the public call's path minus
selection), so it times what callers pay and cannot recurse into lazy tuning.

Where a sweep's time goes, and what keeps it short: NumPy's answer for a
Case is computed once (not once per config), the random inputs of a dtype
are generated and uploaded once per sweep (Inputs) and shared by its sizes
and plugins, and every config of a (size, dtype) is checked before any is
timed, in parallel threads (Tuner.verify_all): a config's first run
compiles its kernels (nvcc is a subprocess, which threads overlap; a
cubin on disk is read without it: build/cubins.py). Timing itself runs one
config at a time, with nothing else on the GPU.
"""
from __future__ import annotations

import contextlib
import itertools
import os
import threading
import time

import numpy as np

from .. import order as host_order
from ..sdk import registry
from ..dtypes import is_bfloat16, itemsize, numpy_dtype
from ..errors import PluginError
from ..sdk.plugin import config_is_valid
from .phases import NoPhases
from .policy import OP_SHAPE
from .replayed import SETTLE_RUNS, replayed_call

VALUE_DTYPES = {4: np.int32, 8: np.int64}

#: Prefer the default unless another config is faster by more than this (noise:
#: whole-call times of 0.1-0.3 ms vary by a few percent between runs on an H100).
NOISE = 0.03

#: Threads that check configs at once (each first run compiles: nvcc is a
#: process of its own). At most this many, one per CPU, and as many as
#: the GPU's free memory holds runs of the Case's size (Case.run_bytes).
MAX_VERIFY_WORKERS = 16


class Rejected(Exception):
    """A config that must not be used: wrong result, compile or launch failure."""


def random_keys(dtype: str, n: int, rng) -> np.ndarray:
    """Uniform over the integer range, standard normal floats (as the bench)."""
    dt = numpy_dtype(dtype)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return rng.integers(info.min, info.max, size=n, dtype=dt, endpoint=True)
    return rng.standard_normal(n, dtype=np.float32 if dt.itemsize <= 4 else np.float64).astype(dt)


def _upload(state, host, bufs: list, what: str):
    from pycuda import gpuarray

    buf = state.allocate(max(host.nbytes, 1), what)
    bufs.append(buf)
    arr = gpuarray.GPUArray(host.shape, host.dtype, gpudata=buf)
    if host.size:
        arr.set(host)
    return arr


class Inputs:
    """`count` independent sets of `n_max` random keys of one dtype
    (random_keys), each generated and uploaded once and shared by the
    Cases of a sweep: a Case of n keys uses the first n of each set.
    Plugins never write their input (Job.keys_in), so the sets stay as
    generated across sizes, plugins and configs."""

    def __init__(self, state, dtype: str, n_max: int, count: int = 3, rng=None):
        self.state, self.dtype, self.n_max = state, dtype, int(n_max)
        rng = rng or np.random.default_rng()
        self.hosts = [random_keys(dtype, self.n_max, rng) for _ in range(count)]
        self._bufs = []
        what = f"tuner inputs, {self.n_max:,} {dtype} keys"
        self.devices = [_upload(state, h, self._bufs, what) for h in self.hosts]

    def serves(self, dtype: str, n: int, count: int) -> bool:
        return dtype == self.dtype and n <= self.n_max and count <= len(self.hosts)

    def take(self, n: int, count: int):
        """(host arrays, device arrays) of the first n keys of `count` sets."""
        return [h[:n] for h in self.hosts[:count]], [d[:n] for d in self.devices[:count]]

    def free(self):
        self.devices = []
        for buf in self._bufs:
            buf.free()
        self._bufs.clear()


def _config_key(config) -> tuple:
    return tuple(sorted(config.items()))


def _first_difference(got: np.ndarray, want: np.ndarray) -> int | None:
    """Index of the first key that differs (NaNs equal each other), or None."""
    if np.array_equal(got, want):
        return None
    eq = got == want
    if got.dtype.kind == "f" or is_bfloat16(got.dtype):
        eq |= np.isnan(got) & np.isnan(want)
    return None if eq.all() else int(np.argmax(~eq))


class Case:
    """Device inputs for one (op, dtype, n), shared by every plugin; with
    `row_len`, n keys in uniform rows of that length (a sort along the last
    axis, for the segmented plugins). With `shared` (Inputs of this dtype
    and at least n keys) the inputs are its first n keys, else its own.

    Checking runs go through cudasortkit.execute.run_plugin: the same path
    as a public call on a device array (result allocation, argsort's index
    setup, the final synchronization). Timed runs (`runners`) are the way
    a repeated call runs (tuning/replayed.py): a replayable plugin's launch
    plan replayed as a prepared call replays it, anything else through
    run_plugin, so a plugin's host-side costs count in its time just as
    they count for the caller. Comparing plugins by device time alone had
    auto pick ones that lost by 1.4x at 2^16-2^18 keys, before launch
    plans; the general path's host time then had it pick radix over
    onesweep at 2^14, where repeated calls took 0.05 and 0.036 ms.

    NumPy's answer for input 0 is computed once (expected), so checking a
    config costs one download and one comparison. `verified` holds each
    checked (plugin, config)'s outcome: None (right) or why it was rejected.
    """

    def __init__(self, state, op: str, dtype: str, n: int, inputs: int = 3, rng=None,
                 row_len: int | None = None, shared: Inputs | None = None):
        from ..sdk.segments import Segments

        self.state, self.op, self.dtype, self.n = state, op, dtype, int(n)
        self.row_len = row_len
        self.segments = None if row_len is None else Segments.rows(self.n // row_len, row_len)
        self.kind, self.value_bytes = OP_SHAPE[op]
        self._bufs = []
        if shared is not None and shared.serves(dtype, self.n, inputs):
            self.hosts, self.keys = shared.take(self.n, inputs)
        else:
            rng = rng or np.random.default_rng()
            self.hosts = [random_keys(dtype, self.n, rng) for _ in range(inputs)]
            what = f"tuner inputs, {self.n:,} {dtype} keys"
            self.keys = [_upload(state, h, self._bufs, what) for h in self.hosts]
        self.values = None
        #: Pairs: the values, a permutation of 0 .. n-1 (not the positions
        #: themselves: a sort that moved positions where it should move the
        #: values fails the check), and the position each value came from.
        self._value_positions = None
        if self.kind == "pairs":
            host = np.random.default_rng(self.n).permutation(self.n).astype(
                VALUE_DTYPES[self.value_bytes])
            self._value_positions = np.empty(self.n, np.intp)  # the inverse permutation
            self._value_positions[host] = np.arange(self.n)
            self.values = _upload(state, host, self._bufs, f"tuner values, {self.n:,}")
        state.cuda.Context.synchronize()
        self._order = None
        self._expected = None
        self._lock = threading.RLock()  # (expected reads order)
        self.verified: dict = {}
        self.result = None

    @property
    def run_bytes(self) -> int:
        """Device memory one run may hold: its result and temporaries."""
        return 4 * max(self.n, 1) * (itemsize(self.dtype) + self.value_bytes)

    @property
    def order(self):
        """NumPy's stable order of input 0 (within each row, for rows)."""
        with self._lock:
            if self._order is None:
                h = self.hosts[0]
                if self.row_len is None:
                    self._order = host_order.argsort(h)
                else:  # the tuner's keys hold no NaN: NumPy's own row order is cudasortkit's
                    rows = np.argsort(h.reshape(-1, self.row_len), axis=-1, kind="stable")
                    self._order = (rows + np.arange(0, self.n, self.row_len)[:, None]).reshape(-1)
            return self._order

    @property
    def expected(self) -> np.ndarray:
        """Input 0's keys as NumPy sorts them (each row on its own, for rows)."""
        with self._lock:  # one thread computes it; the others wait for it
            if self._expected is None:
                h = self.hosts[0]
                if self.kind != "sort" or (self.row_len is not None and is_bfloat16(h.dtype)):
                    self._expected = h[self.order]
                elif self.row_len is None:
                    self._expected = host_order.sort(h)  # far cheaper than a stable argsort
                else:
                    self._expected = np.sort(h.reshape(-1, self.row_len), axis=-1).reshape(-1)
            return self._expected

    def answer(self) -> None:
        """Compute NumPy's answer now (expected), before the checks ask for
        it: while this process waits for compiles (tuning/prebuild.py)."""
        self.expected  # noqa: B018  (computed and kept)

    def run(self, plugin, config, i: int = 0) -> None:
        """One run on input i (what timing repeats); its result is kept
        until the next run."""
        from ..dispatch.execute import run_plugin

        self.result = None  # the previous result's buffers go back to the pool first
        self.result = run_plugin(plugin, config, self.kind, self.keys[i], self.values,
                                 segments=self.segments)

    @contextlib.contextmanager
    def runners(self, contenders: dict):
        """name -> run(i) for `contenders` (name -> (plugin, config)), each
        timed the way a repeated call of it runs (replayed_call, else
        run()), settled: every input run SETTLE_RUNS times, so that no
        timing includes a recording or a graph's capture. The replayed
        calls' buffers go back when the block ends; short of memory for
        them, every contender runs through run() instead."""
        from ..gpu.device import is_out_of_memory

        replayed = {}

        def free_replayed():
            for call in replayed.values():
                if call is not None:
                    call.free()
            replayed.clear()

        try:
            try:
                for name, (plugin, config) in contenders.items():
                    self.run(plugin, config, 0)  # records the shape's plan
                    self.result = None
                    replayed[name] = replayed_call(self, plugin, config)
            except Exception as exc:
                if not is_out_of_memory(exc):
                    raise
                free_replayed()
            runs = {name: replayed.get(name) or
                    (lambda plg, cfg: lambda i: self.run(plg, cfg, i))(plugin, config)
                    for name, (plugin, config) in contenders.items()}
            for _ in range(SETTLE_RUNS):
                for run in runs.values():
                    for i in range(len(self.keys)):
                        run(i)
            yield runs
        finally:
            free_replayed()
            self.result = None

    def outcome(self, plugin, config) -> str | None:
        """Run `config` once on input 0 and say why its result is wrong, or
        None. Threads may call it at once: the result is this call's own."""
        from ..dispatch.execute import run_plugin

        keys, values = run_plugin(plugin, config, self.kind, self.keys[0], self.values,
                                  segments=self.segments)
        return self._wrong(plugin, keys, values)

    def _wrong(self, plugin, keys, values) -> str | None:
        h, want = self.hosts[0], self.expected
        v = None
        if self.kind == "argsort":
            v = values.get()
            if v.shape != (self.n,):
                return f"{v.size} indices for {self.n} keys"
            if self.row_len is not None:  # indices within each row, as numpy.argsort(axis=-1)
                v = v + np.repeat(np.arange(0, self.n, self.row_len), self.row_len)
            if v.min(initial=0) < 0 or v.max(initial=0) >= self.n:
                return "indices out of range"
            got = h[v]
        else:
            got = keys.get()
            if self.kind == "pairs":
                v = values.get()
                if v.shape != (self.n,):
                    return f"{v.size} values for {self.n} keys"
                if v.min(initial=0) < 0 or v.max(initial=0) >= self.n:
                    return "values that were never given"
                v = self._value_positions[v]  # where each value came from
        if got.shape != want.shape:
            return f"{got.size} keys for {self.n}"
        i = _first_difference(got, want)
        if i is not None:
            return f"keys differ from numpy.sort at index {i}"
        if v is not None:
            if plugin.stable:
                if not np.array_equal(v, self.order):
                    return "values are not in stable order"
            elif not np.array_equal(h[v], want) or np.bincount(v, minlength=self.n).max(initial=0) > 1:
                return "values do not follow their keys"
        return None

    def intact(self) -> bool:
        """Whether the device inputs still hold the keys generated. Plugins
        never write their input (Job.keys_in), and the inputs are shared by
        every plugin and size of a dtype: one that did would skew every
        later measurement. One download of each input set."""
        return all(np.array_equal(d.get(), h) for d, h in zip(self.keys, self.hosts))

    def restore(self) -> None:
        """Upload the generated keys again (after intact() said no)."""
        for d, h in zip(self.keys, self.hosts):
            d.set(h)

    def free(self):
        self.result = None
        self.keys, self.values = [], None
        for buf in self._bufs:
            buf.free()
        self._bufs.clear()


def configs_quick(plugin, dtype: str, value_bytes: int, limits, n: int | None = None) -> list:
    """Default first (for n keys where n is given), then each tunable varied
    alone (others at default)."""
    default = registry.default_config(plugin, dtype, value_bytes, n)
    out = [default]
    for name, values in registry.call(plugin, "config_space").items():
        for v in values:
            cfg = dict(default, **{name: v})
            if cfg not in out:
                out.append(cfg)
    return [c for c in out if _valid(plugin, c, dtype, value_bytes, limits)]


def configs_full(plugin, dtype: str, value_bytes: int, limits, n: int | None = None) -> list:
    """Default first (for n keys where n is given), then every combination
    of tunable values."""
    space = registry.call(plugin, "config_space")
    names = list(space)
    out = [registry.default_config(plugin, dtype, value_bytes, n)]
    for combo in itertools.product(*(space[n] for n in names)):
        cfg = dict(zip(names, combo))
        if cfg not in out:
            out.append(cfg)
    return [c for c in out if _valid(plugin, c, dtype, value_bytes, limits)]


def configs_for(plugin, dtype: str, value_bytes: int, limits, strategy: str,
                n: int | None = None) -> list:
    """The configs a strategy tries first: "quick" (configs_quick; the
    winners combined come after), "full" (configs_full) or "default" (the
    first valid of configs_quick: the default config where it is valid)."""
    if strategy == "full":
        return configs_full(plugin, dtype, value_bytes, limits, n)
    configs = configs_quick(plugin, dtype, value_bytes, limits, n)
    return configs[:1] if strategy == "default" else configs


def _valid(plugin, config, dtype, value_bytes, limits) -> bool:
    """The plugin's valid_config() on a device with `limits`; if that fails,
    the plugin is out of service (PluginError), not the config invalid."""
    with registry.guarded(plugin, "valid_config"):
        return config_is_valid(plugin, config, dtype, value_bytes, limits)


def _short(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    return text.splitlines()[0][:200] if text else type(exc).__name__


def _tick(progress, n: int = 1) -> None:
    if progress is not None and n:
        progress.update(n)


class Tuner:
    """Times configs of plugins on Cases; `repeats`/`warmup` as
    cudasortkit.timing; `workers`: threads that check configs at once
    (None: MAX_VERIFY_WORKERS, at most one per CPU); `phases`: where the
    seconds go (tuning/phases.py; None: not counted)."""

    def __init__(self, state, *, repeats: int = 5, warmup: int = 2, workers: int | None = None,
                 phases=None):
        self.state = state
        self.repeats = repeats
        self.warmup = warmup
        self.workers = workers or max(1, min(MAX_VERIFY_WORKERS, os.cpu_count() or 1))
        self.phases = phases if phases is not None else NoPhases()
        self._uncompilable: dict = {}  # (plugin, dtype, value_bytes, config) -> reason

    # ------------------------------------------------------------ checking
    def outcome(self, plugin, case: Case, config) -> str | None:
        """Why `config` must not be used on this case (compile or launch
        failure, wrong result), or None; found once per case and config
        (case.verified), a compile failure once per dtype and config."""
        from ..errors import KernelCompileError

        key = (plugin.name, _config_key(config))
        if key in case.verified:
            return case.verified[key]
        compile_key = (plugin.name, case.dtype, case.value_bytes, key[1])
        reason = self._uncompilable.get(compile_key)
        if reason is None:
            try:
                wrong = case.outcome(plugin, config)
                reason = None if wrong is None else f"wrong result: {wrong}"
            except Exception as exc:
                reason = _short(exc)
                if isinstance(exc, KernelCompileError):
                    self._uncompilable[compile_key] = reason
        case.verified[key] = reason
        return reason

    def verify(self, plugin, case: Case, config) -> None:
        """Run config once on input 0 (compiling it); Rejected if it fails or
        sorts wrongly (once per case and config: later calls are free)."""
        reason = self.outcome(plugin, case, config)
        if reason is not None:
            raise Rejected(reason)

    def verify_all(self, case: Case, pairs) -> None:
        """Check (plugin, config) pairs on `case` before any is timed, in
        parallel threads (check_many)."""
        self.check_many((case, plugin, config) for plugin, config in pairs)

    def check_many(self, triples) -> None:
        """Check (case, plugin, config) triples not checked yet, in parallel
        threads: a config's first run compiles its kernels, and the
        compiler runs as processes of its own, which threads overlap. As
        many threads as there are CPUs (MAX_VERIFY_WORKERS at most) and as
        the GPU's free memory holds runs of the largest case's size."""
        todo, seen = [], set()
        for case, plugin, config in triples:
            key = (id(case), plugin.name, _config_key(config))
            if (plugin.name, key[2]) not in case.verified and key not in seen:
                seen.add(key)
                todo.append((case, plugin, config))
        if not todo:
            return
        workers = min(self.workers, len(todo))
        if workers > 1:
            largest = max(case.run_bytes for case, _, _ in todo)
            workers = min(workers, max(1, self.state.free_memory() // (2 * largest)))
        with self.phases.timed("check", len(todo)):
            if workers <= 1:
                for case, plugin, config in todo:
                    self.outcome(plugin, case, config)
                return
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(workers, thread_name_prefix="csk-tune-check") as pool:
                list(pool.map(lambda t: self.outcome(t[1], t[0], t[2]), todo))

    # -------------------------------------------------------------- timing
    def time(self, plugin, case: Case, config) -> float:
        """Median ms of `config`'s runs (after warm-up) on the case's inputs."""
        from ..gpu.timing import time_gpu

        try:
            with self.phases.timed("time", 1), case.runners({plugin.name: (plugin, config)}) as runs:
                stats = time_gpu(runs[plugin.name], inputs=len(case.keys),
                                 warmup=self.warmup, repeats=self.repeats)
        except Exception as exc:
            raise Rejected(_short(exc)) from exc
        return float(stats["median_ms"])

    def measure(self, plugin, case: Case, config) -> float:
        """Median ms of one config; Rejected if it fails or sorts wrongly."""
        self.verify(plugin, case, config)
        return self.time(plugin, case, config)

    # -------------------------------------------------------------- tuning
    def tune(self, plugin, case: Case, strategy: str = "quick") -> dict:
        """The cache entry of one (plugin, op, dtype, size): best config and its time.

        strategy "quick": default, each tunable alone, then the per-tunable
        winners combined; "full": every valid combination; "default": only the
        default. PluginError if the plugin's own declarations fail.
        """
        configs = configs_for(plugin, case.dtype, case.value_bytes, self.state.limits, strategy,
                              case.n)
        entry = self.tune_cell(case, {plugin.name: (plugin, strategy, configs)})[plugin.name]
        if isinstance(entry, PluginError):
            raise entry
        return entry

    def tune_cell(self, case: Case, work: dict, progress=None) -> dict:
        """Entries of several plugins on one Case. `work` maps a plugin's
        name to (plugin, strategy, configs) (configs_for); returns name ->
        entry, or the PluginError of a plugin whose declarations failed.

        Every config is checked first (verify_all: in parallel), then the
        survivors are timed one after another; with "quick" each plugin's
        per-tunable winners are combined, checked together and timed; a
        config faster than the default by more than NOISE is confirmed
        against it in alternating rounds. `progress.update(1)` per config
        timed or rejected; `progress.grow(n)` for the n combinations."""
        self.verify_all(case, [(plugin, c) for plugin, _, configs in work.values() for c in configs])
        tried = {name: [] for name in work}
        rejected = {name: [] for name in work}
        seconds = dict.fromkeys(work, 0.0)
        out = {}

        def attempt(name, plugin, config):
            t0 = time.monotonic()
            try:
                tried[name].append((config, self.measure(plugin, case, config)))
            except Rejected as exc:
                rejected[name].append({"config": config, "reason": str(exc)})
            seconds[name] += time.monotonic() - t0
            _tick(progress)

        for name, (plugin, _, configs) in sorted(work.items()):
            for config in configs:
                attempt(name, plugin, config)
        combos = {}
        for name, (plugin, strategy, _) in sorted(work.items()):
            if strategy == "quick" and len(tried[name]) > 2:
                try:
                    combo = self._combination(plugin, case, tried[name])
                except PluginError as exc:
                    out[name] = exc
                    continue
                if combo is not None:
                    combos[name] = combo
        if combos:
            if progress is not None:
                progress.grow(len(combos))
            self.verify_all(case, [(work[name][0], c) for name, c in combos.items()])
            for name, combo in sorted(combos.items()):
                attempt(name, work[name][0], combo)
        for name, (plugin, strategy, _) in sorted(work.items()):
            if name in out:
                continue
            try:
                out[name] = self._entry(plugin, case, strategy, tried[name], rejected[name],
                                        seconds[name])
            except PluginError as exc:
                out[name] = exc
        return out

    def _combination(self, plugin, case: Case, tried: list) -> dict | None:
        """The default with each tunable at its fastest value measured alone,
        if valid and not measured already."""
        dtype, vb = case.dtype, case.value_bytes
        default = registry.default_config(plugin, dtype, vb, case.n)
        combo = dict(default)
        for name in registry.call(plugin, "config_space"):
            alone = [(c, ms) for c, ms in tried if all(c[k] == default[k] for k in c if k != name)]
            if alone:
                combo[name] = min(alone, key=lambda t: t[1])[0][name]
        if combo in [c for c, _ in tried] or not _valid(plugin, combo, dtype, vb, self.state.limits):
            return None
        return combo

    def _entry(self, plugin, case: Case, strategy: str, tried: list, rejected: list,
               seconds: float) -> dict:
        default = registry.default_config(plugin, case.dtype, case.value_bytes, case.n)
        entry = {"n": case.n, "strategy": strategy, "complete": strategy != "default",
                 "tried": len(tried), "seconds": round(seconds, 3),
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
            t0 = time.monotonic()
            try:
                with self.phases.timed("confirm", 1), \
                        case.runners({"best": (plugin, best_cfg), "default": (plugin, default)}) as runs:
                    won = race(runs, inputs=len(case.keys), rounds=3, repeats=self.repeats)
                best_ms, default_ms = won["best"], won["default"]
                entry["confirmed"] = True
            except Exception:  # the sweep's own numbers stand
                pass
            entry["seconds"] = round(seconds + time.monotonic() - t0, 3)
        if default_ms is not None and best_ms >= default_ms * (1 - NOISE):
            best_cfg, best_ms = default, default_ms  # not faster beyond noise
        entry.update(ms=best_ms, config=best_cfg, default_ms=default_ms)
        return entry

    def compare(self, case: Case, best: dict, rounds: int = 3):
        """The final word between plugins on one case: name -> (plugin,
        config) timed again in alternating rounds (race). Returns (name ->
        ms, name -> why it was left out)."""
        self.verify_all(case, list(best.values()))
        contenders, left_out = {}, {}
        for name, (plugin, config) in sorted(best.items()):
            reason = self.outcome(plugin, case, config)
            if reason is not None:
                left_out[name] = reason
                continue
            contenders[name] = (plugin, config)
        if len(contenders) < 2:
            return {}, left_out
        with self.phases.timed("compare", 1), case.runners(contenders) as runs:
            return race(runs, inputs=len(case.keys), rounds=rounds, repeats=self.repeats), left_out


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
    the public call's path (cudasortkit.execute.run_plugin)."""
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
