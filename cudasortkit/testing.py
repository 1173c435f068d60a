"""Checks a plugin's author runs in the plugin's own test suite.

    from cudasortkit.testing import check_plugin

    def test_my_plugin():
        check_plugin(MySort)            # declarations, configs, and on a GPU conformance

Each check raises AssertionError (or the registry's TypeError/ValueError for
a wrong declaration) naming what is wrong:

- `check_declarations(cls)`: what discovery checks when it loads the plugin,
  plus: every key dtype and payload width it serves has a default config
  with values among the tunables' own, which valid_config accepts within
  this device's limits (an H100's without a device).
- `check_templates(cls, nvcc=None, compile=True)`: every template renders
  for every key dtype and payload at the default config (`renderings(cls)`);
  with nvcc (found on PATH, or given), each distinct rendering compiles for
  sm_90 with the runtime's options (what CI can check without a GPU).
- `check_conformance(cls, ...)`: sort, argsort and sort_by_key of fresh
  random keys with NaNs, infinities, -0.0 and integer limits, at awkward
  sizes, ascending and descending, against NumPy's order (exactly, for a
  stable plugin's argsort and pairs); needs a GPU for a GPU plugin
  (raises cudasortkit.gpu.device.GPUUnavailable without one).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from . import order
from .dtypes import VALUE_BYTES, numpy_dtype
from .sdk.plugin import Request, check_plugin_class, config_is_valid

SIZES = (1, 2, 3, 31, 257, 1025, 4099)


def check_plugin(cls, nvcc: str | None = None, *, compile: bool = True) -> None:
    """All three checks: templates compiled where nvcc is found (compile=False:
    rendered only), conformance only where it can run."""
    from .gpu.device import gpu_available

    check_declarations(cls)
    check_templates(cls, nvcc, compile=compile)
    if cls.device == "cpu" or gpu_available():
        check_conformance(cls)


def _payloads(plugin) -> tuple:
    return (0, *VALUE_BYTES) if plugin.pairs else (0,)


def check_declarations(cls) -> None:
    from .gpu.device import current_limits

    check_plugin_class(cls, None)
    plugin = cls()
    limits = current_limits()
    for dtype in cls.dtypes:
        for vb in _payloads(plugin):
            config = plugin.default_config(dtype, vb)
            assert set(config) == set(cls.tunables), \
                f"{cls.name}: default_config({dtype}, {vb}) sets {sorted(config)}, not the tunables"
            for name, value in config.items():
                assert value in cls.tunables[name].values, \
                    f"{cls.name}: default {name}={value!r} is not among {cls.tunables[name].values}"
            assert config_is_valid(plugin, config, dtype, vb, limits), \
                f"{cls.name}: valid_config rejects its own default for {dtype}, {vb}-byte values"


def renderings(cls) -> list:
    """(KernelTemplate, dtype, value_bytes, config) of every template for
    every key dtype and payload width at its default config: what
    check_templates renders and compiles."""
    from .build.template import KernelTemplate

    plugin = cls()
    return [(KernelTemplate(template, cls.template_package), dtype, vb,
             plugin.default_config(dtype, vb))
            for template in cls.templates for dtype in cls.dtypes for vb in _payloads(plugin)]


def compile_rendering(nvcc: str, template, dtype, value_bytes: int, config, arch: str) -> str | None:
    """nvcc's errors for one rendering, compiled with the runtime's options
    for `arch`; None when it compiles."""
    from .build.compiler import NVCC_OPTIONS

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "kernel.cu")
        with open(path, "w") as f:
            f.write(template.render(dtype, value_bytes, config))
        cmd = [nvcc, "--cubin", *NVCC_OPTIONS, f"-arch={arch}", "-o", path + ".cubin", path]
        for d in template.include_dirs:
            cmd += ["-I", d]
        result = subprocess.run(cmd, capture_output=True, text=True)
    return None if result.returncode == 0 else result.stderr


def check_templates(cls, nvcc: str | None = None, arch: str = "sm_90", *,
                    compile: bool = True) -> None:
    """Every rendering (renderings(cls)) renders; with compile and nvcc (given,
    or found on PATH) each distinct source compiles for `arch`, several nvcc
    processes at a time. A CPU plugin has no templates."""
    if cls.device != "gpu":
        return
    distinct = {}  # source -> its first rendering: equal sources compile once
    for rendering in renderings(cls):
        template, dtype, vb, config = rendering
        distinct.setdefault(template.render(dtype, vb, config), rendering)
    nvcc = nvcc or shutil.which("nvcc")
    if not compile or nvcc is None:
        return
    jobs = list(distinct.values())
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:  # nvcc: subprocesses
        errors = list(pool.map(lambda r: compile_rendering(nvcc, *r, arch), jobs))
    for (template, dtype, vb, config), error in zip(jobs, errors):
        assert error is None, (f"{cls.name}: {template.file} for {dtype}, {vb}-byte values, "
                               f"config {config} does not compile for {arch}:\n{error}")


def _keys(dtype, n, rng) -> np.ndarray:
    dt = numpy_dtype(dtype)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        keys = rng.integers(info.min, info.max, n, dtype=dt, endpoint=True)
        special = np.array([info.min, info.max, 0, 1], dt)
    else:
        keys = (rng.standard_normal(n) * 100).astype(dt)
        special = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0], np.float64).astype(dt)
    mask = rng.random(n) < 0.2
    keys[mask] = rng.choice(special, int(mask.sum()))
    return keys


def _equal(got, want) -> bool:
    got, want = order.comparable(np.asarray(got)), order.comparable(np.asarray(want))
    same = got == want
    if want.dtype.kind == "f":
        same |= np.isnan(got) & np.isnan(want)
    return bool(same.all())


def check_conformance(cls, sizes=SIZES, dtypes=None, seed=None) -> None:
    """The plugin, default configs, against cudasortkit.order (NumPy 2.5's order)."""
    from .gpu.device import GPUUnavailable, gpu_available, unavailable_reason
    from .dispatch.execute import run_plugin

    if cls.device == "gpu" and not gpu_available():
        raise GPUUnavailable(f"check_conformance({cls.name}) needs a GPU: {unavailable_reason()}")
    plugin = cls()
    rng = np.random.default_rng(seed)
    for dtype in dtypes or cls.dtypes:
        for n in sizes:
            keys = _keys(dtype, n, rng)
            for descending in (False, True):
                where = f"{cls.name}: {dtype} n={n} descending={descending}"
                idx = order.argsort(keys, descending)
                if plugin.unsupported(Request("sort", dtype, n, descending=descending)) is None:
                    got, _ = run_plugin(plugin, None, "sort", keys, descending=descending)
                    assert _equal(got, keys[idx]), f"{where}: sort differs from NumPy's order"
                if not plugin.pairs:
                    continue
                if plugin.unsupported(Request("argsort", dtype, n, descending=descending,
                                              value_bytes=8)) is None:
                    _, got = run_plugin(plugin, None, "argsort", keys, descending=descending)
                    got = np.asarray(got)
                    assert np.array_equal(np.sort(got), np.arange(n)), f"{where}: argsort is no permutation"
                    assert _equal(keys[got], keys[idx]), f"{where}: argsort does not sort"
                    if plugin.stable:
                        assert np.array_equal(got, idx), f"{where}: stable argsort differs from NumPy's"
                values = rng.permutation(n).astype(np.int32)
                if plugin.stable and plugin.unsupported(Request("pairs", dtype, n, stable=True,
                                                                descending=descending,
                                                                value_bytes=4)) is None:
                    k, v = run_plugin(plugin, None, "pairs", keys, values, descending=descending)
                    assert _equal(k, keys[idx]) and np.array_equal(np.asarray(v), values[idx]), \
                        f"{where}: sort_by_key differs from NumPy's stable order"
