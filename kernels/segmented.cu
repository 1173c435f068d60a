// Helpers of the segmented radix sort (plugins/segmented_radix.py): the
// segment of a position, packing a segment id above a key's ordered word,
// and the stores that undo it. The sorting itself is onesweep.cu's.
//
// Segments are uniform rows (offsets null: segment of i is i / row_len) or
// ragged CUB-style int64 offsets[0..count] (binary search; empty segments
// hold no position, so none is ever found in one).
//
// Tunables: BLOCK_SIZE threads (grid-stride loops).
#include "keys.cuh"
#include "segments.cuh"

__device__ __forceinline__ long long seg_of(long long i, long long row_len,
                                            const long long* __restrict__ offsets, long long count)
{
    return offsets == nullptr ? i / row_len : csk_segment_of(offsets, count, i);
}

__device__ __forceinline__ long long seg_start(long long s, long long row_len,
                                               const long long* __restrict__ offsets)
{
    return offsets == nullptr ? s * row_len : offsets[s];
}

// packed[i] = segment(i) << CSK_KEY_BITS | ordered word of keys[i]: one
// ascending sort of `packed` sorts every segment on its own.
extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
seg_pack(const csk_bits_t* __restrict__ keys, unsigned long long* __restrict__ packed, long long n,
         long long row_len, const long long* __restrict__ offsets, long long count,
         unsigned long long mask)
{
    const long long stride = (long long)gridDim.x * BLOCK_SIZE;
    for (long long i = blockIdx.x * (long long)BLOCK_SIZE + threadIdx.x; i < n; i += stride) {
        const unsigned long long s = (unsigned long long)seg_of(i, row_len, offsets, count);
        const unsigned long long u = csk_encode(keys[i], (csk_bits_t)mask);
#if CSK_KEY_BITS < 64
        packed[i] = (s << CSK_KEY_BITS) | u;
#else
        packed[i] = u;
        (void)s;
#endif
    }
}

// The inverse of seg_pack for sorted words: keys_out[i] = the key in the
// low bits; with argsort (index != null, 32-bit positions from the sort),
// order[i] = the position, minus its segment's start when `local`.
extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
seg_unpack(const unsigned long long* __restrict__ packed, csk_bits_t* __restrict__ keys_out,
           const unsigned* __restrict__ index, long long* __restrict__ order, long long n,
           long long row_len, const long long* __restrict__ offsets, long long count, int local,
           unsigned long long mask)
{
    const long long stride = (long long)gridDim.x * BLOCK_SIZE;
    for (long long i = blockIdx.x * (long long)BLOCK_SIZE + threadIdx.x; i < n; i += stride) {
        keys_out[i] = csk_decode((csk_bits_t)packed[i], (csk_bits_t)mask);
        if (index != nullptr) {
            const long long at = index[i];
            order[i] = local ? at - seg_start(seg_of(i, row_len, offsets, count), row_len, offsets) : at;
        }
    }
}

// segkey[i] = the segment of position index[i] (the second sort of the
// two-sort form: keys first, then stably by segment).
extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
seg_ids_of(const unsigned* __restrict__ index, unsigned* __restrict__ segkey, long long n,
           long long row_len, const long long* __restrict__ offsets, long long count)
{
    const long long stride = (long long)gridDim.x * BLOCK_SIZE;
    for (long long i = blockIdx.x * (long long)BLOCK_SIZE + threadIdx.x; i < n; i += stride)
        segkey[i] = (unsigned)seg_of(index[i], row_len, offsets, count);
}

// Final gather of the two-sort form: keys_out[i] = keys_in[index[i]]; values
// by mode (segments.cuh's csk_write_value): argsort in the segment or in the
// whole array, or pairs (values_in gathered).
extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
seg_gather(const csk_bits_t* __restrict__ keys_in, csk_bits_t* __restrict__ keys_out,
           const csk_value_t* __restrict__ values_in, csk_value_t* __restrict__ values_out,
           const unsigned* __restrict__ index, long long n, long long row_len,
           const long long* __restrict__ offsets, long long count, int mode)
{
    const long long stride = (long long)gridDim.x * BLOCK_SIZE;
    for (long long i = blockIdx.x * (long long)BLOCK_SIZE + threadIdx.x; i < n; i += stride) {
        const long long at = index[i];
        keys_out[i] = keys_in[at];
        csk_write_value(values_out, values_in, i, at, mode, [&] {
            return seg_start(seg_of(i, row_len, offsets, count), row_len, offsets);
        });
    }
}
