// A bitonic network over NET_KEYS 32-bit words held in registers by
// NET_THREADS threads (NET_ITEMS = NET_KEYS / NET_THREADS words each),
// shared by block_bitonic.cu (one array, a block) and warp_bitonic.cu
// (rows, a warp each). The including kernel defines NET_THREADS (a power of
// two, 32 to 1024), NET_KEYS (a power of two, at least 2 x NET_THREADS) and
// NET_UNROLL (1: every step in its own code; 0: a loop over stages).
//
// Layout: thread t (warp w, lane l) holds x[0 .. NET_ITEMS); x[q] is
// network position i = t * NET_ITEMS + q: the low NET_R = log2(NET_ITEMS)
// bits of i name a register, the next 5 a lane, the rest a warp.
//
// The network in the form without directions (as rows.cu's): stage k
// (1 .. NET_LOG) sorts each aligned run of 2^k positions from its two
// sorted halves, first pairing i with its mirror i ^ (2^k - 1), then i with
// i ^ 2^j for j = k-2, ..., 0; the lower position of a pair keeps the
// smaller word, so every run ends ascending. A step whose highest changed
// bit j is below NET_R runs in registers, one below NET_R + 5 through
// __shfl_xor_sync, a higher one through shared memory (two buffers of
// NET_SLOTS words used in turn: one barrier a step). A network of one warp
// (NET_THREADS 32) never reaches shared memory.
#pragma once

#ifndef NET_KEYS
#define NET_KEYS 4096
#endif
#ifndef NET_UNROLL
#define NET_UNROLL 0
#endif
#define NET_ITEMS (NET_KEYS / NET_THREADS)
// Shared-memory slot of position i: one spare word every 32, so that the
// lanes of a warp storing x[q] (positions NET_ITEMS apart) hit 32 banks.
#define NET_SLOT(i) ((i) + ((i) >> 5))
#define NET_SLOTS NET_SLOT(NET_KEYS)

#if CSK_KEY_BYTES > 4
#error "bitonic_net sorts 32-bit ordered words: keys of at most 4 bytes"
#endif
#if NET_THREADS < 32 || NET_THREADS > 1024 || (NET_THREADS & (NET_THREADS - 1)) != 0
#error "bitonic_net needs a power-of-two NET_THREADS of 32 to 1024"
#endif
#if (NET_KEYS & (NET_KEYS - 1)) != 0 || NET_KEYS < 2 * NET_THREADS
#error "bitonic_net: NET_KEYS is a power of two, at least two keys a thread"
#endif

constexpr int net_log2(int x) { return x <= 1 ? 0 : 1 + net_log2(x / 2); }
constexpr int NET_LOG = net_log2(NET_KEYS);
constexpr int NET_R = net_log2(NET_ITEMS);

// The words of a step across threads: every position of the thread has
// the same bit j (`upper`: it keeps the larger word of each pair).
__device__ __forceinline__ void net_keep(unsigned (&x)[NET_ITEMS], const unsigned (&y)[NET_ITEMS],
                                         bool upper)
{
#pragma unroll
    for (int q = 0; q < NET_ITEMS; ++q) x[q] = upper ? max(x[q], y[q]) : min(x[q], y[q]);
}

// A step across lanes: x[q]'s partner is x[q ^ RQ] of lane t ^ m (each
// lane sends that one).
template <int RQ>
__device__ __forceinline__ void net_lanes(unsigned (&x)[NET_ITEMS], int m, bool upper)
{
    unsigned y[NET_ITEMS];
#pragma unroll
    for (int q = 0; q < NET_ITEMS; ++q) y[q] = __shfl_xor_sync(0xffffffffu, x[q ^ RQ], m);
    net_keep(x, y, upper);
}

// A step across warps: position i's partner is i ^ p, through shared memory.
__device__ __forceinline__ void net_warps(unsigned (&x)[NET_ITEMS], unsigned* smem, int& parity,
                                          int p, bool upper, int t)
{
    unsigned* buf = smem + parity * NET_SLOTS;
    parity ^= 1;
    const int base = t * NET_ITEMS;
    unsigned y[NET_ITEMS];
#pragma unroll
    for (int q = 0; q < NET_ITEMS; ++q) buf[NET_SLOT(base + q)] = x[q];
    __syncthreads();
#pragma unroll
    for (int q = 0; q < NET_ITEMS; ++q) y[q] = buf[NET_SLOT((base + q) ^ p)];
    net_keep(x, y, upper);
}

// A step on a lane or warp bit j >= NET_R: pairs i and i ^ 2^j, or i and
// its mirror i ^ (2^(j+1) - 1) (a stage's first step).
__device__ __forceinline__ void net_cross(unsigned (&x)[NET_ITEMS], unsigned* smem, int& parity,
                                          int t, int j, bool mirror)
{
    const int p = mirror ? (2 << j) - 1 : 1 << j;
    const bool upper = ((t >> (j - NET_R)) & 1) != 0;
    if (j >= NET_R + 5)
        net_warps(x, smem, parity, p, upper, t);
    else if (mirror)
        net_lanes<NET_ITEMS - 1>(x, p >> NET_R, upper);
    else
        net_lanes<0>(x, p >> NET_R, upper);
}

// One step on position bit J (a MIRROR step: and every lower bit).
template <int J, bool MIRROR>
__device__ __forceinline__ void net_step(unsigned (&x)[NET_ITEMS], unsigned* smem, int& parity, int t)
{
    if constexpr (J < NET_R) {
        constexpr int P = MIRROR ? (2 << J) - 1 : 1 << J;
#pragma unroll
        for (int q = 0; q < NET_ITEMS; ++q) {
            if (q & (1 << J)) continue;
            const unsigned a = x[q], b = x[q ^ P];
            x[q] = min(a, b);
            x[q ^ P] = max(a, b);
        }
    } else {
        net_cross(x, smem, parity, t, J, MIRROR);
    }
}

// Stage k's steps after its mirror step: bits J, J-1, ..., 0.
template <int J>
__device__ __forceinline__ void net_merge(unsigned (&x)[NET_ITEMS], unsigned* smem, int& parity, int t)
{
    if constexpr (J >= 0) {
        net_step<J, false>(x, smem, parity, t);
        net_merge<J - 1>(x, smem, parity, t);
    }
}

// Stages K .. LAST, every step in its own code.
template <int K, int LAST>
__device__ __forceinline__ void net_stages(unsigned (&x)[NET_ITEMS], unsigned* smem, int& parity, int t)
{
    if constexpr (K <= LAST) {
        net_step<K - 1, true>(x, smem, parity, t);
        net_merge<K - 2>(x, smem, parity, t);
        net_stages<K + 1, LAST>(x, smem, parity, t);
    }
}

// The whole network. NET_UNROLL 1: every step in its own code (about
// NET_LOG^2 / 2 steps of NET_ITEMS words each: some 100 KB of code at 32
// words a thread). 0: stages past NET_R in a loop, whose steps on lane and
// warp bits share one copy of each kind of step (masks in registers) and
// whose register steps are the same every stage: a few KB, for an
// instruction cache that sees every instruction of a straight-line kernel
// once per launch.
__device__ __forceinline__ void net_sort(unsigned (&x)[NET_ITEMS], unsigned* smem, int& parity, int t)
{
#if NET_UNROLL
    net_stages<1, NET_LOG>(x, smem, parity, t);
#else
    net_stages<1, NET_R>(x, smem, parity, t);
#pragma unroll 1
    for (int k = NET_R + 1; k <= NET_LOG; ++k) {
#pragma unroll 1
        for (int j = k - 1; j >= NET_R; --j) net_cross(x, smem, parity, t, j, j == k - 1);
        net_merge<NET_R - 1>(x, smem, parity, t);
    }
#endif
}

// x[q] = the ordered word (keys.cuh's csk_encode) of key q * NET_THREADS + t
// of in[0 .. count): loads coalesced across the threads (a network sorts
// any arrangement); 0xFFFFFFFF, no smaller than any key's word, past count,
// so the first count sorted words are the keys'.
__device__ __forceinline__ void net_load(unsigned (&x)[NET_ITEMS], const csk_bits_t* __restrict__ in,
                                         int count, int t, csk_bits_t mask)
{
#pragma unroll
    for (int q = 0; q < NET_ITEMS; ++q) {
        const int p = q * NET_THREADS + t;
        x[q] = p < count ? (unsigned)csk_encode(in[p], mask) : 0xFFFFFFFFu;
    }
}

// out[0 .. count) = the first count sorted words decoded, through `buf`
// (NET_SLOTS words of shared memory) so that the stores are coalesced too.
// The threads of the network meet in between: a block's (__syncthreads)
// or, for a network of one warp, the warp's.
__device__ __forceinline__ void net_store(const unsigned (&x)[NET_ITEMS], unsigned* buf,
                                          csk_bits_t* __restrict__ out, int count, int t,
                                          csk_bits_t mask)
{
#pragma unroll
    for (int q = 0; q < NET_ITEMS; ++q) buf[NET_SLOT(t * NET_ITEMS + q)] = x[q];
#if NET_THREADS > 32
    __syncthreads();
#else
    __syncwarp();
#endif
    for (int p = t; p < count; p += NET_THREADS) out[p] = csk_decode((csk_bits_t)buf[NET_SLOT(p)], mask);
}
