"""Every kernel template of every registered GPU plugin compiles with nvcc, from
the very text the runtime compiler gets (cudasortkit.render): every key dtype
at its default settings (with and without values), and every tunable value at one dtype, for sm_75 and sm_90.
Skipped only when nvcc is missing."""
import os
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor

import pytest

from cudasortkit import registry
from cudasortkit.compiler import NVCC_OPTIONS
from cudasortkit.render import include_dirs, render

pytestmark = pytest.mark.nvcc
NVCC = shutil.which("nvcc")
ARCHS = ("75", "90")
SWEEP_DTYPE = "uint32"

GPU_PLUGINS = {n: p for n, p in registry.plugins().items() if p.device == "gpu"}


def variants(plugin):
    """(template, dtype, value_bytes, config) to compile for one plugin."""
    base = plugin.default_config()
    value_sizes = (0, 8, 4) if plugin.pairs else (0,)
    seen = set()
    for template in plugin.templates:
        for dtype in plugin.dtypes:
            for vb in value_sizes:
                if vb == 4 and dtype != SWEEP_DTYPE:
                    continue
                yield template, dtype, vb, plugin.default_config(dtype, vb)
        for name, values in plugin.config_space().items():
            for value in values:
                config = dict(base, **{name: value})
                key = (template, tuple(sorted(config.items())))
                if key in seen or not plugin.valid_config(config, SWEEP_DTYPE, 8 if plugin.pairs else 0):
                    continue
                seen.add(key)
                yield template, SWEEP_DTYPE, 8 if plugin.pairs else 0, config


def compile_one(plugin, template, dtype, vb, config):
    source = render(type(plugin), template, dtype, vb, config)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "kernel.cu")
        with open(path, "w") as f:
            f.write(source)
        cmd = [NVCC, "--fatbin", *NVCC_OPTIONS, "-o", os.path.join(tmp, "kernel.fatbin"), path]
        for arch in ARCHS:
            cmd += ["-gencode", f"arch=compute_{arch},code=sm_{arch}"]
        for d in include_dirs(type(plugin)):
            cmd += ["-I", d]
        result = subprocess.run(cmd, capture_output=True, text=True)
    return result.returncode, f"{plugin.name} {template} {dtype} values={vb} {config}:\n{result.stderr}"


@pytest.mark.skipif(NVCC is None, reason="nvcc not found")
@pytest.mark.parametrize("name", sorted(GPU_PLUGINS))
def test_templates_compile(name):
    plugin = GPU_PLUGINS[name]
    jobs = list(variants(plugin))
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        results = list(pool.map(lambda v: compile_one(plugin, *v), jobs))
    failures = [msg for rc, msg in results if rc != 0]
    assert not failures, f"{len(failures)} of {len(jobs)} variants failed:\n" + "\n".join(failures[:3])


@pytest.mark.skipif(NVCC is None, reason="nvcc not found")
def test_core_kernels_compile():
    from cudasortkit.corekernels import CoreKernels

    rc, msg = compile_one(CoreKernels(), "util.cu", "uint32", 0, CoreKernels().default_config())
    assert rc == 0, msg
