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
// kernels/merge.cuh).
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
// the caller's sorted a and b (raw keys; `mask` all ones for descending).
extern "C" __global__ void merge_partition(const csk_bits_t* __restrict__ a, csk_index_t na,
                                           const csk_bits_t* __restrict__ b, csk_index_t nb,
                                           csk_index_t* __restrict__ splits, csk_index_t blocks,
                                           unsigned long long mask64)
{
    const csk_index_t blk = partition_index();
    if (blk >= blocks) return;
    splits[blk] = merge_corank<true, csk_index_t>(a, na, b, nb, blk * TILE, (csk_bits_t)mask64);
}

extern "C" __global__ void MERGE_BOUNDS
merge_arrays(const csk_bits_t* __restrict__ a, const csk_value_t* __restrict__ av, csk_index_t na,
             const csk_bits_t* __restrict__ b, const csk_value_t* __restrict__ bv, csk_index_t nb,
             csk_bits_t* __restrict__ out, csk_value_t* __restrict__ outv,
             const csk_index_t* __restrict__ splits, unsigned long long mask64)
{
    const csk_index_t blk = blockIdx.x;
    const csk_index_t d0 = blk * TILE, d1 = min(d0 + TILE, na + nb);
    const csk_index_t a1 = d1 == na + nb ? na : splits[blk + 1];
    merge_block<true>(a, av, b, bv, d0, d1, splits[blk], a1, out + d0,
                      CSK_HAS_VALUES ? outv + d0 : outv, false, (csk_bits_t)mask64);
}
