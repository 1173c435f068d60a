// Multi-key order (plugins/multikey.py): keys packed into one 128-bit
// ordered word, and gathers for sorts in passes.
//
// Rendered per key dtype (keys.cuh): csk_bits_t is the key's width. A key's
// field in the packed word is its ordered word (csk_encode: NaNs all ones and
// last in both directions, -0.0 == +0.0, descending folded in), cut to
// `width` bits (bool keys: 1 bit). Fields of more significant keys sit in
// higher bits, so unsigned order of the packed words is the keys' lexicographic
// order, and a stable sort of them is the stable multi-key order.
#include "keys.cuh"

// Store (first) or OR `v` into element i of an array of unsigned words of
// `bytes` (1, 2, 4 or 8) bytes.
__device__ __forceinline__ void csk_put(void* words, int bytes, long long i,
                                        unsigned long long v, int first)
{
    switch (bytes) {
    case 1: { unsigned char* w = (unsigned char*)words;
              w[i] = (unsigned char)(first ? v : (w[i] | v)); break; }
    case 2: { unsigned short* w = (unsigned short*)words;
              w[i] = (unsigned short)(first ? v : (w[i] | v)); break; }
    case 4: { unsigned int* w = (unsigned int*)words;
              w[i] = (unsigned int)(first ? v : (w[i] | v)); break; }
    default: { unsigned long long* w = (unsigned long long*)words;
               w[i] = first ? v : (w[i] | v); }
    }
}

// The packed key of row i is the number hi[i] * 2^64 + lo[i]: lo holds its
// bits 0..63 in words of lo_bytes, hi (null when every field fits lo) the
// rest in words of hi_bytes, each as narrow as the fields allow. The key's
// field goes to bits [shift, shift + width); `first` set writes the words
// (the first key packed), else ORs into them.
extern "C" __global__ void csk_pack(const csk_bits_t* __restrict__ keys, long long n,
                                    void* __restrict__ lo, int lo_bytes,
                                    void* __restrict__ hi, int hi_bytes, int shift, int width,
                                    unsigned long long mask64, int first)
{
    const csk_bits_t mask = (csk_bits_t)mask64;
    const unsigned long long field_mask = width >= 64 ? ~0ull : ((1ull << width) - 1ull);
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += stride) {
        // a 1-bit field is a bool: any nonzero byte is True (NumPy's rule)
        const unsigned long long u = width == 1
            ? (unsigned long long)((keys[i] != 0) ^ (int)(mask64 & 1ull))
            : (unsigned long long)csk_encode(keys[i], mask) & field_mask;
        const unsigned __int128 field = (unsigned __int128)u << shift;
        csk_put(lo, lo_bytes, i, (unsigned long long)field, first);
        if (hi != nullptr) csk_put(hi, hi_bytes, i, (unsigned long long)(field >> 64), first);
    }
}

// dst[i] = src[order[i]]: a key put in the current order (sorts in passes,
// the high words of 128-bit packed keys).
extern "C" __global__ void csk_gather(const csk_bits_t* __restrict__ src,
                                      const long long* __restrict__ order, long long n,
                                      csk_bits_t* __restrict__ dst)
{
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += stride)
        dst[i] = src[order[i]];
}

// dst[i] = src[order[i]] as a sort returns keys (keys.cuh's ordered word and
// back): float zeros as +0.0 and NaNs as the one quiet NaN, every other key
// its own bits. Multi-key sort_by_key's sorted keys, as the one-key sorts'.
extern "C" __global__ void csk_gather_keys(const csk_bits_t* __restrict__ src,
                                           const long long* __restrict__ order, long long n,
                                           csk_bits_t* __restrict__ dst)
{
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += stride)
        dst[i] = csk_from_ordered(csk_to_ordered(src[order[i]]));
}

// ---------------------------------------------------------------- unique rows
// rows: n rows of `width` keys each (row-major); order: the rows' stable
// multi-key order. Rows are equal as NumPy compares them: value by value,
// -0.0 == +0.0 (equal ordered words), and a NaN equals nothing (its ordered
// word is all ones, which no other float has).
__device__ __forceinline__ bool csk_same_key(csk_bits_t x, csk_bits_t y)
{
    const csk_bits_t u = csk_to_ordered(x);
#if CSK_KEY_KIND == CSK_KIND_FLOAT
    if (u == CSK_ALL_ONES) return false;
#endif
    return u == csk_to_ordered(y);
}

// starts[i] = 1 where sorted row i differs from sorted row i - 1 (and i == 0).
extern "C" __global__ void csk_row_starts(const csk_bits_t* __restrict__ rows, long long width,
                                          const long long* __restrict__ order, long long n,
                                          unsigned int* __restrict__ starts)
{
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += stride) {
        unsigned int start = 1;
        if (i > 0) {
            const csk_bits_t* a = rows + order[i - 1] * width;
            const csk_bits_t* b = rows + order[i] * width;
            start = 0;
            for (long long j = 0; j < width; ++j) {
                if (!csk_same_key(a[j], b[j])) {
                    start = 1;
                    break;
                }
            }
        }
        starts[i] = start;
    }
}

// ends: the inclusive prefix sum of starts, so sorted row i is in unique row
// ends[i] - 1. inverse[order[i]] = that (inverse may be null); firsts[g] =
// the sorted position of unique row g's first row, firsts[k] = n.
extern "C" __global__ void csk_unique_scatter(const long long* __restrict__ order,
                                              const unsigned int* __restrict__ ends, long long n,
                                              long long* __restrict__ inverse,
                                              long long* __restrict__ firsts)
{
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += stride) {
        const long long g = (long long)ends[i] - 1;
        if (inverse != nullptr) inverse[order[i]] = g;
        if (i == 0 || ends[i] != ends[i - 1]) firsts[g] = i;
        if (i == n - 1) firsts[g + 1] = n;
    }
}

// Unique row g is row order[firsts[g]] (its first occurrence), copied bit
// for bit; index[g] that row's number, counts[g] its run's length (index
// and counts may be null).
extern "C" __global__ void csk_unique_rows(const csk_bits_t* __restrict__ rows, long long width,
                                           const long long* __restrict__ order,
                                           const long long* __restrict__ firsts, long long k,
                                           csk_bits_t* __restrict__ unique,
                                           long long* __restrict__ index,
                                           long long* __restrict__ counts)
{
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long g = blockIdx.x * (long long)blockDim.x + threadIdx.x; g < k; g += stride) {
        const long long f = firsts[g], row = order[f];
        if (index != nullptr) index[g] = row;
        if (counts != nullptr) counts[g] = firsts[g + 1] - f;
        for (long long j = 0; j < width; ++j) unique[g * width + j] = rows[row * width + j];
    }
}
