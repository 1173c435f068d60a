// Segments sorted by a block-wide LSD radix sort in shared memory
// (plugins/block_radix.py drives it). Keys of at most 4 bytes.
//
// Tunables: BLOCK_SIZE threads (a multiple of 32, 256 to 1024: at least one
// thread per digit in the digit scan), WARP_MATCH (peers.cuh). Defines:
// ITEMS_PER_THREAD keys a thread holds; a block sorts up to
// BR_TILE = BLOCK_SIZE * ITEMS_PER_THREAD keys.
//
// The sort (br_sort): a tile of c keys uses IE = ceil(c / BLOCK_SIZE) <=
// ITEMS_PER_THREAD items a thread (so every warp gets a share); keys sit in
// registers warp-striped (item j of lane l of warp w is tile position
// w * 32 * IE + j * 32 + l, positions past c hold padding). Each pass takes
// one 8-bit digit: warp-level multisplit ranking in input order (peers.cuh;
// each warp bumps its own digit counters), a scan over (digit, warp) gives
// every key its position, keys and their aux words go to shared memory in
// digit order and come back warp-striped for the next pass. Ranking visits
// keys in position order, so every pass is stable and so is the sort.
// Passes run over the key's bytes from the lowest, then (tiles) over the
// bytes of a segment ordinal kept in the aux word's high half, so the tile
// ends ordered by (segment, key): every segment sorted in place.
//
// Kernels:
//   block_radix_rows   one segment per block, at most BR_TILE keys: block b
//                      sorts uniform row b, or ragged segment seg_list[b]
//                      (offsets given).
//   block_radix_classify  lists the ragged segments the other kernels take.
//   block_radix_tiles  short segments several per block: block b takes the
//                      segments that start in keys [b*STEP, (b+1)*STEP),
//                      STEP = BR_TILE / 2, except one longer than STEP (that
//                      one is another kernel's); all of them lie within
//                      BR_TILE keys of the first one's start.
//
// Values by `mode` (segments.cuh's csk_write_value): keys only; argsort,
// int64 index in the segment or position in the whole array; pairs, the
// caller's values gathered by position.
#include "keys.cuh"
#include "peers.cuh"
#include "scan.cuh"
#include "segments.cuh"

#ifndef ITEMS_PER_THREAD
#define ITEMS_PER_THREAD 16
#endif
#define BR_TILE (BLOCK_SIZE * ITEMS_PER_THREAD)
#define BR_STEP (BR_TILE / 2)
#define BR_WARPS (BLOCK_SIZE / 32)
#define BR_DIGITS 256
// Blocks an SM should hold at once (registers are capped to fit them, 64
// a thread at 8+ keys, 42 at 4, without spills on sm_90). A block of 1024
// threads sorts one 1-D array: one block, 64 registers a thread.
#define BR_SM_THREADS (ITEMS_PER_THREAD >= 8 ? 1024 : ITEMS_PER_THREAD >= 4 ? 1536 : 2048)
#define BR_MIN_BLOCKS (BLOCK_SIZE >= 1024 ? 1 : BR_SM_THREADS / BLOCK_SIZE > 0 ? BR_SM_THREADS / BLOCK_SIZE : 1)

// Digit counters, one row of BR_DIGITS a warp: 32-bit up to 512 threads;
// 16-bit above (32 warps' 32-bit rows would take 32 KiB of the 48), rows
// padded to 258 (129 words) so that the scan's threads of one digit, which
// read rows 8 warps apart, hit different banks. BR_DIGIT_THREADS threads
// share a digit in the scan (consecutive threads, BR_WARPS / BR_DIGIT_THREADS
// warps each): one up to 512 threads, four at 1024.
#if BLOCK_SIZE > 512
typedef unsigned short br_count_t;
#define BR_COUNT_BYTES 2
#define BR_COUNT_ROW 258
#define BR_DIGIT_THREADS (BLOCK_SIZE / BR_DIGITS)
#else
typedef unsigned br_count_t;
#define BR_COUNT_BYTES 4
#define BR_COUNT_ROW BR_DIGITS
#define BR_DIGIT_THREADS 1
#endif
#define BR_COUNT_WORDS (BR_WARPS * BR_COUNT_ROW * BR_COUNT_BYTES / 4)

#if CSK_KEY_BYTES > 4
#error "block_radix keeps keys of at most 4 bytes in shared memory"
#endif
#if BLOCK_SIZE < BR_DIGITS || BLOCK_SIZE > 1024 || BLOCK_SIZE % 32 != 0
#error "block_radix needs whole warps and 256 to 1024 threads (at least one per digit)"
#endif
#if BR_TILE > 65536
#error "tile positions are 16 bits"
#endif

// AUX_SLOTS: BR_TILE where the sort moves aux words (positions, segment
// ordinals), 1 where it moves keys alone (block_radix_rows without values:
// a tile of twice the keys fits the 48 KiB, plugins/block_radix.py's
// _shared_bytes).
template <int AUX_SLOTS>
struct BrSharedT {
    csk_bits_t keys[BR_TILE];
    unsigned aux[AUX_SLOTS];  // tile position (low 16 bits), segment ordinal (high 16)
    br_count_t counts[BR_WARPS * BR_COUNT_ROW];  // warp-major: counts[w * BR_COUNT_ROW + d]
    unsigned scan[BR_WARPS + 1];
    long long bounds[4];
};
typedef BrSharedT<BR_TILE> BrShared;

__device__ __forceinline__ unsigned br_digit(csk_bits_t key, unsigned aux, int pass)
{
    if (pass < CSK_KEY_BYTES) return ((unsigned)key >> (8 * pass)) & 255u;
    return (aux >> (16 + 8 * (pass - CSK_KEY_BYTES))) & 255u;
}

// Sorts the tile held in key/aux (warp-striped over ie items, see above)
// by the digits of `passes` passes; afterwards s->keys[0..c) (and s->aux
// when AUX) hold the first c positions in order. Items j >= ie take no
// part; padding positions (c and up) must hold the largest digits (they
// rank last, being last in position order too). Called by every thread.
template <bool AUX, class Shared>
__device__ __forceinline__ void br_sort(Shared* s, csk_bits_t (&key)[ITEMS_PER_THREAD],
                                        unsigned (&aux)[ITEMS_PER_THREAD], int passes, int ie)
{
    const int t = threadIdx.x, lane = t & 31, warp = t >> 5;
    br_count_t* my_counts = s->counts + warp * BR_COUNT_ROW;
    for (int pass = 0; pass < passes; ++pass) {
        for (int i = t; i < BR_COUNT_WORDS; i += BLOCK_SIZE) ((unsigned*)s->counts)[i] = 0;
        __syncthreads();
        unsigned pos[ITEMS_PER_THREAD];
#pragma unroll
        for (int j = 0; j < ITEMS_PER_THREAD; ++j) {
            if (j >= ie) break;
            const unsigned d = br_digit(key[j], aux[j], pass);
            const unsigned peers = csk_warp_peers<8>(d, j);
            const int leader = 31 - __clz(peers);
            unsigned before = 0;
            if (lane == leader) {
                before = my_counts[d];
                my_counts[d] = before + __popc(peers);
            }
            pos[j] = __shfl_sync(0xffffffffu, before, leader) + __popc(peers & ((1u << lane) - 1u));
            __syncwarp();
        }
        __syncthreads();
        // Thread t takes digit d's counts of warps w0 .. w0 + WPT - 1: they
        // become warp starts within its share, then the block scan in
        // (digit, warp) order adds the earlier digits' and warps' counts.
        constexpr int WPT = BR_WARPS / BR_DIGIT_THREADS;
        const int d = t / BR_DIGIT_THREADS, w0 = (t % BR_DIGIT_THREADS) * WPT;
        unsigned total = 0;
        if (t < BR_DIGITS * BR_DIGIT_THREADS) {
#pragma unroll
            for (int w = w0; w < w0 + WPT; ++w) {
                const unsigned c = s->counts[w * BR_COUNT_ROW + d];
                s->counts[w * BR_COUNT_ROW + d] = total;
                total += c;
            }
        }
        unsigned all;
        const unsigned start = csk_block_exclusive_scan<unsigned, BLOCK_SIZE>(total, s->scan, &all);
        if (t < BR_DIGITS * BR_DIGIT_THREADS) {
#pragma unroll
            for (int w = w0; w < w0 + WPT; ++w) s->counts[w * BR_COUNT_ROW + d] += start;
        }
        __syncthreads();
#pragma unroll
        for (int j = 0; j < ITEMS_PER_THREAD; ++j) {
            if (j >= ie) break;
            const unsigned p = pos[j] + my_counts[br_digit(key[j], aux[j], pass)];
            s->keys[p] = key[j];
            if (AUX) s->aux[p] = aux[j];
        }
        __syncthreads();
        if (pass + 1 < passes) {
#pragma unroll
            for (int j = 0; j < ITEMS_PER_THREAD; ++j) {
                if (j >= ie) break;
                const int p = (warp * ie + j) * 32 + lane;
                key[j] = s->keys[p];
                if (AUX) aux[j] = s->aux[p];
            }
        }
    }
}

// keys_in/keys_out: n keys; uniform rows (offsets null) of row_len keys
// each, or ragged int64 offsets[0..count]; block b sorts row b, or segment
// seg_list[b] (ragged). Segments must have at most BR_TILE keys.
extern "C" __global__ void __launch_bounds__(BLOCK_SIZE, BR_MIN_BLOCKS)
block_radix_rows(const csk_bits_t* __restrict__ keys_in, csk_bits_t* __restrict__ keys_out,
                 const csk_value_t* __restrict__ values_in, csk_value_t* __restrict__ values_out,
                 long long row_len, const long long* __restrict__ offsets,
                 const long long* __restrict__ seg_list, unsigned long long mask64, int mode)
{
    __shared__ BrSharedT<CSK_HAS_VALUES ? BR_TILE : 1> s;
    const csk_bits_t mask = (csk_bits_t)mask64;
    const int t = threadIdx.x, lane = t & 31, warp = t >> 5;
    long long base, len;
    if (offsets == nullptr) {
        base = (long long)blockIdx.x * row_len;
        len = row_len;
    } else {
        const long long seg = seg_list[blockIdx.x];
        base = offsets[seg];
        len = offsets[seg + 1] - base;
    }
    const int ie = (int)((len + BLOCK_SIZE - 1) / BLOCK_SIZE);
    csk_bits_t key[ITEMS_PER_THREAD];
    unsigned aux[ITEMS_PER_THREAD];
#pragma unroll
    for (int j = 0; j < ITEMS_PER_THREAD; ++j) {
        if (j >= ie) break;
        const int p = (warp * ie + j) * 32 + lane;
        // Past the segment: the largest word, after every key (stable: they
        // also come last in position order).
        key[j] = p < len ? csk_encode(keys_in[base + p], mask) : CSK_ALL_ONES;
        aux[j] = (unsigned)p;
    }
    br_sort<CSK_HAS_VALUES != 0>(&s, key, aux, CSK_KEY_BYTES, ie);
    for (int i = t; i < len; i += BLOCK_SIZE) {
        keys_out[base + i] = csk_decode(s.keys[i], mask);
#if CSK_HAS_VALUES  // (without values s.aux has one slot)
        csk_write_value(values_out, values_in, base + i, base + s.aux[i], mode,
                        [&] { return base; });
#endif
    }
    (void)values_in;
    (void)values_out;
    (void)mode;
}

__device__ __forceinline__ long long br_offset(const long long* __restrict__ offsets,
                                               long long row_len, long long s)
{
    return offsets == nullptr ? s * row_len : offsets[s];
}

// The first segment s in [0, count] with offsets[s] >= x (offsets never
// decrease, offsets[count] = n >= x). Called by a whole warp: 32-way search.
__device__ long long br_lower_bound(const long long* __restrict__ offsets, long long row_len,
                                    long long count, long long x)
{
    if (offsets == nullptr) {
        const long long s = (x + row_len - 1) / row_len;
        return s < count ? s : count;
    }
    const int lane = threadIdx.x & 31;
    long long lo = 0, hi = count;  // answer in [lo, hi]; offsets[hi] >= x
    while (lo < hi) {
        const long long step = (hi - lo + 31) / 32;
        long long q = lo + lane * step;
        if (q > hi) q = hi;
        const unsigned ge = __ballot_sync(0xffffffffu, offsets[q] >= x);
        if (ge == 0) {
            lo = __shfl_sync(0xffffffffu, q, 31) + 1;
        } else {
            const int f = __ffs(ge) - 1;
            const long long qf = __shfl_sync(0xffffffffu, q, f);
            const long long qp = __shfl_sync(0xffffffffu, q, f > 0 ? f - 1 : 0);
            hi = qf;
            lo = f > 0 ? qp + 1 : lo;
        }
    }
    return lo;
}

// The several-segments kernel moves aux words: it exists where its tile
// with them fits the static 48 KiB (a keys-only rows tile of twice the
// keys compiles this file without it).
#define BR_AUX_SHARED (BR_TILE * (CSK_KEY_BYTES + 4) + BR_WARPS * BR_COUNT_ROW * BR_COUNT_BYTES \
                       + (BR_WARPS + 1) * 4 + 32)
#if BR_AUX_SHARED <= 48 * 1024
// Short segments, several per block (see the top). Uniform rows (offsets
// null, count rows of row_len keys, row_len <= BR_STEP) or ragged offsets;
// ragged segments longer than BR_STEP are left alone.
extern "C" __global__ void __launch_bounds__(BLOCK_SIZE, BR_MIN_BLOCKS)
block_radix_tiles(const csk_bits_t* __restrict__ keys_in, csk_bits_t* __restrict__ keys_out,
                  const csk_value_t* __restrict__ values_in, csk_value_t* __restrict__ values_out,
                  long long n, long long row_len, const long long* __restrict__ offsets,
                  long long count, unsigned long long mask64, int mode)
{
    __shared__ BrShared s;
    const csk_bits_t mask = (csk_bits_t)mask64;
    const int t = threadIdx.x, lane = t & 31, warp = t >> 5;
    const long long lo = (long long)blockIdx.x * BR_STEP;
    const long long hi = lo + BR_STEP < n ? lo + BR_STEP : n;
    // Segments [s0, s1) start in [lo, hi); only the last can be longer than
    // BR_STEP (it ends past hi, so no later one starts here): dropped.
    if (warp < 2) {
        const long long b = br_lower_bound(offsets, row_len, count, warp == 0 ? lo : hi);
        if (lane == 0) s.bounds[warp] = b;
    }
    __syncthreads();
    const long long s0 = s.bounds[0];
    long long s1 = s.bounds[1];
    if (s0 >= s1) return;
    if (br_offset(offsets, row_len, s1) - br_offset(offsets, row_len, s1 - 1) > BR_STEP) --s1;
    const long long start = br_offset(offsets, row_len, s0);
    const int c = (int)(br_offset(offsets, row_len, s1) - start);  // <= BR_TILE
    if (c == 0) return;

    // Segment heads: aux[p] = 1 where a segment starts (empty segments mark
    // the next one's start again); a prefix sum gives every key its
    // segment's ordinal among this tile's non-empty segments.
    for (int i = t; i < BR_TILE; i += BLOCK_SIZE) s.aux[i] = 0;
    __syncthreads();
    if (offsets == nullptr) {
        for (long long g = s0 + t; g < s1; g += BLOCK_SIZE) s.aux[g * row_len - start] = 1;
    } else {
        for (long long g = s0 + t; g < s1; g += BLOCK_SIZE) {
            const long long at = offsets[g] - start;
            if (at < c) s.aux[at] = 1;
        }
    }
    __syncthreads();
    const int ie = (c + BLOCK_SIZE - 1) / BLOCK_SIZE;
    csk_bits_t key[ITEMS_PER_THREAD];
    unsigned aux[ITEMS_PER_THREAD];
    unsigned carry = 0;
#pragma unroll
    for (int j = 0; j < ITEMS_PER_THREAD; ++j) {
        if (j >= ie) break;
        const int p = (warp * ie + j) * 32 + lane;
        key[j] = p < c ? csk_encode(keys_in[start + p], mask) : CSK_ALL_ONES;
        const unsigned x = csk_warp_inclusive_scan(s.aux[p]) + carry;
        carry = __shfl_sync(0xffffffffu, x, 31);
        aux[j] = x;  // inclusive count of heads up to p, this warp only
    }
    __syncthreads();  // every warp has read the heads: s.scan is free
    if (lane == 0) s.scan[warp] = carry;
    __syncthreads();
    unsigned before = 0, segs = 0;
    for (int w = 0; w < BR_WARPS; ++w) {
        const unsigned v = s.scan[w];
        if (w < warp) before += v;
        segs += v;
    }
    __syncthreads();  // s.scan is reused by the sort
#pragma unroll
    for (int j = 0; j < ITEMS_PER_THREAD; ++j) {
        if (j >= ie) break;
        const int p = (warp * ie + j) * 32 + lane;
        // Past the tile: the largest ordinal, so they stay last.
        const unsigned ordinal = p < c ? aux[j] + before - 1u : 0xFFFFu;
        aux[j] = ordinal << 16 | (unsigned)p;
    }
    const int seg_passes = segs <= 1 ? 0 : (segs - 1 <= 255u ? 1 : 2);
    br_sort<true>(&s, key, aux, CSK_KEY_BYTES + seg_passes, ie);
    for (int i = t; i < c; i += BLOCK_SIZE) {
        keys_out[start + i] = csk_decode(s.keys[i], mask);
        const unsigned a = s.aux[i];
        // LOCAL: uniform rows, no empty segment, so ordinal = row - s0.
        csk_write_value(values_out, values_in, start + i, start + (long long)(a & 0xFFFFu), mode,
                        [&] { return (s0 + (a >> 16)) * row_len; });
    }
}
#endif  // BR_AUX_SHARED

// Ragged segments too long for a block go through one global radix sort of
// their keys alone, compacted in block_radix_classify's order: long_at[0..m] are the
// compact starts of the m long segments (long_at[m] = L keys in all),
// long_start[j] long segment j's start in the key array. Compact position c
// belongs to long segment csk_segment_of(long_at, m, c) (segments.cuh).

// Ragged segments too long for block_radix_tiles, listed from the device
// offsets (no host round trip): those of step < length <= max_row in
// medium_list (for block_radix_rows), longer ones as long_start[j] (their
// start) and long_len[j] (length). Order within a list follows the atomics
// (any order serves: every listed segment is sorted on its own).
// counters[0], [1]: medium and long so far (zeroed by the caller).
extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
block_radix_classify(const long long* __restrict__ offsets, long long count, long long step,
                     long long max_row, long long* __restrict__ medium_list,
                     long long* __restrict__ long_start, long long* __restrict__ long_len,
                     unsigned* __restrict__ counters)
{
    const long long stride = (long long)gridDim.x * BLOCK_SIZE;
    for (long long s = blockIdx.x * (long long)BLOCK_SIZE + threadIdx.x; s < count; s += stride) {
        const long long lo = offsets[s], len = offsets[s + 1] - lo;
        if (len <= step) continue;
        if (len <= max_row) {
            medium_list[atomicAdd(counters, 1u)] = s;
        } else {
            const unsigned j = atomicAdd(counters + 1, 1u);
            long_start[j] = lo;
            long_len[j] = len;
        }
    }
}

// packed[c] = j << CSK_KEY_BITS | ordered word of the key, j its long
// segment's number: one stable sort of `packed` sorts each long segment on
// its own, and a key never leaves its segment's compact range. positions
// (when not null) gets c, for a sort that carries it as a value.
extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
block_radix_long_pack(const csk_bits_t* __restrict__ keys, unsigned long long* __restrict__ packed,
                      unsigned* __restrict__ positions, long long total,
                      const long long* __restrict__ long_at, const long long* __restrict__ long_start,
                      long long m, unsigned long long mask64)
{
    const long long stride = (long long)gridDim.x * BLOCK_SIZE;
    for (long long c = blockIdx.x * (long long)BLOCK_SIZE + threadIdx.x; c < total; c += stride) {
        const long long j = csk_segment_of(long_at, m, c);
        packed[c] = (unsigned long long)j << CSK_KEY_BITS |
                    (unsigned long long)csk_encode(keys[long_start[j] + (c - long_at[j])], (csk_bits_t)mask64);
        if (positions != nullptr) positions[c] = (unsigned)c;
    }
}

// The sorted compact words back to their segments: keys from the low bits
// (argsort's sort leaves the sorted words unwritten: its keys are never read);
// index[c] (the sort's 32-bit compact position of the key, when values are
// wanted) gives its position in the array, within the same segment. Values
// by mode (segments.cuh's csk_write_value): argsort positions, or the
// caller's values gathered (LOCAL, never asked here since long segments are
// ragged, would give the index in the segment).
extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
block_radix_long_unpack(const unsigned long long* __restrict__ packed,
                        const unsigned* __restrict__ index, csk_bits_t* __restrict__ keys_out,
                        const csk_value_t* __restrict__ values_in, csk_value_t* __restrict__ values_out,
                        long long total, const long long* __restrict__ long_at,
                        const long long* __restrict__ long_start, long long m,
                        unsigned long long mask64, int mode)
{
    const long long stride = (long long)gridDim.x * BLOCK_SIZE;
    for (long long c = blockIdx.x * (long long)BLOCK_SIZE + threadIdx.x; c < total; c += stride) {
        const long long j = csk_segment_of(long_at, m, c);
        const long long out = long_start[j] + (c - long_at[j]);
        keys_out[out] = csk_decode((csk_bits_t)packed[c], (csk_bits_t)mask64);
#if CSK_HAS_VALUES
        csk_write_value(values_out, values_in, out,
                        long_start[j] + ((long long)index[c] - long_at[j]), mode,
                        [&] { return long_start[j]; });
#endif
    }
    (void)index;
    (void)values_in;
    (void)values_out;
    (void)mode;
}
