// Single-pass ("onesweep") LSD radix sort: one up-front histogram of every
// digit, then one launch per digit that reads and writes every key once,
// with a chained scan over tiles (decoupled look-back) for global offsets.
// Included by onesweep.cu (the onesweep plugin) and counting.cu (the counting
// plugin's pairs and argsort).
//
// The sorted word of key x is csk_encode(x, mask) - base (keys.cuh), at most
// `limit`, and only the passes over limit's bits run: onesweep passes base 0
// and the largest word; counting passes the smallest ordered key as base and
// its largest bin, so a range of 2^8 values is one pass whatever the key width.
//
// Macros: BLOCK_SIZE threads (whole warps), ITEMS_PER_THREAD keys per thread,
// RADIX_BITS bits per digit (up to 11: 3 passes for 32-bit keys, 11/11/10,
// and 6 for 64-bit keys; the top pass gets the bits left over), WARP_MATCH
// (peers.cuh), EARLY_COUNTS, UNORDERED_FIRST, UNORDERED_LATER, LOOKBACK_WINDOW
// (1 if undefined), VALUE_CARRY (bytes a value takes between passes and in
// shared memory: 4 or 8, at most CSK_VALUE_BYTES; CSK_VALUE_BYTES if
// undefined). A thread owns
// OS_DIGITS_PER_THREAD digits (more than one when there are more digits than
// threads).
// Define WIDE_STATUS=1 (the drivers do, for n >= 2^30) for 64-bit tile status
// words.
//
// Kernels, in launch order (cudasortkit/sdk/sweep.py drives them, for
// plugins/onesweep.py and plugins/msd_local.py):
//   onesweep_histogram  counts of every digit of every sorted pass; its last
//                       block then plans the passes: exclusive digit
//                       offsets; which passes are trivial (one digit holds
//                       every key, or above limit's bits) and are skipped;
//                       which buffer each remaining pass reads and writes
//   onesweep_pass       one digit: tile id from an atomic counter, ranking by
//                       warp-level multisplit (peers.cuh) in shared memory,
//                       status publish + look-back, staged scatter
//   onesweep_pass_persistent  (with PERSISTENT_PASS) the same pass on any
//                       grid, each block taking tile ids until they run out
//
// Forward progress of the look-back: a tile only ever waits on tiles with a
// smaller id, and it publishes its own per-digit aggregate before waiting on
// anything. Tile ids come from an atomic counter taken by a block once it is
// running, so every smaller id belongs to a block that is already resident
// (or finished); such a block publishes its aggregate without waiting, hence
// every flag a tile spins on is set in bounded time. With blockIdx.x as the
// tile id this would not hold: the hardware may schedule block 900 while
// block 10 is not yet resident, and if every resident block spins on a
// non-resident one the grid deadlocks.
#include "keys.cuh"
#include "scan.cuh"
#include "peers.cuh"
#include "passplan.cuh"
#include "overlap.cuh"

#ifndef WIDE_STATUS
#define WIDE_STATUS 0
#endif
#ifndef EARLY_COUNTS
#define EARLY_COUNTS 0
#endif
// PERSISTENT_PASS=1 also defines onesweep_pass_persistent (msd_local.cu).
#ifndef PERSISTENT_PASS
#define PERSISTENT_PASS 0
#endif
// Whether a pass stores its keys and carried values under an L2 evict-last
// policy (os_store_kept).
#ifndef EVICT_LAST
#define EVICT_LAST 0
#endif
// UNORDERED_FIRST 1: keys alone, the first active pass ranks a digit's keys
// in whatever order shared atomics hand out positions. The pass reads the
// caller's order, which the sorted keys do not depend on (equal words are
// alike); later passes must keep the order the earlier ones made, and rank
// stably. Values and indices would show the order: never with CSK_HAS_VALUES.
#ifndef UNORDERED_FIRST
#define UNORDERED_FIRST 0
#endif
// UNORDERED_LATER 1: keys alone, a later pass also ranks in any order each
// whole warp whose keys agree on every bit below the pass's digit. A pass
// reads keys sorted by those bits (the passes before it sorted them), so
// the warp's first and last keys agreeing means all of its keys do; keys
// alike below the digit and alike in it differ, if at all, only above it,
// where the later passes order them: their order among themselves is not
// seen. Never with CSK_HAS_VALUES, as UNORDERED_FIRST.
#ifndef UNORDERED_LATER
#define UNORDERED_LATER 0
#endif
// Where a digit holds more than OS_CROWDED of a tile's keys, the tile ranks
// in order all the same (UNORDERED_FIRST, UNORDERED_LATER): the atomics of
// one digit's keys in a warp queue behind each other.
#define OS_CROWDED (TILE / OS_CROWDED_SHARE)
#ifndef OS_CROWDED_SHARE
#define OS_CROWDED_SHARE 8
#endif
// Whether a tile loads all its values into registers (whole warps without
// bounds tests) before it stages them; else each value is loaded and staged
// in turn under its own bounds test.
#ifndef BATCH_VALUES
#define BATCH_VALUES 0
#endif
// Predecessors' status words a digit's look-back loads at once (os_look_back).
#ifndef LOOKBACK_WINDOW
#define LOOKBACK_WINDOW 1
#endif
// A value between passes: the caller's value, or a 32-bit position that the
// last pass turns into the caller's index or value (os_store_value).
#ifndef VALUE_CARRY
#define VALUE_CARRY CSK_VALUE_BYTES
#endif
#if VALUE_CARRY == 8
typedef unsigned long long os_carry_t;
#else
typedef unsigned os_carry_t;
#endif
#if CSK_HAS_VALUES && ((VALUE_CARRY != 4 && VALUE_CARRY != 8) || VALUE_CARRY > CSK_VALUE_BYTES)
#error "VALUE_CARRY is 4 or 8 bytes, at most the values' own width"
#endif

#define RADIX_DIGITS (1 << RADIX_BITS)
#define PASSES ((CSK_KEY_BITS + RADIX_BITS - 1) / RADIX_BITS)
#define WARPS (BLOCK_SIZE / 32)
#define WARP_ITEMS (32 * ITEMS_PER_THREAD)
#define TILE (BLOCK_SIZE * ITEMS_PER_THREAD)
// Per-warp digit counters: 32-bit for digits of up to 8 bits; for wider
// digits 16-bit, two digits to a 32-bit word (OS_PACK), so that 2048 counters
// a warp still leave room for two blocks an SM (counts and tile positions
// stay below TILE < 2^16, so packed sums never carry). Thread t owns the
// words j * BLOCK_SIZE + t (j < OS_WORDS_PER_THREAD), i.e. digits
// OS_PACK * w + h of each: conflict-free shared accesses. Inside a tile the
// digits' runs follow that ownership order (thread, then j, then h), which
// is digit order when every thread owns at most one digit; otherwise each
// digit still gets one contiguous run, which is all the scatter needs.
#define OS_PACK (RADIX_BITS > 8 ? 2 : 1)
#define OS_LANE_BITS (32 / OS_PACK)
#define OS_LANE_MASK (OS_PACK == 2 ? 0xffffu : 0xffffffffu)
#if RADIX_BITS > 8
typedef unsigned short os_counter_t;
#else
typedef unsigned os_counter_t;
#endif
#define OS_WORDS (RADIX_DIGITS / OS_PACK)
#define OS_WORDS_PER_THREAD ((OS_WORDS + BLOCK_SIZE - 1) / BLOCK_SIZE)
#define OS_DIGITS_PER_THREAD (OS_PACK * OS_WORDS_PER_THREAD)
// Status words a look-back round loads per digit: LOOKBACK_WINDOW where a
// thread owns one digit; a thread owning several walks them back side by
// side, their loads in flight together already, one word a digit a round.
#define OS_LOOKBACK (OS_DIGITS_PER_THREAD == 1 ? LOOKBACK_WINDOW : 1)
// With one word a thread the runs are in digit order, so the keys past n
// (the largest word, ranked after every real key of its digit, not counted)
// land at tile positions tile_n .. TILE - 1, past every real key: they may
// be staged unconditionally (never scattered). Otherwise they are not staged.
#define OS_RUNS_IN_DIGIT_ORDER (OS_WORDS_PER_THREAD == 1)
#define HIST_ITEMS 8
// Threads of a histogram block (cudasortkit/sdk/sweep.py mirrors it): two
// 1024-thread blocks fill an SM's threads, registers and 128 KiB of shared
// memory.
#define HIST_BLOCK 1024
// The histogram's shared counters: 16-bit, two passes to a 32-bit word (pass
// p in half p & 1 of pair p / 2), HIST_COPIES copies of each: thread t adds
// to copy t & (HIST_COPIES - 1), word (pair * RADIX_DIGITS + digit) *
// HIST_COPIES + copy. With 32 copies each lane of a warp adds in its own
// bank whatever the digits (skewed ones too: the top byte of floats in [0, 1)
// takes two values), so the shared atomics never serialize. They live in
// HIST_SHARED_BYTES of dynamic shared memory (cudasortkit/sdk/sweep.py launches
// with that many, and defines less on a device that cannot give a block
// 64 KiB); a block flushes its counts to the global histogram every
// HIST_ROUND steps, before any 16-bit count could overflow.
#ifndef HIST_SHARED_BYTES
#define HIST_SHARED_BYTES 65536
#endif
#define HIST_PAIRS ((PASSES + 1) / 2)
#define HIST_COPIES_FIT (HIST_SHARED_BYTES / 4 / (HIST_PAIRS * RADIX_DIGITS))
#define HIST_COPIES (HIST_COPIES_FIT >= 32 ? 32 : HIST_COPIES_FIT >= 16 ? 16 : HIST_COPIES_FIT >= 8 ? 8 \
                     : HIST_COPIES_FIT >= 4 ? 4 : HIST_COPIES_FIT >= 2 ? 2 : 1)
// A step adds at most HIST_ITEMS keys per thread, HIST_BLOCK / HIST_COPIES
// threads to a copy.
#define HIST_ROUND (65535 / (HIST_ITEMS * (HIST_BLOCK / HIST_COPIES)))
#if HIST_COPIES_FIT < 1 || HIST_ROUND < 1
#error "the histogram's counters do not fit HIST_SHARED_BYTES"
#endif
// Registers: the pass asks for MIN_BLOCKS resident blocks per SM where the
// plugin sets it above 0, else for at least 768 resident threads (85
// registers).
#if defined(MIN_BLOCKS) && MIN_BLOCKS > 0
#define OS_MIN_BLOCKS MIN_BLOCKS
#else
#define OS_MIN_BLOCKS ((768 / BLOCK_SIZE) > 0 ? (768 / BLOCK_SIZE) : 1)
#endif

#if BLOCK_SIZE % 32 != 0 || RADIX_BITS < 2 || RADIX_BITS > 11 || TILE >= 65536
#error "onesweep needs whole warps, 2..11-bit digits and a tile of fewer than 2^16 keys"
#endif

// ---------------------------------------------------------------- tile status
// One word per (tile, digit): 2 flag bits on top, the count below, written and
// read as a whole (one 32/64-bit relaxed access), so flag and count can never
// be seen apart and no fence is needed between them.
#if WIDE_STATUS
typedef unsigned long long os_status_t;
#else
typedef unsigned int os_status_t;
#endif
#define OS_STATUS_BITS (8 * (int)sizeof(os_status_t))
#define OS_FLAG_AGGREGATE ((os_status_t)1 << (OS_STATUS_BITS - 2))
#define OS_FLAG_PREFIX ((os_status_t)2 << (OS_STATUS_BITS - 2))
#define OS_FLAGS (OS_FLAG_AGGREGATE | OS_FLAG_PREFIX)
#define OS_COUNT_MASK (OS_FLAG_AGGREGATE - 1)

__device__ __forceinline__ unsigned os_load_relaxed(const unsigned* p)
{
    unsigned v;
    asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ unsigned long long os_load_relaxed(const unsigned long long* p)
{
    unsigned long long v;
    asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ void os_store_relaxed(unsigned* p, unsigned v)
{
    asm volatile("st.relaxed.gpu.global.u32 [%0], %1;" :: "l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ void os_store_relaxed(unsigned long long* p, unsigned long long v)
{
    asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" :: "l"(p), "l"(v) : "memory");
}

// The digit at bit `shift` of a sorted word. 8-bit digits of words up to 32
// bits are bytes: one PRMT (byte shift / 8 of w, zeros above) instead of a
// shift and a mask.
__device__ __forceinline__ unsigned os_digit(csk_bits_t w, int shift)
{
#if RADIX_BITS == 8 && CSK_KEY_BYTES <= 4
    return __byte_perm((unsigned)w, 0u, 0x4440u | (unsigned)(shift >> 3));
#else
    return csk_digit(w, shift, RADIX_BITS);
#endif
}

// os_digit at a shift known at compile time (the histogram's unrolled
// passes): 8-bit digits of 64-bit words are one PRMT of the right half too
// (with a runtime shift, picking the half costs what it saves).
__device__ __forceinline__ unsigned os_digit_fixed(csk_bits_t w, int shift)
{
#if RADIX_BITS == 8 && CSK_KEY_BYTES == 8
    return __byte_perm((unsigned)(w >> (shift & 32)), 0u, 0x4440u | (unsigned)((shift >> 3) & 3));
#else
    return os_digit(w, shift);
#endif
}

// ------------------------------------------------------------------ histogram
// Passes that hold a bit of a sorted word <= limit (at least one).
__device__ __forceinline__ int os_passes_used(unsigned long long limit)
{
    const int bits = 64 - __clzll(limit);
    const int used = (bits + RADIX_BITS - 1) / RADIX_BITS;
    return used < 1 ? 1 : (used < PASSES ? used : PASSES);
}

// *at += v for a shared word at byte address `at` (no result: RED).
__device__ __forceinline__ void os_shared_add(unsigned at, unsigned v)
{
    asm volatile("red.shared.add.u32 [%0], %1;" :: "r"(at), "r"(v) : "memory");
}

// A pass's store of what the next pass reads (keys, and the values carried
// between passes). With EVICT_LAST, 4- and 8-byte words go under an L2
// evict-last policy: the L2 then holds what a pass writes (the next pass's
// input, and the sectors a tile writes part of, which the tile beside it
// completes) ahead of what it reads once. Past the L2's size that made
// 4-byte sorts 3-5% faster on an H100; within it, up to 20% slower (the
// evict-last lines crowd out the status words and keys still to be read):
// plugins/onesweep.py's size_config turns it on past EVICT_LAST_ABOVE keys.
// Narrower words, and devices before sm_80 (the cache-hint forms need it),
// store plainly.
template <typename T>
__device__ __forceinline__ void os_store_kept(T* at, T v) { *at = v; }

__device__ __forceinline__ void os_store_kept(unsigned* at, unsigned v)
{
#if EVICT_LAST && __CUDA_ARCH__ >= 800
    unsigned long long policy;
    asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
    asm volatile("st.global.L2::cache_hint.b32 [%0], %1, %2;" :: "l"(at), "r"(v), "l"(policy) : "memory");
#else
    *at = v;
#endif
}

__device__ __forceinline__ void os_store_kept(unsigned long long* at, unsigned long long v)
{
#if EVICT_LAST && __CUDA_ARCH__ >= 800
    unsigned long long policy;
    asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
    asm volatile("st.global.L2::cache_hint.b64 [%0], %1, %2;" :: "l"(at), "l"(v), "l"(policy) : "memory");
#else
    *at = v;
#endif
}

__device__ __forceinline__ void os_store_key(csk_bits_t* at, csk_bits_t v) { os_store_kept(at, v); }

// Counts the digits of ITEMS sorted words w[] of one thread in its copy of
// the counters (HIST_COPIES), which starts at shared byte address `mine`,
// passes below `used`. Passes outermost: one branch a pass, not one a key.
// Byte addresses in a register make each count one LEA and one shared atomic
// (the compiler's index arithmetic took three instructions).
template <int ITEMS>
__device__ __forceinline__ void os_count_words(unsigned mine, const csk_bits_t (&w)[ITEMS], int used)
{
#pragma unroll
    for (int p = 0; p < PASSES; ++p)
        if (p < used) {
#pragma unroll
            for (int j = 0; j < ITEMS; ++j) {
                const unsigned digit = os_digit_fixed(w[j], p * RADIX_BITS);
                os_shared_add(mine + 4u * HIST_COPIES * ((p >> 1) * RADIX_DIGITS + digit), 1u << (16 * (p & 1)));
            }
        }
}

// Adds the block's counts to hist and, if `again`, zeroes them for the next
// round. Thread i sums the copies of counter i in the order (c + r) mod
// HIST_COPIES, r telling apart the lanes of a warp whose counters share
// banks: each load of a warp hits 32 distinct banks.
__device__ __forceinline__ void os_hist_flush(unsigned* counts, unsigned long long* __restrict__ hist,
                                              int used, bool again)
{
    __syncthreads();
    for (int i = threadIdx.x; i < used * RADIX_DIGITS; i += HIST_BLOCK) {
        const int p = i / RADIX_DIGITS;
        const unsigned* copies = counts + ((p >> 1) * RADIX_DIGITS + i % RADIX_DIGITS) * HIST_COPIES;
        const int r = i / (32 / HIST_COPIES);
        unsigned sum = 0;
#pragma unroll
        for (int c = 0; c < HIST_COPIES; ++c)
            sum += copies[(c + r) & (HIST_COPIES - 1)] >> (16 * (p & 1)) & 0xffffu;
        if (sum) atomicAdd(&hist[i], (unsigned long long)sum);
    }
    if (again) {
        __syncthreads();
        for (int i = threadIdx.x; i < (used + 1) / 2 * RADIX_DIGITS * HIST_COPIES; i += HIST_BLOCK) counts[i] = 0;
        __syncthreads();
    }
}

// ----------------------------------------------------------------------- plan
// Called by a whole block of THREADS threads: offsets[pass * RADIX_DIGITS +
// d] = keys with a smaller digit d in that pass, and trivial[pass] = 1 (a
// __shared__ array of PASSES) for a pass that one digit holds every key of,
// or above limit's bits. trivial[] is complete after the block's next
// __syncthreads(). hist is read through L2 (ld.cg): in onesweep_histogram
// other blocks have just added to it.
template <int THREADS>
__device__ __forceinline__ void os_plan_offsets(const unsigned long long* hist, csk_index_t n,
                                                unsigned long long limit,
                                                unsigned long long* __restrict__ offsets, int* trivial)
{
    // Thread t scans the consecutive digits t * PLAN_DIGITS ...
    enum { PLAN_DIGITS = (RADIX_DIGITS + THREADS - 1) / THREADS };
    __shared__ unsigned long long warp_sums[THREADS / 32 + 1];
    const int used = os_passes_used(limit);
    if (threadIdx.x < PASSES) trivial[threadIdx.x] = threadIdx.x >= used;
    __syncthreads();
    const int first = threadIdx.x * PLAN_DIGITS;
    for (int p = 0; p < used; ++p) {
        unsigned long long c[PLAN_DIGITS], mine = 0;
#pragma unroll
        for (int k = 0; k < PLAN_DIGITS; ++k) {
            c[k] = first + k < RADIX_DIGITS ? __ldcg(hist + p * RADIX_DIGITS + first + k) : 0ull;
            mine += c[k];
        }
        unsigned long long total;
        unsigned long long before =
            csk_block_exclusive_scan<unsigned long long, THREADS>(mine, warp_sums, &total);
#pragma unroll
        for (int k = 0; k < PLAN_DIGITS; ++k) {
            if (first + k < RADIX_DIGITS) {
                offsets[p * RADIX_DIGITS + first + k] = before;
                if (c[k] == (unsigned long long)n) trivial[p] = 1;
            }
            before += c[k];
        }
    }
}

// hist[pass * RADIX_DIGITS + digit] += count (64-bit, zeroed by the caller),
// for the passes below os_passes_used(limit). A key whose sorted word is
// above limit (outside the caller's promised range) sets *bad. Launched with
// HIST_SHARED_BYTES of dynamic shared memory, HIST_BLOCK threads a block; any
// grid (each block loops).
// With `done` (a zeroed word; null: no plan) the last block to finish also
// writes the passes' plan, which saves a launch: offsets as os_plan_offsets;
// plan[pass]: -1 if skipped (trivial, or above limit's bits), else index |
// (active passes << 8). If every pass is trivial (all keys equal) pass 0
// still runs, as a stable copy that also canonicalises NaN and -0.0 like
// every other result.
extern "C" __global__ void CSK_OVERLAPPED __launch_bounds__(HIST_BLOCK)
onesweep_histogram(const csk_bits_t* __restrict__ keys, csk_index_t n, unsigned long long mask,
                   unsigned long long base, unsigned long long limit, unsigned long long* __restrict__ hist,
                   unsigned* __restrict__ bad, unsigned* __restrict__ done,
                   unsigned long long* __restrict__ offsets, int* __restrict__ plan)
{
    extern __shared__ unsigned os_hist_smem[];
    unsigned* counts = os_hist_smem;
    const int used = os_passes_used(limit);
    csk_wait_prior_grid();  // overlapped (overlap.cuh): before any global access
    for (int i = threadIdx.x; i < (used + 1) / 2 * RADIX_DIGITS * HIST_COPIES; i += HIST_BLOCK) counts[i] = 0;
    __syncthreads();
    const unsigned mine = (unsigned)__cvta_generic_to_shared(counts + (threadIdx.x & (HIST_COPIES - 1)));
    const csk_bits_t kmask = (csk_bits_t)mask, kbase = (csk_bits_t)base;
    const bool check = limit < (unsigned long long)CSK_ALL_ONES;
    csk_bits_t largest = 0;  // of the block's sorted words: above limit iff some key is bad
    const csk_index_t chunk = (csk_index_t)HIST_BLOCK * HIST_ITEMS;
    csk_index_t start = (csk_index_t)blockIdx.x * chunk;
    int steps = 0;  // since the last flush (the same in every thread of the block)
    // Whole chunks: no bounds checks, loads at constant offsets.
    for (; start + chunk <= n; start += (csk_index_t)gridDim.x * chunk) {
        if (steps == HIST_ROUND) {
            os_hist_flush(counts, hist, used, true);
            steps = 0;
        }
        const csk_bits_t* at = keys + start + threadIdx.x;
        csk_bits_t w[HIST_ITEMS];
#pragma unroll
        for (int j = 0; j < HIST_ITEMS; ++j) w[j] = at[j * HIST_BLOCK];
#pragma unroll
        for (int j = 0; j < HIST_ITEMS; ++j) w[j] = (csk_bits_t)(csk_encode(w[j], kmask) - kbase);
        if (check) {
#pragma unroll
            for (int j = 0; j < HIST_ITEMS; ++j) largest = w[j] > largest ? w[j] : largest;
        }
        os_count_words(mine, w, used);
        ++steps;
    }
    // The one partial chunk (of the block that reaches it): key by key, at
    // most HIST_ITEMS a thread, so one step.
    if (start < n) {
        if (steps == HIST_ROUND) os_hist_flush(counts, hist, used, true);
        for (csk_index_t i = start + threadIdx.x; i < n; i += HIST_BLOCK) {
            const csk_bits_t w[1] = {(csk_bits_t)(csk_encode(keys[i], kmask) - kbase)};
            largest = w[0] > largest ? w[0] : largest;
            os_count_words(mine, w, used);
        }
    }
    if (check && (unsigned long long)largest > limit) atomicOr(bad, 1u);
    os_hist_flush(counts, hist, used, false);
    if (done == nullptr) return;
    // Last block done: every block's adds to hist are visible once its
    // threads fenced them before it counted itself done.
    __shared__ bool os_last;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) os_last = atomicAdd(done, 1u) == gridDim.x - 1;
    __syncthreads();
    if (!os_last) return;
    __threadfence();
    __shared__ int trivial[PASSES];
    os_plan_offsets<HIST_BLOCK>(hist, n, limit, offsets, trivial);
    __syncthreads();
    if (threadIdx.x == 0) csk_write_plan(trivial, PASSES, plan);
}

// ----------------------------------------------------------------------- pass
// Dynamic shared memory layout (bytes; plugins/onesweep.py mirrors it):
//   values staging  TILE * VALUE_CARRY   (8-byte aligned, first; none without values)
//   adjust          RADIX_DIGITS * 8      global index - tile position, per digit
//                                         (an os_pos_t: 4 of the 8 bytes used
//                                         unless WIDE_STATUS)
//   keys staging    TILE * CSK_KEY_BYTES  (rounded up to 8)
//   warp counters   WARPS * OS_WORDS * 4  (OS_PACK counters a word)
//   scan scratch    (WARPS + 1) * 4, then the tile id (4)
#define OS_ALIGN8(x) (((x) + 7) / 8 * 8)
// Global key positions of the scatter: 32-bit unless WIDE_STATUS (the
// driver sets it for n >= 2^30), so a position is one add and its address
// one IMAD.WIDE; adjust[] wraps mod 2^32 but adjust + i never does.
#if WIDE_STATUS
typedef csk_index_t os_pos_t;
#else
typedef unsigned os_pos_t;
#endif
#define OS_VALUES_BYTES (CSK_HAS_VALUES ? OS_ALIGN8(TILE * VALUE_CARRY) : 0)
#define OS_KEYS_BYTES OS_ALIGN8(TILE * CSK_KEY_BYTES)

// n more keys of digit d in a warp's counters at shared byte address
// `words` (OS_PACK counters a word; n may be negative, mod 2^32: the word's
// sum stays exact whatever order the adds come in).
__device__ __forceinline__ void os_count_digit(unsigned words, unsigned d, unsigned n)
{
    os_shared_add(words + 4u * (d / OS_PACK), n << (OS_LANE_BITS * (d % OS_PACK)));
}

// Keys past n out of a warp's counts (every digit's run must hold real keys
// only: the runs need not be in digit order, see OS_WORDS). They are the
// largest word, so all of one digit: lane 0 takes them off at once instead
// of every key being tested.
__device__ __forceinline__ void os_uncount_past_n(unsigned words, int shift, int warp_keys, int lane)
{
    const int past = WARP_ITEMS - (warp_keys > 0 ? warp_keys : 0);
    if (lane == 0 && past > 0) os_count_digit(words, os_digit(CSK_ALL_ONES, shift), 0u - (unsigned)past);
}

// Warp-level multisplit ranking of one item per lane: lanes with the same
// digit find each other (peers.cuh); the highest of them bumps the warp's
// counter for that digit. Returns the counter's old value plus the number of
// peers in lower lanes. Called by all 32 lanes, every lane holding a key
// (past n: the largest word, see onesweep_pass).
__device__ __forceinline__ unsigned os_rank_item(os_counter_t* my_counts, csk_bits_t key, int shift,
                                                 int lane, int item)
{
    const unsigned d = os_digit(key, shift);
    const unsigned peers = csk_warp_peers<RADIX_BITS>(d, item);
    const int leader = 31 - __clz(peers);
    const unsigned below = __popc(peers & ((1u << lane) - 1u));  // peers in lower lanes
    // Only the leader's `before` is read (shuffled); the others keep d, whose
    // register is free by then (a zero would cost a MOV a key). The leader is
    // the highest peer: below + 1 peers in all.
    unsigned before = d;
    if (lane == leader) {
        before = my_counts[d];
        my_counts[d] = (os_counter_t)(before + below + 1u);
    }
    const unsigned rank = __shfl_sync(0xffffffffu, before, leader) + below;
    __syncwarp();
    return rank;
}

// Digit k (< OS_DIGITS_PER_THREAD) of thread t: counter k % OS_PACK of word
// (k / OS_PACK) * BLOCK_SIZE + t; digits >= RADIX_DIGITS are not owned.
__device__ __forceinline__ int os_owned_digit(int k)
{
    return OS_PACK * ((k / OS_PACK) * BLOCK_SIZE + (int)threadIdx.x) + k % OS_PACK;
}

// Counter h of a word of OS_PACK counters.
__device__ __forceinline__ unsigned os_lane(unsigned word, int h)
{
    return (word >> (OS_LANE_BITS * h)) & OS_LANE_MASK;
}

// A tile position for a key of digit d from the warp's counters `words`
// (already tile positions: early counts): the counter's old value, bumped
// by one atomically, in no particular order among the warp's keys of d
// (UNORDERED_FIRST).
__device__ __forceinline__ unsigned os_rank_unordered(unsigned* words, unsigned d)
{
    return os_lane(atomicAdd(words + d / OS_PACK, 1u << (OS_LANE_BITS * (d % OS_PACK))),
                   d % OS_PACK);
}

// Whether this warp's keys may be ranked in any order in this pass: never
// with values (CSK_HAS_VALUES: they would show the order); else the first
// active pass under UNORDERED_FIRST, and a later one under UNORDERED_LATER
// where the warp is whole and its first key (item 0 of lane 0) and last key
// (the last item of lane 31) agree on every bit below `shift`. The same
// answer in every lane.
__device__ __forceinline__ bool os_any_order(const csk_bits_t (&key)[ITEMS_PER_THREAD], bool first,
                                             bool whole_warp, int shift)
{
    if (CSK_HAS_VALUES) return false;
    if (first) return UNORDERED_FIRST;
#if UNORDERED_LATER
    if (!whole_warp) return false;
    const unsigned long long head = __shfl_sync(0xffffffffu, (unsigned long long)key[0], 0);
    const unsigned long long tail =
        __shfl_sync(0xffffffffu, (unsigned long long)key[ITEMS_PER_THREAD - 1], 31);
    return ((head ^ tail) & ((1ull << shift) - 1)) == 0;
#else
    (void)key, (void)whole_warp, (void)shift;
    return false;
#endif
}

// From each warp's digit counts (warp_words[w][word], OS_PACK counts a
// word): publish the tile's per-digit count (flag AGGREGATE, or PREFIX for
// tile 0) so that successors can look back past this tile, and turn each
// counter into the tile position of warp w's first key of that digit.
// counts[j] / starts[j]: the tile's count and first tile position of the
// digits of the thread's word j, packed like the counters. Called by
// all threads; ends synchronized. Returns whether a digit holds more than
// OS_CROWDED of the tile's keys (the same answer in every thread).
__device__ __forceinline__ bool os_publish_counts(unsigned* warp_words, unsigned* scan_scratch,
                                                  os_status_t* my_status, unsigned tile,
                                                  unsigned (&counts)[OS_WORDS_PER_THREAD],
                                                  unsigned (&starts)[OS_WORDS_PER_THREAD])
{
    const int t = threadIdx.x;
    unsigned mine = 0;  // keys of the thread's digits, in ownership order
    bool crowded = false;
#pragma unroll
    for (int j = 0; j < OS_WORDS_PER_THREAD; ++j) {
        const int word = j * BLOCK_SIZE + t;
        unsigned packed = 0;  // each counter < TILE: sums never carry
        if (word < OS_WORDS) {
#pragma unroll
            for (int w = 0; w < WARPS; ++w) {
                const unsigned c = warp_words[w * OS_WORDS + word];
                warp_words[w * OS_WORDS + word] = packed;
                packed += c;
            }
#pragma unroll
            for (int h = 0; h < OS_PACK; ++h)
                os_store_relaxed(&my_status[(csk_index_t)tile * RADIX_DIGITS + OS_PACK * word + h],
                                 (tile == 0 ? OS_FLAG_PREFIX : OS_FLAG_AGGREGATE) | (os_status_t)os_lane(packed, h));
        }
        counts[j] = packed;
        starts[j] = 0;
#pragma unroll
        for (int h = 0; h < OS_PACK; ++h) {
            starts[j] |= mine << (OS_LANE_BITS * h);
            mine += os_lane(packed, h);
            crowded |= os_lane(packed, h) > OS_CROWDED;
        }
    }
    unsigned tile_keys;
    const unsigned before = csk_block_exclusive_scan<unsigned, BLOCK_SIZE>(mine, scan_scratch, &tile_keys);
#pragma unroll
    for (int j = 0; j < OS_WORDS_PER_THREAD; ++j) {
        const int word = j * BLOCK_SIZE + t;
        starts[j] += OS_PACK == 2 ? before | (before << 16) : before;
        if (word < OS_WORDS) {
#pragma unroll
            for (int w = 0; w < WARPS; ++w) warp_words[w * OS_WORDS + word] += starts[j];
        }
    }
    return __syncthreads_or(crowded);
}

// Decoupled look-back for each owned digit: add the predecessors' counts,
// walking back over aggregates until an inclusive prefix; publish our own
// inclusive prefix; adjust[d] = global index of the tile's first key of
// digit d minus its tile position. A thread's digits walk back side by side
// (all their status loads in flight at once), OS_LOOKBACK words a digit a
// round: where a pass's tiles all run at once they publish their counts
// together, and a tile walks back over many before it meets a prefix, one
// dependent load a step unless several are loaded at once. Prefixes fit a
// status word's count (the driver picks WIDE_STATUS), so they are summed in
// one.
__device__ __forceinline__ void os_look_back(os_status_t* my_status, const unsigned long long* offsets,
                                             os_pos_t* adjust, int pass, unsigned tile,
                                             const unsigned (&counts)[OS_WORDS_PER_THREAD],
                                             const unsigned (&starts)[OS_WORDS_PER_THREAD])
{
    os_status_t before[OS_DIGITS_PER_THREAD];
    unsigned back[OS_DIGITS_PER_THREAD];
    unsigned open = 0;  // bit k: digit k still walks back
#pragma unroll
    for (int k = 0; k < OS_DIGITS_PER_THREAD; ++k) {
        before[k] = 0;
        back[k] = tile - 1;
        if (tile > 0 && os_owned_digit(k) < RADIX_DIGITS) open |= 1u << k;
    }
    // Each round loads OS_LOOKBACK consecutive predecessors of each open
    // digit at once (back[k], back[k] - 1, ...; none below tile 0, whose word
    // is a prefix), then takes them nearest first up to the first word not
    // yet published (polled again next round) or a prefix (done).
    while (open) {
        os_status_t s[OS_DIGITS_PER_THREAD][OS_LOOKBACK];
#pragma unroll
        for (int k = 0; k < OS_DIGITS_PER_THREAD; ++k)
#pragma unroll
            for (int w = 0; w < OS_LOOKBACK; ++w)
                s[k][w] = (open & (1u << k)) && back[k] >= (unsigned)w
                    ? os_load_relaxed(&my_status[(csk_index_t)(back[k] - w) * RADIX_DIGITS + os_owned_digit(k)])
                    : 0;
#pragma unroll
        for (int k = 0; k < OS_DIGITS_PER_THREAD; ++k) {
            bool taking = open & (1u << k);
#pragma unroll
            for (int w = 0; w < OS_LOOKBACK; ++w) {
                if (taking && (s[k][w] & OS_FLAGS)) {
                    before[k] += s[k][w] & OS_COUNT_MASK;
                    if (s[k][w] & OS_FLAG_PREFIX) {
                        open &= ~(1u << k);
                        taking = false;
                    } else {
                        --back[k];
                    }
                } else {
                    taking = false;
                }
            }
        }
    }
#pragma unroll
    for (int k = 0; k < OS_DIGITS_PER_THREAD; ++k) {
        const int d = os_owned_digit(k);
        if (d < RADIX_DIGITS) {
            const unsigned count = os_lane(counts[k / OS_PACK], k % OS_PACK);
            const unsigned start = os_lane(starts[k / OS_PACK], k % OS_PACK);
            if (tile > 0)
                os_store_relaxed(&my_status[(csk_index_t)tile * RADIX_DIGITS + d],
                                 OS_FLAG_PREFIX | (before[k] + count));
            adjust[d] = (os_pos_t)((csk_index_t)offsets[pass * RADIX_DIGITS + d] + (csk_index_t)before[k] - start);
        }
    }
}

// Where a pass's values come from and go to (the pass kernel's value_mode;
// cudasortkit/sdk/sweep.py names them). Between passes a value is one
// os_carry_t word (VALUE_CARRY bytes) in the ping-pong buffers.
#define OS_VALUES_GIVEN 0   // pairs: values_in holds the caller's values (VALUE_CARRY == CSK_VALUE_BYTES)
#define OS_INDICES 1        // argsort: the first pass makes the positions 0 .. n-1, the
                            // last stores them as csk_value_t (int64 or int32 indices)
#define OS_GATHER 2         // pairs: the first pass makes the positions, the last stores
                            // the caller's value from there, values_in[position]
#define OS_KEEP_CARRIED 4   // flag: the last pass stores the carried word as it is (a
                            // later kernel finishes the values: msd_local.cu)
#define OS_MODE_SOURCE 3    // the mode without its flag

// Value of input position i for the tile: the position itself (first pass
// of OS_INDICES and OS_GATHER), else the word at i.
__device__ __forceinline__ os_carry_t os_load_value(const void* __restrict__ src, int mode,
                                                    bool first, csk_index_t i)
{
    if (first && (mode & OS_MODE_SOURCE) != OS_VALUES_GIVEN) return (os_carry_t)i;
    return ((const os_carry_t*)src)[i];
}

// A warp's items into item[]: a thread's item j is load(j * 32), counted
// from its lane's first item (one j of a warp is 32 consecutive words: a
// coalesced load). Whole warps load without bounds tests; the last tile's
// last warps load their warp_keys items and set the rest to `past`.
template <typename T, typename Load>
__device__ __forceinline__ void os_load_warp(T (&item)[ITEMS_PER_THREAD], bool whole_warp,
                                             int lane, int warp_keys, T past, Load load)
{
    if (whole_warp) {
#pragma unroll
        for (int j = 0; j < ITEMS_PER_THREAD; ++j) item[j] = load(j * 32);
    } else {
#pragma unroll
        for (int j = 0; j < ITEMS_PER_THREAD; ++j)
            item[j] = j * 32 + lane < warp_keys ? load(j * 32) : past;
    }
}

// Value v of output position g: the carried word, except from the last pass
// (unless OS_KEEP_CARRIED), which writes the caller's width: a given value or
// a position as it is, or under OS_GATHER the value at that position of
// `gather` (the caller's values, read once: a random read per key instead of
// carrying 8-byte values through every pass).
__device__ __forceinline__ void os_store_value(void* __restrict__ dst,
                                               const void* __restrict__ gather, int mode,
                                               bool last, csk_index_t g, os_carry_t v)
{
    if (!last || (mode & OS_KEEP_CARRIED))
        os_store_kept((os_carry_t*)dst + g, v);
    else if ((mode & OS_MODE_SOURCE) == OS_GATHER)
        ((csk_value_t*)dst)[g] = __ldg((const csk_value_t*)gather + v);
    else
        ((csk_value_t*)dst)[g] = (csk_value_t)v;
}

// Sorts by the digit at `pass` from the buffer the plan says into the other:
// the first active pass reads keys_in (making sorted words), the last turns
// them back into keys, and the parity is chosen so that the last active pass
// writes keys_out (no keys at all if write_keys is 0: argsort). status is two
// halves of tiles * RADIX_DIGITS words: active pass i uses half i % 2 (zeroed
// beforehand) and zeroes the other half for pass i + 1. counters[i] hands out
// the tile ids of active pass i (zeroed beforehand); `tiles` is the number of
// tiles (ceil(n / TILE)), whatever the grid.
// PERSISTENT false (onesweep_pass): one tile a block, a grid of `tiles`
// blocks. PERSISTENT true (onesweep_pass_persistent): any grid, each block
// taking tile after tile until the ids run out; a skipped pass then costs
// one block per resident slot instead of one per tile.
template <bool PERSISTENT>
__device__ __forceinline__ void
os_pass(const csk_bits_t* __restrict__ keys_in, csk_bits_t* __restrict__ keys_out,
        csk_bits_t* __restrict__ keys_tmp, const void* __restrict__ values_in,
        void* __restrict__ values_out, void* __restrict__ values_tmp,
        csk_index_t n, unsigned long long mask, unsigned long long base, int pass,
        int value_mode, int write_keys, const unsigned long long* __restrict__ offsets,
        const int* __restrict__ plan, os_status_t* status, unsigned* counters,
        unsigned long long tiles)
{
    csk_wait_prior_grid();  // overlapped (overlap.cuh): before any global access
    const csk_pass planned = csk_pass_of(plan, pass);
    if (planned.skip) return;
    const int index = planned.index;
    const bool first = planned.first, last = planned.last, to_out = planned.to_out;
    const csk_bits_t* src = first ? keys_in : (to_out ? keys_tmp : keys_out);
    csk_bits_t* dst = to_out ? keys_out : keys_tmp;
    const bool store_keys = !last || write_keys;
#if CSK_HAS_VALUES
    const void* vsrc = first ? values_in : (to_out ? values_tmp : values_out);
    void* vdst = to_out ? values_out : values_tmp;
#else
    (void)values_in, (void)values_out, (void)values_tmp, (void)value_mode;
#endif
    const csk_bits_t kmask = (csk_bits_t)mask, kbase = (csk_bits_t)base;
    const int shift = pass * RADIX_BITS;

    extern __shared__ unsigned long long os_smem[];
    unsigned char* smem = (unsigned char*)os_smem;
#if CSK_HAS_VALUES
    os_carry_t* values_s = (os_carry_t*)smem;
#endif
    os_pos_t* adjust = (os_pos_t*)(smem + OS_VALUES_BYTES);
    csk_bits_t* keys_s = (csk_bits_t*)(smem + OS_VALUES_BYTES + RADIX_DIGITS * 8);
    unsigned* warp_words = (unsigned*)(smem + OS_VALUES_BYTES + RADIX_DIGITS * 8 + OS_KEYS_BYTES);
    unsigned* scan_scratch = warp_words + WARPS * OS_WORDS;
    unsigned* tile_slot = scan_scratch + WARPS + 1;

    const int t = threadIdx.x, lane = t & 31, warp = t >> 5;
    os_status_t* my_status = status + (csk_index_t)(index & 1) * tiles * RADIX_DIGITS;
    os_status_t* next_status = status + (csk_index_t)((index + 1) & 1) * tiles * RADIX_DIGITS;
    // One tile per iteration; without PERSISTENT the first iteration returns.
    // Forward progress with PERSISTENT (see the top of this file): a block
    // takes a new tile id only after it has finished its previous tile
    // (published its prefixes, scattered), so at any time it holds at most
    // one unfinished tile. Ids come from the pass's atomic counter in
    // increasing order, so when a block takes id k every id below k has been
    // taken by a block that was running then: that block is still resident
    // working on it (blocks leave only when ids run out) or has finished it.
    // It publishes its aggregate before it waits on anything, so the tiles
    // below k that tile k's look-back spins on all publish in bounded time,
    // whatever the grid and however many of its blocks are resident: no
    // deadlock. Every tile below `tiles` is taken exactly once, and each tile
    // zeroes its own rows of next_status as with one tile a block.
    for (;;) {
        if (t == 0) *tile_slot = atomicAdd(&counters[index], 1u);
        // Zero the warp counters in 8-byte stores (the area is 8-byte aligned and
        // holds an even number of words), unrolled: no loop to set up.
        enum { OS_ZERO_PAIRS = WARPS * OS_WORDS / 2 };
#pragma unroll
        for (int k = 0; k < (OS_ZERO_PAIRS + BLOCK_SIZE - 1) / BLOCK_SIZE; ++k)
            if (OS_ZERO_PAIRS % BLOCK_SIZE == 0 || k * BLOCK_SIZE + t < OS_ZERO_PAIRS)
                ((unsigned long long*)warp_words)[k * BLOCK_SIZE + t] = 0ull;
        __syncthreads();
        const unsigned tile = *tile_slot;
        if (PERSISTENT && tile >= tiles) return;  // ids ran out
        const csk_index_t tile_base = (csk_index_t)tile * TILE;
        const csk_index_t warp_base = tile_base + warp * WARP_ITEMS;
        // Keys of this warp's segment that exist (may be <= 0 in the last tile):
        // item j of the lane is valid iff j * 32 + lane < warp_keys.
        const int warp_keys = (int)(n - warp_base < (csk_index_t)WARP_ITEMS ? n - warp_base : (csk_index_t)WARP_ITEMS);

        // Load warp-striped (each load instruction reads 32 consecutive keys), so
        // that item j of lane l is key warp_base + j * 32 + l: ranking items in
        // order j, lanes in order, visits the warp's keys in input order (stable).
        // Whole warps (all but the last tile's last ones) load without bounds tests.
        const bool whole_warp = warp_keys >= WARP_ITEMS;
        const csk_bits_t* my_src = src + warp_base + lane;
        csk_bits_t key[ITEMS_PER_THREAD];
        os_load_warp(key, whole_warp, lane, warp_keys, (csk_bits_t)0,
                     [&](int at) { return my_src[at]; });
        if (first) {
#pragma unroll
            for (int j = 0; j < ITEMS_PER_THREAD; ++j) key[j] = (csk_bits_t)(csk_encode(key[j], kmask) - kbase);
        }
        // Past n (last tile only): the largest word. Such keys rank after every
        // real key of their digit (last in key order), so ranking needs no
        // validity bit: they only bump that digit's counters after every real
        // key of it (and are taken off the counts before they are published).
        if (!whole_warp) {
#pragma unroll
            for (int j = 0; j < ITEMS_PER_THREAD; ++j)
                if (j * 32 + lane >= warp_keys) key[j] = CSK_ALL_ONES;
        }

        unsigned* my_words = warp_words + warp * OS_WORDS;
        os_counter_t* my_counts = (os_counter_t*)my_words;
        const unsigned my_words_at = (unsigned)__cvta_generic_to_shared(my_words);
        unsigned counts[OS_WORDS_PER_THREAD], starts[OS_WORDS_PER_THREAD], pos[ITEMS_PER_THREAD];
#if EARLY_COUNTS
        // Early counts: the warps' digit counts first (shared atomics), so the
        // tile publishes its aggregate and looks back before ranking, and every
        // key is staged as soon as it is ranked (no ranks kept in registers).
#pragma unroll
        for (int j = 0; j < ITEMS_PER_THREAD; ++j) os_count_digit(my_words_at, os_digit(key[j], shift), 1u);
        os_uncount_past_n(my_words_at, shift, warp_keys, lane);
        __syncthreads();
        const bool crowded = os_publish_counts(warp_words, scan_scratch, my_status, tile, counts,
                                               starts);
        // Look back now, before ranking (as CUB's onesweep does): our inclusive
        // prefix is out a whole ranking earlier, so successors walk back less.
        os_look_back(my_status, offsets, adjust, pass, tile, counts, starts);
        if (os_any_order(key, first, whole_warp, shift) && !crowded) {
            // Keys past n were taken off the counts: they are not ranked.
#pragma unroll
            for (int j = 0; j < ITEMS_PER_THREAD; ++j)
                if (whole_warp || j * 32 + lane < warp_keys)
                    keys_s[os_rank_unordered(my_words, os_digit(key[j], shift))] = key[j];
        } else {
#pragma unroll
            for (int j = 0; j < ITEMS_PER_THREAD; ++j) {
                pos[j] = os_rank_item(my_counts, key[j], shift, lane, j);
                if (OS_RUNS_IN_DIGIT_ORDER || j * 32 + lane < warp_keys) keys_s[pos[j]] = key[j];
            }
        }
#else
        // Rank first (the warps' counters start at 0), then publish the counts
        // and turn the counters into tile positions, then stage.
#pragma unroll
        for (int j = 0; j < ITEMS_PER_THREAD; ++j)
            pos[j] = os_rank_item(my_counts, key[j], shift, lane, j);
        os_uncount_past_n(my_words_at, shift, warp_keys, lane);
        __syncthreads();
        os_publish_counts(warp_words, scan_scratch, my_status, tile, counts, starts);
#pragma unroll
        for (int j = 0; j < ITEMS_PER_THREAD; ++j) {
            pos[j] += my_counts[os_digit(key[j], shift)];
            if (OS_RUNS_IN_DIGIT_ORDER || j * 32 + lane < warp_keys) keys_s[pos[j]] = key[j];
        }
#endif
#if CSK_HAS_VALUES
        // Values after all keys are ranked: no ranking stands between their
        // loads. BATCH_VALUES takes them into registers first (a whole warp
        // without bounds tests), so all of a thread's are in flight at once.
#if BATCH_VALUES
        {
            os_carry_t value[ITEMS_PER_THREAD];
            const csk_index_t mine = warp_base + lane;
            os_load_warp(value, whole_warp, lane, warp_keys, (os_carry_t)0,
                         [&](int at) { return os_load_value(vsrc, value_mode, first, mine + at); });
#pragma unroll
            for (int j = 0; j < ITEMS_PER_THREAD; ++j)
                if (j * 32 + lane < warp_keys) values_s[pos[j]] = value[j];
        }
#else
#pragma unroll
        for (int j = 0; j < ITEMS_PER_THREAD; ++j)
            if (j * 32 + lane < warp_keys)
                values_s[pos[j]] = os_load_value(vsrc, value_mode, first, warp_base + j * 32 + lane);
#endif
#endif
#pragma unroll
        for (int k = 0; k < OS_DIGITS_PER_THREAD; ++k)
            if (os_owned_digit(k) < RADIX_DIGITS) next_status[(csk_index_t)tile * RADIX_DIGITS + os_owned_digit(k)] = 0;

#if !EARLY_COUNTS
        os_look_back(my_status, offsets, adjust, pass, tile, counts, starts);
#endif
        __syncthreads();

        // Scatter from the staging area: consecutive threads write consecutive
        // positions of one digit's run (coalesced per digit).
        const int tile_n = (int)((n - tile_base) < (csk_index_t)TILE ? (n - tile_base) : (csk_index_t)TILE);
#pragma unroll 8
        for (int i = t; i < tile_n; i += BLOCK_SIZE) {
            const csk_bits_t k = keys_s[i];
            const os_pos_t g = adjust[os_digit(k, shift)] + (os_pos_t)i;
            if (store_keys) os_store_key(dst + g, last ? csk_decode((csk_bits_t)(k + kbase), kmask) : k);
#if CSK_HAS_VALUES
            os_store_value(vdst, values_in, value_mode, last, g, values_s[i]);
#endif
        }
        if (!PERSISTENT) return;
        __syncthreads();  // every thread is done with the tile's shared memory and tile id
    }
}

// One block per tile: a grid of `tiles` blocks.
extern "C" __global__ void CSK_OVERLAPPED __launch_bounds__(BLOCK_SIZE, OS_MIN_BLOCKS)
onesweep_pass(const csk_bits_t* __restrict__ keys_in, csk_bits_t* __restrict__ keys_out,
              csk_bits_t* __restrict__ keys_tmp, const void* __restrict__ values_in,
              void* __restrict__ values_out, void* __restrict__ values_tmp,
              csk_index_t n, unsigned long long mask, unsigned long long base, int pass,
              int value_mode, int write_keys, const unsigned long long* __restrict__ offsets,
              const int* __restrict__ plan, os_status_t* status, unsigned* counters,
              unsigned long long tiles)
{
    os_pass<false>(keys_in, keys_out, keys_tmp, values_in, values_out, values_tmp, n, mask, base,
                   pass, value_mode, write_keys, offsets, plan, status, counters, tiles);
}

#if PERSISTENT_PASS
// The same pass on a persistent grid (any number of blocks, e.g. as many as
// the GPU holds at once), each block looping over tile ids. Compiled only
// where a template defines PERSISTENT_PASS (msd_local.cu, for its LSD
// fallback passes, which are skipped on its MSD route: a block per resident
// slot that returns at once costs far less to launch than a block per tile).
// Its parameter list repeats onesweep_pass's on purpose: the core reads a
// kernel's argument letters from its written-out prototype
// (cudasortkit/build/prototype.py), which a macro would hide.
extern "C" __global__ void CSK_OVERLAPPED __launch_bounds__(BLOCK_SIZE, OS_MIN_BLOCKS)
onesweep_pass_persistent(const csk_bits_t* __restrict__ keys_in, csk_bits_t* __restrict__ keys_out,
                         csk_bits_t* __restrict__ keys_tmp, const void* __restrict__ values_in,
                         void* __restrict__ values_out, void* __restrict__ values_tmp,
                         csk_index_t n, unsigned long long mask, unsigned long long base, int pass,
                         int value_mode, int write_keys, const unsigned long long* __restrict__ offsets,
                         const int* __restrict__ plan, os_status_t* status, unsigned* counters,
                         unsigned long long tiles)
{
    os_pass<true>(keys_in, keys_out, keys_tmp, values_in, values_out, values_tmp, n, mask, base,
                  pass, value_mode, write_keys, offsets, plan, status, counters, tiles);
}
#endif
