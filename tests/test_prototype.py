"""Kernel argument letters read from `__global__` prototypes
(cudasortkit/build/prototype.py): many prototype shapes, the errors, and every
built-in kernel's letters equal to the signature that used to be typed by
hand beside it."""
import os

import pytest

from cudasortkit.sdk import registry
from cudasortkit.errors import KernelCompileError, KernelSignatureError
from cudasortkit.build.prototype import SCALAR_LETTERS, argument_letters, overlapped, strip_comments
from cudasortkit.sdk.scan import SCAN_DTYPE, scan_config, scan_template
from cudasortkit.build.template import KernelTemplate


def letters(source, kernel="k", include_dirs=()):
    return argument_letters(source, kernel, include_dirs)


# ----------------------------------------------------------------- shapes
@pytest.mark.parametrize("source, expected", [
    ('extern "C" __global__ void k(int a, unsigned b, long long c, unsigned long long d) {}',
     "iIqQ"),
    ('extern "C" __global__ void k(float x, double y) {}', "fd"),
    ('extern "C" __global__ void k(csk_index_t n, u64 mask, int64_t a, uint64_t b) {}', "qQqQ"),
    ('extern "C" __global__ void k(unsigned int a, signed int b, long long int c, '
     'unsigned long long int d, int32_t e, uint32_t f, size_t g) {}', "IiqQiIQ"),
    # pointers of any type, const / __restrict__ / volatile anywhere
    ('extern "C" __global__ void k(const csk_bits_t* __restrict__ keys, void* v, '
     'volatile unsigned* __restrict__ flag, const os_status_t * const s, float2* f) {}', "PPPPP"),
    ('extern "C" __global__ void k(int* p, int** pp, int a[], const int n) {}', "PPPi"),
    ('extern "C" __global__ void k(const unsigned long long n, volatile int v, '
     'const long long __restrict__ m) {}', "Qiq"),
    # unnamed parameters, empty and void lists
    ('extern "C" __global__ void k(int, unsigned long long, const float*);', "iQP"),
    ('extern "C" __global__ void k() {}', ""),
    ('extern "C" __global__ void k(void) {}', ""),
    # launch-bounds macros and other macros between the return type and the name
    ('extern "C" __global__ void __launch_bounds__(BLOCK_SIZE, MIN_BLOCKS)\nk(int n) {}', "i"),
    ('extern "C" __global__ void __launch_bounds__(BLOCK_SIZE * (2 + 1), (768 / BLOCK_SIZE))\n'
     'k(int n) {}', "i"),
    ('#define MERGE_BOUNDS __launch_bounds__(256)\nextern "C" __global__ void MERGE_BOUNDS\n'
     'k(unsigned* out, long long n)\n{\n}', "Pq"),
    # comments and line breaks anywhere
    ('extern "C" __global__ void k(int a, // the count\n'
     '  /* keys: */ unsigned* keys /* , long long gone */,\n'
     '  /* multi\n line */ unsigned long long\n   mask)\n{ }', "iPQ"),
    ('// __global__ void k(float x) {}\nextern "C" __global__ void k(double x) {}', "d"),
    ('/* extern "C" __global__ void k(float x); */ extern "C" __global__ void k(int x) {}', "i"),
    # a string holding // is not a comment
    ('const char* s = "//";\nextern "C" __global__ void k(int a) {}', "i"),
    # declaration and definition agree; extern "C" blocks; a default value
    ('extern "C" __global__ void k(int a, float* b);\n'
     'extern "C" __global__ void k(int n, float* __restrict__ out) { }', "iP"),
    ('extern "C" {\n__global__ void j(float x) {}\n__global__ void k(long long n) {}\n}', "q"),
    ('extern "C" __global__ void k(int a = 3, unsigned b = 4u) {}', "iI"),
    # a longer name sharing the prefix is another kernel
    ('extern "C" __global__ void k2(float a) {}\nextern "C" __global__ void k(int a) {}', "i"),
    ('extern "C" __global__ void k(int a) {}\nextern "C" __global__ void k_step(float a) {}', "i"),
    # line continuations (a macro defining a kernel by its full name)
    ('#define KERNEL extern "C" __global__ \\\n  void k(int a, \\\n  unsigned b) {}\nKERNEL', "iI"),
    # bodies are not prototypes: a call of k inside another kernel
    ('extern "C" __global__ void j(float x) { k(1, 2); }\nextern "C" __global__ void k(int a) {}',
     "i"),
])
def test_prototype_shapes(source, expected):
    assert letters(source) == expected


def test_prototype_found_in_an_included_header(tmp_path):
    (tmp_path / "inner.cuh").write_text('extern "C" __global__ void deep(long long n, int* p) {}\n')
    (tmp_path / "outer.cuh").write_text('#include "inner.cuh"\n#include <cstdint>\n'
                                        '#include "missing.cuh"\n')
    source = '#include "outer.cuh"\n#include "outer.cuh"\n'
    assert letters(source, "deep", [str(tmp_path)]) == "qP"
    with pytest.raises(KernelSignatureError, match="no __global__ prototype"):
        letters(source, "deep")  # not on the include path


def test_unknown_parameter_type_names_kernel_and_parameter():
    source = 'extern "C" __global__ void scatter(int* keys, long long n, float2 scale) {}'
    with pytest.raises(KernelSignatureError) as exc:
        letters(source, "scatter")
    text = str(exc.value)
    assert "kernel 'scatter'" in text and "parameter 3" in text and "float2 scale" in text
    assert "'float2'" in text and "unsigned long long" in text  # says what would do
    assert isinstance(exc.value, KernelCompileError)  # the tuner treats it as uncompilable


@pytest.mark.parametrize("param", ["bool flag", "short s", "long n", "char c", "csk_bits_t key",
                                   "MyStruct s", "int& r"])
def test_types_without_a_letter_are_refused(param):
    with pytest.raises(KernelSignatureError, match="has no pycuda argument letter"):
        letters(f'extern "C" __global__ void k({param}) {{}}')


def test_missing_and_disagreeing_prototypes_are_errors():
    with pytest.raises(KernelSignatureError, match="kernel 'absent': no __global__ prototype"):
        letters('extern "C" __global__ void k(int a) {}', "absent")
    pasted = ('#define STEPS(S) extern "C" __global__ void k##S(int a) {}\nSTEPS(2)\n')
    with pytest.raises(KernelSignatureError, match="## in a macro"):
        letters(pasted, "k2")
    with pytest.raises(KernelSignatureError, match="prototypes disagree"):
        letters('#if A\nextern "C" __global__ void k(int a);\n#else\n'
                'extern "C" __global__ void k(long long a);\n#endif\n')


def test_strip_comments_keeps_lines():
    text = "a /* x\ny */ b // z\nc"
    assert strip_comments(text).count("\n") == text.count("\n")
    assert "x" not in strip_comments(text) and "z" not in strip_comments(text)


def test_scalar_table_letters_are_pycuda_struct_letters():
    assert set(SCALAR_LETTERS.values()) <= set("iIqQfd")


# ------------------------------------------------------ built-in kernels
#: The signatures that were typed by hand beside each kernel before they
#: were read from the prototypes: the parser must reproduce every one.
HAND_WRITTEN = {
    ("radix", "radix.cu"): {
        "radix_histogram_all": "PqQPP", "radix_plan": "PqP", "radix_upsweep": "PPqiPP",
        "radix_scan_table": "PPiiP", "radix_downsweep": "PPPPPPqiQPP"},
    ("counting", "counting.cu"): {
        "counting_histogram": "PqQQQPPiIIq", "counting_fill": "PqPIQQ"},
    ("counting", "counting_sweep.cu"): {
        "onesweep_histogram": "PqQQQPPPPP",
        "onesweep_pass": "PPPPPPqQQiiiPPPPQ"},
    ("msd_local", "msd_local.cu"): {
        "onesweep_histogram": "PqQQQPPPPP",
        "onesweep_pass": "PPPPPPqQQiiiPPPPQ", "msd_plan": "PPqQPPPPP",
        "msd_cuts": "PqQPqP", "msd_local_sort": "PPPPQPPii", "msd_fallback": "PPP",
        "onesweep_pass_persistent": "PPPPPPqQQiiiPPPPQ"},
    ("onesweep", "onesweep.cu"): {
        "onesweep_histogram": "PqQQQPPPPP",
        "onesweep_pass": "PPPPPPqQQiiiPPPPQ"},
    ("bitonic", "bitonic.cu"): {
        "bitonic_sort_tiles": "PPPPqQi", "bitonic_merge_tiles": "PPqQi",
        "bitonic_global_step": "PPqqqi", "bitonic_global_steps2": "PPqqq",
        "bitonic_global_steps3": "PPqqq", "bitonic_global_steps4": "PPqqq"},
    ("merge_sort", "merge_sort.cu"): {
        "merge_sort_tiles": "PPPPqQi", "merge_sort_partition": "PqqPq",
        "merge_sort_pass": "PPPPqqPQi", "merge_partition": "PqPqPqQ",
        "merge_arrays": "PPqPPqPPPQP", "merge_fallback": "PPqPPqPPP"},
    ("rows", "rows.cu"): {"rows_sort": "PPPPqqiPQi"},
    ("block_radix", "block_radix.cu"): {
        "block_radix_rows": "PPPPqPPQi", "block_radix_tiles": "PPPPqqPqQi",
        "block_radix_long_pack": "PPPqPPqQ", "block_radix_long_unpack": "PPPPPqPPqQi"},
    ("block_radix", "block_bitonic.cu"): {"block_bitonic_sort": "PPqQ"},
    ("block_radix", "warp_bitonic.cu"): {"warp_bitonic_rows": "PPqqQ"},
    ("rows", "warp_bitonic.cu"): {"warp_bitonic_rows": "PPqqQ"},
    ("segmented_radix", "segmented.cu"): {
        "seg_pack": "PPqqPqQ", "seg_unpack": "PPPPqqPqiQ", "seg_ids_of": "PPqqPq",
        "seg_gather": "PPPPPqqPqi"},
}
#: The core's own kernels (cudasortkit/build/corekernels.py, cudasortkit/sdk/scan.py).
CORE_HAND_WRITTEN = {"csk_iota": "Pqqi", "csk_minmax_ordered": "PqP"}
SCAN_HAND_WRITTEN = {"csk_scan_tiles": "PPPqi", "csk_scan_add": "PPq"}
#: The example plugin's kernel (examples/csk_ranksort).
RANKSORT_HAND_WRITTEN = {"ranksort_scatter": "PPPPqQ"}


def _variants(plugin):
    """(dtype, value_bytes, defines) the plugin's kernels are built with:
    letters must not depend on them."""
    for dtype in ("uint8", "int32", "float64"):
        for vb in ((0, 8) if plugin.pairs else (0,)):
            yield dtype, vb, None
    yield "uint32", 0, {"offset_bytes": 8, "wide_status": 1}


@pytest.mark.parametrize("plugin_name, template", sorted(HAND_WRITTEN))
def test_builtin_kernels_letters_match_the_old_hand_written_signatures(plugin_name, template):
    plugin = registry.plugins()[plugin_name]
    assert template in plugin.templates
    for dtype, vb, defines in _variants(plugin):
        source = KernelTemplate(template, plugin.template_package, defines)
        config = plugin.default_config(dtype, vb)
        for kernel, expected in HAND_WRITTEN[plugin_name, template].items():
            assert source.signature(kernel, dtype, vb, config) == expected, (kernel, dtype, vb)


def test_core_kernels_letters_match_the_old_hand_written_signatures():
    from cudasortkit.build.corekernels import UTIL, UTIL_CONFIG

    for dtype in ("uint32", "int64", "int8"):
        for kernel, expected in CORE_HAND_WRITTEN.items():
            assert UTIL.signature(kernel, dtype, 0, UTIL_CONFIG) == expected
    for count_bytes in (4, 8):
        for kernel, expected in SCAN_HAND_WRITTEN.items():
            assert scan_template(count_bytes).signature(kernel, SCAN_DTYPE, 0,
                                                        scan_config()) == expected


def test_example_plugin_letters_match_its_old_hand_written_signature(tmp_path):
    import shutil
    import sys

    root = os.path.join(os.path.dirname(__file__), os.pardir, "examples", "csk_ranksort")
    shutil.copytree(os.path.join(root, "csk_ranksort"), tmp_path / "csk_ranksort")
    sys.path.insert(0, str(tmp_path))
    try:
        template = KernelTemplate("ranksort.cu", "csk_ranksort")
        for dtype in ("int8", "float32", "uint64"):
            for kernel, expected in RANKSORT_HAND_WRITTEN.items():
                assert template.signature(kernel, dtype, 8, {"block_size": 256}) == expected
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("csk_ranksort", None)


def test_every_kernel_a_plugin_launches_is_covered():
    """Each built-in GPU plugin's templates appear above, so a new kernel
    file cannot dodge the check."""
    covered = {(name, template) for name, template in HAND_WRITTEN}
    for name, plugin in registry.plugins().items():
        if plugin.device == "gpu" and plugin.template_package == "cudasortkit.kernels":
            for template in plugin.templates:
                assert (name, template) in covered, (name, template)


def test_the_overlap_mark_is_read_from_the_prototype_before_the_name(tmp_path):
    """overlapped(): CSK_OVERLAPPED between __global__ and the kernel's name,
    in the source or an included header; not in a comment, a parameter or
    another kernel's prototype."""
    source = """
    #define CSK_OVERLAPPED
    extern "C" __global__ void CSK_OVERLAPPED __launch_bounds__(256) marked(int* a, int CSK_OVERLAPPED_n)
    { }
    extern "C" __global__ void /* CSK_OVERLAPPED */ commented(int* a) { }
    extern "C" __global__ void plain(int* CSK_OVERLAPPED) { }
    """
    assert overlapped(source, "marked")
    assert not overlapped(source, "commented") and not overlapped(source, "plain")
    assert not overlapped(source, "absent")
    (tmp_path / "k.cuh").write_text('extern "C" __global__ void CSK_OVERLAPPED\nheaded(int n);\n')
    assert overlapped('#include "k.cuh"\n', "headed", [str(tmp_path)])


def test_onesweep_kernels_carry_the_overlap_mark_and_the_core_scan_does_not():
    template = KernelTemplate("onesweep.cu")
    source = template.render("uint32", 0, registry.plugins()["onesweep"].default_config("uint32"))
    for kernel in ("onesweep_histogram", "onesweep_pass"):
        assert overlapped(source, kernel, template.include_dirs), kernel
    scan = scan_template(8)
    config = scan_config()
    assert not overlapped(scan.render(SCAN_DTYPE, 0, config), "csk_scan_tiles", scan.include_dirs)
