"""Plugin discovery through entry points, one group per plugin kind.

Sort plugins live in ``cudasortkit.algorithms``; every other kind of plugin
(selection, ...) has its own group and base class, listed in `KINDS`. Every
function here takes the group it works on (default: the sorts'); plugin
objects carry theirs (`entry_point_group`), so faults find their table.

Discovery is lazy and forgiving: every entry point is loaded and validated
once, on first use; one that fails to import or declares itself wrongly is
kept with its error (shown by ``python -m cudasortkit list``) and skipped by
selection, so one bad plugin never breaks the others.

The same holds later: every call into plugin code runs under `guarded` (or
`call`), and a plugin whose code raises or exits is taken out of service
with a one-line reason (`mark_broken`) until the next `refresh()`.
"""
from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass, field
from importlib import metadata

from ..errors import PluginError
from .multikey import MultikeyPlugin
from .plugin import SortPlugin
from .search import SearchPlugin
from .selection import SelectPlugin

GROUP = SortPlugin.entry_point_group

#: Entry-point group -> the base class its plugins subclass. The base class
#: checks a plugin's declarations (`check_declarations(cls, entry_point_name)`).
KINDS: dict[str, type] = {GROUP: SortPlugin, MultikeyPlugin.entry_point_group: MultikeyPlugin,
                          SearchPlugin.entry_point_group: SearchPlugin,
                          SelectPlugin.entry_point_group: SelectPlugin}


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
        """Loaded and not taken out of service (a broken one keeps its
        instance, so listings still show what it declares)."""
        return self.plugin is not None and self.error is None


_lock = threading.Lock()
#: group -> name -> entry, each group loaded on first use.
_entries: dict[str, dict[str, PluginEntry]] = {}
#: Bumped by refresh(), register() and mark_broken(): memoised choices key on it.
generation = 0


def _reason(what: str, exc: BaseException) -> str:
    """One line saying which plugin code failed and how:
    "<what> raised <Type>: <first line of the message>"."""
    try:
        lines = str(exc).strip().splitlines()
    except Exception:  # the plugin's own exception class may fail here too
        lines = []
    message = f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
    return f"{what} raised {message[:200]}"


def group_of(plugin) -> str:
    """The entry-point group of a plugin instance or class (its kind's)."""
    return getattr(plugin, "entry_point_group", GROUP)


def check_class(cls, group: str = GROUP, entry_point_name: str | None = None) -> None:
    """Raise TypeError/ValueError saying what is wrong with plugin class
    `cls` of the kind registered under `group`."""
    base = KINDS[group]
    if not (isinstance(cls, type) and issubclass(cls, base)) or cls is base:
        raise TypeError(f"{cls!r} is not a subclass of cudasortkit.{base.__name__} "
                        f"(entry-point group {group})")
    base.check_declarations(cls, entry_point_name)


def _load(ep, group: str) -> PluginEntry:
    """The entry of one entry point. Nothing the plugin's module or class
    does (an exception, sys.exit) escapes: it becomes the entry's error."""
    dist = getattr(getattr(ep, "dist", None), "name", None)
    entry = PluginEntry(name=ep.name, target=ep.value, distribution=dist)
    step = "import"
    try:
        cls = ep.load()
        step = "declaration check"
        check_class(cls, group, ep.name)
        step = "construction"
        entry.plugin = cls()
    except (Exception, SystemExit) as exc:  # a broken plugin must not break discovery
        entry.error = _reason(step, exc)
    return entry


def discover(group: str = GROUP) -> dict[str, PluginEntry]:
    """Load every entry point; built-ins first, so a third-party plugin that
    reuses a taken name is the one listed as an error (under name@dist)."""
    def order(ep):
        dist = getattr(getattr(ep, "dist", None), "name", None)
        return (dist != "cudasortkit", ep.name, ep.value)

    entries: dict[str, PluginEntry] = {}
    for ep in sorted(metadata.entry_points(group=group), key=order):
        if ep.name in entries:
            dist = getattr(getattr(ep, "dist", None), "name", None) or "?"
            first = entries[ep.name]
            entries[f"{ep.name}@{dist}"] = PluginEntry(
                name=ep.name, target=ep.value, distribution=dist,
                error=f"ValueError: name {ep.name!r} is registered twice "
                      f"({first.target} and {ep.value}); this one is ignored")
            continue
        entries[ep.name] = _load(ep, group)
    return entries


def entries(group: str = GROUP) -> dict[str, PluginEntry]:
    """All entry points of `group` by name, loaded on first call."""
    if group not in KINDS:
        raise ValueError(f"no plugin kind has entry-point group {group!r}; "
                         f"known: {', '.join(KINDS)}")
    with _lock:
        table = _entries.get(group)
        if table is None:
            table = _entries[group] = discover(group)
        return table


def refresh() -> None:
    """Forget what was discovered (after installing a plugin package)."""
    global generation
    import importlib

    importlib.invalidate_caches()
    with _lock:
        _entries.clear()
        generation += 1


def plugins(group: str = GROUP) -> dict[str, SortPlugin]:
    """The working plugins of `group` by name."""
    return {name: e.plugin for name, e in entries(group).items() if e.ok}


def mark_broken(name: str, reason: str, group: str = GROUP) -> None:
    """Take plugin `name` out of service until refresh(): `list` and
    algorithms() show it as an error with `reason` (one line), auto skips
    it and asking for it by name raises ValueError naming it. Memoised
    choices key on `generation`, so none of them still picks it."""
    global generation
    table = entries(group)
    with _lock:
        entry = table.get(name)
        if entry is None:
            entry = table[name] = PluginEntry(name=name, target="?")
        if entry.error is None:  # the first failure is the one to show
            entry.error = reason
        generation += 1


@contextlib.contextmanager
def guarded(plugin, what: str, expected: tuple = ()):
    """Run plugin code inside; a failure of that code takes the plugin out
    of service instead of breaking the caller's call in an unrelated way.

        with registry.guarded(plugin, "run", expected=(MemoryError,)):
            plugin.run(job)

    Any Exception or SystemExit raised inside (not KeyboardInterrupt) marks
    the plugin broken (mark_broken(plugin.name, "<what> raised <Type>:
    <message>")) and is raised again as cudasortkit.errors.PluginError
    (a RuntimeError naming the plugin, `.plugin` and `.reason`), chained to
    the original. Exceptions of the types in `expected` are part of the
    call's contract (e.g. out of device memory): they pass unchanged and
    mark nothing. A PluginError passes unchanged too: the plugin that
    failed is already marked (e.g. another plugin this one called into).
    Selection catches PluginError and chooses again without the plugin.
    """
    try:
        yield
    except PluginError:
        raise
    except expected:
        raise
    except (Exception, SystemExit) as exc:
        raise fault(plugin, _reason(what, exc)) from exc


def fault(plugin, reason: str) -> PluginError:
    """Take `plugin` out of service for `reason`, a fault of its code found
    without an exception (run() returned a wrong result, say), and return
    the PluginError to raise: what guarded does for an exception.

        raise registry.fault(plugin, "run returned 1 keys for 6")
    """
    mark_broken(plugin.name, reason, group_of(plugin))
    return PluginError(plugin.name, reason)


def call(plugin, method: str, *args, **kwargs):
    """plugin.<method>(*args, **kwargs) under guarded(plugin, method):
    registry.call(p, "unsupported", request) is p.unsupported(request), or
    PluginError with p taken out of service."""
    with guarded(plugin, method):
        return getattr(plugin, method)(*args, **kwargs)


def default_config(plugin, dtype: str, value_bytes: int = 0, n: int | None = None) -> dict:
    """The plugin's default config for `dtype` and payload, adjusted for a
    job of n keys (its size_config) when n is known; plugin code guarded
    as in call()."""
    config = call(plugin, "default_config", dtype, value_bytes)
    if n is None or not hasattr(plugin, "size_config"):  # a kind without size rules
        return config
    return call(plugin, "size_config", dict(config), dtype, value_bytes, n)


def register(plugin_cls) -> None:
    """Add a plugin class at run time (tests, notebooks); validated as usual,
    into the table of its kind (its `entry_point_group`)."""
    global generation
    group = group_of(plugin_cls)
    if group not in KINDS:
        raise TypeError(f"{plugin_cls!r} is no cudasortkit plugin (known kinds: "
                        f"{', '.join(b.__name__ for b in KINDS.values())})")
    check_class(plugin_cls, group)
    table = entries(group)
    with _lock:
        table[plugin_cls.name] = PluginEntry(name=plugin_cls.name, target=plugin_cls.__qualname__,
                                             plugin=plugin_cls())
        generation += 1
