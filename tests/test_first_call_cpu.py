"""The first call of a new size never builds kernels in the caller's path
when a config that ran already can serve it (cudasortkit/launch/built.py),
without a GPU: CuPy's stand-in (tests/cupy_standin.py) for the arrays, a
faked device, and a GPU plugin whose kernels "compile" (a stand-in for
build/template.kernel that takes COMPILE_S per new config and records the
thread) and whose size_config picks another config above BIG keys, as
onesweep's does at 2^22 keys.

On an H200, 3,000,000 float32 keys sorted right after a 2^24 sort took
0.33 s on the first call (a new config's module: nvcc, or pycuda's cache
lookup running the preprocessor) and 0.36 ms on the second."""
import os
import sys
import threading
import time
import types

import numpy as np
import pytest

from cudasortkit import settings
from cudasortkit.calls import sort_prepared
from cudasortkit.dispatch import execute as dispatch_execute
from cudasortkit.dispatch import request as dispatch_request
from cudasortkit.dispatch import select as dispatch_select
from cudasortkit.dispatch.select import DefaultPolicy, Selector
from cudasortkit.gpu import arrays, device
from cudasortkit.gpu.arrays import Operand
from cudasortkit.launch import built
from cudasortkit.sdk import job as sdk_job
from cudasortkit.sdk import registry
from cudasortkit.sdk.plugin import SortPlugin, Tunable
from helpers import FakeState, fake_device, joiner_standin

import cupy_standin  # noqa: E402  (tests/: beside this file)

#: Seconds a stand-in compile of a new config takes.
COMPILE_S = 0.3
#: Above this many keys the plugin's size_config picks block_size 512.
BIG = 1 << 20


class Compiles(SortPlugin):
    """Requests one kernel per run; records every config it ran."""

    name = "compiles"
    dtypes = ("float32", "uint32")
    stable = True
    pairs = True
    makes_indices = True
    priority = 1
    tunables = {"block_size": Tunable(256, (256, 512)), "items_per_thread": Tunable(8, (8, 16))}
    templates = ("bitonic.cu",)  # declared; the stand-in compiler never reads it
    ran: list = []  # (thread name, n, config)
    fail_on: set = set()  # block sizes whose run raises

    def size_config(self, config, dtype, value_bytes, n):
        return dict(config, block_size=512) if n > BIG else config

    def run(self, job):
        job.kernel("bitonic.cu", "bitonic_sort_tiles")
        if job.config["block_size"] in type(self).fail_on:
            raise ValueError("stand-in failure")
        type(self).ran.append((threading.current_thread().name, job.n, dict(job.config)))


class Compiler:
    """build/template.kernel's stand-in: the first request of each config
    takes COMPILE_S and is recorded with its thread."""

    def __init__(self):
        self.compiled, self.seen, self.lock = [], set(), threading.Lock()

    def __call__(self, state, package, file, defines, dtype, value_bytes, config, name, owner):
        key = (dtype, value_bytes, tuple(sorted(config.items())))
        with self.lock:
            new = key not in self.seen
            self.seen.add(key)
        if new:
            time.sleep(COMPILE_S)
            self.compiled.append((threading.current_thread().name, dict(config)))
        return types.SimpleNamespace(name=name)

    def in_thread(self, name):
        return [config for thread, config in self.compiled if thread == name]


class _Buf(int):
    def free(self):
        pass


class _State(FakeState):
    """A device state that allocates addresses, copies nothing and orders nothing."""

    stream = types.SimpleNamespace(handle=7, synchronize=lambda: None)
    joiner = joiner_standin()
    free = 80 << 30

    def __init__(self):
        self.copies = []
        self.cuda = types.SimpleNamespace(memcpy_dtod_async=self._copy,
                                          memset_d8_async=lambda *a: None,
                                          memset_d32_async=lambda *a: None)

    def _copy(self, dst, src, nbytes, stream):
        self.copies.append((dst, src, nbytes))

    def activate(self):
        return self

    def allocate(self, nbytes, who=None):
        return _Buf(0x7000000)

    def allocating(self, make, *args):
        return make(*args)

    def free_memory(self):
        return self.free


@pytest.fixture
def gpu(tmp_path, monkeypatch):
    """The plugin `compiles` alone (with numpy) on a faked device, CuPy's
    stand-in for the arrays, the stand-in compiler; nothing ran yet."""
    state = _State()
    monkeypatch.setenv(settings.BUILD_ASIDE, "1")  # (the suite turns it off: conftest.py)
    fake_device(tmp_path, monkeypatch, dispatch_select)
    for module in (device, dispatch_request):
        monkeypatch.setattr(module, "get_device", lambda ordinal=None: state)
    monkeypatch.setitem(sys.modules, "cupy", None)  # (restored after the test)
    cupy_standin.install()  # sys.modules["cupy"]: the stand-in
    monkeypatch.setattr(sort_prepared, "_adapters", {})
    compiler = Compiler()
    monkeypatch.setattr(sdk_job, "template_kernel", compiler)
    monkeypatch.setattr(arrays, "POISON_BYTE", None)
    registry.register(Compiles)
    alone = {n: registry.plugins()[n] for n in ("compiles", "numpy")}
    monkeypatch.setattr(registry, "plugins", lambda: alone)
    Compiles.ran, Compiles.fail_on = [], set()
    built.forget()
    yield state, compiler, Selector(DefaultPolicy())
    built.wait()
    built.forget()
    registry.entries().pop(Compiles.name, None)
    registry.refresh()


def device_keys(n, dtype="float32"):
    return cupy_standin.ndarray((n,), dtype)


def call(selector, n, algorithm="auto", kind="sort"):
    """One sort (or argsort) of n device keys through the general path;
    (seconds it took, the Outcome)."""
    start = time.perf_counter()
    done = dispatch_execute.execute(selector, kind, Operand(device_keys(n), "a"), None, False,
                                    False, algorithm)
    return time.perf_counter() - start, done


MAIN = threading.main_thread().name


def test_a_first_call_of_a_new_size_runs_a_built_config_and_builds_its_own_aside(gpu):
    state, compiler, selector = gpu
    seconds, _ = call(selector, 1 << 24)  # the first call builds its config: nothing stands in
    assert len(compiler.in_thread(MAIN)) == 1 and seconds >= COMPILE_S
    big = dict(Compiles().default_config(), block_size=512)
    assert Compiles.ran[-1] == (MAIN, 1 << 24, big)

    seconds, done = call(selector, 3_000_000 // 8)  # a new size, another config (block_size 256)
    assert len(compiler.in_thread(MAIN)) == 1, "the first call of a new size compiled"
    assert seconds < COMPILE_S / 2, seconds
    assert Compiles.ran[-1][1:] == (375_000, big) and done.stand_in
    assert state.copies and state.copies[-1][2] == 375_000 * 4  # the keys, copied for the build
    built.wait()
    small = Compiles().default_config()
    assert [config for thread, config in compiler.compiled if thread != MAIN] == [small]
    assert any(n == 375_000 and config == small and thread != MAIN
               for thread, n, config in Compiles.ran), "built on the call's shape"

    seconds, done = call(selector, 3_000_000 // 8)  # then the size's own config, built
    assert Compiles.ran[-1] == (MAIN, 375_000, small) and not done.stand_in
    assert len(compiler.in_thread(MAIN)) == 1
    assert built.counters()["builds"] >= 1


def test_calls_stand_in_until_the_build_is_done_and_start_it_once(gpu):
    state, compiler, selector = gpu
    call(selector, 1 << 24)
    for _ in range(5):
        _, done = call(selector, 1000)
        assert done.stand_in or not built.building()
    built.wait()
    assert [thread for thread, _ in compiler.compiled].count(MAIN) == 1
    assert len(compiler.compiled) == 2  # the big config, then the small one once


def test_a_plugin_asked_for_by_name_stands_in_with_its_own_configs_only(gpu):
    state, compiler, selector = gpu
    call(selector, 1 << 24, algorithm="compiles")
    seconds, done = call(selector, 1000, algorithm="compiles")
    assert done.stand_in and done.plugin.name == "compiles" and seconds < COMPILE_S / 2
    built.wait()


def test_without_memory_for_the_build_the_call_builds_its_config_itself(gpu):
    state, compiler, selector = gpu
    call(selector, 1 << 24)
    state.free = 1000
    seconds, done = call(selector, 1000)
    assert not done.stand_in and len(compiler.in_thread(MAIN)) == 2


def test_a_failed_build_is_not_tried_again_and_the_call_runs_its_config(gpu):
    state, compiler, selector = gpu
    call(selector, 1 << 24)
    Compiles.fail_on = {256}
    _, done = call(selector, 1000)
    assert done.stand_in
    built.wait()
    assert built.counters()["failed"] >= 1
    with pytest.raises(Exception, match="stand-in failure"):
        call(selector, 1000, algorithm="compiles")  # the call runs it: its failure is its own


def test_a_call_that_stood_in_prepares_no_repeats(gpu, monkeypatch):
    """A repeat of a shape whose call ran a stand-in must not replay the
    stand-in once the chosen config is built."""
    state, compiler, selector = gpu
    noted = []
    calls = sort_prepared.PreparedCalls(selector, dispatch_execute.execute)
    monkeypatch.setattr(calls, "note", lambda *args: noted.append(args[7]))
    keys = device_keys(1 << 24)
    calls.run("sort", Operand(keys, "a"), None, False, False, "auto", caller=keys)
    assert len(noted) == 1
    small = device_keys(1000)
    calls.run("sort", Operand(small, "a"), None, False, False, "auto", caller=small)
    assert len(noted) == 1
    built.wait()
    calls.run("sort", Operand(small, "a"), None, False, False, "auto", caller=small)
    assert len(noted) == 2


def test_turned_off_the_call_builds_its_config_itself(gpu, monkeypatch):
    state, compiler, selector = gpu
    monkeypatch.setenv(settings.BUILD_ASIDE, "0")
    call(selector, 1 << 24)
    seconds, done = call(selector, 1000)
    assert not done.stand_in and len(compiler.in_thread(MAIN)) == 2


def test_host_arrays_are_not_stood_in_for(gpu):
    state, compiler, selector = gpu
    call(selector, 1 << 24)
    request = dispatch_request.make_request("sort", Operand(np.zeros(1000, np.float32), "a"),
                                            None, False, False)
    plugin = registry.plugins()["compiles"]
    assert built.choose(plugin, None, request, lambda: 0, state, auto=True)[2] is False
