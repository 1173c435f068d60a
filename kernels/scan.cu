// Device-wide prefix sum, scan-then-propagate (cudasortkit/sdk/scan.py drives it).
//
// csk_scan_tiles scans each tile of TILE = BLOCK_SIZE * ITEMS_PER_THREAD counts
// and writes the tile's total to sums[tile]; the host scans `sums` the same way
// (recursively, exclusive) and csk_scan_add adds each tile's prefix back.
// Inside a tile every thread scans ITEMS_PER_THREAD consecutive counts
// serially, and the per-thread totals get a Blelloch scan (scan.cuh); the
// tile sits in shared memory at padded positions, so neither the coalesced
// load/store nor the per-thread serial pass has bank conflicts.
//
// Defines: SCAN_COUNT_BYTES 4 or 8 (unsigned counts, arithmetic modulo 2^32 /
// 2^64 like numpy.cumsum of that dtype). `in` may equal `out` (in place).
#include "scan.cuh"

#if SCAN_COUNT_BYTES == 4
typedef unsigned int csk_count_t;
#elif SCAN_COUNT_BYTES == 8
typedef unsigned long long csk_count_t;
#else
#error "SCAN_COUNT_BYTES must be 4 or 8"
#endif

#define SCAN_TILE (BLOCK_SIZE * ITEMS_PER_THREAD)

extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
csk_scan_tiles(const csk_count_t* in, csk_count_t* out, csk_count_t* __restrict__ sums,
               long long n, int inclusive)
{
    __shared__ csk_count_t tile[CSK_SCAN_PADDED(SCAN_TILE)];
    __shared__ csk_count_t thread_sums[CSK_SCAN_PADDED(BLOCK_SIZE)];
    const long long base = (long long)blockIdx.x * SCAN_TILE;
    const int t = threadIdx.x;

#pragma unroll
    for (int r = 0; r < ITEMS_PER_THREAD; ++r) {
        const int i = t + r * BLOCK_SIZE;
        tile[CSK_SCAN_PAD(i)] = base + i < n ? in[base + i] : (csk_count_t)0;
    }
    __syncthreads();

    csk_count_t mine[ITEMS_PER_THREAD];
    csk_count_t sum = 0;
#pragma unroll
    for (int j = 0; j < ITEMS_PER_THREAD; ++j) {
        mine[j] = tile[CSK_SCAN_PAD(t * ITEMS_PER_THREAD + j)];
        sum += mine[j];
    }
    thread_sums[CSK_SCAN_PAD(t)] = sum;
    csk_blelloch_scan<csk_count_t, BLOCK_SIZE, BLOCK_SIZE>(thread_sums, sums + blockIdx.x);

    csk_count_t running = thread_sums[CSK_SCAN_PAD(t)];
#pragma unroll
    for (int j = 0; j < ITEMS_PER_THREAD; ++j) {
        const csk_count_t x = mine[j];
        tile[CSK_SCAN_PAD(t * ITEMS_PER_THREAD + j)] = inclusive ? running + x : running;
        running += x;
    }
    __syncthreads();

#pragma unroll
    for (int r = 0; r < ITEMS_PER_THREAD; ++r) {
        const int i = t + r * BLOCK_SIZE;
        if (base + i < n) out[base + i] = tile[CSK_SCAN_PAD(i)];
    }
}

// out[tile k] += prefix[k] (prefix: the exclusive scan of the tile totals).
extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
csk_scan_add(csk_count_t* __restrict__ out, const csk_count_t* __restrict__ prefix, long long n)
{
    const long long base = (long long)blockIdx.x * SCAN_TILE;
    const csk_count_t add = prefix[blockIdx.x];
    if (add == 0) return;
#pragma unroll
    for (int r = 0; r < ITEMS_PER_THREAD; ++r) {
        const long long i = base + threadIdx.x + r * BLOCK_SIZE;
        if (i < n) out[i] += add;
    }
}
