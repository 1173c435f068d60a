"""Compiled kernel modules (cubins) on disk, found again without running
the compiler.

A rendered source (build/render.py) compiles to one cubin. pycuda's own
disk cache keys a cubin by the *preprocessed* source, so every lookup runs
`nvcc --preprocess` (0.15-0.3 s), hit or miss, and a kernel loaded through
the driver as well (build/compiler.driver_function) looked it up twice:
the first call of a sort whose config had not run in this process took
0.3 s with its cubin on disk. Here a cubin's key is a hash of everything
nvcc reads to make it: the rendered source, the text of every header it
includes with quotes from its include path (build/prototype.headers), the
compile options, the target architecture and nvcc's version (the system
and CUDA headers come with the compiler). A hit reads one file.

A miss runs nvcc once (`nvcc --cubin`); threads that ask for the same key
meanwhile wait for that compile instead of starting their own (the tuner
checks one config at several sizes at once). The cubin is written to a
temporary file and renamed into place, so processes sharing the folder
never read half of one. Nothing is ever evicted: a cubin is a few hundred
kB, and a stale one (an edited header) is simply no longer looked up.

The folder: $CUDASORTKIT_KERNEL_CACHE_DIR, else "kernels" in the user cache
folder (platformdirs). It does not follow CUDASORTKIT_CACHE_DIR (the tuning
tables), which test runs point at a new folder each time. A folder that
cannot be written keeps cubins in memory for the process.

`counters()` says how many modules were compiled and read from disk, and
the seconds each took, in this process (tune prints them per phase).
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
import time

from .. import settings
from ..errors import KernelCompileError
from .prototype import headers

#: Changes whenever what a key covers or a cubin's file changes meaning.
KEY_FORMAT = "csk-cubin-1"

_lock = threading.Lock()
_images: dict = {}  # key -> cubin bytes, for this process
_inflight: dict = {}  # key -> threading.Event of the compile under way
_refused: dict = {}  # key -> nvcc's KernelCompileError (the same source fails the same way)
_counts = {"compiled": 0, "compile_s": 0.0, "read": 0, "read_s": 0.0}
_unwritable: set = set()  # folders found unwritable (said once)
_nvcc: list = []  # [(path or None, version line)], found once a process


def cache_dir() -> str:
    """Where cubins are kept ($CUDASORTKIT_KERNEL_CACHE_DIR, else "kernels"
    in platformdirs' user cache folder for cudasortkit)."""
    path = settings.kernel_cache_dir()
    if path:
        return os.path.abspath(os.path.expanduser(path))
    import platformdirs

    return os.path.join(platformdirs.user_cache_dir("cudasortkit"), "kernels")


def nvcc() -> tuple:
    """(path of nvcc on PATH or None, the last line of `nvcc --version`:
    "none" without nvcc, "unknown" when it does not say), once a process."""
    if not _nvcc:
        exe = shutil.which("nvcc")
        text = "none"
        if exe:
            try:
                out = subprocess.run([exe, "--version"], capture_output=True, text=True,
                                     timeout=30).stdout.strip()
                text = out.splitlines()[-1].strip() if out else "unknown"
            except (OSError, subprocess.SubprocessError):
                text = "unknown"
        _nvcc[:] = [(exe, text)]
    return _nvcc[0]


def nvcc_version() -> str:
    """The last line of `nvcc --version` (nvcc()), what cubins are compiled with."""
    return nvcc()[1]


def key(source: str, include_dirs, options, arch: str) -> str:
    """The cubin's key: a hash of the source, the text of its quoted
    headers, the options, arch and nvcc's version."""
    h = hashlib.sha256()
    for part in (KEY_FORMAT, nvcc_version(), arch, "\0".join(options), source):
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\0\1")
    for _, text in headers(source, include_dirs):
        h.update(text.encode("utf-8", "surrogatepass"))
        h.update(b"\0\2")
    return h.hexdigest()[:40]


def image(source: str, include_dirs, options, arch: str, where: str = "cudasortkit") -> bytes:
    """The cubin of `source` for `arch`: this process's copy, else the disk
    cache's, else compiled now (once for all the threads that ask).
    KernelCompileError starting with `where` when nvcc refuses it (and
    again, without compiling, whenever the same source is asked for)."""
    k = key(source, include_dirs, options, arch)
    while True:
        with _lock:
            found = _images.get(k)
            if found is not None:
                return found
            refused = _refused.get(k)
            if refused is not None:
                raise KernelCompileError(f"{where}: {refused}")
            pending = _inflight.get(k)
            if pending is None:
                pending = _inflight[k] = threading.Event()
                break
        pending.wait()  # another thread compiles it: take its cubin, or its error
    try:
        found = _read(k)
        if found is None:
            try:
                found = _compile(source, include_dirs, options, arch)
            except KernelCompileError as exc:
                with _lock:
                    _refused[k] = str(exc)
                raise KernelCompileError(f"{where}: {exc}") from None
            _write(k, found)
        with _lock:
            _images[k] = found
        return found
    finally:
        with _lock:
            _inflight.pop(k, None)
        pending.set()


def recompile(source: str, include_dirs, options, arch: str, where: str = "cudasortkit") -> bytes:
    """image(), after dropping the cubin this process and the disk hold
    (one the driver refused to load: a damaged file is compiled again)."""
    k = key(source, include_dirs, options, arch)
    with _lock:
        _images.pop(k, None)
    try:
        os.unlink(_path(k))
    except OSError:
        pass
    return image(source, include_dirs, options, arch, where)


def counters() -> dict:
    """Modules compiled and read from disk in this process, and their seconds."""
    with _lock:
        return dict(_counts)


def forget() -> None:
    """Drop this process's copies and the refusals it remembers (the next
    lookup reads the disk again)."""
    with _lock:
        _images.clear()
        _refused.clear()


def _path(k: str) -> str:
    return os.path.join(cache_dir(), k[:2], k + ".cubin")


def _read(k: str) -> bytes | None:
    start = time.perf_counter()
    try:
        with open(_path(k), "rb") as f:
            data = f.read()
    except OSError:
        return None
    if not data:
        return None
    _count("read", "read_s", time.perf_counter() - start)
    return data


def _write(k: str, data: bytes) -> None:
    path = _path(k)
    folder = os.path.dirname(path)
    try:
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".cubin")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError as exc:
        root = cache_dir()
        if root not in _unwritable:
            _unwritable.add(root)
            import warnings

            warnings.warn(f"cudasortkit: cannot write compiled kernels to {root} ({exc}); they "
                          f"are kept in memory for this process (set "
                          f"{settings.KERNEL_CACHE_DIR} to a writable folder)", RuntimeWarning,
                          stacklevel=3)


def _compile(source: str, include_dirs, options, arch: str) -> bytes:
    """nvcc --cubin of `source` in a temporary folder; KernelCompileError
    saying why not (the caller adds who asked)."""
    exe = nvcc()[0]
    if exe is None:
        raise KernelCompileError("nvcc is not on PATH: kernels are compiled at run time "
                                 "(install the CUDA toolkit, or put its bin/ on PATH)")
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="csk-nvcc-") as tmp:
        cu, cubin = os.path.join(tmp, "kernel.cu"), os.path.join(tmp, "kernel.cubin")
        with open(cu, "w", encoding="utf-8") as f:
            f.write(source)
        cmd = [exe, "--cubin", *options, "-arch", arch, "-o", cubin]
        for d in include_dirs:
            cmd += ["-I", d]
        cmd.append(cu)
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, errors="replace")
        except OSError as exc:
            raise KernelCompileError(f"nvcc could not run: {exc}") from exc
        if done.returncode != 0 or not os.path.isfile(cubin):
            detail = (done.stderr or done.stdout or f"exit status {done.returncode}").strip()
            raise KernelCompileError(f"nvcc failed:\n{detail}")
        with open(cubin, "rb") as f:
            data = f.read()
    _count("compiled", "compile_s", time.perf_counter() - start)
    return data


def _count(what: str, seconds_key: str, seconds: float) -> None:
    with _lock:
        _counts[what] += 1
        _counts[seconds_key] += seconds
