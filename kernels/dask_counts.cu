// Counts for the exact cuts of the distributed sort (cudasortkit/dask/cuts.py,
// cudasortkit/dask/counting.py): how many elements of windows of one sorted
// array come before each of many query words.
//
// The array is sorted in the requested order (keys.cuh: its ordered words,
// csk_encode with `mask`, ascend). Queries come in rows, one row per target:
// row t holds `per_row` ordered words and a window [lo[t], hi[t]) of the
// array. For query j of row t the kernel counts the window's elements whose
// ordered word is below the query (side 0) or not above it (side 1), and
// stores that count, or adds it when `accumulate` (the counts of a rank's
// several runs summed in place, launch after launch on one stream).
//
// One thread per query, a binary search of the window: the searches of one
// round touch the same top levels (L2 hits), and a round holds at most a few
// hundred thousand queries.
//
// Needs the prelude's BLOCK_SIZE.
#include "keys.cuh"

extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
csk_dask_count(const csk_bits_t* __restrict__ keys, const long long* __restrict__ lo,
               const long long* __restrict__ hi, const unsigned long long* __restrict__ queries,
               long long rows, long long per_row, unsigned long long mask64, int side, int accumulate,
               long long* __restrict__ out)
{
    const long long q = (long long)blockIdx.x * BLOCK_SIZE + threadIdx.x;
    if (q >= rows * per_row) return;
    const long long t = q / per_row;
    const csk_bits_t mask = (csk_bits_t)mask64;
    const csk_bits_t word = (csk_bits_t)queries[q];
    const long long first = lo[t];
    long long a = first, b = hi[t];
    while (a < b) {
        const long long mid = a + ((b - a) >> 1);
        const csk_bits_t u = csk_encode(keys[mid], mask);
        const bool before = side ? u <= word : u < word;
        if (before)
            a = mid + 1;
        else
            b = mid;
    }
    const long long count = a - first;
    out[q] = accumulate ? out[q] + count : count;
}
