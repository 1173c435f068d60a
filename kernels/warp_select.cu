// Top-k of short rows, one warp per row (plugins/warp_select.py drives it).
//
// Lane l holds the row's keys l, l + 32, l + 64, ... (ROW_ITEMS of them, as
// selection words: keys.cuh's ordered word xor `flip`, all ones for
// largest=1, so ascending words are the selection order of
// sdk/selection.py with NaN the largest key). k rounds each take the
// smallest (word, index) not yet taken: every lane finds its own, a
// butterfly of shuffles gives every lane the warp's, and the lane that
// holds it marks it taken. Ties go to the lower index (the tie rule),
// padding past the row's end is taken from the start. Defines: ROW_ITEMS
// (keys per lane, row_len <= 32 * ROW_ITEMS <= 32 * 64).
#include "keys.cuh"

#ifndef ROW_ITEMS
#define ROW_ITEMS 32
#endif
#if ROW_ITEMS > 64
#error "ROW_ITEMS must be at most 64 (one 64-bit taken mask per lane)"
#endif
#define WS_WARPS (BLOCK_SIZE / 32)

extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
warp_select(const csk_bits_t* __restrict__ keys, csk_bits_t* __restrict__ keys_out,
            long long* __restrict__ index_out, long long rows, long long row_len, long long k,
            int largest)
{
    const int lane = threadIdx.x & 31;
    const long long row = (long long)blockIdx.x * WS_WARPS + (threadIdx.x >> 5);
    if (row >= rows) return;  // the whole warp leaves together
    const csk_bits_t* rk = keys + row * row_len;
    const csk_bits_t flip = largest ? CSK_ALL_ONES : (csk_bits_t)0;
    csk_bits_t words[ROW_ITEMS];
    unsigned long long taken = 0;
#pragma unroll
    for (int r = 0; r < ROW_ITEMS; ++r) {
        const long long i = (long long)r * 32 + lane;
        if (i < row_len) {
            words[r] = (csk_bits_t)(csk_to_ordered(rk[i]) ^ flip);
        } else {
            words[r] = CSK_ALL_ONES;
            taken |= 1ull << r;
        }
    }
    for (long long j = 0; j < k; ++j) {
        // this lane's smallest (word, index) not taken; index r * 32 + lane
        // grows with r, so the first of equal words is the lower index
        unsigned long long best = CSK_ALL_ONES;
        int best_r = -1;
#pragma unroll
        for (int r = 0; r < ROW_ITEMS; ++r) {
            if (!((taken >> r) & 1ull) && (best_r < 0 || (unsigned long long)words[r] < best)) {
                best = words[r];
                best_r = r;
            }
        }
        long long best_i = best_r < 0 ? 0x7fffffffffffffffLL : (long long)best_r * 32 + lane;
#pragma unroll
        for (int d = 16; d > 0; d >>= 1) {
            const unsigned long long w = __shfl_xor_sync(0xffffffffu, best, d);
            const long long i = __shfl_xor_sync(0xffffffffu, best_i, d);
            if (w < best || (w == best && i < best_i)) {
                best = w;
                best_i = i;
            }
        }
        // k <= row_len: some lane still holds an untaken key, so best_i is one
        if ((best_i & 31) == lane) {
            const int r = (int)(best_i >> 5);
            taken |= 1ull << r;
            keys_out[row * k + j] = rk[best_i];
            index_out[row * k + j] = best_i;
        }
    }
}
