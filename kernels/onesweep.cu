// The onesweep plugin's template: single-pass (chained-scan) LSD radix sort.
// The kernels live in onesweep.cuh, shared with the counting plugin (which
// sorts bins, ordered keys minus a base, with the same passes).
//
// Tunables: BLOCK_SIZE threads (>= 2^RADIX_BITS), ITEMS_PER_THREAD keys per
// thread, RADIX_BITS bits per digit, WARP_MATCH (peers.cuh), EARLY_COUNTS, MIN_BLOCKS,
// LOOKBACK_WINDOW, UNORDERED_FIRST, UNORDERED_LATER.
#include "onesweep.cuh"
