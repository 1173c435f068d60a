// Small kernels the core itself launches (not tied to one algorithm).
#include "keys.cuh"

// out[i] = i: the payload that turns a pair sort into an argsort (int64
// indices, or int32 ones for argsort(index_dtype=np.int32), n < 2^31).
extern "C" __global__ void csk_iota64(long long* __restrict__ out, long long n)
{
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += stride)
        out[i] = i;
}

extern "C" __global__ void csk_iota32(int* __restrict__ out, long long n)
{
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += stride)
        out[i] = (int)i;
}

// Smallest and largest key of n, as ordered words (keys.cuh, ascending):
// out[0] = min, out[1] = max; the caller sets them to all ones / zero first.
// Counting sort uses it to learn how many bins a request needs.
extern "C" __global__ void csk_minmax_ordered(const csk_bits_t* __restrict__ keys, long long n,
                                              unsigned long long* __restrict__ out)
{
    __shared__ unsigned long long block_lo[32], block_hi[32];
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
        atomicMin(out, lo);
        atomicMax(out + 1, hi);
    }
}
