// Kernels of the host pipeline (cudasortkit/host/pipeline.py, cudasortkit/host/outofcore.py):
// the encoded words of sampled keys, and per-bucket counts of a chunk against
// sorted splitters (a chunk's global argsort indices come from util.cu's csk_iota).
//
// "Encoded word" is keys.cuh's csk_encode(key, mask), widened to 64 bits: its
// unsigned order is the requested order (NumPy's, NaNs last both ways), so
// buckets cut at splitter words are ranges of that order.
#include "keys.cuh"
#include "segments.cuh"

#ifndef CSK_MAX_SPLITTERS
#define CSK_MAX_SPLITTERS 1023
#endif

// out[i] = encoded word of keys[i] (the order the sort is asked for).
extern "C" __global__ void csk_encode_words(const csk_bits_t* __restrict__ keys, long long n,
                                            unsigned long long mask64,
                                            unsigned long long* __restrict__ out)
{
    const csk_bits_t mask = (csk_bits_t)mask64;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += stride)
        out[i] = (unsigned long long)csk_encode(keys[i], mask);
}

// counts[b] += how many of the n keys fall in bucket b, where a key's bucket
// is the number of splitters <= its encoded word (splitters ascending, at
// most CSK_MAX_SPLITTERS of them; nsplit + 1 buckets).
extern "C" __global__ void csk_bucket_count(const csk_bits_t* __restrict__ keys, long long n,
                                            unsigned long long mask64,
                                            const unsigned long long* __restrict__ splitters,
                                            int nsplit, unsigned long long* __restrict__ counts)
{
    __shared__ unsigned long long split[CSK_MAX_SPLITTERS];
    __shared__ unsigned int local[CSK_MAX_SPLITTERS + 1];
    const csk_bits_t mask = (csk_bits_t)mask64;
    for (int i = threadIdx.x; i < nsplit; i += blockDim.x) split[i] = splitters[i];
    for (int i = threadIdx.x; i <= nsplit; i += blockDim.x) local[i] = 0;
    __syncthreads();
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += stride) {
        const unsigned long long w = (unsigned long long)csk_encode(keys[i], mask);
        atomicAdd(&local[csk_count_at_most(split, nsplit, w)], 1u);  // first splitter > w
    }
    __syncthreads();
    for (int i = threadIdx.x; i <= nsplit; i += blockDim.x)
        if (local[i]) atomicAdd(&counts[i], (unsigned long long)local[i]);
}
