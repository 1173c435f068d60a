// numpy.unique of a flat array on the device (cudasortkit/calls/unique.py
// drives it), from one stable key-value sort of (keys, 0 1 2 ...): `sorted`
// the keys in order (read as ordered words only: a sort may canonicalise
// NaNs and zeros) and `order` the input position of each:
//
//   csk_unique_flags    flags[i] = 1 where sorted position i starts a run of
//                       equal keys (i == 0, or key != the previous key)
//   (the core's device scan: ids = exclusive scan of flags, u = its total)
//   csk_unique_scatter  per run start: the unique value (the run's first key,
//                       bit for bit: the stable order makes it the first
//                       occurrence, which is what return_index reports), its
//                       first index and its sorted start; per key: its
//                       run's id at its input position (return_inverse)
//   csk_unique_counts   counts[j] = start[j + 1] - start[j] (start[u] = n)
//
// Equality is NumPy's: ordered words (keys.cuh) are equal, so -0.0 == +0.0;
// every NaN has the ordered word all ones, so with equal_nan all NaNs are one
// value, and without it every NaN starts a run of its own.
//
// Defines: UNIQUE_COUNT_BYTES 4 (n < 2^32) or 8: the width of flags and ids.
#include "keys.cuh"

#if UNIQUE_COUNT_BYTES == 4
typedef unsigned int csk_count_t;
#elif UNIQUE_COUNT_BYTES == 8
typedef unsigned long long csk_count_t;
#else
#error "UNIQUE_COUNT_BYTES must be 4 or 8"
#endif

__device__ __forceinline__ bool csk_unique_same(csk_bits_t a, csk_bits_t b, int equal_nan)
{
    const csk_bits_t ua = csk_to_ordered(a), ub = csk_to_ordered(b);
#if CSK_KEY_KIND == CSK_KIND_FLOAT
    if (!equal_nan && ua == CSK_ALL_ONES) return false;  // NaN != NaN
#endif
    (void)equal_nan;
    return ua == ub;
}

extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
csk_unique_flags(const csk_bits_t* __restrict__ sorted, long long n, int equal_nan,
                 csk_count_t* __restrict__ flags)
{
    const long long stride = (long long)gridDim.x * BLOCK_SIZE;
    for (long long i = blockIdx.x * (long long)BLOCK_SIZE + threadIdx.x; i < n; i += stride)
        flags[i] = (i == 0 || !csk_unique_same(sorted[i - 1], sorted[i], equal_nan)) ? 1 : 0;
}

// keys: the input (values are copied from it bit for bit); values: u keys;
// index, starts, inverse: int64 or null (not asked for).
extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
csk_unique_scatter(const csk_bits_t* __restrict__ keys, const long long* __restrict__ order,
                   const csk_count_t* __restrict__ flags, const csk_count_t* __restrict__ ids,
                   long long n, csk_bits_t* __restrict__ values, long long* __restrict__ index,
                   long long* __restrict__ starts, long long* __restrict__ inverse)
{
    const long long stride = (long long)gridDim.x * BLOCK_SIZE;
    for (long long i = blockIdx.x * (long long)BLOCK_SIZE + threadIdx.x; i < n; i += stride) {
        const long long at = order[i];
        const csk_count_t f = flags[i];
        const long long id = (long long)(ids[i] + f) - 1;  // the run this key belongs to
        if (f) {
            values[id] = keys[at];
            if (index) index[id] = at;
            if (starts) starts[id] = i;
        }
        if (inverse) inverse[at] = id;
    }
}

extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
csk_unique_counts(const long long* __restrict__ starts, long long u, long long n,
                  long long* __restrict__ counts)
{
    const long long stride = (long long)gridDim.x * BLOCK_SIZE;
    for (long long j = blockIdx.x * (long long)BLOCK_SIZE + threadIdx.x; j < u; j += stride)
        counts[j] = (j + 1 < u ? starts[j + 1] : n) - starts[j];
}
