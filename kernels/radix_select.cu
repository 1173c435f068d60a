// Radix select (plugins/radix_select.py drives it): per row, the key of
// rank `target` (1-based) in the selection order, found by digit
// histograms (11 or 8 bits a digit) from the most significant digit down, then one pass that
// writes keys before it (and the first ties) in index order. Rows of
// medium length take one block each instead (rs_stream_select), and
// topk's k <= RS_SORT_CAP candidates are sorted in one block
// (rs_sort_small).
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
#include "scan.cuh"

#define RS_TILE (BLOCK_SIZE * ITEMS_PER_THREAD)
// The widest digit (rs_stream_select's, and rs_hist's for few rows) and its bins.
#define RS_WIDE 11
#define RS_WIDE_BINS (1 << RS_WIDE)
#if BLOCK_SIZE % 32 != 0
#error "BLOCK_SIZE must be a multiple of 32"
#endif

__device__ __forceinline__ csk_bits_t rs_word(csk_bits_t x, csk_bits_t flip)
{
    return (csk_bits_t)(csk_to_ordered(x) ^ flip);
}

// A selection word and a position below 2^32 as one 64-bit composite,
// ascending as (word, position) (keys of at most 32 bits: the sampled paths).
__device__ __forceinline__ unsigned long long rs_composite(csk_bits_t w, long long i)
{
    return ((unsigned long long)w << 32) | (unsigned long long)i;
}

// The thread's keys of tile [start, end): kv[u] = keys[start + u *
// BLOCK_SIZE + threadIdx.x] (0 past the end), every load issued before
// any is used (the tile is BLOCK_SIZE * ITEMS_PER_THREAD keys).
__device__ __forceinline__ void rs_load_tile(const csk_bits_t* __restrict__ rk, long long start,
                                             long long end, csk_bits_t* kv)
{
#pragma unroll
    for (int u = 0; u < ITEMS_PER_THREAD; ++u) {
        const long long i = start + (long long)u * BLOCK_SIZE + threadIdx.x;
        kv[u] = i < end ? rk[i] : (csk_bits_t)0;
    }
}

// Exclusive prefix sum of v over the block's threads in thread order;
// *total gets the block's sum. Every thread of the block calls it.
__device__ __forceinline__ long long rs_block_exclusive(long long v, long long* s_warp,
                                                        long long* total)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    long long inc = v;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
        const long long t = __shfl_up_sync(0xffffffffu, inc, d);
        if (lane >= d) inc += t;
    }
    if (lane == 31) s_warp[warp] = inc;
    __syncthreads();
    long long before = 0, sum = 0;
    for (int q = 0; q < BLOCK_SIZE / 32; ++q) {
        const long long x = s_warp[q];
        if (q < warp) before += x;
        sum += x;
    }
    __syncthreads();  // s_warp may be rewritten by the next call
    *total = sum;
    return before + inc - v;
}

__device__ __forceinline__ long long rs_bin(const unsigned int* bins, int d) { return bins[d]; }
// global bins another block wrote with atomics: read from L2, never a stale L1 line
__device__ __forceinline__ long long rs_bin(const unsigned long long* bins, int d)
{
    return (long long)__ldcg(bins + d);
}

// The digit holding the word of rank `rank` (1 <= rank <= the bins' sum):
// the first bin whose running count reaches it. The one thread whose bins
// hold it writes *s_digit, *s_below (the count in the bins before it) and
// *s_count (its bin's count); every thread sees them after the call.
template <typename Bin>
__device__ __forceinline__ void rs_pick_bin(const Bin* bins, int nbins, long long rank,
                                            int* s_digit, long long* s_below,
                                            long long* s_count, long long* s_warp)
{
    const int per = (nbins + BLOCK_SIZE - 1) / BLOCK_SIZE;
    const int lo = threadIdx.x * per, hi = lo + per < nbins ? lo + per : nbins;
    long long mine = 0;
    for (int d = lo; d < hi; ++d) mine += rs_bin(bins, d);
    long long total;
    long long run = rs_block_exclusive(mine, s_warp, &total);
    if (run < rank && rank <= run + mine) {
        for (int d = lo; d < hi; ++d) {
            const long long c = rs_bin(bins, d);
            if (run + c >= rank) {
                *s_digit = d;
                *s_below = run;
                *s_count = c;
                break;
            }
            run += c;
        }
    }
    __syncthreads();
}

// The exact passes behind radix_select's sampled sort (one row) run only
// where its threshold missed: gate (rs_filter's count of words below the
// threshold, null for the plain exact path) outside [k, gate_cap].
__device__ __forceinline__ bool rs_gated(const unsigned long long* gate, long long k,
                                         long long gate_cap)
{
    if (gate == nullptr) return false;
    const long long below = (long long)gate[0];
    return below >= k && below <= gate_cap;
}

// hist[r * stride + d] += how many words of row r match prefix[r] above
// bit shift + width and have digit d (width bits, at most RS_WIDE) at
// `shift`. hist and done start at zero. The row's last block to finish
// (done[r] counts them) picks the digit: the digit of the word of rank
// remaining[r] (target on the first pass, shift + width == the key bits,
// where prefix[r] is not read yet) joins prefix[r], remaining[r] becomes
// the rank among the words with that digit, and the row's bins and done[r]
// are zeroed again for the next pass. Nothing runs where rs_gated.
extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
rs_hist(const csk_bits_t* __restrict__ keys, long long row_len, long long nb,
        unsigned long long* __restrict__ prefix, long long* __restrict__ remaining,
        unsigned long long* __restrict__ hist, long long stride, unsigned int* __restrict__ done,
        int shift, int width, int largest, long long target,
        const unsigned long long* __restrict__ gate, long long gate_cap)
{
    if (rs_gated(gate, target, gate_cap)) return;
    __shared__ unsigned int s_hist[RS_WIDE_BINS];
    __shared__ long long s_warp[BLOCK_SIZE / 32];
    __shared__ int s_last, s_digit;
    __shared__ long long s_below, s_count;
    const int nbins = 1 << width;
    for (int i = threadIdx.x; i < nbins; i += BLOCK_SIZE) s_hist[i] = 0;
    __syncthreads();
    const long long row = blockIdx.x / nb, b = blockIdx.x - row * nb;
    const long long start = b * RS_TILE;
    const long long end = start + RS_TILE < row_len ? start + RS_TILE : row_len;
    const csk_bits_t* rk = keys + row * row_len;
    const csk_bits_t flip = largest ? CSK_ALL_ONES : (csk_bits_t)0;
    const int high = shift + width;  // the bits at and above `high` must equal the prefix's
    const bool first = high >= CSK_KEY_BITS;
    const unsigned long long want = first ? 0ull : prefix[row] >> high;
    csk_bits_t kv[ITEMS_PER_THREAD];
    rs_load_tile(rk, start, end, kv);
#pragma unroll
    for (int u = 0; u < ITEMS_PER_THREAD; ++u) {
        const unsigned long long w = rs_word(kv[u], flip);
        if (start + (long long)u * BLOCK_SIZE + threadIdx.x < end && (first || (w >> high) == want))
            atomicAdd(&s_hist[(unsigned)(w >> shift) & (nbins - 1)], 1u);
    }
    __syncthreads();
    unsigned long long* h = hist + row * stride;
    for (int i = threadIdx.x; i < nbins; i += BLOCK_SIZE)
        if (s_hist[i]) atomicAdd(&h[i], (unsigned long long)s_hist[i]);
    __threadfence();  // this block's counts are in the bins before done[row] counts it
    __syncthreads();
    if (threadIdx.x == 0) s_last = atomicAdd(&done[row], 1u) == (unsigned int)(nb - 1);
    __syncthreads();
    if (!s_last) return;
    __threadfence();
    const long long rank = first ? target : remaining[row];
    rs_pick_bin(h, nbins, rank, &s_digit, &s_below, &s_count, s_warp);
    if (threadIdx.x == 0) {
        remaining[row] = rank - s_below;
        prefix[row] = (first ? 0ull : prefix[row]) | ((unsigned long long)s_digit << shift);
        done[row] = 0;
    }
    for (int i = threadIdx.x; i < nbins; i += BLOCK_SIZE) h[i] = 0;
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
// the row's target word T = prefix[r], and equal to it. The row's last
// block to finish (done[r] counts them; zero on entry, zero again after)
// turns the row's counts into exclusive prefix sums over its tiles (both
// columns) and writes the row's sums to totals[r * 2 + {0, 1}]. Where
// rs_gated, it only marks the sampled sort's unused candidate slots
// (gate[0] up to gate_cap) with all-ones words, which a stable sort puts
// after every candidate.
extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
rs_count(const csk_bits_t* __restrict__ keys, long long row_len, long long nb,
         const unsigned long long* __restrict__ prefix, long long* __restrict__ counts,
         long long* __restrict__ totals, unsigned int* __restrict__ done, int largest,
         const unsigned long long* __restrict__ gate, long long gate_k, long long gate_cap,
         csk_bits_t* __restrict__ slot_words)
{
    if (rs_gated(gate, gate_k, gate_cap)) {  // the sampled sort's slots past its candidates
        for (long long j = (long long)gate[0] + blockIdx.x * (long long)BLOCK_SIZE + threadIdx.x;
             j < gate_cap; j += (long long)gridDim.x * BLOCK_SIZE)
            slot_words[j] = CSK_ALL_ONES;
        return;
    }
    __shared__ long long s_sum[BLOCK_SIZE / 32];
    __shared__ int s_last;
    const long long row = blockIdx.x / nb, b = blockIdx.x - row * nb;
    const long long start = b * RS_TILE;
    const long long end = start + RS_TILE < row_len ? start + RS_TILE : row_len;
    const csk_bits_t* rk = keys + row * row_len;
    const csk_bits_t flip = largest ? CSK_ALL_ONES : (csk_bits_t)0;
    const csk_bits_t target = (csk_bits_t)prefix[row];
    long long less = 0, equal = 0;
    csk_bits_t kv[ITEMS_PER_THREAD];
    rs_load_tile(rk, start, end, kv);
#pragma unroll
    for (int u = 0; u < ITEMS_PER_THREAD; ++u) {
        const bool valid = start + (long long)u * BLOCK_SIZE + threadIdx.x < end;
        const csk_bits_t w = rs_word(kv[u], flip);
        less += valid && w < target;
        equal += valid && w == target;
    }
    less = rs_block_sum(less, s_sum);
    equal = rs_block_sum(equal, s_sum);
    if (threadIdx.x == 0) {
        counts[(long long)blockIdx.x * 2] = less;
        counts[(long long)blockIdx.x * 2 + 1] = equal;
        __threadfence();  // the counts are out before done[row] counts this block
        s_last = atomicAdd(&done[row], 1u) == (unsigned int)(nb - 1);
    }
    __syncthreads();
    if (!s_last) return;
    __threadfence();
    long long* c = counts + row * nb * 2;
    const long long per = (nb + BLOCK_SIZE - 1) / BLOCK_SIZE;
    const long long lo = threadIdx.x * per, hi = lo + per < nb ? lo + per : nb;
    long long my_less = 0, my_equal = 0;
    for (long long i = lo; i < hi; ++i) {  // other blocks' counts: from L2 (__ldcg)
        my_less += __ldcg(c + 2 * i);
        my_equal += __ldcg(c + 2 * i + 1);
    }
    long long row_less, row_equal;
    long long run_less = rs_block_exclusive(my_less, s_sum, &row_less);
    long long run_equal = rs_block_exclusive(my_equal, s_sum, &row_equal);
    for (long long i = lo; i < hi; ++i) {
        const long long l = __ldcg(c + 2 * i), e = __ldcg(c + 2 * i + 1);
        c[2 * i] = run_less;
        c[2 * i + 1] = run_equal;
        run_less += l;
        run_equal += e;
    }
    if (threadIdx.x == 0) {
        totals[row * 2] = row_less;
        totals[row * 2 + 1] = row_equal;
        done[row] = 0;
    }
}

// Block-wide ranks of two disjoint flags a and b of this thread's key, in
// thread order: *before_a / *before_b = keys of the block's earlier threads
// flagged a / b, *total_a / *total_b = the whole block's. Called by every
// thread of the block; s_a and s_b are BLOCK_SIZE / 32 shared words, free
// again after the caller's next __syncthreads().
__device__ __forceinline__ void rs_block_rank2(bool a, bool b, unsigned* s_a, unsigned* s_b,
                                               long long* before_a, long long* before_b,
                                               long long* total_a, long long* total_b)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const unsigned below_lane = (1u << lane) - 1u;
    const unsigned m_a = __ballot_sync(0xffffffffu, a), m_b = __ballot_sync(0xffffffffu, b);
    if (lane == 0) {
        s_a[warp] = __popc(m_a);
        s_b[warp] = __popc(m_b);
    }
    __syncthreads();
    long long ba = 0, bb = 0, ta = 0, tb = 0;
    for (int q = 0; q < BLOCK_SIZE / 32; ++q) {
        if (q < warp) {
            ba += s_a[q];
            bb += s_b[q];
        }
        ta += s_a[q];
        tb += s_b[q];
    }
    *before_a = ba + __popc(m_a & below_lane);
    *before_b = bb + __popc(m_b & below_lane);
    *total_a = ta;
    *total_b = tb;
}

// Every word of the row below the target T goes to its rank among them
// (index order), the equal ones after them, by index:
// mode 0 (topk): into out_words / out_index (rows x k) the words below T
//   at [0, less) and the first k - less equal ones after them (out_words
//   hold selection words, out_index positions in the row);
// mode 1 (partition): into out_keys / out_index (rows x row_len) the
//   caller's keys below T, then all equal to T, then all above, each part
//   in index order: a stable three-way partition around T;
// mode 2 (the sampled sort's exact passes, one row): as mode 0, the
//   positions as 32-bit ints (out_index read as unsigned int*), and the
//   words of the slots from k to gate_cap all ones.
// Nothing runs where rs_gated.
extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
rs_scatter(const csk_bits_t* __restrict__ keys, long long row_len, long long nb, long long k,
           const unsigned long long* __restrict__ prefix, const long long* __restrict__ counts,
           const long long* __restrict__ totals, csk_bits_t* __restrict__ out_words,
           long long* __restrict__ out_index, int largest, int mode,
           const unsigned long long* __restrict__ gate, long long gate_cap)
{
    if (rs_gated(gate, k, gate_cap)) return;
    if (mode == 2) {  // the candidate slots past the k are unused
        for (long long j = k + blockIdx.x * (long long)BLOCK_SIZE + threadIdx.x; j < gate_cap;
             j += (long long)gridDim.x * BLOCK_SIZE)
            out_words[j] = CSK_ALL_ONES;
    }
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
    if (mode != 1) {
        // topk writes no key of a tile without words below T, and without
        // ties while ties are still taken: such a tile (most of them) ends here
        const bool last = b + 1 == nb;
        const long long next_less = last ? row_less : counts[((long long)blockIdx.x + 1) * 2];
        const long long next_equal = last ? row_equal
                                          : counts[((long long)blockIdx.x + 1) * 2 + 1];
        if (next_less == run_less && (next_equal == run_equal || row_less + run_equal >= k))
            return;
    }
    // words above T before this tile: the tile's start less the others
    long long run_greater = start - run_less - run_equal;
    const long long out_len = mode == 1 ? row_len : k;
    csk_bits_t* words = out_words + row * out_len;
    long long* index = out_index + row * out_len;
    csk_bits_t kv[ITEMS_PER_THREAD];
    rs_load_tile(rk, start, end, kv);
#pragma unroll
    for (int u = 0; u < ITEMS_PER_THREAD; ++u) {  // chunks of BLOCK_SIZE keys in index order
        const long long chunk = start + (long long)u * BLOCK_SIZE;
        if (chunk >= end) break;  // the same in every thread
        const long long i = chunk + threadIdx.x;
        const bool valid = i < end;
        const csk_bits_t key = kv[u];
        const csk_bits_t w = rs_word(key, flip);
        const bool is_less = valid && w < target, is_equal = valid && w == target;
        const bool is_greater = valid && !is_less && !is_equal;
        // topk: a chunk without words below T or ties writes nothing (run_greater is partition's)
        if (mode != 1 && !__syncthreads_or(is_less || is_equal)) continue;
        long long before_less, before_equal, chunk_less, chunk_equal;
        rs_block_rank2(is_less, is_equal, s_less, s_equal, &before_less, &before_equal,
                       &chunk_less, &chunk_equal);
        const long long rank_less = run_less + before_less;
        const long long rank_equal = run_equal + before_equal;
        // position of this key among the chunk's greater ones: its position
        // in the chunk less the less and equal keys before it
        const long long rank_greater = run_greater + threadIdx.x - before_less - before_equal;
        long long pos = -1;
        if (is_less)
            pos = rank_less;
        else if (is_equal && (mode == 1 || row_less + rank_equal < k))
            pos = row_less + rank_equal;
        else if (is_greater && mode == 1)
            pos = row_less + row_equal + rank_greater;
        if (pos >= 0 && mode == 2) {
            words[pos] = w;
            ((unsigned int*)out_index)[pos] = (unsigned int)i;  // one row: index is out_index
        } else if (pos >= 0) {
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

// Sorts s_w[0, p) ascending by (word, index s_x), p a power of two
// (bitonic network); every thread of the block calls it.
__device__ __forceinline__ void rs_bitonic(csk_bits_t* s_w, long long* s_x, int p)
{
    for (int size = 2; size <= p; size <<= 1) {
        for (int stride = size >> 1; stride > 0; stride >>= 1) {
            __syncthreads();
            for (int t = threadIdx.x; t < p / 2; t += BLOCK_SIZE) {
                const int i = 2 * t - (t & (stride - 1)), j = i + stride;
                const bool up = (i & size) == 0;
                const bool j_first = s_w[j] < s_w[i] || (s_w[j] == s_w[i] && s_x[j] < s_x[i]);
                if (j_first == up) {
                    const csk_bits_t w = s_w[i];
                    const long long x = s_x[i];
                    s_w[i] = s_w[j];
                    s_x[i] = s_x[j];
                    s_w[j] = w;
                    s_x[j] = x;
                }
            }
        }
    }
    __syncthreads();
}

// The word's top `bits` bits (0 when bits == 0).
__device__ __forceinline__ unsigned long long rs_head(csk_bits_t w, int bits)
{
    return bits == 0 ? 0ull : (unsigned long long)w >> (CSK_KEY_BITS - bits);
}

// rs_stream_select sorts at most this many candidates in shared memory
#define RS_CAP 1024
// rs_stream_select's keys per thread of a chunk (loaded before they are used)
#define RS_STREAM_ITEMS 4
#define RS_STREAM_CHUNK (BLOCK_SIZE * RS_STREAM_ITEMS)

// topk of many rows of medium length, one block per row, the row streamed
// from global memory (no row-sized buffer: several blocks share an SM, and
// the row's later reads come from L2). The words' top `bits` bits are
// narrowed to the target's (the word of rank k), 11-bit digits at a time,
// each a histogram pass over the row, until at most RS_CAP words share
// them (or all bits are known). Then one pass in index order writes the
// words below that prefix (k - remaining of them, all among the k) to the
// row's candidates and gathers the words sharing it into shared memory,
// where they are sorted by (word, index) and the first `remaining` join the
// candidates; or, all bits known, the first `remaining` ties by index go
// there directly. Candidates of equal words are in index order (equal words
// share a prefix), as the stable sort of the candidates needs.
__device__ __forceinline__ void rs_stream_row(const csk_bits_t* __restrict__ rk, long long row_len,
                                              long long k, csk_bits_t* __restrict__ words,
                                              long long* __restrict__ index, int largest)
{
    __shared__ unsigned int s_hist[RS_WIDE_BINS];
    __shared__ csk_bits_t s_w[RS_CAP];
    __shared__ long long s_x[RS_CAP];
    __shared__ long long s_warp[BLOCK_SIZE / 32];
    __shared__ unsigned int s_less[BLOCK_SIZE / 32], s_match[BLOCK_SIZE / 32];
    __shared__ int s_digit;
    __shared__ long long s_below, s_count;
    const csk_bits_t flip = largest ? CSK_ALL_ONES : (csk_bits_t)0;
    unsigned long long prefix = 0;  // the target word's top `bits` bits (every thread's the same)
    int bits = 0;
    long long remaining = k, match = row_len;  // the target's rank among `match` sharing the prefix
    while (match > RS_CAP && bits < CSK_KEY_BITS) {
        const int width = CSK_KEY_BITS - bits < RS_WIDE ? CSK_KEY_BITS - bits : RS_WIDE;
        const int shift = CSK_KEY_BITS - bits - width, nbins = 1 << width;
        for (int i = threadIdx.x; i < nbins; i += BLOCK_SIZE) s_hist[i] = 0;
        __syncthreads();
        for (long long chunk = 0; chunk < row_len; chunk += RS_STREAM_CHUNK) {
            csk_bits_t wv[RS_STREAM_ITEMS];  // all loads in flight before the atomics
#pragma unroll
            for (int u = 0; u < RS_STREAM_ITEMS; ++u) {
                const long long i = chunk + u * BLOCK_SIZE + threadIdx.x;
                wv[u] = i < row_len ? rk[i] : (csk_bits_t)0;
            }
#pragma unroll
            for (int u = 0; u < RS_STREAM_ITEMS; ++u) {
                const unsigned long long w = rs_word(wv[u], flip);
                if (chunk + u * BLOCK_SIZE + threadIdx.x < row_len
                        && (bits == 0 || (w >> (shift + width)) == prefix))
                    atomicAdd(&s_hist[(unsigned)(w >> shift) & (nbins - 1)], 1u);
            }
        }
        __syncthreads();
        rs_pick_bin(s_hist, nbins, remaining, &s_digit, &s_below, &s_count, s_warp);
        remaining -= s_below;
        match = s_count;
        prefix = (prefix << width) | (unsigned long long)s_digit;
        bits += width;
    }
    const bool direct = bits == CSK_KEY_BITS;  // the prefix is the target word: matches are ties
    const long long less_total = k - remaining, match_need = direct ? remaining : match;
    long long run_less = 0, run_match = 0;
    for (long long chunk = 0; chunk < row_len; chunk += RS_STREAM_CHUNK) {
        csk_bits_t wv[RS_STREAM_ITEMS];  // all loads in flight first
        bool any = false;
#pragma unroll
        for (int u = 0; u < RS_STREAM_ITEMS; ++u) {
            const long long i = chunk + u * BLOCK_SIZE + threadIdx.x;
            wv[u] = rs_word(i < row_len ? rk[i] : (csk_bits_t)0, flip);
            any |= i < row_len && rs_head(wv[u], bits) <= prefix;
        }
        if (!__syncthreads_or(any)) continue;  // no key of the chunk is written (most chunks)
#pragma unroll
        for (int u = 0; u < RS_STREAM_ITEMS; ++u) {
            const long long i = chunk + u * BLOCK_SIZE + threadIdx.x;
            const bool valid = i < row_len;
            const csk_bits_t w = wv[u];
            const unsigned long long head = rs_head(w, bits);
            const bool is_less = valid && head < prefix, is_match = valid && head == prefix;
            long long before_less, before_match, chunk_less, chunk_match;
            rs_block_rank2(is_less, is_match, s_less, s_match, &before_less, &before_match,
                           &chunk_less, &chunk_match);
            const long long rank_less = run_less + before_less;
            const long long rank_match = run_match + before_match;
            if (is_less) {
                words[rank_less] = w;
                index[rank_less] = i;
            } else if (is_match && direct) {
                if (rank_match < remaining) {
                    words[less_total + rank_match] = w;
                    index[less_total + rank_match] = i;
                }
            } else if (is_match) {  // rank_match < match <= RS_CAP
                s_w[rank_match] = w;
                s_x[rank_match] = i;
            }
            run_less += chunk_less;
            run_match += chunk_match;
            __syncthreads();  // s_less / s_match are rewritten next
        }
        if (run_less >= less_total && run_match >= match_need) break;  // the same in every thread
    }
    if (direct) return;
    int p = 1;
    while (p < match) p <<= 1;  // match <= RS_CAP, a power of two
    for (int i = (int)match + threadIdx.x; i < p; i += BLOCK_SIZE) {
        s_w[i] = CSK_ALL_ONES;
        s_x[i] = 0x7fffffffffffffffll;  // after every real word: indices are below it
    }
    rs_bitonic(s_w, s_x, p);
    for (long long j = threadIdx.x; j < remaining; j += BLOCK_SIZE) {
        words[less_total + j] = s_w[j];
        index[less_total + j] = s_x[j];
    }
}

extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
rs_stream_select(const csk_bits_t* __restrict__ keys, long long row_len, long long k,
                 csk_bits_t* __restrict__ cand_words, long long* __restrict__ cand_index,
                 int largest)
{
    const long long row = blockIdx.x;
    rs_stream_row(keys + row * row_len, row_len, k, cand_words + row * k, cand_index + row * k,
                  largest);
}

#define RS_SORT_CAP 2048

// topk's results for k <= RS_SORT_CAP, one block per row: the row's k
// candidates (cand_words / cand_index, rows x k) sorted in shared memory by
// (word, index), the selection order with its tie rule, and gathered:
// rs_finish without the separate sort.
extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
rs_sort_small(const csk_bits_t* __restrict__ keys, long long row_len, long long k,
              const csk_bits_t* __restrict__ cand_words,
              const long long* __restrict__ cand_index, csk_bits_t* __restrict__ keys_out,
              long long* __restrict__ index_out)
{
    __shared__ csk_bits_t s_w[RS_SORT_CAP];
    __shared__ long long s_x[RS_SORT_CAP];
    const long long row = blockIdx.x;
    int p = 1;
    while (p < k) p <<= 1;
    for (int i = threadIdx.x; i < p; i += BLOCK_SIZE) {
        s_w[i] = i < k ? cand_words[row * k + i] : CSK_ALL_ONES;
        s_x[i] = i < k ? cand_index[row * k + i] : 0x7fffffffffffffffll;
    }
    rs_bitonic(s_w, s_x, p);
    for (int j = threadIdx.x; j < k; j += BLOCK_SIZE) {
        const long long i = s_x[j];
        index_out[row * k + j] = i;
        keys_out[row * k + j] = keys[row * row_len + i];
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

#if CSK_KEY_BITS <= 32  // composites of a word and a 32-bit position fit 64 bits
// ---------------------------------------------------------------------
// Sampled topk (keys of at most 32 bits, k <= RS_SORT_CAP): a random
// sample of each row sets a threshold word T, one pass over the row keeps
// the words below T, and one block per row picks the k first of those.
// About one read of the keys, where the histogram passes above take 3 to 5.
//
// Candidates are composites (word << 32) | position: distinct, and their
// ascending order is the selection order with its tie rule (equal words by
// index), so no step below needs to keep index order.
//
// Why the result is exact whatever the sample: let L and E count the row's
// words below T and equal to it. If k <= L, every word of rank <= k is
// below T: the k smallest candidates are the answer. If L < k <= L + E, the
// answer is all L candidates and the first k - L words equal to T by
// index. Otherwise (L + E < k: T too low; or L over the row's candidate
// capacity) the row takes rs_stream_row, the exact path that needs no
// threshold. The sample only decides how fast a row goes.

// Sorts s[0, p) ascending, p a power of two (bitonic network); every
// thread of the block calls it.
__device__ __forceinline__ void rs_bitonic64(unsigned long long* s, int p)
{
    for (int size = 2; size <= p; size <<= 1) {
        for (int stride = size >> 1; stride > 0; stride >>= 1) {
            __syncthreads();
            for (int t = threadIdx.x; t < p / 2; t += BLOCK_SIZE) {
                const int i = 2 * t - (t & (stride - 1)), j = i + stride;
                const unsigned long long a = s[i], b = s[j];
                if ((b < a) == ((i & size) == 0)) {
                    s[i] = b;
                    s[j] = a;
                }
            }
        }
    }
    __syncthreads();
}


// Keys each thread loads before it uses any, in rs_final's passes over a candidate list.
#define RS_LIST_ITEMS 4

// Candidates base + u * BLOCK_SIZE + threadIdx.x (u < RS_LIST_ITEMS) of
// list[0, n) into c[u], every load issued before any is used; past n: 0.
__device__ __forceinline__ void rs_load_list(const unsigned long long* __restrict__ list,
                                             long long base, long long n,
                                             unsigned long long (&c)[RS_LIST_ITEMS])
{
#pragma unroll
    for (int u = 0; u < RS_LIST_ITEMS; ++u) {
        const long long j = base + u * BLOCK_SIZE + threadIdx.x;
        c[u] = j < n ? list[j] : 0ull;
    }
}

// Per row: thresh[r] = T, the word of rank m (1-based) among `samples`
// words of the row (in dynamic shared memory: samples words), one from
// each of `samples` equal strides at a hashed offset (no stride pattern of the data lines up
// with it); counts[2r], counts[2r + 1] (rs_filter's L and E) zeroed. T is
// found by digit histograms of the sample in shared memory, most
// significant digit first, until one sample word or all bits are left.
// One block per row.
extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
rs_sample(const csk_bits_t* __restrict__ keys, long long row_len, int samples, int m,
          unsigned long long* __restrict__ thresh, unsigned long long* __restrict__ counts,
          int largest)
{
    extern __shared__ unsigned long long rs_dynamic[];  // 8-byte aligned
    csk_bits_t* s_w = (csk_bits_t*)rs_dynamic;
    __shared__ unsigned int s_hist[RS_WIDE_BINS];
    __shared__ long long s_warp[BLOCK_SIZE / 32];
    __shared__ int s_digit;
    __shared__ long long s_below, s_count;
    __shared__ csk_bits_t s_t;
    const long long row = blockIdx.x;
    const csk_bits_t* rk = keys + row * row_len;
    const csk_bits_t flip = largest ? CSK_ALL_ONES : (csk_bits_t)0;
    const long long stride = row_len / samples;  // >= 1 (the plugin's rule)
#pragma unroll 8
    for (int j = threadIdx.x; j < samples; j += BLOCK_SIZE) {
        unsigned int h = (unsigned int)j;  // lowbias32: every bit of j moves every bit
        h ^= h >> 16;
        h *= 0x7feb352du;
        h ^= h >> 15;
        h *= 0x846ca68bu;
        h ^= h >> 16;
        s_w[j] = rs_word(rk[(long long)j * stride + (long long)(h % (unsigned long long)stride)],
                         flip);
    }
    unsigned long long prefix = 0;  // the rank-m word's top `bits` bits
    int bits = 0;
    long long rank = m, match = samples;  // its rank among the `match` sharing the prefix
    while (bits < CSK_KEY_BITS && match > 1) {
        const int width = CSK_KEY_BITS - bits < RS_WIDE ? CSK_KEY_BITS - bits : RS_WIDE;
        const int shift = CSK_KEY_BITS - bits - width;
        for (int i = threadIdx.x; i < (1 << width); i += BLOCK_SIZE) s_hist[i] = 0;
        __syncthreads();  // (also: the sample is in s_w)
        for (int j = threadIdx.x; j < samples; j += BLOCK_SIZE) {
            const csk_bits_t w = s_w[j];
            if (rs_head(w, bits) == prefix)
                atomicAdd(&s_hist[(unsigned)((unsigned long long)w >> shift) & ((1u << width) - 1)],
                          1u);
        }
        __syncthreads();
        rs_pick_bin(s_hist, 1 << width, rank, &s_digit, &s_below, &s_count, s_warp);
        rank -= s_below;
        match = s_count;
        prefix = (prefix << width) | (unsigned long long)s_digit;
        bits += width;
    }
    if (bits < CSK_KEY_BITS) {  // one sample word has the prefix: it is T
        for (int j = threadIdx.x; j < samples; j += BLOCK_SIZE)
            if (rs_head(s_w[j], bits) == prefix) s_t = s_w[j];
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        thresh[row] = bits < CSK_KEY_BITS ? (unsigned long long)s_t : prefix;
        counts[2 * row] = 0;
        counts[2 * row + 1] = 0;
    }
}

// The words of tile b of row r below T = thresh[r] join the row's
// candidates cand[r * cap + j] (as composites; j counted by counts[2r],
// which may pass cap: those beyond it are not written), and counts[2r + 1]
// counts the words equal to T. Tiles of BLOCK_SIZE * ITEMS_PER_THREAD keys;
// a warp takes its place in the block's share by one shared atomic, the
// block its share of the row's by one global atomic.
extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
rs_filter(const csk_bits_t* __restrict__ keys, long long row_len, long long nb,
          const unsigned long long* __restrict__ thresh, unsigned long long* __restrict__ counts,
          unsigned long long* __restrict__ cand, long long cap, int largest)
{
    __shared__ unsigned int s_less, s_equal;
    __shared__ unsigned long long s_base;
    const long long row = blockIdx.x / nb, b = blockIdx.x - row * nb;
    const long long start = b * RS_TILE;
    const int len = (int)(start + RS_TILE < row_len ? RS_TILE : row_len - start);
    const csk_bits_t flip = largest ? CSK_ALL_ONES : (csk_bits_t)0;
    const csk_bits_t t = (csk_bits_t)thresh[row];
    const csk_bits_t* rk = keys + row * row_len + start;
    if (threadIdx.x == 0) s_less = s_equal = 0;
    csk_bits_t kv[ITEMS_PER_THREAD];
#pragma unroll
    for (int u = 0; u < ITEMS_PER_THREAD; ++u) {
        const int o = u * BLOCK_SIZE + threadIdx.x;
        kv[u] = o < len ? rk[o] : (csk_bits_t)0;
    }
    unsigned int less = 0, equal = 0;
#pragma unroll
    for (int u = 0; u < ITEMS_PER_THREAD; ++u) {
        const bool valid = u * BLOCK_SIZE + (int)threadIdx.x < len;
        kv[u] = rs_word(kv[u], flip);
        less += valid && kv[u] < t;
        equal += valid && kv[u] == t;
    }
    // the thread's place among its warp's (inclusive scan), the warp's in the block's
    const int lane = threadIdx.x & 31;
    unsigned int inc = less, eq = equal;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
        const unsigned int x = __shfl_up_sync(0xffffffffu, inc, d);
        if (lane >= d) inc += x;
        eq += __shfl_xor_sync(0xffffffffu, eq, d);
    }
    __syncthreads();  // s_less and s_equal are zero
    unsigned int warp_base = 0;
    if (lane == 31) {
        if (inc) warp_base = atomicAdd(&s_less, inc);
        if (eq) atomicAdd(&s_equal, eq);
    }
    warp_base = __shfl_sync(0xffffffffu, warp_base, 31);
    __syncthreads();
    if (s_less == 0 && s_equal == 0) return;  // most tiles (the same in every thread)
    if (threadIdx.x == 0) {
        s_base = s_less ? atomicAdd(&counts[2 * row], (unsigned long long)s_less) : 0ull;
        if (s_equal) atomicAdd(&counts[2 * row + 1], (unsigned long long)s_equal);
    }
    __syncthreads();
    if (less == 0) return;
    long long pos = (long long)s_base + warp_base + inc - less;
    unsigned long long* out = cand + row * cap;
#pragma unroll
    for (int u = 0; u < ITEMS_PER_THREAD; ++u) {
        const int o = u * BLOCK_SIZE + threadIdx.x;
        if (o < len && kv[u] < t) {
            if (pos < cap) out[pos] = rs_composite(kv[u], start + o);
            ++pos;
        }
    }
}

// topk's results, one block per row, from rs_filter's candidates (see the
// section's comment for the three cases): sorted by (word, index) and
// written as keys (gathered from the row) and positions. scratch_words /
// scratch_index (rows x k) hold rs_stream_row's candidates for rows that
// take it.
extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
rs_final(const csk_bits_t* __restrict__ keys, long long row_len, long long k,
         const unsigned long long* __restrict__ thresh,
         const unsigned long long* __restrict__ counts, const unsigned long long* __restrict__ cand,
         long long cap, csk_bits_t* __restrict__ scratch_words,
         long long* __restrict__ scratch_index, csk_bits_t* __restrict__ keys_out,
         long long* __restrict__ index_out, int largest)
{
    __shared__ unsigned long long s_c[RS_SORT_CAP];
    __shared__ unsigned int s_hist[RS_WIDE_BINS];
    __shared__ long long s_warp[BLOCK_SIZE / 32];
    __shared__ unsigned int s_n;
    __shared__ int s_digit;
    __shared__ long long s_below, s_count;
    const long long row = blockIdx.x;
    const csk_bits_t* rk = keys + row * row_len;
    const long long n_less = (long long)counts[2 * row], n_equal = (long long)counts[2 * row + 1];
    const unsigned long long* list = cand + row * cap;
    int pk = 1;
    while (pk < k) pk <<= 1;
    long long n = 0;  // composites in s_c[0, n)
    if (n_less >= k && n_less <= cap) {
        // narrow the list's composites (distinct) by 11-bit digits, most
        // significant first, until those up to the prefix are few: at most
        // `limit` (>= k) to sort
        const long long limit = pk > 64 ? pk : 64;
        unsigned long long prefix = 0;
        int bits = 0;
        long long below = 0, match = n_less;  // composites under / sharing the prefix
        while (below + match > limit) {  // match > 1: bits < 64 here
            const int width = 64 - bits < RS_WIDE ? 64 - bits : RS_WIDE;
            const int shift = 64 - bits - width;
            for (int i = threadIdx.x; i < RS_WIDE_BINS; i += BLOCK_SIZE) s_hist[i] = 0;
            __syncthreads();
            for (long long base = 0; base < n_less; base += RS_LIST_ITEMS * BLOCK_SIZE) {
                unsigned long long c[RS_LIST_ITEMS];
                rs_load_list(list, base, n_less, c);
#pragma unroll
                for (int u = 0; u < RS_LIST_ITEMS; ++u)
                    if (base + u * BLOCK_SIZE + threadIdx.x < n_less
                            && (bits == 0 || (c[u] >> (64 - bits)) == prefix))
                        atomicAdd(&s_hist[(unsigned)(c[u] >> shift) & ((1u << width) - 1)], 1u);
            }
            __syncthreads();
            rs_pick_bin(s_hist, 1 << width, k - below, &s_digit, &s_below, &s_count, s_warp);
            below += s_below;
            match = s_count;
            prefix = (prefix << width) | (unsigned long long)s_digit;
            bits += width;
        }
        if (threadIdx.x == 0) s_n = 0;
        __syncthreads();
        for (long long base = 0; base < n_less; base += RS_LIST_ITEMS * BLOCK_SIZE) {
            unsigned long long c[RS_LIST_ITEMS];
            rs_load_list(list, base, n_less, c);
#pragma unroll
            for (int u = 0; u < RS_LIST_ITEMS; ++u)
                if (base + u * BLOCK_SIZE + threadIdx.x < n_less
                        && (bits == 0 || (c[u] >> (64 - bits)) <= prefix))
                    s_c[atomicAdd(&s_n, 1u)] = c[u];
        }
        __syncthreads();
        n = s_n;  // below + match <= limit
    } else if (n_less < k && k <= n_less + n_equal && n_less <= cap) {
        // all n_less candidates, then the first k - n_less words equal to T by index
        for (long long j = threadIdx.x; j < n_less; j += BLOCK_SIZE) s_c[j] = list[j];
        const csk_bits_t flip = largest ? CSK_ALL_ONES : (csk_bits_t)0;
        const csk_bits_t t = (csk_bits_t)thresh[row];
        const long long need = k - n_less;
        long long found = 0;
        for (long long chunk = 0; chunk < row_len && found < need; chunk += BLOCK_SIZE) {
            const long long i = chunk + threadIdx.x;
            const bool tie = i < row_len && rs_word(rk[i], flip) == t;
            long long total;
            const long long before = rs_block_exclusive(tie ? 1 : 0, s_warp, &total);
            if (tie && found + before < need) s_c[n_less + found + before] = rs_composite(t, i);
            found += total;  // the same in every thread
        }
        __syncthreads();
        n = k;
    } else {
        // T missed: the exact path, its k candidates sorted below
        rs_stream_row(rk, row_len, k, scratch_words + row * k, scratch_index + row * k, largest);
        __syncthreads();  // the block's scratch writes are seen by all its threads
        for (long long j = threadIdx.x; j < k; j += BLOCK_SIZE)
            s_c[j] = rs_composite(scratch_words[row * k + j], scratch_index[row * k + j]);
        __syncthreads();
        n = k;
    }
    int p = 1;
    while (p < n) p <<= 1;
    for (long long j = n + threadIdx.x; j < p; j += BLOCK_SIZE) s_c[j] = ~0ull;
    rs_bitonic64(s_c, p);
    for (long long j = threadIdx.x; j < k; j += BLOCK_SIZE) {
        const long long i = (long long)(s_c[j] & 0xffffffffull);
        index_out[row * k + j] = i;
        keys_out[row * k + j] = rk[i];
    }
}
// rs_filter for one row, in index order: the words below T = thresh[0]
// and their positions (32-bit) go to cand_words / cand_index[0, L) in the
// order of the row (L counted by counts[0], written up to cap; counts[1]
// counts the words equal to T), so a stable sort of the words keeps equal
// ones by position. Each block takes the next tile (next_tile, zero on
// entry) and places its keys after those of the tiles before it by a
// decoupled look-back over status (zero on entry; scan.cuh's
// csk_tile_look_back): a tile's predecessors all started before it, so
// the look-back always ends.
extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
rs_filter_ordered(const csk_bits_t* __restrict__ keys, long long row_len,
                  const unsigned long long* __restrict__ thresh,
                  unsigned long long* __restrict__ counts, unsigned long long* status,
                  unsigned int* __restrict__ next_tile, csk_bits_t* __restrict__ cand_words,
                  unsigned int* __restrict__ cand_index, long long cap, int largest)
{
    constexpr int WARPS = BLOCK_SIZE / 32;
    static_assert(ITEMS_PER_THREAD <= 32, "one (item, warp) count per thread");
    __shared__ unsigned int s_off[ITEMS_PER_THREAD * WARPS];
    __shared__ long long s_warp[WARPS];
    __shared__ unsigned int s_tile, s_equal;
    __shared__ unsigned long long s_prefix;
    if (threadIdx.x == 0) {
        s_tile = atomicAdd(next_tile, 1u);
        s_equal = 0;
    }
    __syncthreads();
    const long long b = s_tile;
    const long long start = b * RS_TILE;
    const int len = (int)(start + RS_TILE < row_len ? RS_TILE : row_len - start);
    const csk_bits_t flip = largest ? CSK_ALL_ONES : (csk_bits_t)0;
    const csk_bits_t t = (csk_bits_t)thresh[0];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    csk_bits_t kv[ITEMS_PER_THREAD];
#pragma unroll
    for (int u = 0; u < ITEMS_PER_THREAD; ++u) {
        const int o = u * BLOCK_SIZE + threadIdx.x;
        kv[u] = o < len ? keys[start + o] : (csk_bits_t)0;
    }
    unsigned int ballots[ITEMS_PER_THREAD];  // the warp's keys below T, chunk u
    unsigned int equal = 0;
#pragma unroll
    for (int u = 0; u < ITEMS_PER_THREAD; ++u) {
        const bool valid = u * BLOCK_SIZE + (int)threadIdx.x < len;
        kv[u] = rs_word(kv[u], flip);
        ballots[u] = __ballot_sync(0xffffffffu, valid && kv[u] < t);
        equal += valid && kv[u] == t;
        if (lane == 0) s_off[u * WARPS + warp] = __popc(ballots[u]);
    }
#pragma unroll
    for (int d = 16; d > 0; d >>= 1) equal += __shfl_xor_sync(0xffffffffu, equal, d);
    if (lane == 0 && equal) atomicAdd(&s_equal, equal);
    __syncthreads();
    // (chunk, warp) counts -> their offsets in the tile, in index order
    const int e = threadIdx.x;
    const long long mine = e < ITEMS_PER_THREAD * WARPS ? (long long)s_off[e] : 0;
    long long total;
    const long long before = rs_block_exclusive(mine, s_warp, &total);
    if (e < ITEMS_PER_THREAD * WARPS) s_off[e] = (unsigned int)before;
    if (warp == 0) {
        const unsigned long long prefix = csk_tile_look_back(status, b, (unsigned long long)total);
        if (lane == 0) {
            s_prefix = prefix;
            if (total) atomicAdd(&counts[0], (unsigned long long)total);
            if (s_equal) atomicAdd(&counts[1], (unsigned long long)s_equal);
        }
    }
    __syncthreads();
    const unsigned int below_lane = (1u << lane) - 1u;
#pragma unroll
    for (int u = 0; u < ITEMS_PER_THREAD; ++u) {
        if (ballots[u] & (1u << lane)) {
            const long long pos = (long long)s_prefix + s_off[u * WARPS + warp]
                + __popc(ballots[u] & below_lane);
            if (pos < cap) {
                cand_words[pos] = kv[u];
                cand_index[pos] = (unsigned int)(start + u * BLOCK_SIZE + threadIdx.x);
            }
        }
    }
}

// topk of one row for k over RS_SORT_CAP: words / index hold the row's
// candidate slots sorted stably by word (rs_filter_ordered's, or where its
// threshold missed the exact passes' k, then the unused slots' all-ones
// words): the first k give the positions, and the keys: decoded from the
// words, read from the row only where the word does not tell the bits (a
// NaN's payload, the sign of a zero).
extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
rs_take(const csk_bits_t* __restrict__ keys, long long k, const csk_bits_t* __restrict__ words,
        const unsigned int* __restrict__ index, csk_bits_t* __restrict__ keys_out,
        long long* __restrict__ index_out, int largest)
{
    const csk_bits_t flip = largest ? CSK_ALL_ONES : (csk_bits_t)0;
    const long long stride = (long long)gridDim.x * BLOCK_SIZE;
    for (long long j = blockIdx.x * (long long)BLOCK_SIZE + threadIdx.x; j < k; j += stride) {
        const long long i = (long long)index[j];
        const csk_bits_t u = (csk_bits_t)(words[j] ^ flip);  // the ordered word
        index_out[j] = i;
#if CSK_KEY_KIND == CSK_KIND_FLOAT
        keys_out[j] = (u == CSK_ALL_ONES || u == CSK_SIGN_BIT) ? keys[i] : csk_from_ordered(u);
#else
        keys_out[j] = csk_from_ordered(u);
#endif
    }
}
#endif  // CSK_KEY_BITS <= 32
