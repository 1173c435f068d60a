// Segments sorted in shared memory (plugins/rows.py drives it): a block
// sorts whole segments, each padded to P = a power of two >= its length.
//
// Tunables: BLOCK_SIZE threads. Defines: TILE slots per block (a power of
// two, at least P); uniform rows put TILE / P rows in one block, ragged
// segments one segment per block (P from that segment's length).
//
// A slot holds (ordered key word, index in its segment); comparators order
// slots by key, then index, so the result is the stable order (equal keys,
// NaNs among them, keep input order; descending is folded into the key
// transform, keys.cuh). Padding slots hold the largest word and an index
// past the segment's end, so they sort after every key. The network is
// bitonic in the "flip" form (bitonic.cu): every comparator puts the
// smaller slot at the lower position, so each aligned run of P slots is
// sorted ascending on its own.
//
// Values by `mode` (segments.cuh's csk_write_value): keys only; argsort,
// int64 index in the segment or position in the whole array; pairs, the
// caller's values gathered by index.
#include "keys.cuh"
#include "segments.cuh"

#ifndef TILE
#define TILE 2048
#endif
#if (TILE & (TILE - 1)) != 0 || TILE > 65536
#error "TILE must be a power of two, at most 65536 (indices are 16 bits)"
#endif

__device__ __forceinline__ int rows_lo(int c, int j)
{
    return ((c & ~(j - 1)) << 1) | (c & (j - 1));
}

// keys_in/keys_out: n keys; rows x row_len keys (uniform, offsets null) or
// offsets[0..rows] (ragged, int64); log_p: log2(P) for uniform rows.
extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
rows_sort(const csk_bits_t* __restrict__ keys_in, csk_bits_t* __restrict__ keys_out,
          const csk_value_t* __restrict__ values_in, csk_value_t* __restrict__ values_out,
          long long rows, long long row_len, int log_p, const long long* __restrict__ offsets,
          unsigned long long mask64, int mode)
{
    __shared__ csk_bits_t s_keys[TILE];
    __shared__ unsigned short s_idx[TILE];
    const csk_bits_t mask = (csk_bits_t)mask64;

    // This block's segments: first row, rows per block, and (ragged) its one
    // segment's start and length.
    long long first_row, seg_start = 0, seg_len = row_len;
    int p_log = log_p;
    if (offsets != nullptr) {
        first_row = blockIdx.x;
        seg_start = offsets[first_row];
        seg_len = offsets[first_row + 1] - seg_start;
        p_log = 0;
        while ((1LL << p_log) < seg_len) ++p_log;
    } else {
        first_row = (long long)blockIdx.x * (TILE >> log_p);
    }
    const int p = 1 << p_log;
    const int active = offsets != nullptr ? p : TILE;  // slots in use

    for (int s = threadIdx.x; s < active; s += BLOCK_SIZE) {
        const int j = s & (p - 1);
        const long long row = first_row + (s >> p_log);
        const long long base = offsets != nullptr ? seg_start : row * row_len;
        const bool valid = j < seg_len && row < rows;
        s_keys[s] = valid ? csk_encode(keys_in[base + j], mask) : CSK_ALL_ONES;
        s_idx[s] = (unsigned short)j;
    }
    __syncthreads();

    for (int k = 2; k <= p; k <<= 1) {
        for (int j = k >> 1; j > 0; j >>= 1) {
            for (int c = threadIdx.x; c < (active >> 1); c += BLOCK_SIZE) {
                const int lo = rows_lo(c, j);
                const int hi = (j == (k >> 1)) ? (lo ^ (k - 1)) : (lo + j);
                const csk_bits_t a = s_keys[lo], b = s_keys[hi];
                const unsigned short ia = s_idx[lo], ib = s_idx[hi];
                if (a > b || (a == b && ia > ib)) {
                    s_keys[lo] = b;
                    s_keys[hi] = a;
                    s_idx[lo] = ib;
                    s_idx[hi] = ia;
                }
            }
            __syncthreads();
        }
    }

    for (int s = threadIdx.x; s < active; s += BLOCK_SIZE) {
        const int j = s & (p - 1);
        const long long row = first_row + (s >> p_log);
        if (j >= seg_len || row >= rows) continue;
        const long long base = offsets != nullptr ? seg_start : row * row_len;
        keys_out[base + j] = csk_decode(s_keys[s], mask);
        csk_write_value(values_out, values_in, base + j, base + s_idx[s], mode,
                        [&] { return base; });
    }
}
