// searchsorted on the device (cudasortkit/calls/search.py drives it; the
// plugins "binary" and "merge", plugins/search_*.py, launch it;
// "tree" has its own search_tree.cu).
//
// `rows` independent searches: row r searches its m queries v[r*m .. r*m+m)
// in its n sorted keys a[r*n .. r*n+n) (with `sorter`, the row's sorted
// order is a[r*n + sorter[r*n + k]], k = 0..n-1). out[r*m + j] is the first
// position k with a_k >= v_j (side left) or a_k > v_j (side right): NumPy's
// searchsorted. Keys compare as ordered words (keys.cuh), which is NumPy's
// sort order: NaNs last and equal to each other, -0.0 == +0.0.
//
// Tunables: BLOCK_SIZE; SAMPLES (binary: keys of a one-row search cached in
// shared memory, 0 for none); ITEMS_PER_THREAD (merge: merge-path steps per
// thread). Each plugin sets only its own kernel's tunable; the other one
// takes its neutral value here.
#include "search.cuh"  // csk_before, csk_search_key

#ifndef SAMPLES
#define SAMPLES 0
#endif
#ifndef ITEMS_PER_THREAD
#define ITEMS_PER_THREAD 1
#endif

// One thread per query. For one row (rows == 1) with SAMPLES > 0, every
// block first caches the keys at SAMPLES evenly spaced positions p_s in
// shared memory; a query counts the samples before it there (no global
// reads), which bounds its answer to (p_{c-1}, p_c], and searches only that
// range in global memory.
extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
csk_search_binary(const csk_bits_t* __restrict__ a, const long long* __restrict__ sorter,
                  long long n, const csk_bits_t* __restrict__ v, long long m, long long rows,
                  int right, long long* __restrict__ out)
{
#if SAMPLES > 0
    __shared__ csk_bits_t samples[SAMPLES];
    const bool sampled = rows == 1 && n >= 2 * SAMPLES;
    if (sampled) {
        for (int s = threadIdx.x; s < SAMPLES; s += BLOCK_SIZE)
            samples[s] = csk_search_key(a, sorter, 0, (long long)s * n / SAMPLES);
        __syncthreads();
    }
#endif
    const long long total = m * rows;
    const long long stride = (long long)gridDim.x * BLOCK_SIZE;
    for (long long q = blockIdx.x * (long long)BLOCK_SIZE + threadIdx.x; q < total; q += stride) {
        const long long row_base = (q / m) * n;
        const csk_bits_t x = csk_to_ordered(v[q]);
        long long lo = 0, hi = n;  // the answer lies in [lo, hi]
#if SAMPLES > 0
        if (sampled) {
            int slo = 0, shi = SAMPLES;  // c = samples before x, in [slo, shi]
            while (slo < shi) {
                const int mid = (slo + shi) >> 1;
                if (csk_before(samples[mid], x, right)) slo = mid + 1; else shi = mid;
            }
            if (slo > 0) lo = (long long)(slo - 1) * n / SAMPLES + 1;
            if (slo < SAMPLES) hi = (long long)slo * n / SAMPLES;
        }
#endif
        while (lo < hi) {
            const long long mid = lo + ((hi - lo) >> 1);
            if (csk_before(csk_search_key(a, sorter, row_base, mid), x, right))
                lo = mid + 1;
            else
                hi = mid;
        }
        out[q] = lo;
    }
}

// Merge path of one row: a (n keys, sorted, no sorter) against the m queries
// in sorted order v[qorder[0]], v[qorder[1]], ... Thread t walks the
// ITEMS_PER_THREAD steps of the merged sequence from diagonal t *
// ITEMS_PER_THREAD, found by a binary search on the diagonal; a query the
// walk meets after i keys of a gets out[its position] = i.
extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
csk_search_merge(const csk_bits_t* __restrict__ a, long long n, const csk_bits_t* __restrict__ v,
                 const long long* __restrict__ qorder, long long m, int right,
                 long long* __restrict__ out)
{
    const long long diag = ((long long)blockIdx.x * BLOCK_SIZE + threadIdx.x) * ITEMS_PER_THREAD;
    const long long length = n + m;
    if (diag >= length) return;
    long long lo = diag > m ? diag - m : 0, hi = diag < n ? diag : n;
    while (lo < hi) {  // the a keys among the first `diag` merged items
        const long long mid = (lo + hi) >> 1;
        if (csk_before(csk_to_ordered(a[mid]), csk_to_ordered(v[qorder[diag - 1 - mid]]), right))
            lo = mid + 1;
        else
            hi = mid;
    }
    long long i = lo, j = diag - lo;
    const long long end = diag + ITEMS_PER_THREAD < length ? diag + ITEMS_PER_THREAD : length;
    long long qj = j < m ? qorder[j] : 0;
    csk_bits_t x = j < m ? csk_to_ordered(v[qj]) : 0;
    for (long long step = diag; step < end; ++step) {
        if (j >= m) break;  // only keys of a remain
        if (i < n && csk_before(csk_to_ordered(a[i]), x, right)) {
            ++i;
        } else {
            out[qj] = i;
            if (++j < m) {
                qj = qorder[j];
                x = csk_to_ordered(v[qj]);
            }
        }
    }
}
