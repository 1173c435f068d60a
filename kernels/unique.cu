// numpy.unique of a flat array on the device (cudasortkit/calls/unique.py
// drives it), from one stable key-value sort of (keys, 0 1 2 ...): `sorted`
// the keys in order and `order` the input position of each:
//
//   csk_unique_flags    flags[i] = 1 where sorted position i starts a run of
//                       equal keys (i == 0, or key != the previous key)
//   (the core's device scan: ids = INCLUSIVE scan of flags, so the run of
//   sorted position i is ids[i] - 1, and u = the total)
//   csk_unique_scatter  per run start: the unique value (bit for bit the
//                       run's first key: the stable order makes it the first
//                       occurrence, which is what return_index reports), its
//                       first index and its sorted start; per key, when asked
//                       (inverse not null): its run at its input position
//   csk_unique_inverse  the inverse without the random scatter: the caller
//                       sorts (order[i], ids[i]) by order, so sorted position
//                       j holds ids[i] of the key whose input position is j;
//                       inverse[j] = that - 1, widened to int64
//   csk_unique_counts   counts[j] = start[j + 1] - start[j] (start[u] = n)
//
// Equality is NumPy's: ordered words (keys.cuh) are equal, so -0.0 == +0.0;
// every NaN has the ordered word all ones, so with equal_nan all NaNs are one
// value, and without it every NaN starts a run of its own. Bools (sorted as
// their bytes, as NumPy sorts them) are equal by truth value: any nonzero
// byte is True, so a run of True starts at the smallest nonzero byte.
//
// Values are read from `sorted` (coalesced), except float keys whose sorted
// word is a zero or a NaN: a sort may canonicalise those (+0.0, one quiet
// NaN), so their bits come from the input, keys[order[i]]. Every other key
// has one bit pattern per value, so the sorted word is the first
// occurrence's bits.
//
// Defines: UNIQUE_COUNT_BYTES 4 (n < 2^31) or 8: the width of flags, ids,
// starts and order (the first sort's positions: int32 or int64, read as
// unsigned words: they are never negative). UNIQUE_BOOL 1: the keys are bools
// (their bytes, uint8 to keys.cuh), compared by truth value; 0 otherwise.
#include "keys.cuh"

#if UNIQUE_COUNT_BYTES == 4
typedef unsigned int csk_count_t;
#elif UNIQUE_COUNT_BYTES == 8
typedef unsigned long long csk_count_t;
#else
#error "UNIQUE_COUNT_BYTES must be 4 or 8"
#endif

#if !defined(UNIQUE_BOOL) || (UNIQUE_BOOL != 0 && UNIQUE_BOOL != 1)
#error "UNIQUE_BOOL must be 0 or 1"
#endif

__device__ __forceinline__ bool csk_unique_same(csk_bits_t a, csk_bits_t b, int equal_nan)
{
#if UNIQUE_BOOL
    (void)equal_nan;
    return (a != 0) == (b != 0);
#endif
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

// Whether a sorted key's word may differ from its first occurrence's bits
// (a canonicalised zero or NaN): then the value is read from the input.
__device__ __forceinline__ bool csk_unique_from_input(csk_bits_t x)
{
#if CSK_KEY_KIND == CSK_KIND_FLOAT
    const csk_bits_t magnitude = (csk_bits_t)(x & (csk_bits_t)~CSK_SIGN_BIT);
    return magnitude == 0 || magnitude > CSK_INF_BITS;
#else
    (void)x;
    return false;
#endif
}

// keys: the input; sorted: the sorted keys; order: their input positions;
// ids: the inclusive scan of flags; values: u keys; index, inverse: int64 or
// null (not asked for; the inverse also when csk_unique_inverse makes it);
// starts: u counts or null (counts not asked for).
extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
csk_unique_scatter(const csk_bits_t* __restrict__ keys, const csk_bits_t* __restrict__ sorted,
                   const csk_count_t* __restrict__ order, const csk_count_t* __restrict__ flags,
                   const csk_count_t* __restrict__ ids, long long n,
                   csk_bits_t* __restrict__ values, long long* __restrict__ index,
                   csk_count_t* __restrict__ starts, long long* __restrict__ inverse)
{
    const long long stride = (long long)gridDim.x * BLOCK_SIZE;
    for (long long i = blockIdx.x * (long long)BLOCK_SIZE + threadIdx.x; i < n; i += stride) {
        const bool first = flags[i] != 0;
        if (!first && !inverse) continue;                // nothing to write for this key
        const long long id = (long long)ids[i] - 1;      // the run this key belongs to
        const long long at = (long long)order[i];
        if (first) {
            const csk_bits_t x = sorted[i];
            values[id] = csk_unique_from_input(x) ? keys[at] : x;
            if (index) index[id] = at;
            if (starts) starts[id] = (csk_count_t)i;
        }
        if (inverse) inverse[at] = id;
    }
}

// run_ids: the values of the sort of (order, ids) by order (the ids of the
// keys in input order, 1-based); inverse: n int64.
extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
csk_unique_inverse(const csk_count_t* __restrict__ run_ids, long long n,
                   long long* __restrict__ inverse)
{
    const long long stride = (long long)gridDim.x * BLOCK_SIZE;
    for (long long j = blockIdx.x * (long long)BLOCK_SIZE + threadIdx.x; j < n; j += stride)
        inverse[j] = (long long)run_ids[j] - 1;
}

extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
csk_unique_counts(const csk_count_t* __restrict__ starts, long long u, long long n,
                  long long* __restrict__ counts)
{
    const long long stride = (long long)gridDim.x * BLOCK_SIZE;
    for (long long j = blockIdx.x * (long long)BLOCK_SIZE + threadIdx.x; j < u; j += stride)
        counts[j] = (j + 1 < u ? (long long)starts[j + 1] : n) - (long long)starts[j];
}
