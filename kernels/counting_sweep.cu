// The counting plugin's pairs and argsort: the chained-scan LSD passes of
// onesweep.cuh over the bits of each key's bin (cudasortkit/sdk/sweep.py drives
// them with base = the smallest ordered key and sort_bits = the bits the bin
// count needs). The passes get their own geometry: SCATTER_BLOCK threads,
// SCATTER_ITEMS keys a thread, 8-bit digits, early counts. BLOCK_SIZE (the
// keys-only kernels' tunable) is redefined for this module only.
#undef BLOCK_SIZE
#define BLOCK_SIZE SCATTER_BLOCK
#define ITEMS_PER_THREAD SCATTER_ITEMS
#define RADIX_BITS 8
#define EARLY_COUNTS 1
#include "onesweep.cuh"
