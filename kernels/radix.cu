// Stable LSD radix sort (plugins/radix.py drives it), reduce-then-scan form.
//
// Tunables: DIGIT_BITS (4..8) bits per pass, BLOCK_SIZE threads (whole warps),
// ITEMS_PER_THREAD keys per thread; a tile is TILE = BLOCK_SIZE * ITEMS keys.
// Defines: OFFSET_BYTES 4 or 8 (width of the digit x block offset table;
// 8 once n reaches 2^32).
//
// Every kernel of one sort uses the same partition: G blocks, block b owns
// the contiguous tiles [b*T/G, (b+1)*T/G) of the T tiles. Per sort:
//   radix_histogram_all  one read of the input: for every pass p, block b's
//                        digit counts table[p][d*G + b] and the global digit
//                        totals
//   radix_plan           one block: from the totals, which passes are
//                        trivial (one digit holds every key) and are skipped,
//                        and each remaining pass's index among the active
//                        ones: plan[p] = -1, or index | active_count << 8.
//                        All on the device: the host never waits for it.
// then the host launches, for EVERY pass p (it does not know the plan), the
// kernels below; each reads plan[p] first and returns at once if p is
// skipped:
//   radix_upsweep        block b's digit counts of this pass -> table[p]
//                        (also returns for the first active pass: its counts
//                        are radix_histogram_all's, already in table[p])
//   radix_scan_table     exclusive scan of table[p] (digit-major): where
//                        block b's keys of digit d start in the output
//   radix_downsweep      per tile: rank keys stably inside the tile (warp-
//                        private digit counters filled in key order with
//                        peer masks of kernels/include/peers.cuh), reorder the tile by
//                        digit in shared memory, then write each digit's run
//                        to consecutive addresses (coalesced); values follow
//                        the same permutation through the same buffer.
// Keys move as ordered words (keys.cuh): the first active pass encodes on
// load (csk_encode, descending folded into the mask), the last decodes on
// store. Buffers ping-pong between keys_out and a temporary, picked from the
// plan so that the last active pass writes keys_out (passplan.cuh); if
// every pass is trivial, pass 0 still runs as a stable copy (encode +
// decode), so keys_out always gets written.
#include "keys.cuh"
#include "scan.cuh"
#include "peers.cuh"
#include "passplan.cuh"

#define RADIX (1 << DIGIT_BITS)
#define WARPS (BLOCK_SIZE / 32)
#define TILE (BLOCK_SIZE * ITEMS_PER_THREAD)
#define PASSES ((CSK_KEY_BITS + DIGIT_BITS - 1) / DIGIT_BITS)
// Digits each thread owns in the per-tile digit scan.
#define DIGITS_PER_THREAD ((RADIX + BLOCK_SIZE - 1) / BLOCK_SIZE)

#ifndef OFFSET_BYTES
#define OFFSET_BYTES 4
#endif
#if OFFSET_BYTES == 4
typedef unsigned int radix_offset_t;
#elif OFFSET_BYTES == 8
typedef unsigned long long radix_offset_t;
#else
#error "OFFSET_BYTES must be 4 or 8"
#endif

#if BLOCK_SIZE % 32 != 0
#error "BLOCK_SIZE must be a multiple of 32"
#endif
#if DIGIT_BITS < 1 || DIGIT_BITS > 8
#error "DIGIT_BITS must be 1..8"
#endif

// Tiles [first, last) of block b in a grid of G blocks over T tiles.
__device__ __forceinline__ void radix_block_tiles(long long tiles, long long& first, long long& last)
{
    const long long b = blockIdx.x, g = gridDim.x;
    first = b * tiles / g;
    last = (b + 1) * tiles / g;
}

__device__ __forceinline__ int radix_pass_bits(int shift)
{
    return min(DIGIT_BITS, CSK_KEY_BITS - shift);
}

// ------------------------------------------------------------------------ plan

// One block. Pass p is trivial when one digit's total is n (with n == 0
// every pass is). plan[p] = -1 for a trivial pass, else its index among the
// active passes | (number of active passes) << 8; if every pass is trivial,
// pass 0 still runs (a stable copy through encode/decode into keys_out).
extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
radix_plan(const unsigned long long* __restrict__ totals, long long n, int* __restrict__ plan)
{
    __shared__ int trivial[PASSES];
    for (int p = threadIdx.x; p < PASSES; p += BLOCK_SIZE) trivial[p] = 0;
    __syncthreads();
    for (int i = threadIdx.x; i < PASSES * RADIX; i += BLOCK_SIZE)
        if (totals[i] == (unsigned long long)n) trivial[i / RADIX] = 1;
    __syncthreads();
    if (threadIdx.x == 0) csk_write_plan(trivial, PASSES, plan);
}

// ------------------------------------------------------------------ histograms

// For every pass: block counts -> table[p * RADIX * G + d * G + b], and
// global totals[p * RADIX + d] (zeroed by the host first).
extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
radix_histogram_all(const csk_bits_t* __restrict__ keys, long long n, unsigned long long mask,
                    radix_offset_t* __restrict__ table, unsigned long long* __restrict__ totals)
{
    __shared__ unsigned hist[PASSES * RADIX];
    for (int i = threadIdx.x; i < PASSES * RADIX; i += BLOCK_SIZE) hist[i] = 0;
    __syncthreads();
    long long first, last;
    radix_block_tiles((n + TILE - 1) / TILE, first, last);
    const long long end = min(last * TILE, n);
    for (long long base = first * TILE; base < end; base += TILE) {
        csk_bits_t u[ITEMS_PER_THREAD];
        csk_load_striped<ITEMS_PER_THREAD, BLOCK_SIZE, true>(keys, base, end, u, (csk_bits_t)mask, 0);
#pragma unroll
        for (int r = 0; r < ITEMS_PER_THREAD; ++r) {
            if (base + r * BLOCK_SIZE + threadIdx.x < end) {
#pragma unroll
                for (int p = 0; p < PASSES; ++p)
                    atomicAdd(&hist[p * RADIX + csk_digit(u[r], p * DIGIT_BITS, radix_pass_bits(p * DIGIT_BITS))], 1u);
            }
        }
    }
    __syncthreads();
    const long long g = gridDim.x;
    for (int i = threadIdx.x; i < PASSES * RADIX; i += BLOCK_SIZE) {
        const unsigned c = hist[i];
        const int p = i / RADIX, d = i % RADIX;
        table[(long long)p * RADIX * g + (long long)d * g + blockIdx.x] = (radix_offset_t)c;
        if (c) atomicAdd(&totals[i], (unsigned long long)c);
    }
}

// Block b's digit counts of pass `pass` -> table[d * G + b] (the pass's
// slice of the table), read from the buffer the previous active pass wrote.
// Nothing to do for a skipped pass, nor for the first active pass (its
// counts came from radix_histogram_all), so it never reads keys_in.
extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
radix_upsweep(const csk_bits_t* __restrict__ keys_out, const csk_bits_t* __restrict__ keys_tmp,
              long long n, int pass, const int* __restrict__ plan,
              radix_offset_t* __restrict__ table)
{
    const csk_pass rp = csk_pass_of(plan, pass);
    if (rp.skip || rp.first) return;
    const csk_bits_t* __restrict__ keys = rp.to_out ? keys_tmp : keys_out;
    const int shift = pass * DIGIT_BITS;
    __shared__ unsigned hist[WARPS][RADIX];
    const int warp = threadIdx.x >> 5;
    for (int i = threadIdx.x; i < WARPS * RADIX; i += BLOCK_SIZE) (&hist[0][0])[i] = 0;
    __syncthreads();
    const int bits = radix_pass_bits(shift);
    long long first, last;
    radix_block_tiles((n + TILE - 1) / TILE, first, last);
    const long long end = min(last * TILE, n);
    for (long long base = first * TILE; base < end; base += TILE) {
        csk_bits_t u[ITEMS_PER_THREAD];
        csk_load_striped<ITEMS_PER_THREAD, BLOCK_SIZE, false>(keys, base, end, u, 0, 0);
#pragma unroll
        for (int r = 0; r < ITEMS_PER_THREAD; ++r)
            if (base + r * BLOCK_SIZE + threadIdx.x < end)
                atomicAdd(&hist[warp][csk_digit(u[r], shift, bits)], 1u);
    }
    __syncthreads();
    const long long g = gridDim.x;
    for (int d = threadIdx.x; d < RADIX; d += BLOCK_SIZE) {
        unsigned c = 0;
#pragma unroll
        for (int w = 0; w < WARPS; ++w) c += hist[w][d];
        table[(long long)d * g + blockIdx.x] = (radix_offset_t)c;
    }
}

// -------------------------------------------------------------------- scatter

// Dynamic shared memory of radix_downsweep, in this order (8-byte aligned):
//   gbase[RADIX]  u64   output index of tile position 0 for each digit
//   dbase[RADIX]  u64   block's next output index per digit
//   whist[WARPS][RADIX] u32   per-warp digit counters, then warp prefixes
//   tstart[RADIX] u32   tile position where each digit's run starts
//   scratch[WARPS + 2] u32   block scan
//   exchange[TILE] of max(key, value) bytes
// plugins/radix.py computes the same size (shared_bytes).
#define RADIX_EXCHANGE_BYTES (CSK_VALUE_BYTES > CSK_KEY_BYTES ? CSK_VALUE_BYTES : CSK_KEY_BYTES)
#define RADIX_HEAD_BYTES (16 * RADIX + 4 * WARPS * RADIX + 4 * RADIX + 4 * (WARPS + 2))
#define RADIX_HEAD_ALIGNED ((RADIX_HEAD_BYTES + 15) / 16 * 16)

struct RadixShared {
    unsigned long long* gbase;
    unsigned long long* dbase;
    unsigned* whist;
    unsigned* tstart;
    unsigned* scratch;
    unsigned char* exchange;
};

// Keys of one tile into registers, warp-striped: warp w takes tile positions
// [w * 32 * ITEMS, (w+1) * 32 * ITEMS), 32 consecutive keys per step, so
// (step, lane) is the key order. Past n: the largest word (largest digit,
// ranked after every real key, never written).
template <bool FULL>
__device__ __forceinline__ void radix_load_keys(csk_bits_t (&u)[ITEMS_PER_THREAD],
                                                const csk_bits_t* __restrict__ src, int first,
                                                int valid, int encode, csk_bits_t mask)
{
#pragma unroll
    for (int r = 0; r < ITEMS_PER_THREAD; ++r) {
        if (FULL || first + r * 32 < valid) {
            const csk_bits_t x = src[r * 32];
            u[r] = encode ? csk_encode(x, mask) : x;
        } else {
            u[r] = CSK_ALL_ONES;
        }
    }
}

__device__ __forceinline__ void radix_load_tile(csk_bits_t (&u)[ITEMS_PER_THREAD],
                                                const csk_bits_t* __restrict__ keys, long long base,
                                                int first, int valid, int encode, csk_bits_t mask)
{
    if (valid == TILE)
        radix_load_keys<true>(u, keys + base + first, first, valid, encode, mask);
    else
        radix_load_keys<false>(u, keys + base + first, first, valid, encode, mask);
}

#if CSK_HAS_VALUES
// The values of a tile, like its keys; `iota`: argsort's first pass, whose
// values are the input indices themselves (made here, not loaded).
__device__ __forceinline__ void radix_load_values(csk_value_t (&v)[ITEMS_PER_THREAD],
                                                  const csk_value_t* __restrict__ values,
                                                  long long base, int first, int valid, bool iota)
{
    if (iota) {
#pragma unroll
        for (int r = 0; r < ITEMS_PER_THREAD; ++r) v[r] = (csk_value_t)(base + first + r * 32);
        return;
    }
    const csk_value_t* src = values + base + first;
    if (valid == TILE) {
#pragma unroll
        for (int r = 0; r < ITEMS_PER_THREAD; ++r) v[r] = src[r * 32];
    } else {
#pragma unroll
        for (int r = 0; r < ITEMS_PER_THREAD; ++r)
            v[r] = first + r * 32 < valid ? src[r * 32] : (csk_value_t)0;
    }
}
#endif

// Occupancy floor for the register allocator (tunable MIN_RESIDENT_THREADS;
// 0: small keys-only tiles keep 1024 threads per SM resident (64 registers),
// wider payloads 512. H100: 512-thread blocks with 1024 resident threads
// beat 256 with 768 by 15-22% for 32-bit keys; for 64-bit keys or values
// 1024 spills and loses).
#if MIN_RESIDENT_THREADS > 0
#define RADIX_MIN_THREADS MIN_RESIDENT_THREADS
#else
#define RADIX_MIN_THREADS ((CSK_KEY_BYTES <= 4 && !CSK_HAS_VALUES) ? 1024 : 512)
#endif
#define RADIX_MIN_BLOCKS (RADIX_MIN_THREADS / BLOCK_SIZE > 0 ? RADIX_MIN_THREADS / BLOCK_SIZE : 1)

// Each block walks its tiles; the next tile's keys (and values) are loaded
// while the current one is being written, so load latency overlaps work.
extern "C" __global__ void __launch_bounds__(BLOCK_SIZE, RADIX_MIN_BLOCKS)
radix_downsweep(const csk_bits_t* __restrict__ keys_in, csk_bits_t* __restrict__ keys_out,
                csk_bits_t* __restrict__ keys_tmp, const csk_value_t* __restrict__ values_in,
                csk_value_t* __restrict__ values_out, csk_value_t* __restrict__ values_tmp,
                long long n, int pass, unsigned long long mask64, const int* __restrict__ plan,
                const radix_offset_t* __restrict__ offsets)
{
    const csk_pass rp = csk_pass_of(plan, pass);
    if (rp.skip) return;
    const bool encode = rp.first, decode = rp.last;
    const int shift = pass * DIGIT_BITS;
    const csk_bits_t* __restrict__ keys_src = rp.first ? keys_in : (rp.to_out ? keys_tmp : keys_out);
    csk_bits_t* __restrict__ keys_dst = rp.to_out ? keys_out : keys_tmp;
#if CSK_HAS_VALUES
    const csk_value_t* __restrict__ values_src = rp.first ? values_in : (rp.to_out ? values_tmp : values_out);
    const bool iota = values_src == nullptr;  // argsort's first pass: no values given
    csk_value_t* __restrict__ values_dst = rp.to_out ? values_out : values_tmp;
#endif

    extern __shared__ unsigned long long radix_smem[];
    RadixShared sm;
    sm.gbase = radix_smem;
    sm.dbase = sm.gbase + RADIX;
    sm.whist = (unsigned*)(sm.dbase + RADIX);
    sm.tstart = sm.whist + WARPS * RADIX;
    sm.scratch = sm.tstart + RADIX;
    sm.exchange = (unsigned char*)radix_smem + RADIX_HEAD_ALIGNED;
    csk_bits_t* exchange = (csk_bits_t*)sm.exchange;

    const long long g = gridDim.x;
    for (int d = threadIdx.x; d < RADIX; d += BLOCK_SIZE)
        sm.dbase[d] = (unsigned long long)offsets[(long long)d * g + blockIdx.x];

    const csk_bits_t mask = (csk_bits_t)mask64;
    const int bits = radix_pass_bits(shift);
    const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    const unsigned lanemask_lt = (1u << lane) - 1u;
    unsigned* my_hist = sm.whist + warp * RADIX;
    const int first = warp * 32 * ITEMS_PER_THREAD + lane;

    long long t, last;
    radix_block_tiles((n + TILE - 1) / TILE, t, last);
    if (t >= last) return;
    csk_bits_t u[ITEMS_PER_THREAD];
    radix_load_tile(u, keys_src, t * TILE, first, (int)min((long long)TILE, n - t * TILE), encode, mask);
#if CSK_HAS_VALUES
    csk_value_t v[ITEMS_PER_THREAD];
    radix_load_values(v, values_src, t * TILE, first, (int)min((long long)TILE, n - t * TILE), iota);
#endif

    for (; t < last; ++t) {
        const long long base = t * TILE;
        const int valid = (int)min((long long)TILE, n - base);
        const long long next = base + TILE;
        const int next_valid = (int)min((long long)TILE, n - next);

        // Rank inside the warp, in key order: the leader of each group of
        // equal digits bumps the warp's counter; pos[r] is first the key's
        // rank among the warp's keys of its digit, later its tile position.
        for (int d = lane; d < RADIX; d += 32) my_hist[d] = 0;
        __syncwarp();
        unsigned pos[ITEMS_PER_THREAD];
#pragma unroll
        for (int r = 0; r < ITEMS_PER_THREAD; ++r) {
            const unsigned d = csk_digit(u[r], shift, bits);
            const unsigned peers = csk_warp_peers<DIGIT_BITS>(d, r);
            const unsigned leader = 31u - __clz(peers);
            unsigned before = 0;
            if (lane == leader) before = atomicAdd(&my_hist[d], (unsigned)__popc(peers));
            before = __shfl_sync(0xffffffffu, before, leader);
            pos[r] = before + __popc(peers & lanemask_lt);
        }
        __syncthreads();

        // Per digit: warp prefixes (in place), tile counts, tile starts, and
        // gbase[d]: the output index of tile position 0 for digit d.
        {
            unsigned cnt[DIGITS_PER_THREAD];
            unsigned sum = 0;
#pragma unroll
            for (int j = 0; j < DIGITS_PER_THREAD; ++j) {
                const int d = threadIdx.x * DIGITS_PER_THREAD + j;
                unsigned running = 0;
                if (d < RADIX) {
#pragma unroll
                    for (int w = 0; w < WARPS; ++w) {
                        const unsigned c = sm.whist[w * RADIX + d];
                        sm.whist[w * RADIX + d] = running;
                        running += c;
                    }
                }
                cnt[j] = running;
                sum += running;
            }
            unsigned total;
            unsigned start = csk_block_exclusive_scan<unsigned, BLOCK_SIZE>(sum, sm.scratch, &total);
#pragma unroll
            for (int j = 0; j < DIGITS_PER_THREAD; ++j) {
                const int d = threadIdx.x * DIGITS_PER_THREAD + j;
                if (d < RADIX) {
                    sm.tstart[d] = start;
                    sm.gbase[d] = sm.dbase[d] - start;
                    sm.dbase[d] += cnt[j];
                }
                start += cnt[j];
            }
        }
        __syncthreads();

        // Reorder the tile by digit in shared memory.
#pragma unroll
        for (int r = 0; r < ITEMS_PER_THREAD; ++r) {
            const unsigned d = csk_digit(u[r], shift, bits);
            pos[r] += sm.tstart[d] + my_hist[d];
            exchange[pos[r]] = u[r];
        }
        __syncthreads();

        // Start loading the next tile's keys, then write each digit's run of
        // this tile to consecutive output addresses.
        if (t + 1 < last) radix_load_tile(u, keys_src, next, first, next_valid, encode, mask);
#if CSK_HAS_VALUES
        unsigned out_digits[(ITEMS_PER_THREAD + 3) / 4];  // 8-bit digits, packed
#pragma unroll
        for (int j = 0; j < (ITEMS_PER_THREAD + 3) / 4; ++j) out_digits[j] = 0;
#endif
#pragma unroll
        for (int r = 0; r < ITEMS_PER_THREAD; ++r) {
            const int i = r * BLOCK_SIZE + threadIdx.x;
            if (i < valid) {
                const csk_bits_t w = exchange[i];
                const unsigned d = csk_digit(w, shift, bits);
                keys_dst[sm.gbase[d] + i] = decode ? csk_decode(w, mask) : w;
#if CSK_HAS_VALUES
                out_digits[r / 4] |= d << (8 * (r % 4));
#endif
            }
        }
#if CSK_HAS_VALUES
        // Values take the same permutation through the same buffer.
        csk_value_t* vexchange = (csk_value_t*)sm.exchange;
        __syncthreads();
#pragma unroll
        for (int r = 0; r < ITEMS_PER_THREAD; ++r) vexchange[pos[r]] = v[r];
        __syncthreads();
        if (t + 1 < last) radix_load_values(v, values_src, next, first, next_valid, iota);
#pragma unroll
        for (int r = 0; r < ITEMS_PER_THREAD; ++r) {
            const int i = r * BLOCK_SIZE + threadIdx.x;
            const unsigned d = (out_digits[r / 4] >> (8 * (r % 4))) & 0xFFu;
            if (i < valid) values_dst[sm.gbase[d] + i] = vexchange[i];
        }
#endif
        __syncthreads();
    }
}

// ------------------------------------------------------------------ table scan

// offsets[d * G + b] = (keys of digits < d) + (keys of digit d in blocks < b),
// in place over block counts `table` of one pass; `totals` are the pass's
// global digit counts (from radix_histogram_all). One block per digit: its
// row of G block counts is contiguous. Uses the shared block scan (scan.cuh).
// Returns at once if plan[pass] skips the pass.
extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
radix_scan_table(radix_offset_t* __restrict__ table, const unsigned long long* __restrict__ totals,
                 int g, int pass, const int* __restrict__ plan)
{
    if (plan[pass] < 0) return;
    __shared__ unsigned long long scratch[WARPS + 2];
    const int d = blockIdx.x;
    // Digit start: sum of totals[0 .. d).
    unsigned long long mine = 0;
    for (int k = threadIdx.x; k < d; k += BLOCK_SIZE) mine += totals[k];
    unsigned long long digit_start;
    csk_block_exclusive_scan<unsigned long long, BLOCK_SIZE>(mine, scratch, &digit_start);
    // Row scan, BLOCK_SIZE counts at a time.
    radix_offset_t* row = table + (long long)d * g;
    unsigned long long carry = digit_start;
    for (int b0 = 0; b0 < g; b0 += BLOCK_SIZE) {
        const int b = b0 + threadIdx.x;
        const unsigned long long c = b < g ? (unsigned long long)row[b] : 0ull;
        unsigned long long chunk;
        const unsigned long long before = csk_block_exclusive_scan<unsigned long long, BLOCK_SIZE>(c, scratch, &chunk);
        if (b < g) row[b] = (radix_offset_t)(carry + before);
        carry += chunk;
    }
}
