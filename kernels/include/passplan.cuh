// Device-side plan of an LSD radix sort's passes, shared by radix and
// onesweep: which passes are trivial (one digit holds every key: skipped)
// and which buffer each remaining pass reads and writes. Decided on the
// device from the digit totals, so the host launches every pass without
// waiting for anything; the kernels of a skipped pass return at once.
//
//   csk_write_plan(trivial, passes, plan)       one thread: plan[p] = -1 for
//       a trivial pass, else its index among the active passes
//       | (number of active passes) << 8. If every pass is trivial, pass 0
//       still runs (a stable copy through encode/decode into the output).
//   csk_pass_of(plan, p)                        plan[p] decoded.
//
// Buffers: active pass i of k reads the input if i == 0, else what pass
// i - 1 wrote; it writes the output if k - 1 - i is even, else the
// temporary, so the last active pass (i == k - 1) writes the output.
#pragma once

struct csk_pass {
    bool skip;    // trivial pass: every kernel returns at once
    bool first;   // reads the input, encodes on load
    bool last;    // writes the output, decodes on store
    bool to_out;  // writes the output buffer, else the temporary
    int index;    // place among the active passes
};

__device__ __forceinline__ csk_pass csk_pass_of(const int* __restrict__ plan, int pass)
{
    const int planned = plan[pass];
    csk_pass p;
    p.skip = planned < 0;
    p.index = planned & 0xff;
    const int active = planned >> 8;
    p.first = p.index == 0;
    p.last = p.index == active - 1;
    p.to_out = ((active - 1 - p.index) & 1) == 0;
    return p;
}

// trivial[] may be changed (pass 0 is made active when all are trivial).
__device__ __forceinline__ void csk_write_plan(int* trivial, int passes, int* __restrict__ plan)
{
    int active = 0;
    for (int p = 0; p < passes; ++p) active += !trivial[p];
    if (active == 0) {
        trivial[0] = 0;
        active = 1;
    }
    int index = 0;
    for (int p = 0; p < passes; ++p) plan[p] = trivial[p] ? -1 : (index++ | (active << 8));
}
