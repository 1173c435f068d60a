// One 1-D array of at most NET_KEYS keys of at most 4 bytes, keys only,
// sorted by one block with a bitonic network in registers
// (plugins/block_radix.py drives it: its `array_kernel` tunable). The network
// is not stable; for keys alone that changes nothing (equal ordered words
// decode to the same key, keys.cuh).
//
// Defines: BLOCK_SIZE threads (a power of two, 32 to 1024), NET_KEYS, the
// network's width (a power of two, at least 2 x BLOCK_SIZE), NET_UNROLL
// (include/bitonic_net.cuh). The n keys become ordered words widened to 32
// bits; the NET_KEYS - n slots past them hold 0xFFFFFFFF, no smaller than
// any key's word, so the first n sorted words are the keys' (only they are
// stored). Keys are loaded coalesced (item q of thread t is key q *
// BLOCK_SIZE + t: a network sorts any arrangement) and stored coalesced
// through shared memory.
#include "keys.cuh"

#define NET_THREADS BLOCK_SIZE
#include "bitonic_net.cuh"

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
    net_load(x, keys_in, count, t, mask);
    int parity = 0;
    net_sort(x, smem, parity, t);
    net_store(x, smem + parity * NET_SLOTS, keys_out, count, t, mask);
}
