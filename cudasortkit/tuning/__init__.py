"""Per-device tuning: measurements, the tuning cache and measured selection.

- cache.py: the JSON cache (one file per device key), atomic writes, locking.
- policy.py: picking a plugin and config from measurements (pure, testable).
- tuner.py: timing configs on the GPU and checking them against NumPy.
- runtime.py: the select hooks, lazy first-run tuning, sweeps, explain().

Importing this package is cheap and never imports pycuda.
"""
from .runtime import autotune_enabled, explain, install, reset

__all__ = ["explain", "install", "reset", "autotune_enabled"]
