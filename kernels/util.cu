// Small kernels the core itself launches (not tied to one algorithm).
#include "keys.cuh"

// out[i] = i: the payload that turns a pair sort into an argsort.
extern "C" __global__ void csk_iota64(long long* __restrict__ out, long long n)
{
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += stride)
        out[i] = i;
}
