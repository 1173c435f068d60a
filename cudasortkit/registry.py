"""Plugin discovery through the ``cudasortkit.algorithms`` entry-point group.

Discovery is lazy and forgiving: every entry point is loaded and validated
once, on first use; one that fails to import or declares itself wrongly is
kept with its error (shown by ``python -m cudasortkit list``) and skipped by
selection, so one bad plugin never breaks the others.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from importlib import metadata

from .plugin import SortPlugin, check_plugin_class

GROUP = "cudasortkit.algorithms"


@dataclass
class PluginEntry:
    """One entry point: its plugin instance, or why it could not be loaded."""

    name: str
    target: str
    distribution: str | None = None
    plugin: SortPlugin | None = None
    error: str | None = None
    extra: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.plugin is not None


_lock = threading.Lock()
_entries: dict[str, PluginEntry] | None = None
#: Bumped by refresh() and register(): memoised choices key on it.
generation = 0


def _load(ep) -> PluginEntry:
    dist = getattr(getattr(ep, "dist", None), "name", None)
    entry = PluginEntry(name=ep.name, target=ep.value, distribution=dist)
    try:
        cls = ep.load()
        check_plugin_class(cls, ep.name)
        entry.plugin = cls()
    except Exception as exc:  # a broken plugin must not break discovery
        entry.error = f"{type(exc).__name__}: {exc}"
    return entry


def discover() -> dict[str, PluginEntry]:
    """Load every entry point; built-ins first, so a third-party plugin that
    reuses a taken name is the one listed as an error (under name@dist)."""
    def order(ep):
        dist = getattr(getattr(ep, "dist", None), "name", None)
        return (dist != "cudasortkit", ep.name, ep.value)

    entries: dict[str, PluginEntry] = {}
    for ep in sorted(metadata.entry_points(group=GROUP), key=order):
        if ep.name in entries:
            dist = getattr(getattr(ep, "dist", None), "name", None) or "?"
            first = entries[ep.name]
            entries[f"{ep.name}@{dist}"] = PluginEntry(
                name=ep.name, target=ep.value, distribution=dist,
                error=f"ValueError: name {ep.name!r} is registered twice "
                      f"({first.target} and {ep.value}); this one is ignored")
            continue
        entries[ep.name] = _load(ep)
    return entries


def entries() -> dict[str, PluginEntry]:
    """All entry points by name, loaded on first call."""
    global _entries
    with _lock:
        if _entries is None:
            _entries = discover()
        return _entries


def refresh() -> None:
    """Forget what was discovered (after installing a plugin package)."""
    global _entries, generation
    import importlib

    importlib.invalidate_caches()
    with _lock:
        _entries = None
        generation += 1


def plugins() -> dict[str, SortPlugin]:
    """The working plugins by name."""
    return {name: e.plugin for name, e in entries().items() if e.ok}


def register(plugin_cls) -> None:
    """Add a plugin class at run time (tests, notebooks); validated as usual."""
    global generation
    check_plugin_class(plugin_cls)
    table = entries()
    with _lock:
        table[plugin_cls.name] = PluginEntry(name=plugin_cls.name, target=plugin_cls.__qualname__,
                                             plugin=plugin_cls())
        generation += 1
