// Stable partition of one array by bucket, for the partition-first collective
// sort (cudasortkit/dask/partition.py, cudasortkit/dask/counting.py).
//
// A key's bucket is the number of splitter words at or below its ordered word
// (segments.cuh's csk_count_at_most_steps)
// (keys.cuh's csk_encode with `mask`; splitters ascending, at most 255 of
// them), so bucket b holds the words in [splitters[b - 1], splitters[b]).
// The output holds bucket 0's keys, then bucket 1's, ..., each bucket's in
// index order (stable), with the values (or the keys' positions) beside.
//
// Two launches with the same grid, and an exclusive scan between them:
//   csk_dask_partition_counts: block g counts the keys of each bucket in its
//     range [g * per, (g + 1) * per) into counts[b * grid + g];
//   (the host scans the flat counts: offsets[b * grid + g] is where block g's
//    first key of bucket b goes, bucket-major, so blocks follow index order)
//   csk_dask_partition_scatter: block g walks its range in rounds of ROUND
//     keys, ranks each round's keys by bucket (warps in index order, lanes
//     by ballots: peers.cuh), stages them bucket after bucket in shared memory
//     and writes each bucket's run of the round to its place (coalesced).
// So the keys are read twice and written once: a pass of radix sort's cost,
// whatever the number of buckets.
//
// Needs the prelude's BLOCK_SIZE and the configuration's ITEMS_PER_THREAD (keys a thread
// holds per round) and BUCKET_BITS (bits of the largest bucket number: the
// ballots a warp casts per key); values are CSK_VALUE_BYTES wide (0: none).
#include "keys.cuh"
#include "peers.cuh"
#include "scan.cuh"
#include "segments.cuh"

#define WARPS (BLOCK_SIZE / 32)
#define ROUND (BLOCK_SIZE * ITEMS_PER_THREAD)
#define MAX_BUCKETS 256
// A label no bucket has: lanes past the end of the range (never ranked).
#define NO_BUCKET MAX_BUCKETS

// Value modes of csk_dask_partition_scatter.
#define PARTITION_KEYS_ONLY 0
#define PARTITION_POSITIONS 1   // the value is the key's index in the array
#define PARTITION_VALUES 2      // the value is read beside the key

// keys[base + at + i * stride] for item i (at or past `end`: 0).
__device__ __forceinline__ void csk_partition_load(const csk_bits_t* __restrict__ keys, long long base,
                                                   long long end, int at, int stride,
                                                   csk_bits_t (&k)[ITEMS_PER_THREAD])
{
#pragma unroll
    for (int i = 0; i < ITEMS_PER_THREAD; ++i) {
        const long long j = base + at + (long long)i * stride;
        k[i] = j < end ? keys[j] : 0;
    }
}

extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
csk_dask_partition_counts(const csk_bits_t* __restrict__ keys, long long n, long long per,
                          const unsigned long long* __restrict__ splitters, int count,
                          unsigned long long mask64, long long* __restrict__ counts)
{
    __shared__ csk_bits_t words[MAX_BUCKETS];
    __shared__ unsigned int hist[MAX_BUCKETS];
    for (int i = threadIdx.x; i < MAX_BUCKETS; i += BLOCK_SIZE) {
        hist[i] = 0;
        if (i < count) words[i] = (csk_bits_t)splitters[i];
    }
    __syncthreads();
    const csk_bits_t mask = (csk_bits_t)mask64;
    const long long begin = (long long)blockIdx.x * per;
    const long long end = begin + per < n ? begin + per : n;
    const unsigned lane = threadIdx.x & 31;
    // Each round's keys are loaded while the round before is counted, so
    // that loads stay in flight through the counting.
    csk_bits_t next[ITEMS_PER_THREAD];
    csk_partition_load(keys, begin, end, threadIdx.x, BLOCK_SIZE, next);
    for (long long base = begin; base < end; base += ROUND) {
        csk_bits_t k[ITEMS_PER_THREAD];
#pragma unroll
        for (int i = 0; i < ITEMS_PER_THREAD; ++i) k[i] = next[i];
        if (base + ROUND < end) csk_partition_load(keys, base + ROUND, end, threadIdx.x, BLOCK_SIZE, next);
        int label[ITEMS_PER_THREAD];   // every item's search first: they overlap
#pragma unroll
        for (int i = 0; i < ITEMS_PER_THREAD; ++i) {
            const long long at = base + (long long)i * BLOCK_SIZE + threadIdx.x;
            label[i] = at < end ? csk_count_at_most_steps<BUCKET_BITS>(words, count, csk_encode(k[i], mask))
                                 : NO_BUCKET;
        }
#pragma unroll
        for (int i = 0; i < ITEMS_PER_THREAD; ++i) {
            // One shared atomic per bucket a warp holds (all-equal keys would
            // otherwise serialise 32 atomics on one counter).
            const bool valid = label[i] != NO_BUCKET;
            const unsigned peers = csk_warp_peers<BUCKET_BITS>(label[i], i) & __ballot_sync(0xffffffffu, valid);
            if (valid && (peers & ((1u << lane) - 1)) == 0)
                atomicAdd(&hist[label[i]], __popc(peers));
        }
    }
    __syncthreads();
    for (int b = threadIdx.x; b <= count; b += BLOCK_SIZE)
        counts[(long long)b * gridDim.x + blockIdx.x] = hist[b];
}

extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
csk_dask_partition_scatter(const csk_bits_t* __restrict__ keys, const csk_value_t* __restrict__ values,
                           long long n, long long per, const unsigned long long* __restrict__ splitters,
                           int count, unsigned long long mask64, const long long* __restrict__ offsets,
                           int value_mode, csk_bits_t* __restrict__ keys_out,
                           csk_value_t* __restrict__ values_out)
{
    __shared__ csk_bits_t words[MAX_BUCKETS];
    __shared__ long long next[MAX_BUCKETS];               // where each bucket's next key goes in the output
    __shared__ unsigned int warp_count[WARPS][MAX_BUCKETS]; // per warp: its keys of each bucket, then their prefix over warps
    __shared__ unsigned int start[MAX_BUCKETS + 1];        // per bucket: its first slot in the round's stage
    __shared__ csk_bits_t stage_keys[ROUND];
    __shared__ unsigned char stage_labels[ROUND];
#if CSK_HAS_VALUES
    __shared__ csk_value_t stage_values[ROUND];
#endif
    const int buckets = count + 1;
    for (int i = threadIdx.x; i < buckets; i += BLOCK_SIZE) {
        if (i < count) words[i] = (csk_bits_t)splitters[i];
        next[i] = offsets[(long long)i * gridDim.x + blockIdx.x];
    }
    __syncthreads();
    const csk_bits_t mask = (csk_bits_t)mask64;
    const long long begin = (long long)blockIdx.x * per;
    const long long end = begin + per < n ? begin + per : n;
    const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const unsigned below = (1u << lane) - 1;
    // Warp w holds keys [w * 32 * ITEMS_PER_THREAD, (w + 1) * 32 * ITEMS_PER_THREAD) of a round,
    // item i of lane l at w * 32 * ITEMS_PER_THREAD + i * 32 + l: warps in index order,
    // items in index order within a warp, lanes within an item.
    const int first = warp * 32 * ITEMS_PER_THREAD + lane;
    csk_bits_t ahead[ITEMS_PER_THREAD];   // the next round's keys, loaded while this one is ranked
    csk_partition_load(keys, begin, end, first, 32, ahead);
    for (long long base = begin; base < end; base += ROUND) {
        for (int b = lane; b < buckets; b += 32) warp_count[warp][b] = 0;
        __syncwarp();
        csk_bits_t k[ITEMS_PER_THREAD];
        int label[ITEMS_PER_THREAD];
        unsigned rank[ITEMS_PER_THREAD];
#pragma unroll
        for (int i = 0; i < ITEMS_PER_THREAD; ++i) k[i] = ahead[i];
        if (base + ROUND < end) csk_partition_load(keys, base + ROUND, end, first, 32, ahead);
#pragma unroll
        for (int i = 0; i < ITEMS_PER_THREAD; ++i) {   // every item's search first: they overlap
            const long long at = base + first + i * 32;
            label[i] = at < end ? csk_count_at_most_steps<BUCKET_BITS>(words, count, csk_encode(k[i], mask))
                                 : NO_BUCKET;
        }
#pragma unroll
        for (int i = 0; i < ITEMS_PER_THREAD; ++i) {
            // Ballots see NO_BUCKET's low bits: the valid lanes' vote masks it out.
            const unsigned peers = csk_warp_peers<BUCKET_BITS>(label[i], i) &
                                   __ballot_sync(0xffffffffu, label[i] != NO_BUCKET);
            const unsigned before = label[i] != NO_BUCKET ? warp_count[warp][label[i]] : 0;
            rank[i] = before + __popc(peers & below);
            __syncwarp();
            if (label[i] != NO_BUCKET && (peers & below) == 0) warp_count[warp][label[i]] = before + __popc(peers);
            __syncwarp();
        }
        __syncthreads();
        // Per bucket: the warps' counts become their exclusive prefix, and
        // the bucket's total goes to start[] (scanned next).
        for (int b = threadIdx.x; b < buckets; b += BLOCK_SIZE) {
            unsigned run = 0;
#pragma unroll
            for (int w = 0; w < WARPS; ++w) {
                const unsigned c = warp_count[w][b];
                warp_count[w][b] = run;
                run += c;
            }
            start[b] = run;
        }
        __syncthreads();
        if (warp == 0) {   // the totals' exclusive scan: each bucket's first slot
            const unsigned held = csk_warp_scan_entries<MAX_BUCKETS / 32>(start, buckets);
            if (lane == 0) start[buckets] = held;
        }
        __syncthreads();
#pragma unroll
        for (int i = 0; i < ITEMS_PER_THREAD; ++i) {
            if (label[i] == NO_BUCKET) continue;
            const unsigned slot = start[label[i]] + warp_count[warp][label[i]] + rank[i];
            stage_keys[slot] = k[i];
            stage_labels[slot] = (unsigned char)label[i];
#if CSK_HAS_VALUES
            const long long at = base + first + i * 32;
            stage_values[slot] = value_mode == PARTITION_POSITIONS ? (csk_value_t)at : values[at];
#endif
        }
        __syncthreads();
        const int held = (int)start[buckets];
        for (int j = threadIdx.x; j < held; j += BLOCK_SIZE) {
            const int b = stage_labels[j];
            const long long to = next[b] + (j - (int)start[b]);
            keys_out[to] = stage_keys[j];
#if CSK_HAS_VALUES
            if (value_mode != PARTITION_KEYS_ONLY) values_out[to] = stage_values[j];
#endif
        }
        __syncthreads();
        for (int b = threadIdx.x; b < buckets; b += BLOCK_SIZE) next[b] += start[b + 1] - start[b];
        __syncthreads();
    }
}
