"""Host arrays sorted on the GPU: the pipeline, transfers, pinned and host
memory, out-of-core sorts and the device memory limit."""
