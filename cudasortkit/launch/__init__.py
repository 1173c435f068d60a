"""Running one job on the device: result buffers, launch plans and CUDA graphs."""
