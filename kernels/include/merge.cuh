// Merge path (co-rank) merging, shared by merge sort and the public merge.
//
// The stable merge of sorted A and B is cut along output "diagonals": the
// co-rank of diagonal d is the number i of A's keys among the first d outputs
// (the other d - i come from B). A binary search finds it, so every block and
// every thread can start its own slice of the output independently: blocks
// get TILE outputs each (their splits found by a partition kernel), load the
// A and B keys of that range into shared memory with coalesced reads, and each
// thread merges ITEMS_PER_THREAD outputs from its own co-ranked start.
// Stability: on equal keys A comes first.
//
// Keys are compared as ordered words. With ENCODE the keys in memory are the
// caller's raw bits, encoded (csk_encode, with the descending mask) at every
// comparison so they come back bit for bit; without it they are ordered words
// already (merge sort encodes once on load and decodes on the last store).
//
// Needs the prelude's BLOCK_SIZE and ITEMS_PER_THREAD.
#pragma once
#include "keys.cuh"

#define MERGE_TILE (BLOCK_SIZE * ITEMS_PER_THREAD)

template <bool ENCODE>
__device__ __forceinline__ csk_bits_t merge_ord(csk_bits_t x, csk_bits_t mask)
{
    return ENCODE ? csk_encode(x, mask) : x;
}

// Co-rank of diagonal `diag` (0 <= diag <= na + nb) in the stable merge of
// a[0, na) and b[0, nb): a[i] precedes b[j] exactly when a[i] <= b[j].
template <bool ENCODE, typename Index>
__device__ __forceinline__ Index merge_corank(const csk_bits_t* a, Index na, const csk_bits_t* b,
                                              Index nb, Index diag, csk_bits_t mask)
{
    Index lo = diag > nb ? diag - nb : 0;
    Index hi = diag < na ? diag : na;
    while (lo < hi) {
        const Index mid = lo + ((hi - lo) >> 1);
        if (merge_ord<ENCODE>(a[mid], mask) <= merge_ord<ENCODE>(b[diag - 1 - mid], mask))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

// Serial merge of ITEMS_PER_THREAD outputs from the split (a, b) of the
// shared runs keys[a .. a_end) and keys[b .. b_end) (starting on the merge
// path, the greedy merge is the stable merge). Outputs past both ends are
// filler the caller must not store. src[r] is the tile index of output r.
template <bool ENCODE>
__device__ __forceinline__ void merge_serial(const csk_bits_t* keys, int a, int a_end, int b, int b_end,
                                             csk_bits_t mask, csk_bits_t (&out)[ITEMS_PER_THREAD],
                                             int (&src)[ITEMS_PER_THREAD])
{
    csk_bits_t ka = keys[min(a, MERGE_TILE - 1)];
    csk_bits_t kb = keys[min(b, MERGE_TILE - 1)];
#pragma unroll
    for (int r = 0; r < ITEMS_PER_THREAD; ++r) {
        const bool take_b = b < b_end && (a >= a_end || merge_ord<ENCODE>(kb, mask) < merge_ord<ENCODE>(ka, mask));
        out[r] = take_b ? kb : ka;
        src[r] = take_b ? b : a;
        if (take_b) ++b; else ++a;
        const csk_bits_t next = keys[min(take_b ? b : a, MERGE_TILE - 1)];
        if (take_b) kb = next; else ka = next;
    }
}

// Registers (thread-major: item r of thread t is tile index t*IPT + r) to the tile.
__device__ __forceinline__ void merge_regs_to_tile(csk_tile t, const csk_bits_t (&k)[ITEMS_PER_THREAD],
                                                   const csk_value_t (&v)[ITEMS_PER_THREAD], int count)
{
#pragma unroll
    for (int r = 0; r < ITEMS_PER_THREAD; ++r) {
        const int i = threadIdx.x * ITEMS_PER_THREAD + r;
        if (i < count) {
            t.keys[i] = k[r];
#if CSK_HAS_VALUES
            t.values[i] = v[r];
#endif
        }
    }
}

// Values of the outputs a merge_serial produced (gathered before the tile changes).
__device__ __forceinline__ void merge_gather_values(csk_tile t, const int (&src)[ITEMS_PER_THREAD],
                                                    csk_value_t (&v)[ITEMS_PER_THREAD])
{
#if CSK_HAS_VALUES
#pragma unroll
    for (int r = 0; r < ITEMS_PER_THREAD; ++r)
        v[r] = t.values[min(src[r], MERGE_TILE - 1)];
#endif
}

// Coalesced load of a block's two runs into its shared tile: A's run
// a[a0, a0 + na) at tile [0, na), B's run b[b0, ...) at [na, count).
__device__ __forceinline__ void merge_load_runs(csk_tile t, const csk_bits_t* __restrict__ a,
                                                const csk_value_t* __restrict__ av,
                                                const csk_bits_t* __restrict__ b,
                                                const csk_value_t* __restrict__ bv,
                                                csk_index_t a0, csk_index_t b0, int na, int count)
{
    a += a0;
    b += b0 - na;  // so b[i] is B's key for tile index i >= na
#if CSK_HAS_VALUES
    av += a0;
    bv += b0 - na;
#endif
#pragma unroll
    for (int r = 0; r < ITEMS_PER_THREAD; ++r) {
        const int i = threadIdx.x + r * BLOCK_SIZE;
        if (i < count) {
            t.keys[i] = i < na ? a[i] : b[i];
#if CSK_HAS_VALUES
            t.values[i] = i < na ? av[i] : bv[i];
#endif
        }
    }
    (void)av;
    (void)bv;
}

// The loaded tile's two sorted runs [0, na) and [na, count), merged stably
// and stored striped to out / outv (decoding ordered words if `decode`).
// Call after a barrier that follows merge_load_runs.
template <bool ENCODE>
__device__ __forceinline__ void merge_tile_and_store(csk_tile t, int na, int count,
                                                     csk_bits_t* __restrict__ out,
                                                     csk_value_t* __restrict__ outv,
                                                     bool decode, csk_bits_t mask)
{
    const int diag = min((int)threadIdx.x * ITEMS_PER_THREAD, count);
    const int i = merge_corank<ENCODE, int>(t.keys, na, t.keys + na, count - na, diag, mask);
    csk_bits_t k[ITEMS_PER_THREAD];
    csk_value_t v[ITEMS_PER_THREAD];
    int src[ITEMS_PER_THREAD];
    merge_serial<ENCODE>(t.keys, i, na, na + diag - i, count, mask, k, src);
    merge_gather_values(t, src, v);
    __syncthreads();
    merge_regs_to_tile(t, k, v, count);
    __syncthreads();

    csk_store_tile<ITEMS_PER_THREAD, BLOCK_SIZE>(t, out, outv, count, decode, mask);
}

// One block's share of a stable merge: outputs [d0, d1) of merging a[0, na)
// and b[0, nb), where a0 / a1 are the co-ranks of d0 / d1 (from a partition
// kernel). Writes out[0, d1 - d0), decoding ordered words if `decode`.
template <bool ENCODE>
__device__ __forceinline__ void merge_block(const csk_bits_t* __restrict__ a, const csk_value_t* __restrict__ av,
                                            const csk_bits_t* __restrict__ b, const csk_value_t* __restrict__ bv,
                                            csk_index_t d0, csk_index_t d1, csk_index_t a0, csk_index_t a1,
                                            csk_bits_t* __restrict__ out, csk_value_t* __restrict__ outv,
                                            bool decode, csk_bits_t mask)
{
    const csk_tile t = csk_shared_tile(MERGE_TILE);
    const int na = (int)(a1 - a0), count = (int)(d1 - d0);
    merge_load_runs(t, a, av, b, bv, a0, d0 - a0, na, count);
    __syncthreads();
    merge_tile_and_store<ENCODE>(t, na, count, out, outv, decode, mask);
}
