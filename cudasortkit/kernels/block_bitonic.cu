// One 1-D array of at most NET_KEYS keys of at most 4 bytes, keys only,
// sorted by one block with a bitonic network in registers
// (plugins/block_radix.py drives it: its `array_kernel` tunable). The network
// is not stable; for keys alone that changes nothing (equal ordered words
// decode to the same key, keys.cuh).
//
// Defines: BLOCK_SIZE threads (a power of two, 32 to 1024) and NET_KEYS, the
// network's width (a power of two, at least 2 x BLOCK_SIZE). The n keys
// become ordered words widened to 32 bits; the NET_KEYS - n slots past them
// hold 0xFFFFFFFF, no smaller than any key's word, so the first n sorted
// words are the keys' (only they are stored).
//
// Layout: thread t (warp w, lane l) holds NET_ITEMS = NET_KEYS / BLOCK_SIZE
// words x[0 .. NET_ITEMS); x[q] is network position i = t * NET_ITEMS + q:
// the low NET_R = log2(NET_ITEMS) bits of i name a register, the next 5 a
// lane, the rest a warp. Keys are loaded coalesced (item q of thread t is
// key q * BLOCK_SIZE + t: a network sorts any arrangement) and stored
// coalesced through shared memory.
//
// The network in the form without directions (as rows.cu's): stage k
// (1 .. NET_LOG) sorts each aligned run of 2^k positions from its two
// sorted halves, first pairing i with its mirror i ^ (2^k - 1), then i with
// i ^ 2^j for j = k-2, ..., 0; the lower position of a pair keeps the
// smaller word, so every run ends ascending. A step whose highest changed
// bit j is below NET_R runs in registers, one below NET_R + 5 through
// __shfl_xor_sync, a higher one through shared memory (two buffers used in
// turn: one barrier a step).
#include "keys.cuh"

#ifndef NET_KEYS
#define NET_KEYS 4096
#endif
#define NET_ITEMS (NET_KEYS / BLOCK_SIZE)
// Shared-memory slot of position i: one spare word every 32, so that the
// lanes of a warp storing x[q] (positions NET_ITEMS apart) hit 32 banks.
#define NET_SLOT(i) ((i) + ((i) >> 5))
#define NET_SLOTS NET_SLOT(NET_KEYS)

#if CSK_KEY_BYTES > 4
#error "block_bitonic sorts 32-bit ordered words: keys of at most 4 bytes"
#endif
#if BLOCK_SIZE < 32 || BLOCK_SIZE > 1024 || (BLOCK_SIZE & (BLOCK_SIZE - 1)) != 0
#error "block_bitonic needs a power-of-two block of 32 to 1024 threads"
#endif
#if (NET_KEYS & (NET_KEYS - 1)) != 0 || NET_KEYS < 2 * BLOCK_SIZE
#error "block_bitonic's width is a power of two, at least two keys a thread"
#endif

constexpr int net_log2(int x) { return x <= 1 ? 0 : 1 + net_log2(x / 2); }
constexpr int NET_LOG = net_log2(NET_KEYS);
constexpr int NET_R = net_log2(NET_ITEMS);

// One compare-exchange step whose pairs differ in position bit J and, for
// a MIRROR step (a stage's first), every lower bit too: i and i ^ P.
template <int J, bool MIRROR>
__device__ __forceinline__ void net_step(unsigned (&x)[NET_ITEMS], unsigned* smem, int& parity, int t)
{
    constexpr int P = MIRROR ? (2 << J) - 1 : 1 << J;
    if constexpr (J < NET_R) {
#pragma unroll
        for (int q = 0; q < NET_ITEMS; ++q) {
            if (q & (1 << J)) continue;
            const unsigned a = x[q], b = x[q ^ P];
            x[q] = min(a, b);
            x[q ^ P] = max(a, b);
        }
    } else {
        // Bit J of every x[q]'s position, a lane or warp bit: the thread's.
        const bool upper = ((t >> (J - NET_R)) & 1) != 0;
        unsigned y[NET_ITEMS];  // the partners' words
        if constexpr (J < NET_R + 5) {
            // x[q]'s partner is x[q ^ RQ] of lane t ^ (P >> NET_R): each lane sends that one.
            constexpr int RQ = P & (NET_ITEMS - 1);
#pragma unroll
            for (int q = 0; q < NET_ITEMS; ++q) y[q] = __shfl_xor_sync(0xffffffffu, x[q ^ RQ], P >> NET_R);
        } else {
            unsigned* buf = smem + parity * NET_SLOTS;
            parity ^= 1;
            const int base = t * NET_ITEMS;
#pragma unroll
            for (int q = 0; q < NET_ITEMS; ++q) buf[NET_SLOT(base + q)] = x[q];
            __syncthreads();
#pragma unroll
            for (int q = 0; q < NET_ITEMS; ++q) y[q] = buf[NET_SLOT((base + q) ^ P)];
        }
#pragma unroll
        for (int q = 0; q < NET_ITEMS; ++q) x[q] = upper ? max(x[q], y[q]) : min(x[q], y[q]);
    }
}

// Stage K's steps after its mirror step: bits J, J-1, ..., 0.
template <int J>
__device__ __forceinline__ void net_merge(unsigned (&x)[NET_ITEMS], unsigned* smem, int& parity, int t)
{
    if constexpr (J >= 0) {
        net_step<J, false>(x, smem, parity, t);
        net_merge<J - 1>(x, smem, parity, t);
    }
}

// Stages K .. NET_LOG.
template <int K>
__device__ __forceinline__ void net_sort(unsigned (&x)[NET_ITEMS], unsigned* smem, int& parity, int t)
{
    if constexpr (K <= NET_LOG) {
        net_step<K - 1, true>(x, smem, parity, t);
        net_merge<K - 2>(x, smem, parity, t);
        net_sort<K + 1>(x, smem, parity, t);
    }
}

// keys_out[0..n) = keys_in[0..n) sorted (n <= NET_KEYS; descending where
// mask64 is all ones, keys.cuh's csk_encode). One block.
extern "C" __global__ void __launch_bounds__(BLOCK_SIZE, 1)
block_bitonic_sort(const csk_bits_t* __restrict__ keys_in, csk_bits_t* __restrict__ keys_out,
                   long long n, unsigned long long mask64)
{
    __shared__ unsigned smem[2 * NET_SLOTS];
    const csk_bits_t mask = (csk_bits_t)mask64;
    const int t = threadIdx.x, count = (int)n;
    unsigned x[NET_ITEMS];
#pragma unroll
    for (int q = 0; q < NET_ITEMS; ++q) {
        const int p = q * BLOCK_SIZE + t;
        x[q] = p < count ? (unsigned)csk_encode(keys_in[p], mask) : 0xFFFFFFFFu;
    }
    int parity = 0;
    net_sort<1>(x, smem, parity, t);
    unsigned* buf = smem + parity * NET_SLOTS;
#pragma unroll
    for (int q = 0; q < NET_ITEMS; ++q) buf[NET_SLOT(t * NET_ITEMS + q)] = x[q];
    __syncthreads();
    for (int p = t; p < count; p += BLOCK_SIZE) keys_out[p] = csk_decode((csk_bits_t)buf[NET_SLOT(p)], mask);
}
