"""Kernel argument letters read from `__global__` prototypes
(cudasortkit/prototype.py): many prototype shapes and the errors."""
import pytest

from cudasortkit.errors import KernelCompileError, KernelSignatureError
from cudasortkit.prototype import SCALAR_LETTERS, argument_letters, strip_comments


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
