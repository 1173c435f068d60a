"""Kernel sources to device functions: templates, rendering, nvcc through pycuda
(one cache), kernel prototypes, and the core kernels."""
