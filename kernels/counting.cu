// Counting sort for integer keys that take few distinct values
// (plugins/counting.py drives these kernels).
//
// Every key falls in a bin: bin = (ordered word ^ mask) - base (keys.cuh), so
// bins 0 .. bins-1 are already in output order, descending included (the
// mask flips the order, and nothing else changes, so stability holds).
//
// Keys only (nothing to move but the keys themselves):
//   counting_histogram     count keys per bin (privatized shared-memory
//                          histograms, or global atomics for many bins)
//   DeviceScan (scan.py)   exclusive scan: the first output slot of each bin
//   counting_fill          every output slot finds its bin in the offsets and
//                          writes that bin's key: runs of equal keys, no scatter
//
// Pairs / argsort: counting_sweep.cu, the chained-scan LSD passes of
// onesweep.cuh over the bits of the bin (one pass per 8 bits: a range of
// 2^8 values is one pass, 2^16 two).
//
// Tunables: BLOCK_SIZE (a multiple of 32, >= 256), VEC_LOADS (16-byte loads or
// stores in flight per thread in the histogram and fill), SLICE_BINS (host
// side: packed 16-bit shared counters per histogram block), AGGREGATE (warp-aggregated
// atomics where keys repeat).
#include "keys.cuh"

#define KEYS_PER_VEC (16 / CSK_KEY_BYTES)
#define NO_BIN 0xFFFFFFFFu

typedef unsigned long long u64;

union KeyVec {
    uint4 v;
    csk_bits_t k[KEYS_PER_VEC];
};

// The bin of key bits x; >= bins when x is outside the range (caller's key_range).
__device__ __forceinline__ u64 counting_bin(csk_bits_t x, csk_bits_t mask, csk_bits_t base)
{
    return (u64)(csk_bits_t)(csk_encode(x, mask) - base);
}

// An array of n keys seen as aligned 16-byte vectors: key e sits in vector
// (e + head) / KEYS_PER_VEC. Keys must be aligned to their own size.
struct VecSpan {
    long long head;   // keys of the first vector that precede the array
    long long count;  // vectors that hold at least one key
};

__device__ __forceinline__ VecSpan vec_span(const void* p, long long n)
{
    VecSpan s;
    s.head = (long long)(((unsigned long long)p & 15ull) / CSK_KEY_BYTES);
    s.count = (s.head + n + KEYS_PER_VEC - 1) / KEYS_PER_VEC;
    return s;
}

__device__ __forceinline__ const uint4* vec_base(const void* p)
{
    return (const uint4*)((unsigned long long)p & ~15ull);
}

// Keys j in [*lo, *hi) of vector v lie inside [begin, end).
__device__ __forceinline__ void vec_keys(long long v, const VecSpan& s, long long begin,
                                         long long end, int* lo, int* hi)
{
    const long long e0 = v * KEYS_PER_VEC - s.head;
    const long long a = begin - e0, b = end - e0;
    *lo = (int)(a < 0 ? 0 : (a > KEYS_PER_VEC ? KEYS_PER_VEC : a));
    *hi = (int)(b < 0 ? 0 : (b > KEYS_PER_VEC ? KEYS_PER_VEC : b));
}

// The block's next VEC_LOADS * BLOCK_SIZE vectors from v0 (striped: vector
// v0 + r * BLOCK_SIZE + t to thread t's w[r]), all loads in flight at once;
// vectors at or past v_end are not read.
__device__ __forceinline__ void load_vecs(KeyVec (&w)[VEC_LOADS], const uint4* __restrict__ vecs,
                                          long long v0, long long v_end)
{
#pragma unroll
    for (int r = 0; r < VEC_LOADS; ++r) {
        const long long v = v0 + r * BLOCK_SIZE + threadIdx.x;
        if (v < v_end) w[r].v = vecs[v];
    }
}

// ---------------------------------------------------------------- histogram
// Add inc to the 16-bit counter `target` of a packed shared histogram (two
// counters per 32-bit word, low half = even bin), exactly: the atomic's old
// word says whether this add wrapped the low counter (then its 2^16 goes to
// the global count, and the carry it pushed into the high counter is taken
// back off the high bin's global count) or wrapped the high counter (its 2^16
// goes to the global count). Sums are modulo 2^32, so the order of these
// corrections and the final flush does not matter.
__device__ __forceinline__ void counting_add_packed(unsigned* hist, unsigned* __restrict__ counts,
                                                    u64 lo, unsigned width, unsigned target,
                                                    unsigned inc)
{
    const unsigned shift = (target & 1u) << 4;
    const unsigned old = atomicAdd(&hist[target >> 1], inc << shift);
    if (shift == 0 && (old & 0xFFFFu) + inc > 0xFFFFu) {
        atomicAdd(&counts[lo + target], 0x10000u);
        if (target + 1 < width) atomicSub(&counts[lo + target + 1], 1u);
    }
    if ((u64)old + ((u64)inc << shift) > 0xFFFFFFFFull && (target | 1u) < width)
        atomicAdd(&counts[lo + (target | 1u)], 0x10000u);
}

// Grid: chunks x slices (slice = blockIdx % slices, so the blocks that read the
// same chunk run side by side and share it through L2). With slices > 0 each
// block counts the bins [slice * slice_bins, +slice_bins) of its chunk in
// shared memory, then adds them to counts:
//   copies >= 1: `copies` 32-bit counters per bin (lane & (copies - 1) picks
//                one, so equal keys in a warp do not serialize on one address);
//   copies == 0: packed 16-bit counters (counting_add_packed), so 65,536 bins
//                fit in 128 KiB and a 16-bit key range needs one slice.
// With slices == 0 (too many bins) every key is a global atomic.
extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
counting_histogram(const csk_bits_t* __restrict__ keys, long long n, u64 mask, u64 base,
                   u64 bins, unsigned* __restrict__ counts, unsigned* __restrict__ bad,
                   int slices, unsigned slice_bins, unsigned copies, long long vecs_per_chunk)
{
    extern __shared__ unsigned hist[];
    const bool in_shared = slices > 0;
    const bool packed = copies == 0;
    const unsigned slice = in_shared ? blockIdx.x % slices : 0;
    const long long chunk = in_shared ? blockIdx.x / slices : blockIdx.x;
    const u64 lo = (u64)slice * slice_bins;
    const unsigned width = in_shared ? (unsigned)min((u64)slice_bins, bins - lo) : 0;
    const unsigned words = packed ? (width + 1) / 2 : width * copies;
    const unsigned lane = threadIdx.x & 31u;
    const unsigned copy = packed ? 0 : lane & (copies - 1);
    for (unsigned i = threadIdx.x; i < words; i += BLOCK_SIZE) hist[i] = 0;
    __syncthreads();

    const VecSpan span = vec_span(keys, n);
    const uint4* vecs = vec_base(keys);
    const long long v_begin = chunk * vecs_per_chunk;
    const long long v_end = min(span.count, v_begin + vecs_per_chunk);
    const csk_bits_t m = (csk_bits_t)mask, b0 = (csk_bits_t)base;
    bool outside = false;
    // The loop bounds are the same for the whole block, so warps stay converged.
    for (long long v0 = v_begin; v0 < v_end; v0 += (long long)BLOCK_SIZE * VEC_LOADS) {
        KeyVec w[VEC_LOADS];
        load_vecs(w, vecs, v0, v_end);
#pragma unroll
        for (int r = 0; r < VEC_LOADS; ++r) {
            const long long v = v0 + r * BLOCK_SIZE + threadIdx.x;
            int j_lo = 0, j_hi = 0;
            if (v < v_end) vec_keys(v, span, 0, n, &j_lo, &j_hi);
#pragma unroll
            for (int j = 0; j < KEYS_PER_VEC; ++j) {
                unsigned target = NO_BIN;  // bin in this slice (shared) or in counts (global)
                if (j >= j_lo && j < j_hi) {
                    const u64 bin = counting_bin(w[r].k[j], m, b0);
                    if (bin >= bins)
                        outside = true;
                    else if (!in_shared)
                        target = (unsigned)bin;
                    else if (bin - lo < width)  // bin < lo wraps around: not in slice
                        target = (unsigned)(bin - lo);
                }
                unsigned inc = 1;
#if AGGREGATE
                if (copies <= 1) {  // one atomic per distinct bin of the warp
                    const unsigned peers = __match_any_sync(0xffffffffu, target);  // bins: too wide for ballots
                    if (lane != (unsigned)(__ffs(peers) - 1)) target = NO_BIN;
                    inc = (unsigned)__popc(peers);
                }
#endif
                if (target == NO_BIN) continue;
                if (!in_shared)
                    atomicAdd(&counts[target], inc);
                else if (packed)
                    counting_add_packed(hist, counts, lo, width, target, inc);
                else
                    atomicAdd(&hist[target * copies + copy], inc);
            }
        }
    }
    if (outside && bad) atomicOr(bad, 1u);
    if (!in_shared) return;
    __syncthreads();
    for (unsigned i = threadIdx.x; i < width; i += BLOCK_SIZE) {
        unsigned s = 0;
        if (packed) {
            s = (hist[i >> 1] >> ((i & 1u) << 4)) & 0xFFFFu;
        } else {
            for (unsigned c = 0; c < copies; ++c)
                s += hist[i * copies + ((c + i) & (copies - 1))];  // rotated: no bank conflicts
        }
        if (s) atomicAdd(&counts[lo + i], s);
    }
}

// --------------------------------------------------------------------- fill
// Largest b in [lo, hi] with offsets[b] <= e (given offsets[lo] <= e): the bin
// of output slot e (empty bins share their offset with the next bin).
__device__ __forceinline__ unsigned find_bin(const unsigned* __restrict__ offsets, unsigned lo,
                                             unsigned hi, long long e)
{
    while (lo < hi) {
        const unsigned mid = lo + (hi - lo + 1) / 2;
        if ((long long)offsets[mid] <= e)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

__device__ __forceinline__ long long bin_end(const unsigned* __restrict__ offsets, unsigned b,
                                             unsigned bins, long long n)
{
    return b + 1 < bins ? (long long)offsets[b + 1] : n;
}

// out[e] = the key of the bin holding slot e; offsets = exclusive scan of the
// counts. Each block first finds the bins of its first and last slot, so each
// thread searches only that (usually tiny) range, then walks forward.
extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
counting_fill(csk_bits_t* __restrict__ out, long long n, const unsigned* __restrict__ offsets,
              unsigned bins, u64 mask, u64 base)
{
    __shared__ unsigned first_bin, last_bin;
    const VecSpan span = vec_span(out, n);
    uint4* vecs = (uint4*)vec_base(out);
    const long long v_begin = (long long)blockIdx.x * BLOCK_SIZE * VEC_LOADS;
    const long long v_end = min(span.count, v_begin + (long long)BLOCK_SIZE * VEC_LOADS);
    if (threadIdx.x == 0) {
        const long long e = v_begin * KEYS_PER_VEC - span.head;
        first_bin = find_bin(offsets, 0, bins - 1, e < 0 ? 0 : e);
    }
    if (threadIdx.x == BLOCK_SIZE - 1) {
        const long long e = v_end * KEYS_PER_VEC - span.head;
        last_bin = find_bin(offsets, 0, bins - 1, (e < n ? e : n) - 1);
    }
    __syncthreads();
    const unsigned lo = first_bin, hi = last_bin;
    const csk_bits_t m = (csk_bits_t)mask, b0 = (csk_bits_t)base;
#pragma unroll
    for (int r = 0; r < VEC_LOADS; ++r) {
        const long long v = v_begin + r * BLOCK_SIZE + threadIdx.x;
        if (v >= v_end) continue;
        int j_lo, j_hi;
        vec_keys(v, span, 0, n, &j_lo, &j_hi);
        const long long e0 = v * KEYS_PER_VEC - span.head;
        unsigned b = find_bin(offsets, lo, hi, e0 + j_lo);
        long long end = bin_end(offsets, b, bins, n);
        csk_bits_t key = csk_decode((csk_bits_t)(b0 + b), m);
        KeyVec w;
#pragma unroll
        for (int j = 0; j < KEYS_PER_VEC; ++j) {
            if (j >= j_lo && j < j_hi && e0 + j >= end) {
                b = find_bin(offsets, b + 1, hi, e0 + j);
                end = bin_end(offsets, b, bins, n);
                key = csk_decode((csk_bits_t)(b0 + b), m);
            }
            w.k[j] = key;
        }
        if (j_lo == 0 && j_hi == KEYS_PER_VEC) {
            vecs[v] = w.v;
        } else {
#pragma unroll
            for (int j = 0; j < KEYS_PER_VEC; ++j)
                if (j >= j_lo && j < j_hi) out[e0 + j] = w.k[j];
        }
    }
}
