"""Per-device tuning: measurements, the tuning cache and measured selection.

- cache.py: the JSON cache (one file per device key), atomic writes, locking.
- policy.py: estimates and decisions from measurements (pure, testable).
- tuner.py: timing configs on the GPU and checking them against NumPy.
- runtime.py: this process's tables (one per device and cache dir) and sweeps.
- measured.py: the measured select policy and its first-run learner.

Importing this package is cheap and never imports pycuda.
"""
from .runtime import autotune_enabled, reset

__all__ = ["reset", "autotune_enabled"]
