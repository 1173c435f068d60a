"""The tuning cache: one JSON file per device key, written atomically under a lock.

Layout (schema 1)::

    {"schema": 1,
     "device": {"name", "compute_capability", "sm_count", "driver", "nvcc", "cudasortkit"},
     "plugins": {NAME: {"hash": SHA, "results": {OP: {DTYPE: {BUCKET: ENTRY}}}}},
     "host":    {OP: {DTYPE: {BUCKET: {"extra_ms", "via"}}}},
     "kinds":   {GROUP: {NAME: {"hash": SHA, "results": {SHAPE: MS}}}}}

OP is "sort", "argsort" (8-byte values) or "pairs" (4-byte values); BUCKET is
log2 of the measured size as a string. An ENTRY holds the best measured
"ms" and its "config", the default config's "default_ms", and what was
tried or rejected; after tune's final comparison "ms" is the interleaved
re-timing and "sweep_ms" the sweep's time (comparable with "default_ms"). A plugin whose kernel sources or tunables changed (its
hash differs) has its results dropped on load, so it re-tunes; a changed
driver, nvcc or cudasortkit version is a different device key, so a
different file.

"kinds" holds the measurements of the other plugin kinds (selection,
multikey, search; `python -m cudasortkit.tune --kinds`), a section per
entry-point GROUP: SHAPE is the kind's shape key (tuning/kinds.py), MS the
median time of plugin NAME there. Its "hash" is kind_hash(plugin): the
chooser ignores the results of a plugin whose hash changed, and the next
measurement replaces them.

Nothing here may crash a sort: a file that is not a cache of this schema,
down to every entry (validate), is reported once, moved aside and rebuilt;
a read-only directory keeps results in memory (warned once). Configs are
checked against the plugin's tunables where the plugin is known
(policy.fits).
"""
from __future__ import annotations

import contextlib
import copy
import glob
import hashlib
import inspect
import json
import math
import os
import re
import stat
import tempfile
import threading
import time
import warnings

from .. import settings
from ..build.cubins import nvcc_version  # what the device key names (the compiler's version)

#: 2: times are whole calls through execute.run_plugin (host-side work included);
#: 1 held device time only. Files of another schema are set aside and rebuilt.
SCHEMA = 2
ENV_DIR = settings.CACHE_DIR

_warned: set = set()
_warn_lock = threading.Lock()


def warn_once(key: str, message: str) -> None:
    with _warn_lock:
        if key in _warned:
            return
        _warned.add(key)
    warnings.warn(message, RuntimeWarning, stacklevel=3)


def cache_dir() -> str:
    """$CUDASORTKIT_CACHE_DIR, else platformdirs.user_cache_dir("cudasortkit")."""
    path = settings.cache_dir()
    if path:
        return os.path.abspath(os.path.expanduser(path))
    import platformdirs

    return platformdirs.user_cache_dir("cudasortkit")


# ------------------------------------------------------------------ device key
def device_info(state) -> dict:
    """What identifies a device's tuning: hardware, driver, compiler, library."""
    from ..version import __version__
    from ..gpu.device import driver_version

    return {
        "name": state.name,
        "compute_capability": "%d.%d" % tuple(state.compute_capability),
        "sm_count": int(state.sm_count),
        "driver": driver_version(),
        "nvcc": nvcc_version(),
        "cudasortkit": __version__,
    }


def device_key(info: dict) -> str:
    """File-name-safe key: readable device part plus a hash of every field."""
    digest = hashlib.sha256(json.dumps(info, sort_keys=True).encode()).hexdigest()[:12]
    slug = re.sub(r"[^A-Za-z0-9]+", "-", str(info.get("name", "device"))).strip("-").lower()
    cc = str(info.get("compute_capability", "")).replace(".", "")
    return f"{slug or 'device'}-sm{cc}-{digest}"


# ---------------------------------------------------------------- plugin hash
_hashes: dict = {}


def plugin_hash(plugin) -> str:
    """Hash of what a plugin's timings depend on: its kernel templates, the
    shared headers next to them and in cudasortkit's kernels/, its Python
    module, its tunables and dtypes. Any change there means re-tuning."""
    cls = type(plugin)
    return _hash(cls, cls, (cls.name, tuple(cls.dtypes), cls.stable, cls.pairs, cls.device,
                            sorted((k, t.default, tuple(t.values))
                                   for k, t in cls.tunables.items())))


def kind_hash(plugin) -> str:
    """Hash of what a non-sort plugin's timings depend on: its class's
    declarations, its Python module, its kernel templates and the shared
    headers (as plugin_hash for sorts)."""
    cls = type(plugin)
    return _hash(("kind", cls), cls, (
        getattr(cls, "entry_point_group", ""), getattr(cls, "name", ""),
        getattr(cls, "device", ""), tuple(getattr(cls, "dtypes", ()) or ()),
        repr(getattr(cls, "config", None)), repr(getattr(cls, "priorities", None)),
        getattr(cls, "priority", None)))


def _hash(key, cls, declarations) -> str:
    """sha256 (16 hex digits, memoised under `key`) of the declarations'
    repr and the files behind cls: its kernel templates, the headers on
    their include path and its Python source."""
    cached = _hashes.get(key)
    if cached is not None:
        return cached
    h = hashlib.sha256()
    h.update(repr(declarations).encode())
    files = []
    templates = tuple(getattr(cls, "templates", ()) or ())
    if templates and getattr(cls, "device", "gpu") == "gpu":
        from ..build.render import include_dirs, template_path

        package = getattr(cls, "template_package", "cudasortkit.kernels")
        files += [template_path(package, t) for t in templates]
        for d in include_dirs(package):
            files += sorted(glob.glob(os.path.join(d, "*.cuh")))
    with contextlib.suppress(TypeError, OSError):
        files.append(inspect.getsourcefile(cls))
    for path in files:
        if not path:
            continue
        h.update(os.path.basename(path).encode())
        with contextlib.suppress(OSError), open(path, "rb") as f:
            h.update(f.read())
    digest = h.hexdigest()[:16]
    _hashes[key] = digest
    return digest


# ---------------------------------------------------------------- file lock
class FileLock:
    """An exclusive lock on `path` shared by processes: fcntl.flock on POSIX,
    msvcrt.locking on Windows, else an O_EXCL lock file (stale after 60 s)."""

    def __init__(self, path: str, timeout: float = 30.0):
        self.path = path
        self.timeout = timeout
        self._fd = None
        self._mode = None

    def __enter__(self):
        deadline = time.monotonic() + self.timeout
        try:
            import fcntl
        except ImportError:
            fcntl = None
        if fcntl is not None:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            self._mode = "fcntl"
            fcntl.flock(self._fd, fcntl.LOCK_EX)
            return self
        try:
            import msvcrt
        except ImportError:
            msvcrt = None
        if msvcrt is not None:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            self._mode = "msvcrt"
            while True:
                try:
                    msvcrt.locking(self._fd, msvcrt.LK_NBLCK, 1)
                    return self
                except OSError:
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"could not lock {self.path}")
                    time.sleep(0.05)
        self._mode = "excl"
        while True:
            try:
                self._fd = os.open(self.path + ".excl", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
                return self
            except FileExistsError:
                with contextlib.suppress(OSError):
                    if time.time() - os.path.getmtime(self.path + ".excl") > 60:
                        os.unlink(self.path + ".excl")
                if time.monotonic() > deadline:
                    raise TimeoutError(f"could not lock {self.path}")
                time.sleep(0.05)

    def __exit__(self, *exc):
        if self._fd is None:
            return
        if self._mode == "fcntl":
            import fcntl

            fcntl.flock(self._fd, fcntl.LOCK_UN)
        elif self._mode == "msvcrt":
            import msvcrt

            with contextlib.suppress(OSError):
                msvcrt.locking(self._fd, msvcrt.LK_UNLCK, 1)
        os.close(self._fd)
        if self._mode == "excl":
            with contextlib.suppress(OSError):
                os.unlink(self.path + ".excl")
        self._fd = None


# ---------------------------------------------------------------- the store
def empty(info: dict | None = None) -> dict:
    return {"schema": SCHEMA, "device": dict(info or {}), "plugins": {}, "host": {}, "kinds": {}}


class CorruptCache(ValueError):
    """The file is not a cache of this schema."""


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _time(v) -> bool:
    """A measured time: a finite number above zero. A zero or negative time
    would win selection; NaN and infinity would poison its estimates."""
    return _number(v) and v > 0


def _scalar(v) -> bool:
    return v is None or isinstance(v, (str, bool)) or _number(v)


def _result_problem(e) -> str | None:
    """Why a plugin's result ENTRY is malformed, or None. Kept: "failed"
    (text) or a number "ms" and a "config" (None or tunable name -> value);
    "default_ms" and "sweep_ms" numbers when present."""
    if not isinstance(e, dict):
        return "is not an object"
    if "failed" in e:
        return None if isinstance(e["failed"], str) else "'failed' is not text"
    if not _time(e.get("ms")):
        return "has no 'ms' time (a positive finite number)"
    for key in ("default_ms", "sweep_ms"):
        if e.get(key) is not None and not _time(e[key]):
            return f"{key!r} is not a positive finite number"
    if "config" not in e:
        return "has no 'config'"
    config = e["config"]
    if config is not None and not (isinstance(config, dict) and all(map(_scalar, config.values()))):
        return "'config' is not an object of plain values"
    return None


def _host_problem(e) -> str | None:
    if not isinstance(e, dict) or not _time(e.get("extra_ms")):
        return "has no 'extra_ms' time (a positive finite number)"
    return None


def _table_problem(table, what: str, entry_problem) -> str | None:
    """Why {OP: {DTYPE: {BUCKET: ENTRY}}} is malformed, or None."""
    if not isinstance(table, dict):
        return f"{what} is not an object"
    for op, by_dtype in table.items():
        if not isinstance(by_dtype, dict):
            return f"{what} {op}: not an object"
        for dtype, by_bucket in by_dtype.items():
            if not isinstance(by_bucket, dict):
                return f"{what} {op} {dtype}: not an object"
            for bucket, e in by_bucket.items():
                if not (bucket.isdecimal() and int(bucket) < 64):
                    return f"{what} {op} {dtype}: bucket {bucket[:20]!r} is not a log2 size"
                problem = entry_problem(e)
                if problem:
                    return f"{what} {op} {dtype} 2^{bucket}: entry {problem}"
    return None


def _kinds_problem(kinds) -> str | None:
    """Why the "kinds" section is malformed, or None: {GROUP: {NAME:
    {"hash": text or None, "results": {SHAPE: positive finite ms}}}}."""
    if not isinstance(kinds, dict):
        return "'kinds' is not an object"
    for group, by_name in kinds.items():
        if not isinstance(by_name, dict):
            return f"kinds {group}: not an object"
        for name, block in by_name.items():
            if not (isinstance(block, dict) and isinstance(block.get("hash"), (str, type(None)))
                    and isinstance(block.get("results", {}), dict)):
                return f"kinds {group} plugin {name!r} is malformed"
            for shape, ms in block.setdefault("results", {}).items():
                if not _time(ms):
                    return f"kinds {group} {name} {shape[:40]}: time is not a positive finite number"
    return None


def validate(data) -> dict:
    """`data` if it is a cache of this SCHEMA down to every entry, else
    CorruptCache saying what is wrong: whatever passes here is safe to read."""
    if not isinstance(data, dict):
        raise CorruptCache("top level is not an object")
    if data.get("schema") != SCHEMA:
        raise CorruptCache(f"schema {data.get('schema')!r}, expected {SCHEMA}")
    data.setdefault("plugins", {})
    data.setdefault("host", {})
    data.setdefault("device", {})
    data.setdefault("kinds", {})
    for key in ("plugins", "device"):
        if not isinstance(data[key], dict):
            raise CorruptCache(f"{key!r} is not an object")
    problem = _table_problem(data["host"], "host", _host_problem) or _kinds_problem(data["kinds"])
    for name, block in data["plugins"].items():
        if problem:
            break
        if not isinstance(block, dict) or not isinstance(block.get("hash"), (str, type(None))):
            problem = f"plugin {name!r} is malformed"
        else:
            problem = _table_problem(block.setdefault("results", {}), f"plugin {name!r}",
                                     _result_problem)
    if problem:
        raise CorruptCache(problem)
    return data


def parse(raw: bytes) -> dict:
    """The cache in a file's bytes; CorruptCache saying why they are not one."""
    try:
        data = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as exc:  # bad bytes, bad JSON, absurd nesting
        raise CorruptCache(f"{type(exc).__name__}: {str(exc)[:120]}") from exc
    return validate(data)


class NotRegularFile(OSError):
    """A path that is a FIFO, a device, a socket or a folder, not a file."""


def _kind(mode: int) -> str:
    for test, what in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISDIR, "a folder"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")):
        if test(mode):
            return what
    return "not a file"


def read_bytes(path: str) -> bytes | None:
    """The bytes of the regular file at `path`, None if there is none;
    NotRegularFile if something else is there. Opened without blocking: a
    FIFO's ordinary open() waits for a writer, forever."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except IsADirectoryError as exc:  # (Windows)
        raise NotRegularFile("not a regular file (a folder)") from exc
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegularFile(f"not a regular file ({_kind(mode)})")
    except BaseException:
        os.close(fd)
        raise
    with os.fdopen(fd, "rb") as f:
        return f.read()


def _regular_or_missing(path: str) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (FileNotFoundError, NotADirectoryError):
        return True


def read_file(path: str) -> dict | None:
    """The cache at `path`; None if there is none. Any content that is not
    a cache (bytes, JSON, types, fields) is reported once and moved aside
    (to PATH.corrupt-TIME), so it is rebuilt; something that is not a
    regular file (a FIFO, a folder) is reported once and left alone."""
    try:
        raw = read_bytes(path)
    except OSError as exc:
        warn_once("read:" + path, f"cudasortkit: cannot read tuning cache {path} ({exc}); "
                                  "tuning again in memory")
        return None
    if raw is None:
        return None
    try:
        return parse(raw)
    except CorruptCache as exc:
        aside = f"{path}.corrupt-{int(time.time())}"
        try:
            os.replace(path, aside)
            where = f"moved to {aside}"
        except OSError:
            where = "could not move it aside"
        warn_once("corrupt:" + path, f"cudasortkit: tuning cache {path} is corrupt, unreadable "
                                     f"as a cache ({exc}); {where}, rebuilding")
        return None


def merge(base: dict, new: dict) -> dict:
    """`base` updated with every entry of `new` (new wins per entry)."""
    out = copy.deepcopy(base)
    out["device"] = new.get("device") or out.get("device", {})
    for name, block in new.get("plugins", {}).items():
        mine = out["plugins"].get(name)
        if mine is None or mine.get("hash") != block.get("hash"):
            out["plugins"][name] = copy.deepcopy(block)
            continue
        for op, by_dtype in block.get("results", {}).items():
            for dtype, by_bucket in by_dtype.items():
                mine["results"].setdefault(op, {}).setdefault(dtype, {}).update(copy.deepcopy(by_bucket))
    for op, by_dtype in new.get("host", {}).items():
        for dtype, by_bucket in by_dtype.items():
            out["host"].setdefault(op, {}).setdefault(dtype, {}).update(copy.deepcopy(by_bucket))
    for group, by_name in new.get("kinds", {}).items():
        mine_group = out.setdefault("kinds", {}).setdefault(group, {})
        for name, block in by_name.items():
            mine = mine_group.get(name)
            if mine is None or mine.get("hash") != block.get("hash"):  # changed plugin: replaced
                mine_group[name] = copy.deepcopy(block)
            else:
                mine["results"].update(block.get("results", {}))
    return out


class Store:
    """One device's cache file, held in memory and saved by merging.

    `data` is the in-memory table. `save()` takes the lock, re-reads the file
    (another tuner may have written), merges this process's new results into
    it and replaces the file atomically. Failures to write switch the store to
    memory only, with one warning.
    """

    def __init__(self, directory: str, info: dict, plugin_hashes: dict | None = None):
        self.directory = directory
        self.info = dict(info)
        self.key = device_key(self.info)
        self.path = os.path.join(directory, self.key + ".json")
        self.plugin_hashes = dict(plugin_hashes or {})
        self.read_only = False
        self.lock = threading.RLock()
        self._pending = empty(self.info)
        self.data = self._load()

    def _load(self) -> dict:
        data = read_file(self.path) or empty(self.info)
        return self._drop_stale(data)

    def _drop_stale(self, data: dict) -> dict:
        """Forget results of plugins whose current hash differs from the file's."""
        for name, h in self.plugin_hashes.items():
            block = data["plugins"].get(name)
            if block is not None and block.get("hash") != h:
                data["plugins"][name] = {"hash": h, "results": {}, "stale_dropped": True}
        data["device"] = dict(self.info)
        return data

    def plugin_block(self, data: dict, name: str) -> dict:
        block = data["plugins"].get(name)
        h = self.plugin_hashes.get(name)
        if block is None or (h is not None and block.get("hash") != h):
            block = data["plugins"][name] = {"hash": h, "results": {}}
        return block

    def results(self, name: str) -> dict:
        block = self.data["plugins"].get(name)
        return block.get("results", {}) if block else {}

    def put(self, name: str, op: str, dtype: str, bucket: int, entry: dict) -> None:
        """Record one plugin entry in memory (and in what the next save writes)."""
        with self.lock:
            for data in (self.data, self._pending):
                block = self.plugin_block(data, name)
                block["results"].setdefault(op, {}).setdefault(dtype, {})[str(bucket)] = copy.deepcopy(entry)

    def put_host(self, op: str, dtype: str, bucket: int, entry: dict) -> None:
        with self.lock:
            for data in (self.data, self._pending):
                data["host"].setdefault(op, {}).setdefault(dtype, {})[str(bucket)] = dict(entry)

    def put_kind(self, group: str, name: str, plugin_hash: str | None, shape: str,
                 ms: float) -> None:
        """Record plugin `name`'s (of kind `group`) median time at `shape`;
        a changed hash replaces that plugin's earlier results."""
        with self.lock:
            for data in (self.data, self._pending):
                by_name = data.setdefault("kinds", {}).setdefault(group, {})
                block = by_name.get(name)
                if block is None or block.get("hash") != plugin_hash:
                    block = by_name[name] = {"hash": plugin_hash, "results": {}}
                block["results"][shape] = float(ms)

    def save(self) -> bool:
        """Merge pending results into the file; False if kept in memory only."""
        with self.lock:
            if self.read_only:
                return False
            if not (self._pending["plugins"] or self._pending["host"] or self._pending["kinds"]):
                return True
            try:
                os.makedirs(self.directory, exist_ok=True)
                if not _regular_or_missing(self.path):  # never replaced: not ours
                    raise NotRegularFile(f"{self.path} is not a regular file")
                with FileLock(self.path + ".lock"):
                    on_disk = read_file(self.path) or empty(self.info)
                    merged = self._drop_stale(merge(on_disk, self._pending))
                    self._write(merged)
            except (OSError, TimeoutError) as exc:
                self.read_only = True
                warn_once("write:" + self.directory,
                          f"cudasortkit: cannot write the tuning cache in {self.directory} "
                          f"({type(exc).__name__}: {exc}); keeping tuning results in memory "
                          f"(set {ENV_DIR} to a writable directory)")
                return False
            self._pending = empty(self.info)
            # Adopt what other processes wrote, keeping ours on top.
            self.data = merge(merged, self.data) if merged is not self.data else merged
            return True

    def _write(self, data: dict) -> None:
        fd, tmp = tempfile.mkstemp(prefix=self.key + ".", suffix=".tmp", dir=self.directory)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(data, f, indent=1, sort_keys=True)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise


def load_any(path: str) -> dict | None:
    """A cache file by path (for --show/--plot without a GPU), never moved:
    None if there is none, CorruptCache if it is not a cache, OSError if
    it cannot be read (NotRegularFile: a FIFO, a folder)."""
    raw = read_bytes(path)
    return None if raw is None else parse(raw)


def folder_problem(directory: str) -> str | None:
    """Why `directory` cannot hold tuning caches because something other
    than a folder is there, or None (a folder, or nothing yet)."""
    if os.path.exists(directory) and not os.path.isdir(directory):
        return (f"the tuning cache folder {directory} is not a folder (a file is there); "
                f"remove it or set {ENV_DIR} to a folder")
    return None


def cache_files(directory: str | None = None) -> list:
    directory = directory or cache_dir()
    return sorted(glob.glob(os.path.join(directory, "*.json")))
