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
// Stage k (1 .. NET_LOG) merges runs of 2^k positions with steps on bits
// k-1, ..., 0; a step on bit j pairs i with i ^ 2^j and the lower position
// keeps the smaller word: in registers for j < NET_R, through
// __shfl_xor_sync for lane bits, through shared memory for warp bits (two
// buffers used in turn: one barrier a step). Directions: a run whose
// position bit k is 1 must end stage k descending (k < NET_LOG). Its words
// are complemented for the stage instead (x ^ ~0 reverses the order), so
// every step is ascending: before stage k, x[q] ^= ~0 where bit k-1 ^ bit k
// of its position is 1, taking bit 0 (before stage 1) and bit NET_LOG as 0.
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

// Bit b of the position of x[q] in thread t (q < NET_ITEMS: its bits are
// the low NET_R).
template <int B>
__device__ __forceinline__ unsigned net_bit(int t, int q)
{
    if constexpr (B < NET_R) return (unsigned)(q >> B) & 1u;
    else return (unsigned)(t >> (B - NET_R)) & 1u;
}

// Whether stage K sorts x[q]'s run descending (complemented words).
template <int K>
__device__ __forceinline__ unsigned net_down(int t, int q)
{
    if constexpr (K >= 1 && K < NET_LOG) return net_bit<K>(t, q);
    else return 0u;
}

// Before stage K: complement the words whose direction changes.
template <int K>
__device__ __forceinline__ void net_flip(unsigned (&x)[NET_ITEMS], int t)
{
#pragma unroll
    for (int q = 0; q < NET_ITEMS; ++q) x[q] ^= 0u - (net_down<K - 1>(t, q) ^ net_down<K>(t, q));
}

// One ascending compare-exchange step on position bit J.
template <int J>
__device__ __forceinline__ void net_step(unsigned (&x)[NET_ITEMS], unsigned* smem, int& parity, int t)
{
    if constexpr (J < NET_R) {
#pragma unroll
        for (int q = 0; q < NET_ITEMS; ++q) {
            if (q & (1 << J)) continue;
            const unsigned a = x[q], b = x[q | 1 << J];
            x[q] = min(a, b);
            x[q | 1 << J] = max(a, b);
        }
    } else if constexpr (J < NET_R + 5) {
        const int m = 1 << (J - NET_R);
        const bool upper = (t & m) != 0;  // lane bit
#pragma unroll
        for (int q = 0; q < NET_ITEMS; ++q) {
            const unsigned y = __shfl_xor_sync(0xffffffffu, x[q], m);
            x[q] = upper ? max(x[q], y) : min(x[q], y);
        }
    } else {
        const bool upper = net_bit<J>(t, 0) != 0;  // warp bit
        unsigned* buf = smem + parity * NET_SLOTS;
        parity ^= 1;
        const int base = t * NET_ITEMS;
#pragma unroll
        for (int q = 0; q < NET_ITEMS; ++q) buf[NET_SLOT(base + q)] = x[q];
        __syncthreads();
#pragma unroll
        for (int q = 0; q < NET_ITEMS; ++q) {
            const unsigned y = buf[NET_SLOT((base + q) ^ (1 << J))];
            x[q] = upper ? max(x[q], y) : min(x[q], y);
        }
    }
}

// Stage K's steps on bits J, J-1, ..., 0.
template <int K, int J>
__device__ __forceinline__ void net_merge(unsigned (&x)[NET_ITEMS], unsigned* smem, int& parity, int t)
{
    if constexpr (J >= 0) {
        net_step<J>(x, smem, parity, t);
        net_merge<K, J - 1>(x, smem, parity, t);
    }
}

// Stages K .. NET_LOG.
template <int K>
__device__ __forceinline__ void net_sort(unsigned (&x)[NET_ITEMS], unsigned* smem, int& parity, int t)
{
    if constexpr (K <= NET_LOG) {
        net_flip<K>(x, t);
        net_merge<K, K - 1>(x, smem, parity, t);
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
