// Warp-level multisplit helper shared by the ranking kernels (radix,
// onesweep, counting): which lanes of a warp hold the same small label
// (a digit), so that one lane per label can bump a shared counter and every
// lane knows its rank among its peers.
//
//   csk_warp_peers<BITS>(label, item)
//       mask of the lanes whose label equals this lane's; labels must be
//       below 2^BITS and every lane of the warp must call it. `item` is the
//       caller's (unrolled, so compile-time) item index: it picks the method.
//
// Two methods, mixed by the WARP_MATCH tunable of the plugin (every
// WARP_MATCH-th item uses the second; 0: never, 1: always):
//   ballots: one vote per label bit (4 ALU instructions a bit, below);
//   __match_any_sync: one instruction (sm_70+), but on sm_90 it issues to a
//     narrow pipe (ADU). Nsight Compute on an H100 showed ranking kernels that
//     used it for every key limited by that pipe (ADU 60-75% busy, short
//     scoreboard stalls) and ballot-only ones limited by the ALU; mixing the
//     two keeps both pipes busy. The tuner picks the mix per device.
#pragma once

#ifndef WARP_MATCH
#define WARP_MATCH 0
#endif

template <int BITS>
__device__ __forceinline__ unsigned csk_warp_peers(unsigned label, int item)
{
#if WARP_MATCH > 0
    if (item % WARP_MATCH == 0) return __match_any_sync(0xffffffffu, label);
#else
    (void)item;
#endif
    // Per bit: one LOP3 tests it (predicate), one vote, one LEA.HI makes the
    // flip mask (bit clear: all ones), one LOP3 folds vote ^ flip into peers:
    // 4 instructions. The obvious C++ (set ? vote : ~vote) compiles to about
    // 7 on sm_90 (the bit is tested twice), and ranking is ALU-bound. The
    // flip is arithmetic, not `@!p not`: predicates kept live across many
    // votes made ptxas fail register allocation for 64-bit keys.
    unsigned peers = 0xffffffffu;
#pragma unroll
    for (int b = 0; b < BITS; ++b) {
        unsigned vote, flip;
        asm("{\n\t.reg .pred p;\n\t"
            "and.b32 %1, %2, %3;\n\t"
            "setp.ne.u32 p, %1, 0;\n\t"
            "vote.sync.ballot.b32 %0, p, 0xffffffff;\n\t"
            "shr.u32 %1, %1, %4;\n\t"
            "sub.u32 %1, %1, 1;\n\t}"
            : "=r"(vote), "=r"(flip) : "r"(label), "r"(1u << b), "r"(b));
        peers &= vote ^ flip;
    }
    return peers;
}
