"""The package version (one place: setup.cfg reads it, the tuning cache keys on it)."""
__version__ = "0.1.0"
