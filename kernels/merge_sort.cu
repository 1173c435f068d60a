// Stable merge sort, and the kernels behind cudasortkit.merge.
//
// Phase 1 (merge_sort_tiles): each block sorts TILE = BLOCK_SIZE x
// ITEMS_PER_THREAD keys. Every thread sorts its ITEMS_PER_THREAD keys in
// registers (odd-even transposition, stable), then runs of IPT, 2 IPT, ...
// are merged pairwise in shared memory along merge paths: at every step each
// thread merges ITEMS_PER_THREAD outputs, so no thread idles.
// Phase 2: log2(n / TILE) passes, each merging pairs of sorted runs of
// `width` keys from one buffer into the other (merge_sort_partition finds
// every block's co-rank, one warp per block, merge_sort_pass merges;
// kernels/include/merge.cuh).
//
// Keys are ordered words (keys.cuh) from the first load to the last store,
// which decodes (`decode`). Padding past n in the last tile is the largest
// word; being last in input order, a stable sort keeps it behind real keys.
#include "merge.cuh"

#define TILE MERGE_TILE

// Blocks per SM the merge kernels may ask registers for (a define, for
// experiments); unset, ptxas picks (a minimum of 1 makes it take twice as many).
#ifdef MERGE_MIN_BLOCKS
#define MERGE_BOUNDS __launch_bounds__(BLOCK_SIZE, MERGE_MIN_BLOCKS)
#else
#define MERGE_BOUNDS __launch_bounds__(BLOCK_SIZE)
#endif

__device__ __forceinline__ void regs_swap_if_greater(csk_bits_t (&k)[ITEMS_PER_THREAD],
                                                     csk_value_t (&v)[ITEMS_PER_THREAD], int j)
{
    if (k[j] > k[j + 1]) {
        const csk_bits_t tk = k[j];
        k[j] = k[j + 1];
        k[j + 1] = tk;
#if CSK_HAS_VALUES
        const csk_value_t tv = v[j];
        v[j] = v[j + 1];
        v[j + 1] = tv;
#endif
    }
}

// Odd-even transposition sort of one thread's keys: IPT rounds of adjacent
// compare-exchanges; only strictly greater keys swap, so it is stable.
__device__ __forceinline__ void regs_sort(csk_bits_t (&k)[ITEMS_PER_THREAD], csk_value_t (&v)[ITEMS_PER_THREAD])
{
#pragma unroll
    for (int round = 0; round < ITEMS_PER_THREAD; ++round) {
#pragma unroll
        for (int j = round & 1; j + 1 < ITEMS_PER_THREAD; j += 2)
            regs_swap_if_greater(k, v, j);
    }
}

extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
merge_sort_tiles(const csk_bits_t* __restrict__ keys_in, const csk_value_t* __restrict__ values_in,
                 csk_bits_t* __restrict__ keys_out, csk_value_t* __restrict__ values_out,
                 csk_index_t n, unsigned long long mask64, int decode)
{
    const csk_tile t = csk_shared_tile(MERGE_TILE);
    const csk_bits_t mask = (csk_bits_t)mask64;
    const csk_index_t base = (csk_index_t)blockIdx.x * TILE;
    const int count = (int)min((csk_index_t)TILE, n - base);

#pragma unroll
    for (int r = 0; r < ITEMS_PER_THREAD; ++r) {
        const int i = threadIdx.x + r * BLOCK_SIZE;
        if (i < count) {
            t.keys[i] = csk_encode(keys_in[base + i], mask);
#if CSK_HAS_VALUES
            t.values[i] = values_in[base + i];
#endif
        } else {
            t.keys[i] = CSK_ALL_ONES;
        }
    }
    __syncthreads();

    csk_bits_t k[ITEMS_PER_THREAD];
    csk_value_t v[ITEMS_PER_THREAD];
    int src[ITEMS_PER_THREAD];
#pragma unroll
    for (int r = 0; r < ITEMS_PER_THREAD; ++r) {
        const int i = threadIdx.x * ITEMS_PER_THREAD + r;
        k[r] = t.keys[i];
#if CSK_HAS_VALUES
        v[r] = t.values[i];
#endif
    }
    regs_sort(k, v);

    // Merge sorted runs of `run` keys pairwise; a pair is 2 run / IPT threads.
    for (int run = ITEMS_PER_THREAD; run < TILE; run <<= 1) {
        __syncthreads();
        merge_regs_to_tile(t, k, v, TILE);
        __syncthreads();
        const int threads = (2 * run) / ITEMS_PER_THREAD;
        const int pair = (threadIdx.x / threads) * 2 * run;
        const int diag = (threadIdx.x % threads) * ITEMS_PER_THREAD;
        const int i = merge_corank<false, int>(t.keys + pair, run, t.keys + pair + run, run, diag, 0);
        merge_serial<false>(t.keys, pair + i, pair + run, pair + run + diag - i, pair + 2 * run, 0, k, src);
        merge_gather_values(t, src, v);
    }
    __syncthreads();
    merge_regs_to_tile(t, k, v, TILE);
    __syncthreads();

    csk_store_tile<ITEMS_PER_THREAD, BLOCK_SIZE>(t, keys_out + base, CSK_HAS_VALUES ? values_out + base : values_out,
                                                count, decode,
                                                mask);
}

// Where block `blk` of a pass with runs of `width` keys works: its pair of
// runs a = keys[start, start + na), b = keys[start + na, start + na + nb) and
// its first output diagonal d0 within that pair.
struct MergePassSpot {
    csk_index_t start, na, nb, d0;
};

__device__ __forceinline__ MergePassSpot merge_pass_spot(csk_index_t blk, csk_index_t n, csk_index_t width)
{
    MergePassSpot s;
    const csk_index_t pos = blk * TILE;
    s.start = pos / (2 * width) * (2 * width);
    s.na = min(width, n - s.start);
    s.nb = min(width, n - s.start - s.na);
    s.d0 = pos - s.start;
    return s;
}

// The split a partition kernel's warp works on (one warp per split).
// Partition kernels: one thread per split, a plain binary search. The top
// levels of all searches touch the same keys (L2 hits); a warp-cooperative
// search was measured (Nsight Compute, H100) moving ~45 MB for 8,739 splits.
__device__ __forceinline__ csk_index_t partition_index()
{
    return (csk_index_t)blockIdx.x * blockDim.x + threadIdx.x;
}

// splits[blk] = co-rank of block blk's first output within its pair of runs.
extern "C" __global__ void merge_sort_partition(const csk_bits_t* __restrict__ keys, csk_index_t n,
                                                csk_index_t width, csk_index_t* __restrict__ splits,
                                                csk_index_t blocks)
{
    const csk_index_t blk = partition_index();
    if (blk >= blocks) return;
    const MergePassSpot s = merge_pass_spot(blk, n, width);
    const csk_bits_t* a = keys + s.start;
    splits[blk] = merge_corank<false, csk_index_t>(a, s.na, a + s.na, s.nb, s.d0, 0);
}

// One pass of phase 2: keys_in's runs of `width` merged pairwise into keys_out.
extern "C" __global__ void MERGE_BOUNDS
merge_sort_pass(const csk_bits_t* __restrict__ keys_in, const csk_value_t* __restrict__ values_in,
                csk_bits_t* __restrict__ keys_out, csk_value_t* __restrict__ values_out,
                csk_index_t n, csk_index_t width, const csk_index_t* __restrict__ splits,
                unsigned long long mask64, int decode)
{
    const csk_index_t blk = blockIdx.x;
    const MergePassSpot s = merge_pass_spot(blk, n, width);
    const csk_index_t total = s.na + s.nb;
    const csk_index_t d1 = min(s.d0 + TILE, total);
    const csk_index_t a1 = d1 == total ? s.na : splits[blk + 1];
    const csk_bits_t* a = keys_in + s.start;
    const csk_value_t* av = CSK_HAS_VALUES ? values_in + s.start : values_in;
    merge_block<false>(a, av, a + s.na, CSK_HAS_VALUES ? av + s.na : av, s.d0, d1, splits[blk], a1,
                       keys_out + blk * TILE, CSK_HAS_VALUES ? values_out + blk * TILE : values_out,
                       decode != 0, (csk_bits_t)mask64);
}

// cudasortkit.merge: splits[blk] = co-rank of output blk * TILE of merging
// the caller's a and b (raw keys; `mask` all ones for descending). The search
// stays inside a[0, na) and b[0, nb) whatever the keys; only sorted inputs
// make the co-ranks the merge path (merge_arrays checks that).
extern "C" __global__ void merge_partition(const csk_bits_t* __restrict__ a, csk_index_t na,
                                           const csk_bits_t* __restrict__ b, csk_index_t nb,
                                           csk_index_t* __restrict__ splits, csk_index_t blocks,
                                           unsigned long long mask64)
{
    const csk_index_t blk = partition_index();
    if (blk >= blocks) return;
    splits[blk] = merge_corank<true, csk_index_t>(a, na, b, nb, blk * TILE, (csk_bits_t)mask64);
}

// Block blk merges outputs [d0, d1) = [blk * TILE, ...) from a[a0, a1) and
// b[b0, b1), b0 = d0 - a0 and b1 = d1 - a1, where a0, a1 are splits[blk] and
// splits[blk + 1] (na for the last block).
//
// The inputs are the caller's, so they are checked, not trusted. A block
// first checks its ranges (0 <= a0 <= a1 <= na, 0 <= b0 <= b1 <= nb) and
// loads nothing when they are not. It then checks that its a-run and its
// b-run are each in (encoded, masked) order, and that the key just before
// each non-empty run (a[a0 - 1], b[b0 - 1], where they exist) is not greater
// than the run's first key. The blocks' runs tile a and b, so every adjacent
// pair of a and of b is checked by some block: all blocks pass exactly when
// both inputs are sorted, and then the merge is the stable merge. A block
// that fails sets *unsorted and neither merges nor stores; merge_fallback
// (launched next) then writes the whole output.
extern "C" __global__ void MERGE_BOUNDS
merge_arrays(const csk_bits_t* __restrict__ a, const csk_value_t* __restrict__ av, csk_index_t na,
             const csk_bits_t* __restrict__ b, const csk_value_t* __restrict__ bv, csk_index_t nb,
             csk_bits_t* __restrict__ out, csk_value_t* __restrict__ outv,
             const csk_index_t* __restrict__ splits, unsigned long long mask64,
             unsigned int* __restrict__ unsorted)
{
    const csk_bits_t mask = (csk_bits_t)mask64;
    const csk_index_t blk = blockIdx.x;
    const csk_index_t total = na + nb;
    const csk_index_t d0 = blk * TILE, d1 = min(d0 + TILE, total);
    const csk_index_t a0 = splits[blk];
    const csk_index_t a1 = d1 == total ? na : splits[blk + 1];
    const csk_index_t b0 = d0 - a0, b1 = d1 - a1;
    if (!(0 <= a0 && a0 <= a1 && a1 <= na && 0 <= b0 && b0 <= b1 && b1 <= nb)) {
        if (threadIdx.x == 0) *unsorted = 1u;
        return;  // the whole block: the test depends on blk only
    }
    const int ka = (int)(a1 - a0), count = (int)(d1 - d0);  // tile [0, ka) is a's run, [ka, count) b's

    const csk_tile t = csk_shared_tile(MERGE_TILE);
    merge_load_runs(t, a, av, b, bv, a0, b0, ka, count);
    // The keys just before the runs (thread 0 checks them), in flight across the barrier.
    const bool check_a = a0 > 0 && ka > 0, check_b = b0 > 0 && count > ka;
    csk_bits_t a_before = 0, b_before = 0;
    if (threadIdx.x == 0) {
        if (check_a) a_before = a[a0 - 1];
        if (check_b) b_before = b[b0 - 1];
    }
    __syncthreads();

    // Order check: every pair (i - 1, i) of one run in this thread's items
    // (thread-major, as the merge reads them), and the runs' predecessors.
    bool bad = false;
    if (threadIdx.x == 0) {
        if (check_a) bad |= merge_ord<true>(t.keys[0], mask) < merge_ord<true>(a_before, mask);
        if (check_b) bad |= merge_ord<true>(t.keys[ka], mask) < merge_ord<true>(b_before, mask);
    }
    const int first = threadIdx.x * ITEMS_PER_THREAD;
    if (first < count) {
        csk_bits_t prev = merge_ord<true>(t.keys[first > 0 ? first - 1 : 0], mask);
#pragma unroll
        for (int r = 0; r < ITEMS_PER_THREAD; ++r) {
            const int i = first + r;
            if (i < count) {
                const csk_bits_t cur = merge_ord<true>(t.keys[i], mask);
                if (i != 0 && i != ka) bad |= cur < prev;
                prev = cur;
            }
        }
    }

    if (__syncthreads_or(bad)) {
        if (threadIdx.x == 0) *unsorted = 1u;
        return;
    }
    merge_tile_and_store<true>(t, ka, count, out + d0, CSK_HAS_VALUES ? outv + d0 : outv, false, mask);
}

// After merge_arrays, same grid: when it found the inputs unsorted, block blk
// copies outputs [blk * TILE, ...) of the concatenation [a..., b...] (keys
// and values), so the output is always a permutation of the inputs. With
// the inputs sorted every block returns after reading the flag.
extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
merge_fallback(const csk_bits_t* __restrict__ a, const csk_value_t* __restrict__ av, csk_index_t na,
               const csk_bits_t* __restrict__ b, const csk_value_t* __restrict__ bv, csk_index_t nb,
               csk_bits_t* __restrict__ out, csk_value_t* __restrict__ outv,
               const unsigned int* __restrict__ unsorted)
{
    if (*unsorted == 0u) return;
    const csk_index_t d0 = (csk_index_t)blockIdx.x * TILE, d1 = min(d0 + TILE, na + nb);
    for (csk_index_t i = d0 + threadIdx.x; i < d1; i += BLOCK_SIZE) {
        out[i] = i < na ? a[i] : b[i - na];
#if CSK_HAS_VALUES
        outv[i] = i < na ? av[i] : bv[i - na];
#endif
    }
    (void)av; (void)bv; (void)outv;
}
