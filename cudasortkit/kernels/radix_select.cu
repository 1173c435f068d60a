// Radix select (plugins/radix_select.py drives it): per row, the key of
// rank `target` (1-based) in the selection order, found by 8-bit digit
// histograms from the most significant digit down, then one pass that
// writes keys before it (and the first ties) in index order.
//
// Selection words: keys.cuh's ordered word (NaN the largest word, -0.0 ==
// +0.0) xor `flip` (all ones for largest=True, so NaNs come first): the
// selection order of sdk/selection.py is ascending words, ties by index.
//
// Row r has keys[r * row_len, (r + 1) * row_len); blocks are tiles of TILE
// = BLOCK_SIZE * ITEMS_PER_THREAD keys of one row, block id = r * nb + b
// (nb tiles per row, one 1-D grid: more rows than gridDim.y allows).
// Per-row state: prefix (the word's digits found so far) and remaining
// (the target's rank among the words matching the prefix).
#include "keys.cuh"

#define RS_TILE (BLOCK_SIZE * ITEMS_PER_THREAD)
#define RS_BINS 256
#if BLOCK_SIZE % 32 != 0
#error "BLOCK_SIZE must be a multiple of 32"
#endif

__device__ __forceinline__ csk_bits_t rs_word(csk_bits_t x, csk_bits_t flip)
{
    return (csk_bits_t)(csk_to_ordered(x) ^ flip);
}

// prefix = 0, remaining = target (1 <= target <= row_len) for every row.
extern "C" __global__ void rs_init(unsigned long long* __restrict__ prefix,
                                   long long* __restrict__ remaining, long long rows,
                                   long long target)
{
    const long long r = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (r < rows) {
        prefix[r] = 0;
        remaining[r] = target;
    }
}

// hist[r * 256 + d] += how many words of row r match prefix[r] above bit
// shift + 8 and have digit d at `shift`. hist starts at zero (rs_pick
// zeroes it again after reading it).
extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
rs_hist(const csk_bits_t* __restrict__ keys, long long row_len, long long nb,
        const unsigned long long* __restrict__ prefix, unsigned long long* __restrict__ hist,
        int shift, int largest)
{
    __shared__ unsigned int s_hist[RS_BINS];
    for (int i = threadIdx.x; i < RS_BINS; i += BLOCK_SIZE) s_hist[i] = 0;
    __syncthreads();
    const long long row = blockIdx.x / nb, b = blockIdx.x - row * nb;
    const long long start = b * RS_TILE;
    const long long end = start + RS_TILE < row_len ? start + RS_TILE : row_len;
    const csk_bits_t* rk = keys + row * row_len;
    const csk_bits_t flip = largest ? CSK_ALL_ONES : (csk_bits_t)0;
    const int high = shift + 8;  // the bits at and above `high` must equal the prefix's
    const unsigned long long want = high >= CSK_KEY_BITS ? 0ull : prefix[row] >> high;
    for (long long i = start + threadIdx.x; i < end; i += BLOCK_SIZE) {
        const unsigned long long w = rs_word(rk[i], flip);
        if (high >= CSK_KEY_BITS || (w >> high) == want)
            atomicAdd(&s_hist[(unsigned)(w >> shift) & (RS_BINS - 1)], 1u);
    }
    __syncthreads();
    for (int i = threadIdx.x; i < RS_BINS; i += BLOCK_SIZE)
        if (s_hist[i]) atomicAdd(&hist[row * RS_BINS + i], (unsigned long long)s_hist[i]);
}

// One block per row: the digit at `shift` of the word of rank remaining[r]
// (the first digit whose running count reaches it) joins prefix[r], and
// remaining[r] becomes the rank among the words with that digit. Then the
// row's histogram is zeroed for the next pass.
extern "C" __global__ void rs_pick(unsigned long long* __restrict__ hist,
                                   unsigned long long* __restrict__ prefix,
                                   long long* __restrict__ remaining, int shift)
{
    const long long row = blockIdx.x;
    unsigned long long* h = hist + row * RS_BINS;
    if (threadIdx.x == 0) {
        const unsigned long long rank = (unsigned long long)remaining[row];
        unsigned long long below = 0;
        int d = 0;
        for (; d < RS_BINS - 1; ++d) {
            if (below + h[d] >= rank) break;
            below += h[d];
        }
        remaining[row] = (long long)(rank - below);
        prefix[row] |= (unsigned long long)d << shift;
    }
    __syncthreads();
    for (int i = threadIdx.x; i < RS_BINS; i += blockDim.x) h[i] = 0;
}

// Block sums of `v` over the block; every thread gets the total.
__device__ __forceinline__ long long rs_block_sum(long long v, long long* s_sum)
{
#pragma unroll
    for (int d = 16; d > 0; d >>= 1) v += __shfl_down_sync(0xffffffffu, v, d);
    const int warp = threadIdx.x >> 5;
    if ((threadIdx.x & 31) == 0) s_sum[warp] = v;
    __syncthreads();
    long long total = 0;
    for (int q = 0; q < BLOCK_SIZE / 32; ++q) total += s_sum[q];
    __syncthreads();
    return total;
}

// counts[(r * nb + b) * 2 + {0, 1}] = the words of tile b of row r below
// the row's target word T = prefix[r], and equal to it.
extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
rs_count(const csk_bits_t* __restrict__ keys, long long row_len, long long nb,
         const unsigned long long* __restrict__ prefix, long long* __restrict__ counts,
         int largest)
{
    __shared__ long long s_sum[BLOCK_SIZE / 32];
    const long long row = blockIdx.x / nb, b = blockIdx.x - row * nb;
    const long long start = b * RS_TILE;
    const long long end = start + RS_TILE < row_len ? start + RS_TILE : row_len;
    const csk_bits_t* rk = keys + row * row_len;
    const csk_bits_t flip = largest ? CSK_ALL_ONES : (csk_bits_t)0;
    const csk_bits_t target = (csk_bits_t)prefix[row];
    long long less = 0, equal = 0;
    for (long long i = start + threadIdx.x; i < end; i += BLOCK_SIZE) {
        const csk_bits_t w = rs_word(rk[i], flip);
        less += w < target;
        equal += w == target;
    }
    less = rs_block_sum(less, s_sum);
    equal = rs_block_sum(equal, s_sum);
    if (threadIdx.x == 0) {
        counts[(long long)blockIdx.x * 2] = less;
        counts[(long long)blockIdx.x * 2 + 1] = equal;
    }
}

// One block per row: counts become exclusive prefix sums over the row's
// tiles (both columns), and totals[r * 2 + {0, 1}] the row's sums.
extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
rs_scan(long long* __restrict__ counts, long long nb, long long* __restrict__ totals)
{
    __shared__ long long s_less[BLOCK_SIZE], s_equal[BLOCK_SIZE];
    long long* c = counts + (long long)blockIdx.x * nb * 2;
    const long long per = (nb + BLOCK_SIZE - 1) / BLOCK_SIZE;
    const long long lo = threadIdx.x * per;
    const long long hi = lo + per < nb ? lo + per : nb;
    long long less = 0, equal = 0;
    for (long long i = lo; i < hi; ++i) {
        less += c[2 * i];
        equal += c[2 * i + 1];
    }
    s_less[threadIdx.x] = less;
    s_equal[threadIdx.x] = equal;
    __syncthreads();
    if (threadIdx.x == 0) {
        long long run_less = 0, run_equal = 0;
        for (int t = 0; t < BLOCK_SIZE; ++t) {
            const long long l = s_less[t], e = s_equal[t];
            s_less[t] = run_less;
            s_equal[t] = run_equal;
            run_less += l;
            run_equal += e;
        }
        totals[blockIdx.x * 2] = run_less;
        totals[blockIdx.x * 2 + 1] = run_equal;
    }
    __syncthreads();
    long long run_less = s_less[threadIdx.x], run_equal = s_equal[threadIdx.x];
    for (long long i = lo; i < hi; ++i) {
        const long long l = c[2 * i], e = c[2 * i + 1];
        c[2 * i] = run_less;
        c[2 * i + 1] = run_equal;
        run_less += l;
        run_equal += e;
    }
}

// Every word of the row below the target T goes to its rank among them
// (index order), the equal ones after them, by index:
// mode 0 (topk): into out_words / out_index (rows x k) the words below T
//   at [0, less) and the first k - less equal ones after them (out_words
//   hold selection words, out_index positions in the row);
// mode 1 (partition): into out_keys / out_index (rows x row_len) the
//   caller's keys below T, then all equal to T, then all above, each part
//   in index order: a stable three-way partition around T.
extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
rs_scatter(const csk_bits_t* __restrict__ keys, long long row_len, long long nb, long long k,
           const unsigned long long* __restrict__ prefix, const long long* __restrict__ counts,
           const long long* __restrict__ totals, csk_bits_t* __restrict__ out_words,
           long long* __restrict__ out_index, int largest, int mode)
{
    __shared__ unsigned int s_less[BLOCK_SIZE / 32], s_equal[BLOCK_SIZE / 32];
    const long long row = blockIdx.x / nb, b = blockIdx.x - row * nb;
    const long long start = b * RS_TILE;
    const long long end = start + RS_TILE < row_len ? start + RS_TILE : row_len;
    const csk_bits_t* rk = keys + row * row_len;
    const csk_bits_t flip = largest ? CSK_ALL_ONES : (csk_bits_t)0;
    const csk_bits_t target = (csk_bits_t)prefix[row];
    const long long row_less = totals[row * 2], row_equal = totals[row * 2 + 1];
    long long run_less = counts[(long long)blockIdx.x * 2];
    long long run_equal = counts[(long long)blockIdx.x * 2 + 1];
    // words above T before this tile: the tile's start less the others
    long long run_greater = start - run_less - run_equal;
    const long long out_len = mode == 0 ? k : row_len;
    csk_bits_t* words = out_words + row * out_len;
    long long* index = out_index + row * out_len;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const unsigned below_lane = (1u << lane) - 1u;
    for (long long chunk = start; chunk < end; chunk += BLOCK_SIZE) {
        const long long i = chunk + threadIdx.x;
        const bool valid = i < end;
        const csk_bits_t key = valid ? rk[i] : (csk_bits_t)0;
        const csk_bits_t w = rs_word(key, flip);
        const bool is_less = valid && w < target, is_equal = valid && w == target;
        const bool is_greater = valid && !is_less && !is_equal;
        const unsigned m_less = __ballot_sync(0xffffffffu, is_less);
        const unsigned m_equal = __ballot_sync(0xffffffffu, is_equal);
        if (lane == 0) {
            s_less[warp] = __popc(m_less);
            s_equal[warp] = __popc(m_equal);
        }
        __syncthreads();
        long long before_less = 0, before_equal = 0, chunk_less = 0, chunk_equal = 0;
        for (int q = 0; q < BLOCK_SIZE / 32; ++q) {
            if (q < warp) {
                before_less += s_less[q];
                before_equal += s_equal[q];
            }
            chunk_less += s_less[q];
            chunk_equal += s_equal[q];
        }
        const long long rank_less = run_less + before_less + __popc(m_less & below_lane);
        const long long rank_equal = run_equal + before_equal + __popc(m_equal & below_lane);
        // position of this key among the chunk's greater ones: its position
        // in the chunk less the less and equal keys before it
        const long long rank_greater = run_greater + threadIdx.x
            - (before_less + __popc(m_less & below_lane))
            - (before_equal + __popc(m_equal & below_lane));
        long long pos = -1;
        if (is_less)
            pos = rank_less;
        else if (is_equal && (mode == 1 || row_less + rank_equal < k))
            pos = row_less + rank_equal;
        else if (is_greater && mode == 1)
            pos = row_less + row_equal + rank_greater;
        if (pos >= 0) {
            words[pos] = mode == 0 ? w : key;
            index[pos] = i;
        }
        run_less += chunk_less;
        run_equal += chunk_equal;
        run_greater += (end - chunk < BLOCK_SIZE ? end - chunk : BLOCK_SIZE) - chunk_less
            - chunk_equal;
        __syncthreads();  // s_less / s_equal are rewritten by the next chunk
    }
}

// topk of a row that fits in shared memory, one block per row: the row's
// selection words are loaded once into dynamic shared memory (row_len
// words), the digit passes of rs_hist / rs_pick run there, and one more
// pass over it writes the words below the target T and the first ties,
// in index order, to the row's k candidates (as rs_scatter's mode 0).
extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
rs_block_select(const csk_bits_t* __restrict__ keys, long long row_len, long long k,
                csk_bits_t* __restrict__ cand_words, long long* __restrict__ cand_index,
                int largest)
{
    extern __shared__ unsigned long long rs_block_smem[];
    csk_bits_t* s_words = (csk_bits_t*)rs_block_smem;
    __shared__ unsigned int s_hist[RS_BINS];
    __shared__ unsigned int s_less[BLOCK_SIZE / 32], s_equal[BLOCK_SIZE / 32];
    __shared__ unsigned long long s_prefix;
    __shared__ long long s_remaining;
    const long long row = blockIdx.x;
    const csk_bits_t* rk = keys + row * row_len;
    const csk_bits_t flip = largest ? CSK_ALL_ONES : (csk_bits_t)0;
#pragma unroll 8
    for (long long i = threadIdx.x; i < row_len; i += BLOCK_SIZE) s_words[i] = rs_word(rk[i], flip);
    if (threadIdx.x == 0) {
        s_prefix = 0;
        s_remaining = k;  // 1 <= k <= row_len: the target's rank
    }
    for (int shift = CSK_KEY_BITS - 8; shift >= 0; shift -= 8) {
        for (int i = threadIdx.x; i < RS_BINS; i += BLOCK_SIZE) s_hist[i] = 0;
        __syncthreads();  // the words, the prefix and the zeroed bins are in place
        const int high = shift + 8;
        const unsigned long long want = high >= CSK_KEY_BITS ? 0ull : s_prefix >> high;
        for (long long i = threadIdx.x; i < row_len; i += BLOCK_SIZE) {
            const unsigned long long w = s_words[i];
            if (high >= CSK_KEY_BITS || (w >> high) == want)
                atomicAdd(&s_hist[(unsigned)(w >> shift) & (RS_BINS - 1)], 1u);
        }
        __syncthreads();
        if (threadIdx.x == 0) {  // as rs_pick
            const long long rank = s_remaining;
            long long below = 0;
            int d = 0;
            for (; d < RS_BINS - 1; ++d) {
                if (below + (long long)s_hist[d] >= rank) break;
                below += s_hist[d];
            }
            s_remaining = rank - below;
            s_prefix |= (unsigned long long)d << shift;
        }
        __syncthreads();  // before the bins are zeroed again or the prefix read
    }
    const csk_bits_t target = (csk_bits_t)s_prefix;
    const long long need = s_remaining, row_less = k - need;
    csk_bits_t* words = cand_words + row * k;
    long long* index = cand_index + row * k;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const unsigned below_lane = (1u << lane) - 1u;
    long long run_less = 0, run_equal = 0;
    for (long long chunk = 0; chunk < row_len; chunk += BLOCK_SIZE) {
        const long long i = chunk + threadIdx.x;
        const bool valid = i < row_len;
        const csk_bits_t w = valid ? s_words[i] : (csk_bits_t)0;
        const bool is_less = valid && w < target, is_equal = valid && w == target;
        const unsigned m_less = __ballot_sync(0xffffffffu, is_less);
        const unsigned m_equal = __ballot_sync(0xffffffffu, is_equal);
        if (lane == 0) {
            s_less[warp] = __popc(m_less);
            s_equal[warp] = __popc(m_equal);
        }
        __syncthreads();
        long long before_less = 0, before_equal = 0, chunk_less = 0, chunk_equal = 0;
        for (int q = 0; q < BLOCK_SIZE / 32; ++q) {
            if (q < warp) {
                before_less += s_less[q];
                before_equal += s_equal[q];
            }
            chunk_less += s_less[q];
            chunk_equal += s_equal[q];
        }
        const long long rank_less = run_less + before_less + __popc(m_less & below_lane);
        const long long rank_equal = run_equal + before_equal + __popc(m_equal & below_lane);
        if (is_less) {
            words[rank_less] = w;
            index[rank_less] = i;
        } else if (is_equal && rank_equal < need) {
            words[row_less + rank_equal] = w;
            index[row_less + rank_equal] = i;
        }
        run_less += chunk_less;
        run_equal += chunk_equal;
        __syncthreads();  // s_less / s_equal are rewritten by the next chunk
        if (run_less >= row_less && run_equal >= need) break;  // the same in every thread
    }
}

// topk's results: order (rows x k positions in each row of candidates, a
// stable argsort of the candidates' words) picks the candidate, whose
// position in the row (cand_index) gives the caller's key.
extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
rs_finish(const csk_bits_t* __restrict__ keys, long long row_len, long long k,
          long long rows, const long long* __restrict__ cand_index,
          const long long* __restrict__ order, csk_bits_t* __restrict__ keys_out,
          long long* __restrict__ index_out)
{
    const long long total = rows * k;
    const long long stride = (long long)gridDim.x * BLOCK_SIZE;
    for (long long j = blockIdx.x * (long long)BLOCK_SIZE + threadIdx.x; j < total; j += stride) {
        const long long r = j / k;
        const long long i = cand_index[r * k + order[j]];
        index_out[j] = i;
        keys_out[j] = keys[r * row_len + i];
    }
}
