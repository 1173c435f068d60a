// Uniform rows of at most NET_KEYS keys of at most 4 bytes, keys only, each
// sorted by one warp with a bitonic network in registers
// (include/bitonic_net.cuh with NET_THREADS 32); WB_THREADS / 32 rows a
// block (plugins/block_radix.py and plugins/rows.py drive it: their
// `row_network` tunable). Not stable; for keys alone that changes nothing
// (equal ordered words decode to the same key, keys.cuh).
//
// Defines: WB_THREADS threads a block (a multiple of 32, below), NET_KEYS
// (a power of two, 64 to 1024: row_len <= NET_KEYS), NET_UNROLL. A row's row_len keys
// become ordered words; its NET_KEYS - row_len slots past them hold
// 0xFFFFFFFF, no smaller than any key's word, so the first row_len sorted
// words are the row's. Lane l loads keys q * 32 + l (coalesced) and stores
// through its warp's part of shared memory, coalesced again.
#include "keys.cuh"

// Every template of a plugin compiles for every dtype it declares (rows
// declares 8-byte keys too): for keys wider than 4 bytes the kernel only
// traps. The plugins launch it for keys of at most 4 bytes only
// (warp_rows.serves checks).
#if CSK_KEY_BYTES <= 4
#define NET_THREADS 32
#ifndef NET_KEYS
#define NET_KEYS 1024  // the widest a warp holds (warp_rows.WIDEST)
#endif
#include "bitonic_net.cuh"
#endif

// WB_THREADS, not the plugin's BLOCK_SIZE tunable, is the block (the
// launch's, warp_rows.BLOCK): its warps' buffers are static shared memory.
#ifndef WB_THREADS
#define WB_THREADS 256
#endif
#if WB_THREADS % 32 != 0
#error "warp_bitonic needs whole warps"
#endif
#define WB_WARPS (WB_THREADS / 32)

extern "C" __global__ void __launch_bounds__(WB_THREADS)
warp_bitonic_rows(const csk_bits_t* __restrict__ keys_in, csk_bits_t* __restrict__ keys_out,
                  long long rows, long long row_len, unsigned long long mask64)
{
#if CSK_KEY_BYTES <= 4
    __shared__ unsigned smem[WB_WARPS * NET_SLOTS];
    const csk_bits_t mask = (csk_bits_t)mask64;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const long long row = (long long)blockIdx.x * WB_WARPS + warp;
    if (row >= rows) return;  // a whole warp: the network syncs warps only
    const int len = (int)row_len;
    unsigned x[NET_ITEMS];
    net_load(x, keys_in + row * row_len, len, lane, mask);
    int parity = 0;
    net_sort(x, nullptr, parity, lane);
    net_store(x, smem + warp * NET_SLOTS, keys_out + row * row_len, len, lane, mask);
#else
    __trap();
#endif
}
