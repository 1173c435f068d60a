"""A complete third-party cudasortkit plugin in one small class.

Rank sort: each key's final position is the number of keys that sort before
it (smaller keys, and equal keys earlier in the input), so every thread
computes one key's rank and writes it there. O(n^2) work: stable and simple,
for small arrays only, which is why `unsupported` declines large ones.
"""
from cudasortkit import SortPlugin, Tunable
from cudasortkit.dtypes import KEY_DTYPES, itemsize

MAX_KEYS = 1 << 16


class RankSort(SortPlugin):
    name = "ranksort"
    summary = "example third-party plugin: O(n^2) stable rank sort for n <= 65536"
    dtypes = KEY_DTYPES
    stable = True
    pairs = True
    tunables = {"block_size": Tunable(256, (64, 128, 256, 512))}
    templates = ("ranksort.cu",)
    template_package = "csk_ranksort"  # ranksort.cu ships next to this file

    def unsupported(self, request):
        if request.n > MAX_KEYS:
            return f"ranksort does O(n^2) work and takes at most {MAX_KEYS} keys"
        return super().unsupported(request)

    @staticmethod
    def shared_bytes(config, dtype) -> int:
        """The tile of keys a block stages in shared memory."""
        return config["block_size"] * itemsize(dtype)

    def valid_config(self, config, dtype, value_bytes, limits):
        # `limits` is the device's (cudasortkit.gpu.device.DeviceLimits)
        return (config["block_size"] <= limits.max_threads_per_block
                and self.shared_bytes(config, dtype) <= limits.shared_per_block)

    def run(self, job):
        block = job.config["block_size"]
        rank = job.kernel("ranksort.cu", "ranksort_scatter")  # argument types: from the .cu
        job.launch(rank, job.blocks(job.n, block), block, job.keys_in, job.values_in,
                   job.keys_out, job.values_out, job.n, job.desc_mask,
                   shared=self.shared_bytes(job.config, job.dtype))
