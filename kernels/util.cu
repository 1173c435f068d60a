// Small kernels the core itself launches (not tied to one algorithm).
#include "keys.cuh"

// out[i] = start + i, for i < n: argsort's index payload (start 0), or one
// chunk's indices into a whole array (the host pipeline). The indices are
// int64, or int32 when index_bytes is 4 (argsort(index_dtype=np.int32): every
// start + i < 2^31). One kernel for both widths: the branch on index_bytes is
// the same for every thread and taken once, outside the loop.
template <typename Index>
__device__ __forceinline__ void csk_iota_fill(Index* __restrict__ out, long long n, long long start)
{
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += stride)
        out[i] = (Index)(start + i);
}

extern "C" __global__ void csk_iota(void* __restrict__ out, long long n, long long start,
                                    int index_bytes)
{
    if (index_bytes == 4)
        csk_iota_fill((int*)out, n, start);
    else
        csk_iota_fill((long long*)out, n, start);
}

// Block-wide minimum of `lo` and maximum of `hi` over every thread of the
// block (all of them call it): the result lands in thread 0's lo and hi.
__device__ __forceinline__ void csk_block_min_max(unsigned long long& lo, unsigned long long& hi)
{
    __shared__ unsigned long long block_lo[32], block_hi[32];
#pragma unroll
    for (int d = 16; d > 0; d >>= 1) {
        const unsigned long long l = __shfl_xor_sync(0xffffffffu, lo, d);
        const unsigned long long h = __shfl_xor_sync(0xffffffffu, hi, d);
        lo = l < lo ? l : lo;
        hi = h > hi ? h : hi;
    }
    const unsigned warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
    if ((threadIdx.x & 31) == 0) {
        block_lo[warp] = lo;
        block_hi[warp] = hi;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        for (unsigned w = 1; w < warps; ++w) {
            lo = block_lo[w] < lo ? block_lo[w] : lo;
            hi = block_hi[w] > hi ? block_hi[w] : hi;
        }
    }
}

// Smallest and largest key of n, as ordered words (keys.cuh, ascending):
// out[0] = min, out[1] = max; the caller sets them to all ones / zero first.
// Counting sort uses it to learn how many bins a request needs.
extern "C" __global__ void csk_minmax_ordered(const csk_bits_t* __restrict__ keys, long long n,
                                              unsigned long long* __restrict__ out)
{
    unsigned long long lo = ~0ull, hi = 0;
    const long long stride = (long long)gridDim.x * blockDim.x;
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    for (; i + 3 * stride < n; i += 4 * stride) {  // four loads in flight per thread
        csk_bits_t x[4];
#pragma unroll
        for (int r = 0; r < 4; ++r) x[r] = keys[i + r * stride];
#pragma unroll
        for (int r = 0; r < 4; ++r) {
            const unsigned long long u = csk_to_ordered(x[r]);
            lo = u < lo ? u : lo;
            hi = u > hi ? u : hi;
        }
    }
    for (; i < n; i += stride) {
        const unsigned long long u = csk_to_ordered(keys[i]);
        lo = u < lo ? u : lo;
        hi = u > hi ? u : hi;
    }
    csk_block_min_max(lo, hi);
    if (threadIdx.x == 0) {
        atomicMin(out, lo);
        atomicMax(out + 1, hi);
    }
}

// CUB-style segment offsets checked and measured in one pass (count + 1
// values, int64 if `wide` else int32). stats (unsigned 64-bit words, set by
// the caller: [0] all ones, the rest zero):
//   [0] first s with offsets[s + 1] < offsets[s] (all ones: none)
//   [1] the longest segment (of those that do not decrease)
//   [2] offsets[0], [3] offsets[count]
//   [4 + b]  segments whose length has bucket b = bit length of (length - 1)
//            (0 for lengths 0 and 1), b in 0..64
//   [69 + b] keys in those segments
// widened (when not null) gets the offsets as int64.
#define CSK_OFFSET_BUCKETS 65
extern "C" __global__ void csk_offsets_check(const void* __restrict__ offsets, int wide,
                                             long long count, long long* __restrict__ widened,
                                             unsigned long long* __restrict__ stats)
{
    __shared__ unsigned long long segs[CSK_OFFSET_BUCKETS], keys[CSK_OFFSET_BUCKETS];
    const long long* o64 = (const long long*)offsets;
    const int* o32 = (const int*)offsets;
    for (int b = threadIdx.x; b < CSK_OFFSET_BUCKETS; b += blockDim.x) segs[b] = keys[b] = 0;
    __syncthreads();
    const long long stride = (long long)gridDim.x * blockDim.x;
    const long long first = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (first == 0) {
        const long long lo = wide ? o64[0] : (long long)o32[0];
        const long long hi = wide ? o64[count] : (long long)o32[count];
        stats[2] = (unsigned long long)lo;
        stats[3] = (unsigned long long)hi;
        if (widened != nullptr) widened[count] = hi;
    }
    unsigned long long bad = ~0ull, longest = 0;
    for (long long s = first; s < count; s += stride) {
        const long long lo = wide ? o64[s] : (long long)o32[s];
        const long long hi = wide ? o64[s + 1] : (long long)o32[s + 1];
        if (widened != nullptr) widened[s] = lo;
        if (hi < lo) {
            bad = (unsigned long long)s < bad ? (unsigned long long)s : bad;
            continue;
        }
        const unsigned long long len = (unsigned long long)(hi - lo);
        longest = len > longest ? len : longest;
        const int b = len > 1 ? 64 - __clzll(len - 1) : 0;
        atomicAdd(&segs[b], 1ull);
        atomicAdd(&keys[b], len);
    }
    csk_block_min_max(bad, longest);
    if (threadIdx.x == 0) {
        if (bad != ~0ull) atomicMin(stats, bad);
        if (longest) atomicMax(stats + 1, longest);
    }
    for (int b = threadIdx.x; b < CSK_OFFSET_BUCKETS; b += blockDim.x) {
        if (segs[b]) atomicAdd(stats + 4 + b, segs[b]);
        if (keys[b]) atomicAdd(stats + 4 + CSK_OFFSET_BUCKETS + b, keys[b]);
    }
}
