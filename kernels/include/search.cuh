// What every searchsorted kernel (search.cu, search_kary.cu, search_tree.cu)
// compares by, and how the sorted keys are read.
#pragma once

#include "keys.cuh"

// Whether key word k comes before query word x in the merged order: the
// predicate whose count over a is the answer (side left: k < x; side right:
// k <= x). Both are prefix predicates over sorted a.
__device__ __forceinline__ bool csk_before(csk_bits_t k, csk_bits_t x, int right)
{
    return right ? k <= x : k < x;
}

// The k-th key of a row of sorted keys, as an ordered word: a[row_base + k],
// or through the caller's sorter (argsort of a) where there is one.
__device__ __forceinline__ csk_bits_t csk_search_key(const csk_bits_t* __restrict__ a,
                                                      const long long* __restrict__ sorter,
                                                      long long row_base, long long k)
{
    const long long at = sorter ? sorter[row_base + k] : k;
    return csk_to_ordered(a[row_base + at]);
}
