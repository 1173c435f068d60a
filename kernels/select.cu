// Selection by sort-then-slice (plugins/sort_select.py drives it).
//
// select_encode writes each key's selection word: the ordered word of
// keys.cuh (ascending unsigned order == NumPy's order, NaN the largest
// word, -0.0 == +0.0), bit-inverted for largest=1. Ascending words are then
// the selection order of sdk/selection.py: largest first with NaNs before
// everything (torch.topk's NaN rule), or smallest first with NaNs last; a
// stable sort of the words keeps equal keys in index order (the tie rule).
// select_gather takes the first k positions of every sorted row and writes
// the caller's own key bits (so -0.0 and NaN payloads come back as given).
#include "keys.cuh"

extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
select_encode(const csk_bits_t* __restrict__ keys, csk_bits_t* __restrict__ words, long long n,
              int largest)
{
    const csk_bits_t flip = largest ? CSK_ALL_ONES : (csk_bits_t)0;
    const long long stride = (long long)gridDim.x * BLOCK_SIZE;
    for (long long i = blockIdx.x * (long long)BLOCK_SIZE + threadIdx.x; i < n; i += stride)
        words[i] = (csk_bits_t)(csk_to_ordered(keys[i]) ^ flip);
}

// order: rows x row_len positions in the row (a stable ascending argsort of
// each row's words); out: rows x k keys and int64 positions.
extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
select_gather(const csk_bits_t* __restrict__ keys, const long long* __restrict__ order,
              csk_bits_t* __restrict__ keys_out, long long* __restrict__ index_out,
              long long rows, long long row_len, long long k)
{
    const long long total = rows * k;
    const long long stride = (long long)gridDim.x * BLOCK_SIZE;
    for (long long j = blockIdx.x * (long long)BLOCK_SIZE + threadIdx.x; j < total; j += stride) {
        const long long r = j / k;
        const long long i = order[r * row_len + (j - r * k)];
        index_out[j] = i;
        keys_out[j] = keys[r * row_len + i];
    }
}
