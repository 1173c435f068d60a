// Overlapped launches (programmatic dependent launch, sm_90 and up).
//
// A kernel whose __global__ prototype names CSK_OVERLAPPED before its name
// may be launched before the grid queued ahead of it on the stream has
// finished: the core does so inside the CUDA graphs of launch plans, for a
// launch that follows another launch (cudasortkit/launch/plans.py). The
// build reads the mark from the prototype (cudasortkit/build/prototype.py).
//
// Such a kernel keeps one rule: it calls csk_wait_prior_grid() before it
// reads or writes global memory. The call returns once the grids before it
// on the stream have finished and their writes are visible (at once when
// the kernel was launched the usual way).
//
// The grid before never triggers the launch early
// (griddepcontrol.launch_dependents): the next grid then starts as this
// one's last blocks leave, its launch overlapping the end of this one. An
// early trigger let the next pass's blocks onto the SMs while the last
// ones were still busy, packed onto the few free ones: a 2^20-key sort,
// whose passes have about as many tiles as an H100 has SMs, went from 79
// to 90 us (docs/algorithms/onesweep.md).
#pragma once

#define CSK_OVERLAPPED

__device__ __forceinline__ void csk_wait_prior_grid()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
