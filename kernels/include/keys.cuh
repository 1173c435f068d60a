// Key and value types, and the order-preserving key transform shared by every
// cudasortkit kernel.
//
// The rendered prelude (cudasortkit/build/render.py) defines, before this header:
//   CSK_KEY_BYTES    1, 2, 4 or 8     width of a key
//   CSK_KEY_KIND     0, 1 or 2        CSK_KIND_UNSIGNED / _SIGNED / _FLOAT
//   CSK_KEY_BFLOAT   0 or 1           2-byte floats are bfloat16, not IEEE half
//   CSK_VALUE_BYTES  0, 4 or 8        width of the value payload (0: keys only)
//   one macro per tunable, upper-cased (BLOCK_SIZE, ITEMS_PER_THREAD, ...)
//
// Kernels never see the key's own C type: they move keys as unsigned words
// (csk_bits_t) and compare "ordered" words, where unsigned comparison gives
// NumPy's order: every NaN is the largest key, -0.0 equals +0.0. Descending
// order (NumPy 2.5's descending=True) is the same transform xor-ed with all
// ones, except that NaNs stay the largest word: NaNs come last in both orders.
// So every algorithm only ever sorts ascending, and a stable algorithm stays
// stable when descending (equal keys, NaNs among them, keep input order).
#pragma once

#define CSK_KIND_UNSIGNED 0
#define CSK_KIND_SIGNED 1
#define CSK_KIND_FLOAT 2

#if !defined(CSK_KEY_BYTES) || !defined(CSK_KEY_KIND) || !defined(CSK_VALUE_BYTES)
#error "keys.cuh needs the cudasortkit prelude (CSK_KEY_BYTES, CSK_KEY_KIND, CSK_VALUE_BYTES)"
#endif

#if CSK_KEY_BYTES == 1
typedef unsigned char csk_bits_t;
#elif CSK_KEY_BYTES == 2
typedef unsigned short csk_bits_t;
#elif CSK_KEY_BYTES == 4
typedef unsigned int csk_bits_t;
#elif CSK_KEY_BYTES == 8
typedef unsigned long long csk_bits_t;
#else
#error "CSK_KEY_BYTES must be 1, 2, 4 or 8"
#endif

#if CSK_VALUE_BYTES == 8
typedef unsigned long long csk_value_t;
#define CSK_HAS_VALUES 1
#elif CSK_VALUE_BYTES == 4
typedef unsigned int csk_value_t;
#define CSK_HAS_VALUES 1
#elif CSK_VALUE_BYTES == 0
typedef unsigned int csk_value_t;  // placeholder so signatures stay the same
#define CSK_HAS_VALUES 0
#else
#error "CSK_VALUE_BYTES must be 0, 4 or 8"
#endif

// Indices and sizes: 64-bit, so arrays past 2^31 keys work everywhere.
typedef long long csk_index_t;

#define CSK_KEY_BITS (8 * CSK_KEY_BYTES)
#define CSK_ALL_ONES ((csk_bits_t)~(csk_bits_t)0)
#define CSK_SIGN_BIT ((csk_bits_t)((csk_bits_t)1 << (CSK_KEY_BITS - 1)))

#if CSK_KEY_KIND == CSK_KIND_FLOAT
#ifndef CSK_KEY_BFLOAT
#define CSK_KEY_BFLOAT 0
#endif
#if CSK_KEY_BYTES == 2 && CSK_KEY_BFLOAT
#define CSK_INF_BITS ((csk_bits_t)0x7F80u)
#elif CSK_KEY_BYTES == 2
#define CSK_INF_BITS ((csk_bits_t)0x7C00u)
#elif CSK_KEY_BYTES == 4
#define CSK_INF_BITS ((csk_bits_t)0x7F800000u)
#elif CSK_KEY_BYTES == 8
#define CSK_INF_BITS ((csk_bits_t)0x7FF0000000000000ull)
#else
#error "float keys are 2, 4 or 8 bytes"
#endif
#endif

// Key bits -> ordered word (ascending unsigned order == NumPy's order).
__device__ __forceinline__ csk_bits_t csk_to_ordered(csk_bits_t x)
{
#if CSK_KEY_KIND == CSK_KIND_UNSIGNED
    return x;
#elif CSK_KEY_KIND == CSK_KIND_SIGNED
    return (csk_bits_t)(x ^ CSK_SIGN_BIT);
#else
    // Selects, no branches: a branch on a loaded key makes the next load
    // wait for it, so a thread's unrolled loads of several keys would run
    // one after another (block_bitonic's float32 sort of 4,096 keys took
    // 9.9 us against 7.4 for uint32 on an H100 with branches here).
    const csk_bits_t magnitude = (csk_bits_t)(x & (csk_bits_t)~CSK_SIGN_BIT);
    const csk_bits_t y = magnitude == 0 ? (csk_bits_t)0 : x;  // -0.0 == +0.0
    const csk_bits_t u = (y & CSK_SIGN_BIT) ? (csk_bits_t)~y : (csk_bits_t)(y | CSK_SIGN_BIT);
    return magnitude > CSK_INF_BITS ? CSK_ALL_ONES : u;       // any NaN: last
#endif
}

// Ordered word -> key bits. NaNs come back as one quiet NaN, zeros as +0.0.
__device__ __forceinline__ csk_bits_t csk_from_ordered(csk_bits_t u)
{
#if CSK_KEY_KIND == CSK_KIND_UNSIGNED
    return u;
#elif CSK_KEY_KIND == CSK_KIND_SIGNED
    return (csk_bits_t)(u ^ CSK_SIGN_BIT);
#else
    return (u & CSK_SIGN_BIT) ? (csk_bits_t)(u ^ CSK_SIGN_BIT) : (csk_bits_t)~u;
#endif
}

// `mask` is 0 for ascending and all ones for descending (kernel argument).
// Float NaNs (ordered word all ones, which no other key has in either order)
// are not flipped: they sort last both ways.
__device__ __forceinline__ csk_bits_t csk_encode(csk_bits_t x, csk_bits_t mask)
{
    const csk_bits_t u = csk_to_ordered(x);
#if CSK_KEY_KIND == CSK_KIND_FLOAT
    return u == CSK_ALL_ONES ? u : (csk_bits_t)(u ^ mask);
#else
    return (csk_bits_t)(u ^ mask);
#endif
}

__device__ __forceinline__ csk_bits_t csk_decode(csk_bits_t u, csk_bits_t mask)
{
#if CSK_KEY_KIND == CSK_KIND_FLOAT
    return csk_from_ordered(u == CSK_ALL_ONES ? u : (csk_bits_t)(u ^ mask));
#else
    return csk_from_ordered((csk_bits_t)(u ^ mask));
#endif
}

// The digit of an ordered word that a radix pass looks at.
__device__ __forceinline__ unsigned csk_digit(csk_bits_t u, int shift, int bits)
{
    return (unsigned)((u >> shift) & (((csk_bits_t)1 << bits) - 1));
}

// A block's tile of `capacity` keys (and as many values) in dynamic shared
// memory: the values first (8-byte aligned), then the keys. The launch sizes
// the dynamic shared memory: capacity * (CSK_KEY_BYTES + CSK_VALUE_BYTES).
struct csk_tile {
    csk_bits_t* keys;
    csk_value_t* values;
};

__device__ __forceinline__ csk_tile csk_shared_tile(int capacity)
{
    extern __shared__ unsigned long long csk_tile_smem[];
    csk_tile t;
#if CSK_HAS_VALUES
    t.values = (csk_value_t*)csk_tile_smem;
    t.keys = (csk_bits_t*)(t.values + capacity);
#else
    t.values = 0;
    t.keys = (csk_bits_t*)csk_tile_smem;
    (void)capacity;
#endif
    return t;
}

// Striped (coalesced) store of a shared tile's first `count` keys (and values)
// to keys[0, count) / values[0, count), decoding ordered words if `decode`.
template <int ITEMS, int BLOCK>
__device__ __forceinline__ void csk_store_tile(csk_tile t, csk_bits_t* __restrict__ keys,
                                               csk_value_t* __restrict__ values, long long count,
                                               bool decode, csk_bits_t mask)
{
#pragma unroll
    for (int r = 0; r < ITEMS; ++r) {
        const int i = r * BLOCK + threadIdx.x;
        if (i < count) {
            const csk_bits_t u = t.keys[i];
            keys[i] = decode ? csk_decode(u, mask) : u;
#if CSK_HAS_VALUES
            values[i] = t.values[i];
#endif
        }
    }
    (void)values;
}

// Striped (coalesced) load of one tile into registers: item r of thread t is
// keys[base + r * BLOCK + t]; positions at or past `end` read as `fill`.
// ENCODE turns keys into ordered words (first pass) as they arrive.
template <int ITEMS, int BLOCK, bool ENCODE>
__device__ __forceinline__ void csk_load_striped(const csk_bits_t* __restrict__ keys, long long base,
                                                 long long end, csk_bits_t (&u)[ITEMS],
                                                 csk_bits_t mask, csk_bits_t fill)
{
#pragma unroll
    for (int r = 0; r < ITEMS; ++r) {
        const long long i = base + r * BLOCK + threadIdx.x;
        u[r] = i < end ? (ENCODE ? csk_encode(keys[i], mask) : keys[i]) : fill;
    }
}
