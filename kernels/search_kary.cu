// searchsorted by a k-ary search, LANES lanes a query (the plugin "kary",
// cudasortkit/plugins/search_kary.py, launches it): for few queries into
// many keys, where a search waits on its dependent loads, not on bandwidth.
//
// `rows` independent searches, as search.cu's: row r's n sorted keys at
// a[r*n ..] (with `sorter`, the row's k-th key is a[r*n + sorter[r*n + k]]),
// its m queries at v[r*m ..], out[r*m + j] = #{k : a_k before v_j}
// (csk_before: a_k < v_j for side left, a_k <= v_j for side right), NumPy's
// searchsorted. Keys compare as ordered words (keys.cuh): NaNs last and
// equal to each other, -0.0 == +0.0.
//
// The answer c of a query lies in [lo, hi] (first [0, n]). While the range
// is longer than LANES, the query's LANES lanes read the keys at
// p_j = lo + (j + 1) * len / (LANES + 1), j < LANES (len = hi - lo > LANES,
// so lo < p_0 < p_1 < ... < hi), together, one dependent load; their ballot
// counts the t probes before the query (a prefix: a is sorted), so
// c lies in [p_{t-1} + 1, p_t] (lo and hi at the ends): the range shrinks
// (LANES + 1)-fold a round. Then the lanes read the at most LANES keys left
// (contiguous) and c = lo + their count. For 2^24 keys and 32 lanes that is
// five dependent loads a query, where "binary" makes about fifteen.
//
// Every lane of a warp runs every round (ballots need them all): a warp's
// queries are 32 / LANES consecutive ones, lanes past the last query or
// done with theirs vote false.
//
// Tunables: BLOCK_SIZE (a multiple of 32), LANES (4, 8, 16 or 32).
#include "search.cuh"

#if LANES != 4 && LANES != 8 && LANES != 16 && LANES != 32
#error "LANES must be 4, 8, 16 or 32 (the lanes of a warp that search one query)"
#endif
#if BLOCK_SIZE % 32
#error "BLOCK_SIZE must be a multiple of 32"
#endif

#define CSK_KARY_FULL 0xffffffffu
#define CSK_KARY_GROUP_MASK (LANES == 32 ? CSK_KARY_FULL : (1u << (LANES & 31)) - 1u)

extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
csk_search_kary(const csk_bits_t* __restrict__ a, const long long* __restrict__ sorter,
                long long n, const csk_bits_t* __restrict__ v, long long m, long long rows,
                int right, long long* __restrict__ out)
{
    const int lane = threadIdx.x & 31, member = lane & (LANES - 1);
    const unsigned group = CSK_KARY_GROUP_MASK << (lane - member);
    const long long total = m * rows;
    // Queries of this warp: first + lane / LANES; the grid strides by its
    // warps' queries.
    const long long per_warp = 32 / LANES;
    const long long warp = ((long long)blockIdx.x * BLOCK_SIZE + threadIdx.x) >> 5;
    const long long stride = (long long)gridDim.x * (BLOCK_SIZE / 32) * per_warp;
    for (long long first = warp * per_warp; first < total; first += stride) {  // warp-uniform
        const long long q = first + lane / LANES;
        const bool active = q < total;
        const long long row_base = active ? (q / m) * n : 0;
        const csk_bits_t x = active ? csk_to_ordered(v[q]) : (csk_bits_t)0;
        long long lo = 0, hi = n;  // the answer lies in [lo, hi]
        for (;;) {
            const bool live = active && hi - lo > LANES;
            if (!__any_sync(CSK_KARY_FULL, live)) break;
            const long long len = hi - lo;
            bool before = false;
            if (live)
                before = csk_before(csk_search_key(a, sorter, row_base,
                                                 lo + (member + 1) * len / (LANES + 1)),
                                    x, right);
            const int t = __popc(__ballot_sync(CSK_KARY_FULL, before) & group);
            if (live) {
                const long long new_lo = t > 0 ? lo + t * len / (LANES + 1) + 1 : lo;
                if (t < LANES) hi = lo + (t + 1) * len / (LANES + 1);
                lo = new_lo;
            }
        }
        const bool before = active && member < hi - lo
                            && csk_before(csk_search_key(a, sorter, row_base, lo + member), x, right);
        const int c = __popc(__ballot_sync(CSK_KARY_FULL, before) & group);
        if (active && member == 0) out[q] = lo + c;
    }
}
