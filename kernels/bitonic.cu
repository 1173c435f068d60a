// Bitonic sort for any n, in the "flip" formulation: every comparator puts
// the smaller key at the lower index, so the virtual padding up to the next
// power of two (keys >= n) never moves and is never read or written.
//
// Tunables: BLOCK_SIZE threads, ITEMS_PER_THREAD keys each (both powers of
// two); a tile of TILE keys is sorted or merged in shared memory at once.
//
// Keys travel as ordered words (keys.cuh) between launches: the first launch
// encodes on load and the last decodes on store (`decode_store`).
#include "keys.cuh"

#define TILE (BLOCK_SIZE * ITEMS_PER_THREAD)

// Comparator c of a step with partner distance j: lower index with bit j clear.
__device__ __forceinline__ csk_index_t bitonic_lo(csk_index_t c, csk_index_t j)
{
    return ((c & ~(j - 1)) << 1) | (c & (j - 1));
}

__device__ __forceinline__ void bitonic_cas_shared(csk_tile t, int lo, int hi)
{
    const csk_bits_t a = t.keys[lo], b = t.keys[hi];
    if (a > b) {
        t.keys[lo] = b;
        t.keys[hi] = a;
#if CSK_HAS_VALUES
        const csk_value_t va = t.values[lo];
        t.values[lo] = t.values[hi];
        t.values[hi] = va;
#endif
    }
}

// Steps j = first_j, first_j/2, ..., 1 of merge stage k inside the tile;
// the step with j == k/2 is the flip (mirror) comparator.
__device__ __forceinline__ void bitonic_steps_shared(csk_tile t, int k, int first_j)
{
    for (int j = first_j; j > 0; j >>= 1) {
#pragma unroll
        for (int r = 0; r < ITEMS_PER_THREAD / 2; ++r) {
            const int c = threadIdx.x + r * BLOCK_SIZE;
            const int lo = (int)bitonic_lo(c, j);
            const int hi = (j == (k >> 1)) ? (lo ^ (k - 1)) : (lo + j);
            bitonic_cas_shared(t, lo, hi);
        }
        __syncthreads();
    }
}

// Load a tile (padding past n with the largest word; pads never move).
__device__ __forceinline__ void bitonic_load(csk_tile t, const csk_bits_t* keys,
                                             const csk_value_t* values, csk_index_t base,
                                             csk_index_t n, bool encode, csk_bits_t mask)
{
#pragma unroll
    for (int r = 0; r < ITEMS_PER_THREAD; ++r) {
        const int i = threadIdx.x + r * BLOCK_SIZE;
        const csk_index_t g = base + i;
        if (g < n) {
            const csk_bits_t x = keys[g];
            t.keys[i] = encode ? csk_encode(x, mask) : x;
#if CSK_HAS_VALUES
            t.values[i] = values[g];
#endif
        } else {
            t.keys[i] = CSK_ALL_ONES;
        }
    }
    __syncthreads();
}

// Sort each tile completely: keys_in -> keys_out, encoding on load.
extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
bitonic_sort_tiles(const csk_bits_t* __restrict__ keys_in, const csk_value_t* __restrict__ values_in,
                   csk_bits_t* __restrict__ keys_out, csk_value_t* __restrict__ values_out,
                   csk_index_t n, unsigned long long mask, int decode_store)
{
    const csk_tile t = csk_shared_tile(TILE);
    const csk_index_t base = (csk_index_t)blockIdx.x * TILE;
    bitonic_load(t, keys_in, values_in, base, n, true, (csk_bits_t)mask);
    for (int k = 2; k <= TILE; k <<= 1)
        bitonic_steps_shared(t, k, k >> 1);
    csk_store_tile<ITEMS_PER_THREAD, BLOCK_SIZE>(t, keys_out + base, CSK_HAS_VALUES ? values_out + base : values_out, n - base,
                                                decode_store, (csk_bits_t)mask);
}

// Finish merge stage k (> TILE) within each tile: steps j = TILE/2 ... 1.
extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
bitonic_merge_tiles(csk_bits_t* __restrict__ keys, csk_value_t* __restrict__ values,
                    csk_index_t n, unsigned long long mask, int decode_store)
{
    const csk_tile t = csk_shared_tile(TILE);
    const csk_index_t base = (csk_index_t)blockIdx.x * TILE;
    bitonic_load(t, keys, values, base, n, false, 0);
    bitonic_steps_shared(t, 2 * TILE, TILE / 2);  // k > TILE: never the flip step
    csk_store_tile<ITEMS_PER_THREAD, BLOCK_SIZE>(t, keys + base, CSK_HAS_VALUES ? values + base : values, n - base, decode_store,
                                                (csk_bits_t)mask);
}

// One step with partner distance j >= TILE across the whole array, in place.
// `flip` marks the first step of a stage (mirror comparator, j == k/2).
extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
bitonic_global_step(csk_bits_t* __restrict__ keys, csk_value_t* __restrict__ values,
                    csk_index_t n, csk_index_t comparators, csk_index_t j, int flip)
{
    const csk_index_t stride = (csk_index_t)gridDim.x * BLOCK_SIZE;
    for (csk_index_t c = (csk_index_t)blockIdx.x * BLOCK_SIZE + threadIdx.x; c < comparators; c += stride) {
        const csk_index_t lo = bitonic_lo(c, j);
        const csk_index_t hi = flip ? (lo ^ (2 * j - 1)) : (lo + j);
        if (hi >= n) continue;  // partner is padding: the larger-or-equal key, stays
        const csk_bits_t a = keys[lo], b = keys[hi];
        if (a > b) {
            keys[lo] = b;
            keys[hi] = a;
#if CSK_HAS_VALUES
            const csk_value_t va = values[lo];
            values[lo] = values[hi];
            values[hi] = va;
#endif
        }
    }
}

// STEPS consecutive half-cleaner steps j, j/2, ..., j >> (STEPS-1) (all >=
// TILE, none a flip step) in one pass: each thread owns the 2^STEPS keys
// base + m * low (low = j >> (STEPS-1)) that those steps compare among
// themselves, keeps them in registers, and reads and writes them once.
template <int STEPS>
__device__ __forceinline__ void bitonic_global_steps(csk_bits_t* __restrict__ keys,
                                                     csk_value_t* __restrict__ values,
                                                     csk_index_t n, csk_index_t groups,
                                                     csk_index_t j)
{
    const int M = 1 << STEPS;
    const csk_index_t low = j >> (STEPS - 1);
    const csk_index_t stride = (csk_index_t)gridDim.x * BLOCK_SIZE;
    for (csk_index_t g = (csk_index_t)blockIdx.x * BLOCK_SIZE + threadIdx.x; g < groups; g += stride) {
        const csk_index_t base = ((g & ~(low - 1)) << STEPS) | (g & (low - 1));
        if (base >= n) continue;
        csk_bits_t k[M];
        csk_value_t v[M];
#pragma unroll
        for (int m = 0; m < M; ++m) {
            const csk_index_t p = base + m * low;
            k[m] = p < n ? keys[p] : CSK_ALL_ONES;  // padding: largest, never moves
#if CSK_HAS_VALUES
            if (p < n) v[m] = values[p];
#endif
        }
#pragma unroll
        for (int d = M >> 1; d > 0; d >>= 1) {
#pragma unroll
            for (int m = 0; m < M; ++m) {
                if (m & d) continue;
                if (k[m] > k[m + d]) {
                    const csk_bits_t t = k[m]; k[m] = k[m + d]; k[m + d] = t;
#if CSK_HAS_VALUES
                    const csk_value_t tv = v[m]; v[m] = v[m + d]; v[m + d] = tv;
#endif
                }
            }
        }
#pragma unroll
        for (int m = 0; m < M; ++m) {
            const csk_index_t p = base + m * low;
            if (p < n) {
                keys[p] = k[m];
#if CSK_HAS_VALUES
                values[p] = v[m];
#endif
            }
        }
        (void)v;
    }
}

// One entry point per fused step count; each is written out so its
// prototype gives the kernel's argument types (cudasortkit/build/prototype.py).
extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
bitonic_global_steps2(csk_bits_t* __restrict__ keys, csk_value_t* __restrict__ values,
                      csk_index_t n, csk_index_t groups, csk_index_t j)
{
    bitonic_global_steps<2>(keys, values, n, groups, j);
}

extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
bitonic_global_steps3(csk_bits_t* __restrict__ keys, csk_value_t* __restrict__ values,
                      csk_index_t n, csk_index_t groups, csk_index_t j)
{
    bitonic_global_steps<3>(keys, values, n, groups, j);
}

extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
bitonic_global_steps4(csk_bits_t* __restrict__ keys, csk_value_t* __restrict__ values,
                      csk_index_t n, csk_index_t groups, csk_index_t j)
{
    bitonic_global_steps<4>(keys, values, n, groups, j);
}
