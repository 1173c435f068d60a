// numpy.unique of a flat array on the device (cudasortkit/calls/unique.py
// drives it), from one sort: `sorted` the keys in order, and `order` the
// input position of each where the call needs them (first indices, the
// inverse; a stable sort of (keys, 0 1 2 ...)), else a keys-only sort.
//
// Tiles of TILE = BLOCK_SIZE * ITEMS_PER_THREAD sorted keys, one block a
// tile; item j of thread t is sorted position tile * TILE + j * BLOCK_SIZE + t
// (loads coalesced), and position i starts a run when i == 0 or its key is
// not the key before it.
//
//   csk_unique_tile_counts   the run starts of every tile; where `specials`
//                            is given, clears its bit 0 when a run of zeros
//                            starts, bit 1 when a run of NaNs does (float keys)
//   (the core's device scan: the tiles' exclusive offsets, and u the total)
//   csk_unique_first_special the first input position of a zero and of a NaN
//                            (keys-only calls with such runs)
//   csk_unique_compact       keys-only integer (and bool) calls without an
//                            inverse or first indices: the three steps above
//                            and the values and run starts below in one pass
//                            (tiles taken by ticket, offsets by look-back,
//                            scan.cuh), u written to `total`
//   csk_unique_write         per run start: the unique value, its first index
//                            and its sorted start (counts); per key, where
//                            asked: its run, at its sorted position (`ids`,
//                            for the inverse sort) or at its input position
//                            (the inverse, scattered)
//   csk_unique_inverse       the inverse without the random scatter: the
//                            caller sorts (order[i], ids[i]) by order, so
//                            position j holds the run of the key whose input
//                            position is j, widened here to int64
//   csk_unique_counts        counts[j] = start[j + 1] - start[j] (start[u] = n), u
//                            read from the scan's total on the device
//
// Equality is NumPy's: ordered words (keys.cuh) are equal, so -0.0 == +0.0;
// every NaN has the ordered word all ones, so with equal_nan all NaNs are one
// value, and without it every NaN starts a run of its own. Bools (sorted as
// their bytes, as NumPy sorts them) are equal by truth value: any nonzero
// byte is True, so a run of True starts at the smallest nonzero byte.
//
// A value is its run's first key: read from `sorted`, except float keys whose
// sorted word is a zero or a NaN, which a sort may canonicalise (+0.0, one
// quiet NaN): their bits come from the input, at the first occurrence
// (keys[order[i]]: the stable order puts it first; keys-only: the first
// position csk_unique_first_special found). Every other key has one bit
// pattern per value, so the sorted word is the first occurrence's bits.
//
// Defines: UNIQUE_COUNT_BYTES 4 (n < 2^31) or 8: the width of the tiles'
// counts and offsets, ids, starts and order (the first sort's positions,
// int32 or int64, read as unsigned words: they are never negative).
// UNIQUE_BOOL 1: the keys are bools (their bytes, uint8 to keys.cuh),
// compared by truth value; 0 otherwise.
// Tunables: BLOCK_SIZE (a multiple of 32), ITEMS_PER_THREAD (at most 32);
// MIN_BLOCKS (csk_unique_compact: the blocks an SM should hold at once, so
// its registers a thread; default 1, as the compiler picks).
#include "keys.cuh"
#include "scan.cuh"

#if UNIQUE_COUNT_BYTES == 4
typedef unsigned int csk_count_t;
#elif UNIQUE_COUNT_BYTES == 8
typedef unsigned long long csk_count_t;
#else
#error "UNIQUE_COUNT_BYTES must be 4 or 8"
#endif
#if BLOCK_SIZE % 32 || ITEMS_PER_THREAD < 1 || ITEMS_PER_THREAD > 32
#error "BLOCK_SIZE must be a multiple of 32 and ITEMS_PER_THREAD in 1..32"
#endif

#ifndef MIN_BLOCKS
#define MIN_BLOCKS 1
#endif
#define CSK_UNIQUE_TILE (BLOCK_SIZE * ITEMS_PER_THREAD)
#define CSK_UNIQUE_WARPS (BLOCK_SIZE / 32)
#define CSK_UNIQUE_FULL 0xffffffffu
// specials' bits (cleared when seen) and the first-position words' indices
#define CSK_UNIQUE_ZERO 1u
#define CSK_UNIQUE_NAN 2u

#if !defined(UNIQUE_BOOL) || (UNIQUE_BOOL != 0 && UNIQUE_BOOL != 1)
#error "UNIQUE_BOOL must be 0 or 1"
#endif

__device__ __forceinline__ bool csk_unique_same(csk_bits_t a, csk_bits_t b, int equal_nan)
{
#if UNIQUE_BOOL
    (void)equal_nan;
    return (a != 0) == (b != 0);
#endif
    const csk_bits_t ua = csk_to_ordered(a), ub = csk_to_ordered(b);
#if CSK_KEY_KIND == CSK_KIND_FLOAT
    if (!equal_nan && ua == CSK_ALL_ONES) return false;  // NaN != NaN
#endif
    (void)equal_nan;
    return ua == ub;
}

// Which special run a run-start key begins: CSK_UNIQUE_ZERO, CSK_UNIQUE_NAN
// or 0 (not a float zero or NaN, whose bits a sort may have canonicalised).
__device__ __forceinline__ unsigned csk_unique_special(csk_bits_t x)
{
#if CSK_KEY_KIND == CSK_KIND_FLOAT
    const csk_bits_t magnitude = (csk_bits_t)(x & (csk_bits_t)~CSK_SIGN_BIT);
    return magnitude == 0 ? CSK_UNIQUE_ZERO : magnitude > CSK_INF_BITS ? CSK_UNIQUE_NAN : 0u;
#else
    (void)x;
    return 0u;
#endif
}

__device__ __forceinline__ csk_bits_t csk_unique_shfl_up(csk_bits_t x)
{
#if CSK_KEY_BYTES == 8
    return __shfl_up_sync(CSK_UNIQUE_FULL, (unsigned long long)x, 1);
#else
    return (csk_bits_t)__shfl_up_sync(CSK_UNIQUE_FULL, (unsigned)x, 1);
#endif
}

// This thread's keys of tile `tile` (x[j]: item j) and which of them start a
// run (bit j). Every thread of the block runs it (it synchronizes). All the
// tile's loads are issued before any key is compared, so they are in flight
// together: the key before each item comes by shuffle within a warp, from
// `edges` (the tile's last lanes' keys, CSK_UNIQUE_EDGES of them in shared
// memory, only read after the call) for a warp's lane 0, and from the tile
// before for the tile's first key.
#define CSK_UNIQUE_EDGES (ITEMS_PER_THREAD * CSK_UNIQUE_WARPS)
__device__ __forceinline__ unsigned csk_unique_starts(const csk_bits_t* __restrict__ sorted,
                                                      long long n, int equal_nan, long long tile,
                                                      csk_bits_t (&x)[ITEMS_PER_THREAD],
                                                      csk_bits_t* edges)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const long long base = tile * CSK_UNIQUE_TILE + threadIdx.x;
#pragma unroll
    for (int j = 0; j < ITEMS_PER_THREAD; ++j) {
        const long long i = base + j * BLOCK_SIZE;
        x[j] = i < n ? sorted[i] : (csk_bits_t)0;
    }
    const csk_bits_t tile_before = threadIdx.x == 0 && tile > 0 ? sorted[base - 1] : (csk_bits_t)0;
    // position order is item, warp, lane: the key before lane 0 of warp w's
    // item j is lane 31's of warp w - 1, item j (of the last warp, item
    // j - 1, for warp 0)
    if (lane == 31) {
#pragma unroll
        for (int j = 0; j < ITEMS_PER_THREAD; ++j) edges[j * CSK_UNIQUE_WARPS + warp] = x[j];
    }
    __syncthreads();
    unsigned starts = 0;
#pragma unroll
    for (int j = 0; j < ITEMS_PER_THREAD; ++j) {
        const long long i = base + j * BLOCK_SIZE;
        csk_bits_t before = csk_unique_shfl_up(x[j]);
        if (lane == 0)
            before = warp > 0 ? edges[j * CSK_UNIQUE_WARPS + warp - 1]
                   : j > 0    ? edges[j * CSK_UNIQUE_WARPS - 1]
                              : tile_before;
        if (i < n && (i == 0 || !csk_unique_same(before, x[j], equal_nan))) starts |= 1u << j;
    }
    return starts;
}

// A tile's keys (x) and which of this thread's items start a run (the bits
// returned), and per item and warp the number of run starts, at
// prefix[j * WARPS + w] (position order: item, then warp, then lane), for
// the caller's scan. Every lane of the block. The callers take each item's
// warp ballot again where they write (a vote, where holding them all would
// cost ITEMS_PER_THREAD registers and so occupancy).
__device__ __forceinline__ unsigned csk_unique_rank_tile(const csk_bits_t* __restrict__ sorted,
                                                         long long n, int equal_nan, long long tile,
                                                         csk_bits_t (&x)[ITEMS_PER_THREAD],
                                                         unsigned* prefix, csk_bits_t* edges)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const unsigned starts = csk_unique_starts(sorted, n, equal_nan, tile, x, edges);
#pragma unroll
    for (int j = 0; j < ITEMS_PER_THREAD; ++j) {
        const unsigned ballot = __ballot_sync(CSK_UNIQUE_FULL, starts >> j & 1);
        if (lane == 0) prefix[j * CSK_UNIQUE_WARPS + warp] = __popc(ballot);
    }
    return starts;
}

extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
csk_unique_tile_counts(const csk_bits_t* __restrict__ sorted, long long n, int equal_nan,
                       csk_count_t* __restrict__ tile_counts, unsigned* specials)
{
    __shared__ unsigned block_total, block_seen;
    __shared__ csk_bits_t edges[CSK_UNIQUE_EDGES];
    if (threadIdx.x == 0) block_total = block_seen = 0;  // csk_unique_starts synchronizes
    csk_bits_t x[ITEMS_PER_THREAD];
    const unsigned starts = csk_unique_starts(sorted, n, equal_nan, blockIdx.x, x, edges);
    unsigned count = __popc(starts);
#pragma unroll
    for (int d = 16; d > 0; d >>= 1) count += __shfl_xor_sync(CSK_UNIQUE_FULL, count, d);
    unsigned seen = 0;
#pragma unroll
    for (int j = 0; j < ITEMS_PER_THREAD; ++j)
        if (starts >> j & 1) seen |= csk_unique_special(x[j]);
    if ((threadIdx.x & 31) == 0) atomicAdd(&block_total, count);
    if (seen) atomicOr(&block_seen, seen);
    __syncthreads();
    if (threadIdx.x == 0) {
        tile_counts[blockIdx.x] = (csk_count_t)block_total;
        if (specials && block_seen) atomicAnd(specials, ~block_seen);
    }
}

// first[0], first[1]: the least input position of a zero (either sign) and
// of a NaN, for the specials seen (bits cleared in *specials); the caller
// sets both to all ones. A block whose positions all come after the firsts
// it would look for returns at once (blocks start roughly in order).
extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
csk_unique_first_special(const csk_bits_t* __restrict__ keys, long long n,
                         const unsigned* specials, unsigned long long* first)
{
#if CSK_KEY_KIND == CSK_KIND_FLOAT
    const unsigned need = ~*specials & (CSK_UNIQUE_ZERO | CSK_UNIQUE_NAN);
    if (!need) return;
    const unsigned long long start = (unsigned long long)blockIdx.x * CSK_UNIQUE_TILE;
    volatile unsigned long long* found = first;
    if (!((need & CSK_UNIQUE_ZERO) && found[0] > start) && !((need & CSK_UNIQUE_NAN) && found[1] > start))
        return;
    unsigned long long zero = ~0ull, nan = ~0ull;
#pragma unroll
    for (int j = 0; j < ITEMS_PER_THREAD; ++j) {
        const unsigned long long i = start + j * BLOCK_SIZE + threadIdx.x;
        if (i < (unsigned long long)n) {
            const unsigned kind = csk_unique_special(keys[i]) & need;
            if (kind == CSK_UNIQUE_ZERO && i < zero) zero = i;
            if (kind == CSK_UNIQUE_NAN && i < nan) nan = i;
        }
    }
#pragma unroll
    for (int d = 16; d > 0; d >>= 1) {
        const unsigned long long z = __shfl_xor_sync(CSK_UNIQUE_FULL, zero, d);
        const unsigned long long q = __shfl_xor_sync(CSK_UNIQUE_FULL, nan, d);
        zero = z < zero ? z : zero;
        nan = q < nan ? q : nan;
    }
    if ((threadIdx.x & 31) == 0) {
        if (zero != ~0ull) atomicMin(first, zero);
        if (nan != ~0ull) atomicMin(first + 1, nan);
    }
#else
    (void)keys; (void)n; (void)specials; (void)first;
#endif
}

// offsets: the tiles' exclusive offsets (the scanned tile counts); values: u
// keys; the rest may be null (not asked for): order (then `first` gives the
// zero's and NaN's first positions), index (int64), starts (u counts),
// ids (n counts: the run of sorted position i), inverse (n int64: the run
// of input position order[i]).
extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
csk_unique_write(const csk_bits_t* __restrict__ keys, const csk_bits_t* __restrict__ sorted,
                 const csk_count_t* __restrict__ order,
                 const unsigned long long* __restrict__ first,
                 const csk_count_t* __restrict__ offsets, long long n, int equal_nan,
                 csk_bits_t* __restrict__ values, long long* __restrict__ index,
                 csk_count_t* __restrict__ starts, csk_count_t* __restrict__ ids,
                 long long* __restrict__ inverse)
{
    // prefix[j * WARPS + w]: run starts before item j of warp w in the tile
    // (position order: item, then warp, then lane)
    constexpr int ENTRIES = ITEMS_PER_THREAD * CSK_UNIQUE_WARPS;
    constexpr int PER_LANE = (ENTRIES + 31) / 32;
    __shared__ unsigned prefix[ENTRIES];
    __shared__ csk_bits_t edges[CSK_UNIQUE_EDGES];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    csk_bits_t x[ITEMS_PER_THREAD];
    const unsigned starts_here = csk_unique_rank_tile(sorted, n, equal_nan, blockIdx.x, x, prefix, edges);
    __syncthreads();
    if (warp == 0) csk_warp_scan_entries<PER_LANE>(prefix, ENTRIES);
    __syncthreads();
    const long long offset = (long long)offsets[blockIdx.x];
    const unsigned below = (1u << lane) - 1u;  // the lanes before this one
#pragma unroll
    for (int j = 0; j < ITEMS_PER_THREAD; ++j) {
        const bool start = starts_here >> j & 1;
        const unsigned ballot = __ballot_sync(CSK_UNIQUE_FULL, start);  // every lane, before the bound
        const long long i = (long long)blockIdx.x * CSK_UNIQUE_TILE + j * BLOCK_SIZE + threadIdx.x;
        if (i >= n) continue;
        // the run of position i: the run starts at or before it, less one
        const long long run = offset + prefix[j * CSK_UNIQUE_WARPS + warp]
                              + __popc(ballot & below) + start - 1;
        const long long at = order ? (long long)order[i] : 0;
        if (start) {
            csk_bits_t value = x[j];
            const unsigned kind = csk_unique_special(value);
            if (kind) value = keys[order ? at : (long long)first[kind - 1]];
            values[run] = value;
            if (index) index[run] = at;
            if (starts) starts[run] = (csk_count_t)i;
        }
        if (ids) ids[i] = (csk_count_t)run;
        if (inverse) inverse[at] = run;
    }
}

// One pass for integer and bool keys (no zeros or NaNs to take from the
// input): each block takes the next tile by ticket (*ticket and the status
// words zeroed by the caller), counts its run starts, finds the runs before
// it by look-back and writes its values and (where asked) run starts; the
// last tile writes u to *total.
extern "C" __global__ void __launch_bounds__(BLOCK_SIZE, MIN_BLOCKS)
csk_unique_compact(const csk_bits_t* __restrict__ sorted, long long n, int equal_nan,
                   unsigned long long* status, unsigned* ticket,
                   csk_bits_t* __restrict__ values, csk_count_t* __restrict__ starts,
                   csk_count_t* __restrict__ total)
{
    constexpr int ENTRIES = ITEMS_PER_THREAD * CSK_UNIQUE_WARPS;
    constexpr int PER_LANE = (ENTRIES + 31) / 32;
    __shared__ unsigned prefix[ENTRIES];
    __shared__ csk_bits_t edges[CSK_UNIQUE_EDGES];
    __shared__ unsigned tile_number;
    __shared__ unsigned long long runs_before;
    if (threadIdx.x == 0) tile_number = atomicAdd(ticket, 1u);
    __syncthreads();
    const unsigned tile = tile_number;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    csk_bits_t x[ITEMS_PER_THREAD];
    const unsigned starts_here = csk_unique_rank_tile(sorted, n, equal_nan, tile, x, prefix, edges);
    __syncthreads();
    if (warp == 0) {
        const unsigned runs = csk_warp_scan_entries<PER_LANE>(prefix, ENTRIES);
        const unsigned long long before = csk_tile_look_back(status, tile, runs);
        if (lane == 0) {
            runs_before = before;
            if (tile == gridDim.x - 1) *total = (csk_count_t)(before + runs);
        }
    }
    __syncthreads();
    const long long offset = (long long)runs_before;
    const unsigned below = (1u << lane) - 1u;
#pragma unroll
    for (int j = 0; j < ITEMS_PER_THREAD; ++j) {
        const bool start = starts_here >> j & 1;  // never past n
        const unsigned ballot = __ballot_sync(CSK_UNIQUE_FULL, start);
        if (start) {
            const long long i = (long long)tile * CSK_UNIQUE_TILE + j * BLOCK_SIZE + threadIdx.x;
            const long long run = offset + prefix[j * CSK_UNIQUE_WARPS + warp]
                                  + __popc(ballot & below);
            values[run] = x[j];
            if (starts) starts[run] = (csk_count_t)i;
        }
    }
}

// run_ids: the values of the sort of (order, ids) by order (the runs of the
// keys in input order); inverse: n int64.
extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
csk_unique_inverse(const csk_count_t* __restrict__ run_ids, long long n,
                   long long* __restrict__ inverse)
{
    const long long stride = (long long)gridDim.x * BLOCK_SIZE;
    for (long long j = blockIdx.x * (long long)BLOCK_SIZE + threadIdx.x; j < n; j += stride)
        inverse[j] = (long long)run_ids[j];
}

extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
csk_unique_counts(const csk_count_t* __restrict__ starts, const csk_count_t* __restrict__ total,
                  long long n, long long* __restrict__ counts)
{
    const long long u = (long long)*total;  // the scan's total: the runs
    const long long stride = (long long)gridDim.x * BLOCK_SIZE;
    for (long long j = blockIdx.x * (long long)BLOCK_SIZE + threadIdx.x; j < u; j += stride)
        counts[j] = (j + 1 < u ? (long long)starts[j + 1] : n) - (long long)starts[j];
}
