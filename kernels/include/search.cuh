// What every searchsorted kernel (search.cu, search_tree.cu) compares by.
#pragma once

#include "keys.cuh"

// Whether key word k comes before query word x in the merged order: the
// predicate whose count over a is the answer (side left: k < x; side right:
// k <= x). Both are prefix predicates over sorted a.
__device__ __forceinline__ bool csk_before(csk_bits_t k, csk_bits_t x, int right)
{
    return right ? k <= x : k < x;
}
