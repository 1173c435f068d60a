// Rank sort: thread i counts the keys that sort before key i and writes key i
// (and its value) to that position. Keys are compared as cudasortkit ordered
// words (keys.cuh), so NaN, -0.0 and descending order behave like every other
// cudasortkit algorithm. Tiles of keys are staged in shared memory.
#include "keys.cuh"

extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
ranksort_scatter(const csk_bits_t* __restrict__ keys_in, const csk_value_t* __restrict__ values_in,
                 csk_bits_t* __restrict__ keys_out, csk_value_t* __restrict__ values_out,
                 csk_index_t n, unsigned long long mask)
{
    extern __shared__ unsigned long long ranksort_smem[];
    csk_bits_t* tile = (csk_bits_t*)ranksort_smem;
    const csk_index_t i = (csk_index_t)blockIdx.x * BLOCK_SIZE + threadIdx.x;
    const csk_bits_t mine = i < n ? csk_encode(keys_in[i], (csk_bits_t)mask) : 0;
    csk_index_t rank = 0;
    for (csk_index_t base = 0; base < n; base += BLOCK_SIZE) {
        const csk_index_t j = base + threadIdx.x;
        if (j < n) tile[threadIdx.x] = csk_encode(keys_in[j], (csk_bits_t)mask);
        __syncthreads();
        const int count = (int)min((csk_index_t)BLOCK_SIZE, n - base);
        for (int t = 0; t < count; ++t) {
            const csk_bits_t other = tile[t];
            rank += (other < mine) || (other == mine && base + t < i);
        }
        __syncthreads();
    }
    if (i < n) {
        keys_out[rank] = csk_decode(mine, (csk_bits_t)mask);
#if CSK_HAS_VALUES
        values_out[rank] = values_in[i];
#endif
    }
}
