// The msd_local plugin's template: 8-byte keys, alone, with the caller's
// values or as an argsort: most significant digits first, then small pieces
// sorted on chip.
//
// 1. onesweep_histogram, then msd_plan: digit offsets of every pass (as
//    onesweep_plan), and the route. The MSD route is taken when the four top
//    passes (digits 4..7: the top 32 bits of the sorted word) are all
//    non-trivial and the groups are small: among MSD_SAMPLES keys sampled
//    at a stride, r pairs of neighbours (in sorted order) share their top 32
//    bits (r: the samples less their distinct prefixes, counted in a hash
//    set in shared memory), about s^2 g / 2n for groups of g keys (s
//    samples of n keys, g weighted by keys), so the route needs
//    2 n r <= MSD_GROUP_MAX s^2.
//    Otherwise plain LSD. (Requiring r == 0 turned standard-normal float64
//    keys, groups of ~18 keys at 2^26, to LSD about half the time.)
// 2. MSD route: onesweep_pass over digits 4..7 (an LSD sort of the top 32
//    bits), leaving keys_out ordered by its top 32 bits: "groups" of keys
//    with one prefix, each contiguous, in input order within a group (the
//    passes are stable). With values they carry one 32-bit word a key
//    (VALUE_CARRY 4) under OS_KEEP_CARRIED, so the last writes the words
//    as they are, into the driver's `carried` buffer: the key's input
//    position (argsort; pairs of 8-byte values) or its 4-byte value.
// 3. msd_cuts: the chunk boundaries, each the start of the group holding
//    position c * MSD_SPAN (found by binary search in the MSD_WINDOW keys
//    before it). A group longer than the window sets flags[1] (overflow).
// 4. msd_local_sort: a block per chunk (at most MSD_SPAN + MSD_WINDOW keys,
//    whole groups only) ranks each key within its group by comparisons and
//    writes it to its place, in keys_out; with values, the key's carried
//    word becomes its value there as the last pass of onesweep.cuh would
//    write it (os_store_value: the index, the value read from the position,
//    or the carried value). Ranks break ties by position, so the sort is
//    stable: NumPy's stable argsort, values in that order.
// 5. msd_fallback: after an overflow, plan2 becomes the plain LSD plan.
// 6. onesweep_pass_persistent over digits 0..7 with plan2: every pass is
//    skipped unless the route is LSD (or overflowed); then they sort the
//    caller's keys_in (and values), which nothing wrote, as onesweep does,
//    stable too. Their tile counters are their own; the status
//    words of pass index 0 are the half the fourth MSD pass zeroed. They run
//    on a persistent grid (as many blocks as the GPU holds at once, each
//    taking tile after tile: onesweep.cuh's os_pass), so on the MSD route,
//    where every block returns at its plan word, a launch costs a few hundred
//    blocks instead of one per tile (7282 at 2^26 keys).
//
// flags[0]: the MSD route was taken; flags[1]: a group overflowed.
#define PERSISTENT_PASS 1  // onesweep_pass_persistent, for step 6
#include "onesweep.cuh"

#if CSK_KEY_BYTES != 8 || RADIX_BITS != 8
#error "msd_local sorts 8-byte keys with 8-bit digits"
#endif

#define MSD_FIRST 4          // first MSD pass: digits 4..7 are the top 32 bits
#define MSD_SAMPLES 2048     // keys sampled by msd_plan (a power of two)
#define MSD_TABLE_LOG 12     // msd_plan's hash set of sampled prefixes: 2 x MSD_SAMPLES slots
#define MSD_TABLE (1 << MSD_TABLE_LOG)
#define MSD_EMPTY (~0ull)    // a free slot (prefixes are 32-bit)
#define MSD_SPAN 2048        // chunk stride
#define MSD_WINDOW 2048      // how far back a chunk's start is searched
#define MSD_CHUNK (MSD_SPAN + MSD_WINDOW)  // most keys a chunk holds
#define MSD_LOCAL_BLOCK 256
// Largest (key-weighted) mean group the sample may suggest for the MSD route:
// msd_local_sort ranks a key by comparing it with its group's keys.
#define MSD_GROUP_MAX 128

__device__ __forceinline__ unsigned msd_prefix(csk_bits_t w)
{
    return (unsigned)(w >> 32);
}

// One block (BLOCK_SIZE threads). keys: the caller's. msd, lsd, plan2:
// plans of PASSES words (csk_write_plan's format).
extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
msd_plan(const csk_bits_t* __restrict__ keys, const unsigned long long* __restrict__ hist,
         csk_index_t n, unsigned long long mask, unsigned long long* __restrict__ offsets,
         int* __restrict__ msd, int* __restrict__ lsd, int* __restrict__ plan2,
         unsigned* __restrict__ flags)
{
    __shared__ int trivial[PASSES];
    __shared__ unsigned long long table[MSD_TABLE];
    __shared__ int distinct;
    for (int i = threadIdx.x; i < MSD_TABLE; i += BLOCK_SIZE) table[i] = MSD_EMPTY;
    if (threadIdx.x == 0) distinct = 0;
    os_plan_offsets<BLOCK_SIZE>(hist, n, ~0ull, offsets, trivial);  // syncs the block
    const csk_index_t stride = n / MSD_SAMPLES;  // the driver guarantees n >= MSD_SAMPLES
    for (int i = threadIdx.x; i < MSD_SAMPLES; i += BLOCK_SIZE) {
        const unsigned v = msd_prefix(csk_encode(keys[(csk_index_t)i * stride], (csk_bits_t)mask));
        // Linear probing from a multiplicative hash; the table is at most half full.
        for (unsigned h = (v * 2654435761u) >> (32 - MSD_TABLE_LOG);; h = (h + 1) & (MSD_TABLE - 1)) {
            const unsigned long long old = atomicCAS(&table[h], MSD_EMPTY, (unsigned long long)v);
            if (old == MSD_EMPTY) atomicAdd(&distinct, 1);
            if (old == MSD_EMPTY || old == v) break;
        }
    }
    __syncthreads();
    // Sorted, the samples would have `repeat` neighbours sharing a prefix.
    const int repeat = MSD_SAMPLES - distinct;
    if (threadIdx.x == 0) {
        bool route = 2ull * (unsigned long long)n * (unsigned long long)repeat
                     <= (unsigned long long)MSD_GROUP_MAX * MSD_SAMPLES * MSD_SAMPLES;
        for (int p = MSD_FIRST; p < PASSES; ++p) route = route && !trivial[p];
        csk_write_plan(trivial, PASSES, lsd);
        for (int p = 0; p < PASSES; ++p) {
            msd[p] = !route || p < MSD_FIRST ? -1 : ((p - MSD_FIRST) | ((PASSES - MSD_FIRST) << 8));
            plan2[p] = route ? -1 : lsd[p];
        }
        flags[0] = route;
    }
}

// Thread c of the grid: cuts[c] for c = 0 .. chunks (keys: keys_out after
// the MSD passes, ordered by prefix).
extern "C" __global__ void __launch_bounds__(MSD_LOCAL_BLOCK)
msd_cuts(const csk_bits_t* __restrict__ keys, csk_index_t n, unsigned long long mask,
         csk_index_t* __restrict__ cuts, csk_index_t chunks, unsigned* __restrict__ flags)
{
    if (!flags[0]) return;
    const csk_index_t c = (csk_index_t)blockIdx.x * MSD_LOCAL_BLOCK + threadIdx.x;
    if (c > chunks) return;
    if (c == 0 || c == chunks) {
        cuts[c] = c == 0 ? 0 : n;
        return;
    }
    const csk_bits_t kmask = (csk_bits_t)mask;
    const csk_index_t at = c * MSD_SPAN;
    const unsigned prefix = msd_prefix(csk_encode(keys[at], kmask));
    csk_index_t lo = at > MSD_WINDOW ? at - MSD_WINDOW : 0, hi = at;
    if (lo > 0 && msd_prefix(csk_encode(keys[lo], kmask)) == prefix) {
        atomicOr(&flags[1], 1u);  // a group longer than the window
        cuts[c] = at;
        return;
    }
    while (lo < hi) {  // the first position in [lo, at] holding `prefix`
        const csk_index_t mid = lo + (hi - lo) / 2;
        if (msd_prefix(csk_encode(keys[mid], kmask)) < prefix) lo = mid + 1;
        else hi = mid;
    }
    cuts[c] = lo;
}

// One block per chunk [cuts[c], cuts[c + 1]) of keys_out: each key goes to
// its group's start plus the number of keys of its group that sort before
// it (smaller, or equal at a smaller position). Returns at once unless the
// MSD route ran without overflow.
//
// A warp takes 32 consecutive positions at a time. A position heads a group
// where its prefix differs from the one before; the warp's ballot of heads
// gives each lane its group's first and end when they fall in its 32
// positions, and only a group reaching past them is scanned for its bound
// in shared memory (lanes of one such group scan the same keys). Ranking is
// branch-free, so the lanes diverge only by their groups' lengths.
//
// With values (CSK_HAS_VALUES): carried[i] is the word the MSD passes left
// for keys[i] (os_carry_t), written to values_out at the key's place as the
// last pass would (value_mode: OS_VALUES_GIVEN, OS_INDICES or OS_GATHER from
// values_in); write_keys 0 leaves keys as the MSD passes left them (argsort).
extern "C" __global__ void __launch_bounds__(MSD_LOCAL_BLOCK)
msd_local_sort(csk_bits_t* __restrict__ keys, const void* __restrict__ carried,
               const void* __restrict__ values_in, void* __restrict__ values_out,
               unsigned long long mask, const csk_index_t* __restrict__ cuts,
               const unsigned* __restrict__ flags, int value_mode, int write_keys)
{
#if !CSK_HAS_VALUES
    (void)carried, (void)values_in, (void)values_out, (void)value_mode, (void)write_keys;
#endif
    if (!flags[0] || flags[1]) return;
    __shared__ csk_bits_t w[MSD_CHUNK];
    const csk_bits_t kmask = (csk_bits_t)mask;
    const csk_index_t start = cuts[blockIdx.x];
    const int size = (int)(cuts[blockIdx.x + 1] - start);
    for (int i = threadIdx.x; i < size; i += MSD_LOCAL_BLOCK) w[i] = csk_encode(keys[start + i], kmask);
    __syncthreads();
    const int lane = threadIdx.x & 31;
    const unsigned upto = (2u << lane) - 1;  // lanes 0 .. lane
    for (int base = threadIdx.x - lane; base < size; base += MSD_LOCAL_BLOCK) {
        const int i = base + lane;
        const bool valid = i < size;
        const csk_bits_t x = w[valid ? i : size - 1];
        const unsigned prefix = msd_prefix(x);
        // Past the chunk every lane heads a group of its own (and stores nothing).
        const bool head = !valid || i == 0 || msd_prefix(w[i - 1]) != prefix;
        const unsigned heads = __ballot_sync(0xffffffffu, head);
        const unsigned before = heads & upto, after = heads & ~upto;
        int first = base + 31 - __clz(before), end = base + __ffs(after) - 1;
        if (before == 0)  // the group began before this window
            for (first = base; first > 0 && msd_prefix(w[first - 1]) == prefix;) --first;
        if (after == 0)   // and may go on past it
            for (end = base + 32; end < size && msd_prefix(w[end]) == prefix;) ++end;
        int rank = 0;
        for (int j = first; j < end; ++j) {
            const csk_bits_t y = w[j];
            rank += (int)(y < x) + (int)((y == x) & (j < i));
        }
#if CSK_HAS_VALUES
        if (valid) {
            const csk_index_t to = start + first + rank;
            if (write_keys) keys[to] = csk_decode(x, kmask);
            os_store_value(values_out, values_in, value_mode, true, to,
                           ((const os_carry_t*)carried)[start + i]);
        }
#else
        if (valid) keys[start + first + rank] = csk_decode(x, kmask);
#endif
    }
}

// One thread: after an overflow the LSD passes run (plan2 = lsd).
extern "C" __global__ void msd_fallback(const unsigned* __restrict__ flags, const int* __restrict__ lsd,
                                        int* __restrict__ plan2)
{
    if (flags[0] && flags[1])
        for (int p = 0; p < PASSES; ++p) plan2[p] = lsd[p];
}
