// Segments, shared by the segmented kernels (rows.cu, block_radix.cu,
// segmented.cu), the host pipeline's buckets (hostpipe.cu) and the Dask
// sort's bucket partition (dask_partition.cu): which
// segment a position belongs to, and the value a sorted key's slot gets.
//
// Value modes (the kernels' `mode`) are cudasortkit's: the render prelude
// defines CSK_MODE_KEYS (keys only), CSK_MODE_LOCAL (argsort, int64 index in
// the segment), CSK_MODE_GLOBAL (argsort, int64 position in the whole
// array) and CSK_MODE_PAIRS (the caller's values), from the one Python
// definition (cudasortkit/build/render.py VALUE_MODES).
#pragma once
#include "keys.cuh"

#if !defined(CSK_MODE_KEYS) || !defined(CSK_MODE_LOCAL) || !defined(CSK_MODE_GLOBAL) || \
    !defined(CSK_MODE_PAIRS)
#error "the CSK_MODE_* value modes come from cudasortkit's render prelude"
#endif

// How many of a[0..count) are <= x, for a ascending: the first s with
// a[s] > x (count when there is none).
template <typename T, typename Index>
__device__ __forceinline__ Index csk_count_at_most(const T* __restrict__ a, Index count, T x)
{
    Index lo = 0, hi = count;
    while (lo < hi) {
        const Index mid = (lo + hi) >> 1;
        if (a[mid] <= x) lo = mid + 1; else hi = mid;
    }
    return lo;
}

// csk_count_at_most in STEPS fixed steps, without branches, for count <
// 2^STEPS: a thread's several searches then overlap instead of each
// waiting on its own loop.
template <int STEPS, typename T>
__device__ __forceinline__ int csk_count_at_most_steps(const T* a, int count, T x)
{
    int at = 0;
#pragma unroll
    for (int step = 1 << (STEPS - 1); step > 0; step >>= 1) {
        const int probe = at + step;
        at = probe <= count && a[probe - 1] <= x ? probe : at;
    }
    return at;
}

// The segment of position i, for segments starting at starts[0..count)
// (ascending, starts[0] <= i < the end of the last): the last s with
// starts[s] <= i. Empty segments hold no position, so none is ever found
// in one.
__device__ __forceinline__ long long csk_segment_of(const long long* __restrict__ starts,
                                                    long long count, long long i)
{
    return csk_count_at_most(starts + 1, count - 1, i);
}

// values_out[out] for the sorted key that came from position `at` of the
// whole array, by mode: LOCAL its index in its segment (at - start(), the
// segment's start; start is called in that mode only), GLOBAL at itself,
// PAIRS the caller's value values_in[at]. Without values (CSK_HAS_VALUES 0)
// nothing; with them the mode is never CSK_MODE_KEYS.
template <typename Start>
__device__ __forceinline__ void csk_write_value(csk_value_t* __restrict__ values_out,
                                                const csk_value_t* __restrict__ values_in,
                                                long long out, long long at, int mode,
                                                Start start)
{
#if CSK_HAS_VALUES
    if (mode == CSK_MODE_LOCAL) values_out[out] = (csk_value_t)(at - start());
    else if (mode == CSK_MODE_GLOBAL) values_out[out] = (csk_value_t)at;
    else values_out[out] = values_in[at];
#else
    (void)values_out;
    (void)values_in;
    (void)out;
    (void)at;
    (void)mode;
    (void)start;
#endif
}
