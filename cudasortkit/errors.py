"""Exceptions that name the plugin, kernel and configuration at fault."""
from __future__ import annotations

import sys
import warnings


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

    @classmethod
    def failed(cls, plugin: str, kernel: str | None, dtype: str | None, config, what: str,
               cause) -> "KernelError":
        """The one form of a failed launch: "<describe(...)>: <what> failed: <cause>"."""
        return cls(f"{describe(plugin, kernel, dtype, config)}: {what} failed: {cause}")


class KernelCompileError(KernelError):
    """nvcc rejected a rendered template."""


class KernelSignatureError(KernelCompileError):
    """A kernel's prototype cannot give pycuda's argument letters: the kernel
    is not declared, its declarations disagree, or a parameter's type has no
    letter (cudasortkit/build/prototype.py)."""


def warn_caller(message: str, category=RuntimeWarning) -> None:
    """warnings.warn pointing at the first frame outside cudasortkit: the
    caller's own line, however deep in the library the warning arises. A
    frame is the library's when its module is (cudasortkit.plugins too,
    whose files sit beside the package in a checkout)."""
    level, frame = 2, sys._getframe(1)  # stacklevel 2: warn_caller's caller
    while frame is not None and _is_ours(frame.f_globals.get("__name__", "")):
        frame = frame.f_back
        level += 1
    warnings.warn(message, category, stacklevel=level)


def _is_ours(module: str) -> bool:
    return module == "cudasortkit" or module.startswith("cudasortkit.")


class PluginError(RuntimeError):
    """A plugin's own code failed (raised, or called sys.exit); the registry
    has taken it out of service (cudasortkit.sdk.registry.guarded)."""

    def __init__(self, plugin: str, reason: str):
        super().__init__(f"plugin {plugin!r} failed and is disabled: {reason} "
                         "(python -m cudasortkit list shows it)")
        self.plugin = plugin
        self.reason = reason
