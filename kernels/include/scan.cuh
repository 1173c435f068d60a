// Prefix sums as device functions, shared by every cudasortkit kernel that
// needs one (radix digit offsets, counting sort, the device-wide scan in
// scan.cu). Templated on the count type T (32- or 64-bit unsigned; any type
// with + and __shfl_up_sync works) and, for block scans, on the block size.
//
//   csk_warp_inclusive_scan(x) / csk_warp_exclusive_scan(x)
//       one value per lane of a full warp, Kogge-Stone over shuffles
//       (no shared memory, 5 steps).
//   csk_warp_scan_entries<PER_LANE>(entries, count)
//       one warp's exclusive scan, in place, of `count` (at most 32 *
//       PER_LANE) values in shared memory: PER_LANE consecutive a lane, then
//       a warp scan of the lanes' sums; returns the total to every lane.
//   csk_block_exclusive_scan<T, BLOCK>(x, warp_sums, &total)
//       one value per thread: warp scans, then a warp scan of the warp totals
//       (warp_sums: BLOCK/32 + 1 T of shared memory). The fastest block scan.
//   csk_blelloch_scan<T, N, BLOCK>(data, &total)
//       work-efficient up-sweep / down-sweep (Blelloch) exclusive scan of N
//       (power of two) values held in shared memory at padded positions
//       CSK_SCAN_PAD(i) (one spare slot every 32, against bank conflicts);
//       the array needs CSK_SCAN_PADDED(N) slots.
//   csk_tile_look_back(status, tile, aggregate)
//       a single-pass chained scan over tiles (decoupled look-back): warp 0
//       of tile `tile` publishes its aggregate, sums its predecessors'
//       published values 32 at a time until one holds an inclusive prefix,
//       publishes its own and returns its exclusive prefix.
//
// Block scans must be called by every thread of the block (they synchronize).
#pragma once

#define CSK_SCAN_LOG_BANKS 5
#define CSK_SCAN_PAD(i) ((i) + ((i) >> CSK_SCAN_LOG_BANKS))
#define CSK_SCAN_PADDED(n) CSK_SCAN_PAD(n)

__device__ __forceinline__ unsigned csk_lane_id() { return threadIdx.x & 31u; }

template <typename T>
__device__ __forceinline__ T csk_warp_inclusive_scan(T x)
{
    const unsigned lane = csk_lane_id();
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
        const T y = __shfl_up_sync(0xffffffffu, x, d);
        if (lane >= (unsigned)d) x += y;
    }
    return x;
}

template <typename T>
__device__ __forceinline__ T csk_warp_exclusive_scan(T x)
{
    return csk_warp_inclusive_scan(x) - x;
}

template <int PER_LANE, typename T>
__device__ __forceinline__ T csk_warp_scan_entries(T* entries, int count)
{
    const unsigned lane = csk_lane_id();
    T mine[PER_LANE], sum = 0;
#pragma unroll
    for (int k = 0; k < PER_LANE; ++k) {
        const int e = (int)lane * PER_LANE + k;
        mine[k] = e < count ? entries[e] : T(0);
        sum += mine[k];
    }
    const T inclusive = csk_warp_inclusive_scan(sum);
    T running = inclusive - sum;
#pragma unroll
    for (int k = 0; k < PER_LANE; ++k) {
        const int e = (int)lane * PER_LANE + k;
        if (e < count) entries[e] = running;
        running += mine[k];
    }
    return __shfl_sync(0xffffffffu, inclusive, 31);
}

// Exclusive scan of one value per thread across the block; *total gets the
// sum of all values (every thread). warp_sums: BLOCK / 32 + 1 shared slots.
template <typename T, int BLOCK>
__device__ __forceinline__ T csk_block_exclusive_scan(T x, T* warp_sums, T* total)
{
    static_assert(BLOCK % 32 == 0 && BLOCK <= 1024, "block scans need whole warps");
    constexpr int WARPS = BLOCK / 32;
    const unsigned lane = csk_lane_id(), warp = threadIdx.x >> 5;
    const T inclusive = csk_warp_inclusive_scan(x);
    if (lane == 31) warp_sums[warp] = inclusive;
    __syncthreads();
    if (warp == 0) {
        const T s = lane < (unsigned)WARPS ? warp_sums[lane] : (T)0;
        const T t = csk_warp_inclusive_scan(s);
        if (lane < (unsigned)WARPS) warp_sums[lane] = t - s;
        if (lane == WARPS - 1) warp_sums[WARPS] = t;  // needs WARPS + 1 slots
    }
    __syncthreads();
    const T result = warp_sums[warp] + inclusive - x;
    *total = warp_sums[WARPS];
    __syncthreads();  // warp_sums may be reused right after
    return result;
}

// Blelloch exclusive scan of data[CSK_SCAN_PAD(0 .. N-1)] in shared memory,
// in place; *total (optional) gets the sum. N a power of two, N >= 2.
template <typename T, int N, int BLOCK>
__device__ __forceinline__ void csk_blelloch_scan(T* data, T* total)
{
    static_assert(N >= 2 && (N & (N - 1)) == 0, "Blelloch scan length must be a power of two");
    // Up-sweep: build partial sums in place.
    int offset = 1;
#pragma unroll
    for (int d = N >> 1; d > 0; d >>= 1) {
        __syncthreads();
        for (int t = threadIdx.x; t < d; t += BLOCK) {
            const int a = offset * (2 * t + 1) - 1, b = offset * (2 * t + 2) - 1;
            data[CSK_SCAN_PAD(b)] += data[CSK_SCAN_PAD(a)];
        }
        offset <<= 1;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        if (total) *total = data[CSK_SCAN_PAD(N - 1)];
        data[CSK_SCAN_PAD(N - 1)] = (T)0;
    }
    // Down-sweep: push prefixes back down the tree.
#pragma unroll
    for (int d = 1; d < N; d <<= 1) {
        offset >>= 1;
        __syncthreads();
        for (int t = threadIdx.x; t < d; t += BLOCK) {
            const int a = offset * (2 * t + 1) - 1, b = offset * (2 * t + 2) - 1;
            const T left = data[CSK_SCAN_PAD(a)];
            data[CSK_SCAN_PAD(a)] = data[CSK_SCAN_PAD(b)];
            data[CSK_SCAN_PAD(b)] += left;
        }
    }
    __syncthreads();
}

// A tile's status word (csk_tile_look_back): 0 until published, then
// CSK_TILE_AGGREGATE | the tile's own sum, then CSK_TILE_PREFIX | the sum of
// every tile up to and including it. One 64-bit word, stored at once, so a
// reader sees a flag and its value together. The caller zeroes the words
// and hands out tile numbers in the order blocks start (an atomic ticket),
// so every tile waited for is running or done.
#define CSK_TILE_AGGREGATE (1ull << 62)
#define CSK_TILE_PREFIX (2ull << 62)
#define CSK_TILE_VALUE (CSK_TILE_AGGREGATE - 1ull)

// Called by all 32 lanes of one warp of tile `tile`, with the tile's sum
// (below 2^62) in every lane; returns the sum of tiles 0 .. tile-1 to every
// lane.
__device__ __forceinline__ unsigned long long
csk_tile_look_back(unsigned long long* status, unsigned long long tile, unsigned long long aggregate)
{
    volatile unsigned long long* word = status;
    const unsigned lane = csk_lane_id();
    if (lane == 0)
        word[tile] = (tile == 0 ? CSK_TILE_PREFIX : CSK_TILE_AGGREGATE) | aggregate;
    unsigned long long before = 0;
    long long last = (long long)tile - 1;  // the window: tiles last - 31 .. last
    while (last >= 0) {
        const long long at = last - (long long)lane;
        unsigned long long s = at >= 0 ? word[at] : CSK_TILE_PREFIX;
        while (__any_sync(0xffffffffu, s == 0))
            if (s == 0) s = word[at];
        // lanes up to the nearest inclusive prefix (the lowest lane holding one)
        const unsigned prefixes = __ballot_sync(0xffffffffu, (s & CSK_TILE_PREFIX) != 0);
        const unsigned stop = prefixes ? (unsigned)__ffs(prefixes) - 1u : 31u;
        unsigned long long v = lane <= stop ? (s & CSK_TILE_VALUE) : 0ull;
#pragma unroll
        for (int d = 16; d > 0; d >>= 1) v += __shfl_xor_sync(0xffffffffu, v, d);
        before += v;
        if (prefixes) break;
        last -= 32;
    }
    if (lane == 0 && tile > 0) word[tile] = CSK_TILE_PREFIX | (before + aggregate);
    return before;
}

