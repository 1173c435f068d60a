"""Every kernel template of every registered GPU plugin compiles with nvcc, from
the very text the runtime compiler gets (KernelTemplate.render): every key dtype
at its default settings (with and without values), and every tunable value
valid on an H100 (DeviceLimits.sm90()) at one dtype, for sm_75 and sm_90; the
core's own kernels too. Every kernel's argument letters, as read from its
prototype, match the parameters nvcc gives it in PTX. cudasortkit.merge's
kernels also at every payload width for sm_90, launched with as many
arguments as they take. Skipped only when nvcc is missing."""
import os
import re
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from cudasortkit.sdk import registry
from cudasortkit.build.compiler import NVCC_OPTIONS
from cudasortkit.gpu.device import DeviceLimits
from cudasortkit.build.template import KernelTemplate
from cudasortkit.dtypes import KEY_DTYPES as KEY_DTYPES_ALL

pytestmark = pytest.mark.nvcc
NVCC = shutil.which("nvcc")
ARCHS = ("75", "90")
#: Built to PTX only (every arch's source checked; sm_90's assembled).
OLDEST_ARCH = "75"
#: A swept config (one tunable moved off its default) is compiled for the
#: device the sweep is valid on only; every dtype's default config, for
#: every arch (the oldest CUDA 13 targets included). Half the nvcc time.
SWEEP_ARCHS = ("90",)
#: ...and assembled unoptimised: what a swept value can break is the source
#: (nvcc's front end and PTX); ptxas still checks resources. Defaults are
#: assembled as the library builds them (-O3). About 40% of their nvcc time.
SWEEP_PTXAS = ("-Xptxas", "-O0")
SWEEP_DTYPE = "uint32"
#: Configs are swept where valid on an H100 (no device here to ask).
LIMITS = DeviceLimits.sm90()

GPU_PLUGINS = {n: p for n, p in registry.plugins().items() if p.device == "gpu"}


def sweep_dtype(plugin) -> str:
    """The dtype configs are swept at: SWEEP_DTYPE, or the plugin's first
    if it does not sort that one."""
    return SWEEP_DTYPE if SWEEP_DTYPE in plugin.dtypes else plugin.dtypes[0]


#: Key dtypes whose pair sorts (8-byte values) are compiled besides the
#: swept one: a width each, and the two half floats. Every dtype's keys-only
#: default is compiled for every arch; the GPU tiers run every dtype's pairs.
PAIR_DTYPES = ("uint8", "int16", "float16", "bfloat16", "float64", "int64")


def _closure_text(template: KernelTemplate) -> str:
    """The template's text and that of every header it includes from its
    include dirs, recursively."""
    texts, todo, seen = [], [str(template.path)], set()
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        with open(path) as f:
            text = f.read()
        texts.append(text)
        for name in re.findall(r'#include\s+"([^"]+)"', text):
            for d in [os.path.dirname(path), *template.include_dirs]:
                if os.path.exists(os.path.join(d, name)):
                    todo.append(os.path.join(d, name))
                    break
    return "\n".join(texts)


def uses(template: KernelTemplate, tunable: str) -> bool:
    """Whether the template's source (headers included) reads the tunable's
    macro: a value swept in a template that never reads it renders the same
    kernels, and is not compiled again."""
    return re.search(r"\b" + tunable.upper() + r"\b", _closure_text(template)) is not None


def variants(plugin):
    """(template, dtype, value_bytes, config, archs) to compile for one plugin."""
    base = plugin.default_config()
    swept = sweep_dtype(plugin)
    seen = set()
    for template in plugin.templates:
        reads = KernelTemplate(template, plugin.template_package)
        for dtype in plugin.dtypes:
            yield template, dtype, 0, plugin.default_config(dtype, 0), ARCHS
            if plugin.pairs and (dtype == swept or dtype in PAIR_DTYPES):
                yield template, dtype, 8, plugin.default_config(dtype, 8), SWEEP_ARCHS
            if plugin.pairs and dtype == swept:
                yield template, dtype, 4, plugin.default_config(dtype, 4), SWEEP_ARCHS
        for name, values in plugin.config_space().items():
            if not uses(reads, name):
                continue
            for value in values:
                config = dict(base, **{name: value})
                key = (template, tuple(sorted(config.items())))
                vb = 8 if plugin.pairs else 0
                if key in seen or not plugin.valid_config(config, swept, vb, LIMITS):
                    continue
                seen.add(key)
                yield template, swept, 8 if plugin.pairs else 0, config, SWEEP_ARCHS


def compile_one(plugin, template, dtype, vb, config, archs=ARCHS):
    return compile_template(KernelTemplate(template, plugin.template_package), dtype, vb, config,
                            f"{plugin.name} {template}", archs)


def compile_template(template, dtype, vb, config, label, archs=ARCHS):
    source = template.render(dtype, vb, config)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "kernel.cu")
        with open(path, "w") as f:
            f.write(source)
        cmd = [NVCC, "--fatbin", *NVCC_OPTIONS, "-o", os.path.join(tmp, "kernel.fatbin"), path]
        for arch in archs:
            # the oldest arch as PTX: its front end and intrinsics, not ptxas
            code = f"compute_{arch}" if arch == OLDEST_ARCH else f"sm_{arch}"
            cmd += ["-gencode", f"arch=compute_{arch},code={code}"]
        if archs == SWEEP_ARCHS:
            cmd += SWEEP_PTXAS
        for d in template.include_dirs:
            cmd += ["-I", d]
        result = subprocess.run(cmd, capture_output=True, text=True)
    return result.returncode, f"{label} {dtype} values={vb} {config}:\n{result.stderr}"


@pytest.mark.skipif(NVCC is None, reason="nvcc not found")
@pytest.mark.parametrize("name", sorted(GPU_PLUGINS))
def test_templates_compile(name):
    plugin = GPU_PLUGINS[name]
    assert_all_compile(list(variants(plugin)), lambda v: compile_one(plugin, *v))


def assert_all_compile(jobs, compile_job):
    """compile_job(job) -> (returncode, message) for every job, on every
    CPU at once; the first failures' messages if any fails."""
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        results = list(pool.map(compile_job, jobs))
    failures = [msg for rc, msg in results if rc != 0]
    assert not failures, f"{len(failures)} of {len(jobs)} variants failed:\n" + "\n".join(failures[:3])


@pytest.mark.skipif(NVCC is None, reason="nvcc not found")
def test_core_kernels_compile():
    from cudasortkit.build.corekernels import UTIL, UTIL_CONFIG

    for dtype in ("uint8", "int32", "uint64"):
        rc, msg = compile_template(UTIL, dtype, 0, UTIL_CONFIG, "core util.cu")
        assert rc == 0, msg


@pytest.mark.skipif(NVCC is None, reason="nvcc not found")
def test_dask_counts_compiles_for_every_key_dtype():
    """kernels/dask_counts.cu (the distributed sort's exact cuts and
    buckets) at every key dtype and bool's uint8, for sm_90."""
    pytest.importorskip("dask")
    from cudasortkit.dask.counting import COUNT_CONFIG, DASK_COUNTS

    from cudasortkit.dask.counting import DASK_PARTITION, partition_config

    cases = [(DASK_COUNTS, d, 0, COUNT_CONFIG) for d in (*KEY_DTYPES_ALL, "uint8")]
    # The partition kernels once per key width and value width (registers,
    # shared memory); their keys' encodings per dtype are dask_counts.cu's
    # (keys.cuh), compiled above for every key dtype.
    cases += [(DASK_PARTITION, d, v, partition_config(np.dtype(d).itemsize, v, s))
              for d in ("uint8", "int16", "float32", "float64") for v, s in ((0, 255), (4, 19), (8, 1))]
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        results = list(pool.map(lambda c: _compile_ptx(*c), cases))
    failures = [msg for rc, msg, _ in results if rc != 0]
    assert not failures, "\n".join(failures[:3])
    entries = [set(re.findall(r"\.entry\s+(\w+)", ptx)) for _, _, ptx in results]
    assert all(e == {"csk_dask_count"} for e in entries[:len(KEY_DTYPES_ALL) + 1])
    assert all(e == {"csk_dask_partition_counts", "csk_dask_partition_scatter"}
               for e in entries[len(KEY_DTYPES_ALL) + 1:])


# Argument letters against what nvcc made of each prototype.
#: Bytes of one argument per pycuda prepare() letter.
LETTER_BYTES = {"P": 8, "q": 8, "Q": 8, "i": 4, "I": 4, "f": 4, "d": 8}
PTX_PARAM_BYTES = {"u64": 8, "b64": 8, "s64": 8, "f64": 8, "u32": 4, "b32": 4, "s32": 4, "f32": 4}


def _ptx_params(ptx: str, kernel: str) -> list:
    """Byte sizes of a kernel's parameters, from its PTX .entry."""
    m = re.search(r"\.entry\s+" + kernel + r"\s*\((.*?)\)", ptx, re.S)
    assert m, f"{kernel} not in the PTX"
    return [PTX_PARAM_BYTES[t] for t in re.findall(r"\.param\s+\.(\w+)", m.group(1))]


def _compile_ptx(template, dtype, vb, config, assemble=True):
    """nvcc for sm_90 (cubin, PTX kept; assemble=False: the PTX alone, for
    tests that read its parameters of renderings other tests assemble):
    (returncode, message, PTX text)."""
    source = template.render(dtype, vb, config)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "kernel.cu")
        with open(path, "w") as f:
            f.write(source)
        if assemble:
            cmd = [NVCC, "--cubin", *NVCC_OPTIONS, "-arch=sm_90", "--keep", "--keep-dir", tmp,
                   "-o", os.path.join(tmp, "kernel.cubin"), path]
        else:
            cmd = [NVCC, "--ptx", *NVCC_OPTIONS, "-arch=sm_90", "-o",
                   os.path.join(tmp, "kernel.ptx"), path]
        for d in template.include_dirs:
            cmd += ["-I", d]
        result = subprocess.run(cmd, capture_output=True, text=True)
        ptx_path = os.path.join(tmp, "kernel.ptx")
        ptx = open(ptx_path).read() if os.path.exists(ptx_path) else ""
    return result.returncode, f"{template} {dtype} values={vb} {config}:\n{result.stderr}", ptx


def _letter_cases():
    """(label, template, dtype, value_bytes, config): each template of each
    GPU plugin and the core's, once keys-only and once with values."""
    from cudasortkit.build.corekernels import UTIL, UTIL_CONFIG
    from cudasortkit.sdk.scan import SCAN_DTYPE, SCAN_TEMPLATES, scan_config

    for name, plugin in sorted(GPU_PLUGINS.items()):
        for template in plugin.templates:
            narrow = "int8" if "int8" in plugin.dtypes else plugin.dtypes[-1]
            for dtype, vb in ((narrow, 0), (sweep_dtype(plugin), 8 if plugin.pairs else 0)):
                yield (f"{name} {template}", KernelTemplate(template, plugin.template_package),
                       dtype, vb, plugin.default_config(dtype, vb))
    yield "core util.cu", UTIL, "int64", 0, UTIL_CONFIG
    from cudasortkit.dask.counting import COUNT_CONFIG, DASK_COUNTS

    yield "core dask_counts.cu", DASK_COUNTS, "float32", 0, COUNT_CONFIG
    from cudasortkit.host.kernels import CONFIG as HOSTPIPE_CONFIG, HOSTPIPE

    for dtype in ("uint8", "float32", "float64"):
        yield f"core hostpipe.cu ({dtype})", HOSTPIPE, dtype, 0, HOSTPIPE_CONFIG
    for count_bytes, template in SCAN_TEMPLATES.items():
        yield f"core scan.cu ({count_bytes}-byte counts)", template, SCAN_DTYPE, 0, scan_config()
    yield from _unique_search_cases(("int8", "float64"))


#: search_tree.cu besides the tree plugin's default: the configs the GPU
#: tests patch in (small tops: deep trees at small n; every fanout).
TREE_VARIANTS = ({"block_size": 64, "fanout": 8, "top": 16},
                 {"block_size": 128, "fanout": 4, "top": 8},
                 {"block_size": 256, "fanout": 16, "top": 64},
                 {"block_size": 256, "fanout": 32, "top": 64})

#: search_kary.cu besides the kary plugin's default: every lane count.
KARY_VARIANTS = ({"block_size": 128, "lanes": 4}, {"block_size": 64, "lanes": 8},
                 {"block_size": 256, "lanes": 16})
VARIANTS = {"tree": TREE_VARIANTS, "kary": KARY_VARIANTS}
#: The key dtypes the variants compile at (a word of each width, a float):
#: the variants change the search's shape, not how keys are read.
VARIANT_DTYPES = ("int8", "uint16", "float32", "float64")


#: Key dtypes unique.cu is also compiled for at COMPACT_CONFIG.
COMPACT_DTYPES = ("uint8", "int16", "int32", "uint64")


def _unique_search_cases(dtypes):
    """(label, template, dtype, 0, config) of unique.cu (both count widths)
    and of every search plugin's templates (search.cu, search_tree.cu) at
    its config, for `dtypes`; the tree's and kary's VARIANTS too, at those
    of VARIANT_DTYPES."""
    from cudasortkit.calls.unique import COMPACT_CONFIG, UNIQUE_CONFIG
    from cudasortkit.sdk.search import SearchPlugin

    for dtype in dtypes:
        for count_bytes in (4, 8):
            for bools in (0, 1) if dtype == "uint8" else (0,):  # bools sort as uint8
                # csk_unique_compact's own tiles, at one dtype of each width
                configs = (UNIQUE_CONFIG, COMPACT_CONFIG) if dtype in COMPACT_DTYPES \
                    else (UNIQUE_CONFIG,)
                for config in configs:
                    yield (f"core unique.cu ({count_bytes}-byte counts{', bools' if bools else ''}"
                           f"{', compact tiles' if config is COMPACT_CONFIG else ''})",
                           KernelTemplate("unique.cu", defines={"unique_count_bytes": count_bytes,
                                                                "unique_bool": bools}),
                           dtype, 0, config)
        for name, plugin in sorted(registry.plugins(SearchPlugin.entry_point_group).items()):
            for template in plugin.templates:
                yield (f"search {name} {template}",
                       KernelTemplate(template, plugin.template_package), dtype, 0,
                       plugin.default_config(dtype))
                for variant in VARIANTS.get(name, ()) if dtype in VARIANT_DTYPES else ():
                    yield (f"search {name} {template} {variant}",
                           KernelTemplate(template, plugin.template_package), dtype, 0,
                           {**plugin.default_config(dtype), **variant})


def test_search_cases_cover_every_search_template():
    """The compile and argument-letter checks see search.cu (binary, merge),
    search_tree.cu (tree) and search_kary.cu (kary) at every key dtype."""
    labels = {c[0] for c in _unique_search_cases(("int8", "float64"))}
    assert {"search binary search.cu", "search merge search.cu",
            "search tree search_tree.cu", "search kary search_kary.cu"} <= labels


@pytest.mark.skipif(NVCC is None, reason="nvcc not found")
def test_unique_search_kernels_compile():
    """unique.cu and the search plugins' templates compile for sm_90 at every
    key dtype (and bool's uint8); unique.cu holds the six kernels
    calls/unique.py launches, at both count widths."""
    cases = list(_unique_search_cases(KEY_DTYPES_ALL))
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        results = list(pool.map(lambda c: _compile_ptx(*c[1:]), cases))
    failures = [msg for rc, msg, _ in results if rc != 0]
    assert not failures, f"{len(failures)} of {len(cases)} failed:\n" + "\n".join(failures[:3])
    unique = {"csk_unique_tile_counts", "csk_unique_first_special", "csk_unique_write",
              "csk_unique_inverse", "csk_unique_counts", "csk_unique_compact"}
    for (label, *_), (_, _, ptx) in zip(cases, results):
        if label.startswith("core unique.cu"):
            assert set(re.findall(r"\.entry\s+(\w+)", ptx)) == unique, label


@pytest.mark.skipif(NVCC is None, reason="nvcc not found")
def test_argument_letters_match_the_compiled_parameters():
    """For every extern "C" kernel of every template (plugins' and the
    core's), the letters read from its prototype have the sizes of the
    parameters nvcc compiled it with (its PTX .entry)."""
    cases = list(_letter_cases())
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        results = list(pool.map(lambda c: _compile_ptx(*c[1:], assemble=False), cases))
    checked = 0
    for (label, template, dtype, vb, config), (rc, msg, ptx) in zip(cases, results):
        assert rc == 0, msg
        kernels = [k for k in re.findall(r"\.entry\s+(\w+)", ptx) if not k.startswith("_Z")]
        assert kernels, f"{label}: no extern \"C\" kernel in the PTX"
        for kernel in kernels:
            letters = template.signature(kernel, dtype, vb, config)
            assert [LETTER_BYTES[c] for c in letters] == _ptx_params(ptx, kernel), (
                f"{label} {kernel} ({dtype}, values={vb}): letters {letters!r} do not match "
                f"the compiled parameters")
            checked += 1
    assert checked >= 30


# cudasortkit.merge's kernels: every key width and kind, every payload width.
MERGE_DTYPES = ("uint8", "int16", "float16", "float32", "uint64", "float64")
MERGE_VALUE_BYTES = (0, 4, 8)


class _RecordingJob:
    """The parts of a Job that MergeSort.merge uses, recording its kernels
    and launches instead of running them."""

    def __init__(self, plugin, dtype, value_bytes):
        self.config = plugin.default_config(dtype, value_bytes)
        self.key_bytes = np.dtype(dtype).itemsize
        self.value_bytes = value_bytes
        self.desc_mask = 0
        self.keys_out, self.values_out = 0x1000, 0x2000 if value_bytes else 0
        self.kernels, self.events = {}, []

    def kernel(self, template, name):
        self.kernels[name] = template
        return name

    def alloc_parts(self, parts):
        return {name: 0x10000 * (i + 1) for i, (name, _) in enumerate(parts)}

    def memset32(self, dst, value, count):
        self.events.append(("memset32", (dst, value, count)))

    def blocks(self, items, per_block):
        return -(-int(items) // int(per_block))

    def launch(self, kernel, grid, block, *args, shared=0):
        self.events.append((kernel, args))


@pytest.mark.skipif(NVCC is None, reason="nvcc not found")
def test_merge_kernels_compile_sm90():
    """merge_partition, merge_arrays and merge_fallback compile for sm_90 at
    every key width and kind and payload width, and MergeSort.merge launches
    each with as many arguments, of the same sizes, as the kernel declares."""
    plugin = GPU_PLUGINS["merge_sort"]
    template = KernelTemplate("merge_sort.cu", plugin.template_package)
    jobs = [(dtype, vb) for dtype in MERGE_DTYPES for vb in MERGE_VALUE_BYTES]
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        results = list(pool.map(
            lambda v: _compile_ptx(template, *v, plugin.default_config(*v)), jobs))
    failures = [msg for rc, msg, _ in results if rc != 0]
    assert not failures, f"{len(failures)} of {len(jobs)} variants failed:\n" + "\n".join(failures[:3])

    for (dtype, vb), (_, _, ptx) in zip(jobs, results):
        job = _RecordingJob(plugin, dtype, vb)
        plugin.merge(job, 0x3000, 0x4000 if vb else 0, 5000, 0x5000, 0x6000 if vb else 0, 7)
        assert set(job.kernels) == {"merge_partition", "merge_arrays", "merge_fallback"}
        assert set(job.kernels.values()) == {"merge_sort.cu"}
        assert [e for e, _ in job.events] == ["memset32", "merge_partition", "merge_arrays", "merge_fallback"]
        flag = job.events[0][1]
        assert flag[1:] == (0, 1), "the unsorted flag is one word, zeroed"
        assert job.events[2][1][-1] == flag[0] and job.events[3][1][-1] == flag[0], "both kernels get the flag"
        for name, args in job.events[1:]:
            signature = template.signature(name, dtype, vb, job.config)
            assert len(args) == len(signature), f"{name}: {len(args)} arguments for {signature!r}"
            assert [LETTER_BYTES[c] for c in signature] == _ptx_params(ptx, name), (
                f"{name} ({dtype}, values={vb}): signature {signature!r} does not match the kernel")


@pytest.mark.skipif(NVCC is None, reason="nvcc not found")
def test_multikey_kernels_compile_sm90():
    """multikey.cu (csk_pack, csk_gather(_keys), the unique rows kernels) compiles for sm_90 at every key
    dtype, and the launches in sdk/multikey.py pass as many arguments as
    each kernel declares."""
    from cudasortkit.dtypes import KEY_DTYPES
    from cudasortkit.sdk.multikey import _CONFIG, MULTIKEY

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        results = list(pool.map(lambda d: _compile_ptx(MULTIKEY, d, 0, _CONFIG), KEY_DTYPES))
    failures = [msg for rc, msg, _ in results if rc != 0]
    assert not failures, "\n".join(failures[:3])
    for dtype, (_, _, ptx) in zip(KEY_DTYPES, results):
        for name, count in (("csk_pack", 10), ("csk_gather", 4), ("csk_gather_keys", 4),
                            ("csk_row_starts", 5),
                            ("csk_unique_scatter", 5), ("csk_unique_rows", 8)):
            signature = MULTIKEY.signature(name, dtype, 0, _CONFIG)
            assert len(signature) == count, f"{name}: {signature!r}"
            assert [LETTER_BYTES[c] for c in signature] == _ptx_params(ptx, name), name

# Selection plugins (cudasortkit.selection): their own kind, their own table.
SELECT_PLUGINS = {n: p for n, p in registry.plugins("cudasortkit.selection").items()
                  if p.device == "gpu"}


def _select_variants(plugin):
    """(template, dtype, config, archs): every key dtype at the defaults
    (every arch), every tunable value at uint32 (SWEEP_ARCHS)."""
    base = plugin.default_config()
    for template in plugin.templates:
        for dtype in plugin.dtypes:
            yield template, dtype, base, ARCHS
        reads = KernelTemplate(template, plugin.template_package)
        for name, values in plugin.config_space().items():
            for value in values:
                if value != base[name] and uses(reads, name):
                    yield template, "uint32", dict(base, **{name: value}), SWEEP_ARCHS


@pytest.mark.skipif(NVCC is None, reason="nvcc not found")
@pytest.mark.parametrize("name", sorted(SELECT_PLUGINS))
def test_selection_templates_compile(name):
    plugin = SELECT_PLUGINS[name]
    assert_all_compile(list(_select_variants(plugin)), lambda v: compile_template(
        KernelTemplate(v[0], plugin.template_package), v[1], 0, v[2], f"{name} {v[0]}", v[3]))


class _SelectRecordingJob:
    """The parts of a SelectJob a selection plugin's run() uses, recording
    each kernel launch's name and argument count instead of running it."""

    def __init__(self, plugin, request, dtype):
        self.plugin, self.request, self.dtype = plugin, request, dtype
        self.config = plugin.default_config()
        self.key_bytes = np.dtype(dtype).itemsize
        self.key_bits = 8 * self.key_bytes
        self.rows, self.row_len, self.k = request.rows, request.row_len, request.k
        self.n = request.n
        self.largest, self.sorted = request.largest, request.sorted
        self.keys_in, self.keys_out, self.values_out = 0x1000, 0x2000, 0x3000
        self.launches, self.sorts = [], []
        self.limits = LIMITS

    def kernel(self, template, name, defines=None, config=None, value_bytes=None):
        return template, name, dict(self.config if config is None else config)

    def kernels(self, template, names, defines=None, config=None, value_bytes=None):
        return tuple(self.kernel(template, name, defines, config, value_bytes) for name in names)

    def alloc(self, nbytes):
        return 0x10000

    def alloc_parts(self, parts):
        return {name: 0x10000 * (i + 1) for i, (name, _) in enumerate(parts)}

    def memset32(self, dst, value, count):
        pass

    def blocks(self, items, per_block):
        return -(-int(items) // int(per_block))

    def launch(self, kernel, grid, block, *args, shared=0):
        assert shared <= self.limits.shared_per_block_optin - 4096, shared
        self.launches.append((kernel, grid, block, args))

    def argsort_rows(self, words, word_dtype, rows=None, row_len=None):
        self.sorts.append((word_dtype, rows, row_len))
        return 0x20000

    def sort_rows(self, words, word_dtype, rows, row_len, values=0):
        self.sorts.append((word_dtype, rows, row_len))
        return (0x30000, 0x40000) if values else 0x30000


@pytest.mark.skipif(NVCC is None, reason="nvcc not found")
@pytest.mark.parametrize("name", sorted(SELECT_PLUGINS))
def test_selection_launches_match_the_kernels(name):
    """Every launch a selection plugin's run() makes (topk and partition,
    narrow and wide keys) passes as many arguments as the kernel declares,
    of the sizes nvcc compiled it with for sm_90, with a block of at most
    1024 threads and a grid within 2^31 - 1."""
    from cudasortkit.sdk.selection import SelectRequest

    plugin = SELECT_PLUGINS[name]
    checked = 0
    compiled = {}  # (template, dtype, config): nvcc's answer, once
    for dtype in ("uint8", "float32", "float64"):
        for request in (SelectRequest("topk", dtype, 3, 10000, 7, True),
                        SelectRequest("topk", dtype, 5, 1000, 7, False),
                        SelectRequest("topk", dtype, 4, 20000, 50, True),
                        SelectRequest("topk", dtype, 1, 100000, 1000, True),
                        SelectRequest("topk", dtype, 2, 70000, 3000, False),
                        SelectRequest("topk", dtype, 1, 200000, 3000, True),
                        SelectRequest("partition", dtype, 2, 5000, 5000, False, True, True, (17,)),
                        SelectRequest("partition", dtype, 100, 300, 300, False, True, True, (3,))):
            if plugin.unsupported(request) is not None:
                continue
            job = _SelectRecordingJob(plugin, request, dtype)
            plugin.run(job)
            assert job.launches
            for (template, kernel, config), grid, block, args in job.launches:
                tpl = KernelTemplate(template, plugin.template_package)
                key = (template, dtype, tuple(sorted(config.items())))
                if key not in compiled:
                    compiled[key] = _compile_ptx(tpl, dtype, 0, config, assemble=False)
                rc, msg, ptx = compiled[key]
                assert rc == 0, msg
                letters = tpl.signature(kernel, dtype, 0, config)
                assert len(letters) == len(args), f"{name} {kernel}: {len(args)} arguments " \
                                                  f"for {letters!r}"
                assert [LETTER_BYTES[c] for c in letters] == _ptx_params(ptx, kernel)
                assert 0 < block <= 1024 and 0 <= grid < 2 ** 31
                checked += 1
    assert checked


@pytest.mark.skipif(NVCC is None, reason="nvcc not found")
def test_warp_select_row_variants_compile():
    """warp_select's kernel at the keys per lane its rows pick (1 .. 64),
    narrow and wide keys."""
    cases = [(items, dtype) for items in (1, 8, 64) for dtype in ("uint8", "bfloat16", "float64")]
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        results = list(pool.map(lambda c: compile_template(
            KernelTemplate("warp_select.cu", defines={"row_items": c[0]}), c[1], 0,
            {"block_size": 128}, f"warp_select row_items={c[0]}"), cases))
    failures = [msg for rc, msg in results if rc != 0]
    assert not failures, "\n".join(failures[:3])


def _carried_cases():
    """(label, template, dtype, value_bytes, config): the sweep templates
    built as pairs and argsorts build them (cudasortkit/sdk/sweep.py's
    sweep_defines): 32-bit positions carried for 8-byte values
    (VALUE_CARRY 4; onesweep's gather_values on), 64-bit status words too,
    and msd_local's pairs and argsorts (4-byte values carried as they are)."""
    plugins = registry.plugins()
    for name, template, dtypes, widths in (
            ("onesweep", "onesweep.cu", KEY_DTYPES_ALL, (8,)),
            ("counting", "counting_sweep.cu", plugins["counting"].dtypes, (8,)),
            ("msd_local", "msd_local.cu", plugins["msd_local"].dtypes, (4, 8))):
        plugin = plugins[name]
        for dtype in dtypes:
            for vb in widths:
                config = plugin.default_config(dtype, vb)
                if "gather_values" in config:
                    config = dict(config, gather_values=int(vb == 8))
                defines = {"value_carry": 4} if vb == 8 else {}
                yield (f"{name} {template} carried", KernelTemplate(template, plugin.template_package,
                                                                    defines), dtype, vb, config)
    onesweep = plugins["onesweep"]
    yield ("onesweep onesweep.cu carried, wide status",
           KernelTemplate("onesweep.cu", onesweep.template_package,
                          {"value_carry": 4, "wide_status": 1}),
           "uint32", 8, onesweep.default_config("uint32", 8))


@pytest.mark.skipif(NVCC is None, reason="nvcc not found")
def test_carried_value_variants_compile_sm90():
    """Every sweep template as pairs and argsorts build it, carrying 32-bit
    words between passes, compiles for sm_90, its argument letters matching
    the compiled parameters."""
    cases = list(_carried_cases())
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        results = list(pool.map(lambda c: _compile_ptx(*c[1:]), cases))
    failures = [msg for rc, msg, _ in results if rc != 0]
    assert not failures, f"{len(failures)} of {len(cases)} failed:\n" + "\n".join(failures[:3])
    for (label, template, dtype, vb, config), (_, _, ptx) in zip(cases, results):
        for kernel in re.findall(r"\.entry\s+(\w+)", ptx):
            letters = template.signature(kernel, dtype, vb, config)
            assert [LETTER_BYTES[c] for c in letters] == _ptx_params(ptx, kernel), (label, kernel)
