// searchsorted of one row through an implicit static search tree (the plugin
// "tree", plugins/search_tree.py, launches it).
//
// a: n sorted keys (no sorter); v: m queries; out[j] = #{k : a_k before
// v_j} (csk_before: a_k < v_j for side left, a_k <= v_j for side right),
// NumPy's searchsorted. Keys compare as ordered words (keys.cuh): NaNs last
// and equal to each other, -0.0 == +0.0.
//
// The tree, F = FANOUT: level 0 is a; level k >= 1 has len_k = ceil(n / F^k)
// entries L_k[g] = ordered(a[F^k g + F^k - 1]). Reading any index of a level
// at or past its end as the pad word ALL_ONES (past a's end too), every
// level is a sorted subsequence of a and its pads, and L_{k+1}[g] =
// L_k[F g + F - 1]. With c_k = #{i : L_k[i] before x}, a prefix count, that
// gives c_{k+1} = floor(c_k / F), so
//     c_k = F c_{k+1} + #{l < F : L_k[F c_{k+1} + l] before x}:
// one group of F contiguous entries read per level. The top level (at most
// TOP entries; a itself when n <= TOP), pads after it up to TOP, is copied
// to shared memory by every block in Eytzinger order (csk_tree_top_rank)
// and searched there. A pad is before x only when x is ALL_ONES (a NaN)
// and side is right, and then so is every key: c runs past n, and the
// answer min(c, n) is n.
//
// The levels buffer (csk_search_tree_build writes it) holds L_1 .. L_depth,
// level k at word offset sum_{j<k} roundup(len_j, F), so that every group of
// F entries lies in one aligned F-word block.
//
// Tunables: BLOCK_SIZE (a multiple of 32), FANOUT (4, 8, 16 or 32: the lanes
// that read one group together), TOP (shared top entries, a power of two).
#include "search.cuh"

#if FANOUT == 4
#define CSK_TREE_SHIFT 2
#elif FANOUT == 8
#define CSK_TREE_SHIFT 3
#elif FANOUT == 16
#define CSK_TREE_SHIFT 4
#elif FANOUT == 32
#define CSK_TREE_SHIFT 5
#else
#error "FANOUT must be 4, 8, 16 or 32 (the lanes of a warp that read one group)"
#endif

#if TOP < 2 || (TOP & (TOP - 1))
#error "TOP must be a power of two"
#endif

#define CSK_TREE_FULL 0xffffffffu
#define CSK_TREE_GROUP_MASK (FANOUT == 32 ? CSK_TREE_FULL : (1u << (FANOUT & 31)) - 1u)
// Levels above a at most (the plugin checks): n < 2^63 and F >= 4.
#define CSK_TREE_MAX_DEPTH 32

// len_{k+1} from len_k, and the room level k takes in the levels buffer.
__device__ __forceinline__ long long csk_tree_up(long long len)
{
    return (len + FANOUT - 1) >> CSK_TREE_SHIFT;
}

__device__ __forceinline__ long long csk_tree_room(long long len)
{
    return (len + FANOUT - 1) & ~(long long)(FANOUT - 1);
}

__device__ __forceinline__ csk_bits_t csk_tree_shfl(csk_bits_t x, int lane)
{
#if CSK_KEY_BYTES == 8
    return __shfl_sync(CSK_TREE_FULL, (unsigned long long)x, lane);
#else
    return (csk_bits_t)__shfl_sync(CSK_TREE_FULL, (unsigned)x, lane);
#endif
}

// Levels 1..depth from a, one thread per entry (total: the buffer's words).
extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
csk_search_tree_build(const csk_bits_t* __restrict__ a, long long n,
                      csk_bits_t* __restrict__ levels, int depth, long long total)
{
    const long long stride = (long long)gridDim.x * BLOCK_SIZE;
    for (long long t = blockIdx.x * (long long)BLOCK_SIZE + threadIdx.x; t < total; t += stride) {
        long long g = t, len = n;
        int k = 0;
        for (;;) {  // word t is entry g of level k (entries past len_k: pads)
            len = csk_tree_up(len);
            ++k;
            const long long room = csk_tree_room(len);
            if (g < room || k == depth) break;
            g -= room;
        }
        const long long last = ((g + 1) << (k * CSK_TREE_SHIFT)) - 1;
        levels[t] = last < n ? csk_to_ordered(a[last]) : CSK_ALL_ONES;
    }
}

// The shared top in Eytzinger (breadth-first) order of a complete binary
// tree over sorted entries 0 .. TOP-2: node p (1 .. TOP-1; children 2p and
// 2p+1) at depth d = floor(log2 p) holds the entry of in-order rank
// (2 (p - 2^d) + 1) 2^(H-1-d) - 1, H = log2(TOP); slot 0 holds entry TOP-1.
// A search walks p = 2p + [node before x] for H steps, ending at TOP + the
// count among entries 0 .. TOP-2. Depth d's nodes are 2^d words in a row,
// so a warp's first five steps read one 32-word stretch (no bank conflict)
// where a halving search over sorted words would keep hitting one bank.
__device__ __forceinline__ int csk_tree_top_rank(int p, int top_bits)
{
    if (p == 0) return TOP - 1;
    const int d = 31 - __clz(p);
    return ((((p - (1 << d)) << 1) + 1) << (top_bits - 1 - d)) - 1;
}

// One level k >= 1 down for the FANOUT queries of this lane's group: every
// lane of the group holds all their words xs and counts cs (the same in
// each lane), reads entry `member` of each query's group (FANOUT
// independent loads in flight), and the group's ballot (its bits: `group`)
// counts the entries before the query. A count past the level's end
// (everything before x) is kept at len: its groups below are all pads, so
// it stays past their end. Counts of levels k >= 1 fit 32 bits: len_1 <
// 2^32 - 2 FANOUT (the plugin checks n).
template <bool RIGHT>
__device__ __forceinline__ void csk_tree_level(const csk_bits_t* __restrict__ level,
                                               unsigned len, const csk_bits_t (&xs)[FANOUT],
                                               unsigned (&cs)[FANOUT], int member, unsigned group)
{
    csk_bits_t w[FANOUT];
#pragma unroll
    for (int j = 0; j < FANOUT; ++j) {
        const unsigned i = (cs[j] << CSK_TREE_SHIFT) + member;
        w[j] = i < len ? level[i] : CSK_ALL_ONES;
    }
#pragma unroll
    for (int j = 0; j < FANOUT; ++j) {
        const unsigned votes = __ballot_sync(CSK_TREE_FULL, csk_before(w[j], xs[j], RIGHT));
        const unsigned c = (cs[j] << CSK_TREE_SHIFT) + __popc(votes & group);
        cs[j] = c < len ? c : len;
    }
}

// The last step, in a itself (read as ordered words, indices >= n as pads):
// the count of this lane's own query (64 bits).
template <bool RIGHT>
__device__ __forceinline__ long long csk_tree_leaf(const csk_bits_t* __restrict__ a, long long n,
                                                   const csk_bits_t (&xs)[FANOUT],
                                                   const unsigned (&cs)[FANOUT], int member,
                                                   unsigned group)
{
    csk_bits_t w[FANOUT];
#pragma unroll
    for (int j = 0; j < FANOUT; ++j) {
        const long long i = ((long long)cs[j] << CSK_TREE_SHIFT) + member;
        w[j] = i < n ? csk_to_ordered(a[i]) : CSK_ALL_ONES;
    }
    long long mine = 0;
#pragma unroll
    for (int j = 0; j < FANOUT; ++j) {
        const unsigned votes = __ballot_sync(CSK_TREE_FULL, csk_before(w[j], xs[j], RIGHT));
        if (j == member) mine = ((long long)cs[j] << CSK_TREE_SHIFT) + __popc(votes & group);
    }
    return mine;
}

// Every query of the grid-stride loop, for one side. Each warp takes 32
// queries at a time, one a lane; the whole warp runs every step (ballots
// and shuffles need all lanes), lanes past m search a 0 and write nothing.
template <bool RIGHT>
__device__ __forceinline__ void csk_tree_queries(const csk_bits_t* __restrict__ a, long long n,
                                                 const csk_bits_t* __restrict__ levels,
                                                 int depth, const csk_bits_t* __restrict__ v,
                                                 long long m, long long* __restrict__ out,
                                                 const csk_bits_t* top, int top_len,
                                                 const long long* level_len,
                                                 const long long* level_at)
{
    const int lane = threadIdx.x & 31, member = lane & (FANOUT - 1), leader = lane - member;
    const unsigned group = CSK_TREE_GROUP_MASK << leader;
    const long long stride = (long long)gridDim.x * BLOCK_SIZE;
    for (long long base = (long long)blockIdx.x * BLOCK_SIZE + (threadIdx.x - lane); base < m;
         base += stride) {
        const long long q = base + lane;
        const csk_bits_t x = q < m ? csk_to_ordered(v[q]) : (csk_bits_t)0;
        unsigned p = 1;  // the Eytzinger walk, then the count in the top
#pragma unroll
        for (int s = TOP / 2; s > 0; s >>= 1) p = 2 * p + csk_before(top[p], x, RIGHT);
        int c_top = (int)p - TOP;
        if (c_top == TOP - 1) c_top += csk_before(top[0], x, RIGHT);
        c_top = c_top < top_len ? c_top : top_len;
        long long c = c_top;
        if (depth > 0) {
            csk_bits_t xs[FANOUT];
            unsigned cs[FANOUT];
#pragma unroll
            for (int j = 0; j < FANOUT; ++j) {
                xs[j] = csk_tree_shfl(x, leader + j);
                cs[j] = __shfl_sync(CSK_TREE_FULL, (unsigned)c_top, leader + j);
            }
            for (int k = depth - 1; k >= 1; --k)
                csk_tree_level<RIGHT>(levels + level_at[k], (unsigned)level_len[k], xs, cs,
                                      member, group);
            c = csk_tree_leaf<RIGHT>(a, n, xs, cs, member, group);
        }
        if (q < m) out[q] = c < n ? c : n;
    }
}

// (Min blocks 1: no register cap below what the block needs; ptxas's own
// cap for 512 threads spills the per-group arrays.)
extern "C" __global__ void __launch_bounds__(BLOCK_SIZE, 1)
csk_search_tree(const csk_bits_t* __restrict__ a, long long n,
                const csk_bits_t* __restrict__ levels, int depth,
                const csk_bits_t* __restrict__ v, long long m, int right,
                long long* __restrict__ out)
{
    __shared__ csk_bits_t top[TOP];
    __shared__ long long level_len[CSK_TREE_MAX_DEPTH + 1], level_at[CSK_TREE_MAX_DEPTH + 1];
    if (threadIdx.x == 0) {
        long long len = n, at = 0;
        level_len[0] = n;
        level_at[0] = 0;
        for (int k = 1; k <= depth; ++k) {
            len = csk_tree_up(len);
            level_len[k] = len;
            level_at[k] = at;
            at += csk_tree_room(len);
        }
    }
    __syncthreads();
    const int top_len = (int)level_len[depth];  // <= TOP; pads fill the rest
    const int top_bits = 31 - __clz(TOP);
    for (int p = threadIdx.x; p < TOP; p += BLOCK_SIZE) {
        const int r = csk_tree_top_rank(p, top_bits);
        top[p] = r >= top_len ? CSK_ALL_ONES
                              : depth ? levels[level_at[depth] + r] : csk_to_ordered(a[r]);
    }
    __syncthreads();
    if (right)
        csk_tree_queries<true>(a, n, levels, depth, v, m, out, top, top_len, level_len, level_at);
    else
        csk_tree_queries<false>(a, n, levels, depth, v, m, out, top, top_len, level_len, level_at);
}
