"""Exceptions that name the plugin, kernel and configuration at fault."""
from __future__ import annotations


def describe(plugin: str, kernel: str | None, dtype: str | None, config) -> str:
    parts = [f"plugin {plugin!r}"]
    if kernel:
        parts.append(f"kernel {kernel!r}")
    if dtype:
        parts.append(f"keys {dtype}")
    if config:
        parts.append("config " + ", ".join(f"{k}={v}" for k, v in sorted(config.items())))
    return ", ".join(parts)


class KernelError(RuntimeError):
    """A kernel failed to compile or to run."""


class KernelCompileError(KernelError):
    """nvcc rejected a rendered template."""
