"""``python -m cudasortkit {info,list,demo,bench,tune}``."""
from __future__ import annotations

import argparse
import ast
import glob
import os
import re
import shutil
import subprocess
import sys
import time


#: The CUDA toolkit headers pycuda's build compiles against (its cuda.hpp and
#: curand.hpp include them).
PYCUDA_BUILD_HEADERS = ("cuda.h", "curand.h")
#: pycuda's build configuration files, read in this order (a later one wins);
#: pycuda's build takes CUDA_ROOT from here, not from the environment.
AKSETUP_FILES = ("/etc/aksetup-defaults.py", "~/.aksetup-defaults.py")
#: Where a CUDA toolkit is looked for to suggest one (after $CUDA_HOME,
#: $CUDA_PATH and $CUDA_ROOT); glob patterns.
TOOLKIT_GUESSES = ("/usr/local/cuda", "/usr/local/cuda-*", "/opt/cuda")


def _pycuda_version() -> str | None:
    try:
        import pycuda
    except ImportError:
        return None
    return pycuda.VERSION_TEXT


def _find_nvcc() -> str | None:
    """The first nvcc on PATH, as pycuda's build finds it (not resolved:
    a wrapper script stays the wrapper)."""
    nvcc = shutil.which("nvcc")
    return os.path.abspath(nvcc) if nvcc else None


#: nvcc's --dryrun names the toolkit it runs from: "#$ TOP=<toolkit>/bin/..".
_DRYRUN_TOP = re.compile(r"^#\$ TOP=(.+)$", re.MULTILINE)
#: A wrapper script's target: an absolute path of an nvcc in a bin/ folder.
_WRAPPED_NVCC = re.compile(r"(/[^\s'\"$;|&]*/bin/nvcc)\b")
#: Wrapper scripts are read up to this many bytes (nvcc itself is megabytes).
_WRAPPER_MAX_BYTES = 1 << 16


def toolkit_of(nvcc: str) -> tuple:
    """(the CUDA toolkit folder whose bin/nvcc the `nvcc` on PATH runs, how
    that was found). nvcc may be a wrapper (a script in /usr/local/bin that
    execs a toolkit's nvcc, or a symlink): asked first, nvcc's --dryrun
    names the folders it works from (TOP=<toolkit>/bin/..); else a symlink's
    target, else the nvcc path a short wrapper script names; else the folder
    above nvcc's own bin/ (what pycuda's build assumes)."""
    try:
        done = subprocess.run([nvcc, "--dryrun", "-x", "cu", "-E", os.devnull],
                              capture_output=True, text=True, timeout=30)
        found = _DRYRUN_TOP.search(done.stderr + done.stdout)
    except (OSError, subprocess.SubprocessError):
        found = None
    if found:
        return os.path.normpath(found.group(1).strip()), "nvcc --dryrun"
    real = os.path.realpath(nvcc)
    if real != os.path.abspath(nvcc) and os.path.basename(os.path.dirname(real)) == "bin":
        return os.path.dirname(os.path.dirname(real)), "the symlink's target"
    try:
        if os.path.getsize(nvcc) <= _WRAPPER_MAX_BYTES:
            with open(nvcc, errors="replace") as f:
                for target in _WRAPPED_NVCC.findall(f.read()):
                    if os.path.realpath(target) != real and os.path.isfile(target):
                        return os.path.dirname(os.path.dirname(target)), "the wrapper script"
    except OSError:
        pass
    return os.path.normpath(os.path.join(os.path.dirname(nvcc), "..")), "nvcc's folder"


def _nvcc_version(nvcc: str) -> str:
    out = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout.strip()
    return out.splitlines()[-1] if out else "?"


def _aksetup_config() -> dict:
    """CUDA_ROOT and CUDA_INC_DIR as pycuda's build reads them from
    AKSETUP_FILES (literal assignments only): name -> (value, file)."""
    found = {}
    for name in AKSETUP_FILES:
        try:
            with open(os.path.expanduser(name)) as f:
                tree = ast.parse(f.read())
        except (OSError, SyntaxError, ValueError):
            continue
        for node in tree.body:
            if (isinstance(node, ast.Assign) and len(node.targets) == 1
                    and isinstance(node.targets[0], ast.Name)
                    and node.targets[0].id in ("CUDA_ROOT", "CUDA_INC_DIR")):
                try:
                    found[node.targets[0].id] = (ast.literal_eval(node.value), name)
                except ValueError:
                    pass
    return found


def pycuda_build_include_dirs(nvcc: str | None) -> tuple[list, str]:
    """Where pycuda's build looks for the CUDA headers, and why there (as
    pycuda's setup.py decides): CUDA_INC_DIR from its config files, else
    CUDA_ROOT/include, CUDA_ROOT from its config files or else the folder
    above the first nvcc on PATH."""
    conf = _aksetup_config()
    inc, where = conf.get("CUDA_INC_DIR", (None, None))
    if inc:
        return ([inc] if isinstance(inc, str) else list(inc)), f"CUDA_INC_DIR in {where}"
    root, where = conf.get("CUDA_ROOT", (None, None))
    if isinstance(root, str) and root:
        return [os.path.join(root, "include")], f"CUDA_ROOT = {root!r} in {where}"
    if nvcc:
        root = os.path.normpath(os.path.join(os.path.dirname(nvcc), ".."))
        return [os.path.join(root, "include")], f"CUDA_ROOT/include, CUDA_ROOT being the folder above {nvcc}"
    return [], "no nvcc on PATH and no CUDA_ROOT in ~/.aksetup-defaults.py"


def _headers_missing(dirs) -> list:
    return [h for h in PYCUDA_BUILD_HEADERS if not any(os.path.isfile(os.path.join(d, h)) for d in dirs)]


def _toolkit_with_headers(exclude) -> str | None:
    """A CUDA toolkit folder holding every PYCUDA_BUILD_HEADERS, to suggest."""
    candidates = [os.environ.get(v) for v in ("CUDA_HOME", "CUDA_PATH", "CUDA_ROOT")]
    candidates += [p for pattern in TOOLKIT_GUESSES for p in sorted(glob.glob(pattern))]
    for root in filter(None, candidates):
        inc = os.path.join(root, "include")
        if inc not in exclude and not _headers_missing([inc]):
            return root
    return None


def _headers_fix(dirs, runs) -> str:
    """What to do when pycuda's build would not find the headers in `dirs`:
    point it at the toolkit nvcc runs (`runs`: its folder and the headers
    it lacks) where that has them, else at another toolkit that does; where
    nvcc's own toolkit lacks some, install them into it first."""
    if runs is not None and not runs[1]:
        return _point_at(runs[0], "the toolkit at {} has them;")
    toolkit = _toolkit_with_headers(dirs)
    if toolkit is not None:
        return _point_at(toolkit, "the toolkit at {} has them;")
    if runs is not None and os.path.join(runs[0], "include") not in dirs:
        what = ("its cuRAND development files (the cuda-curand-dev package of this CUDA "
                "version, or the toolkit installer with cuRAND)" if runs[1] == ["curand.h"]
                else "the whole CUDA toolkit there")
        return _point_at(runs[0], f"the toolkit at {{}} (which nvcc runs) lacks "
                                  f"{', '.join(runs[1])}: install {what}, then")
    return ("install the CUDA toolkit (its include/ holds them) and point pycuda's build at "
            "it: its bin/ first on PATH, or CUDA_ROOT = '<toolkit>' in ~/.aksetup-defaults.py")


def _point_at(toolkit: str, opening: str) -> str:
    """`opening` (formatted with the toolkit) and how to point pycuda's build at `toolkit`."""
    bindir = os.path.join(toolkit, "bin")
    return (opening.format(toolkit) + " point pycuda's build there: "
            + (f"PATH={bindir}:$PATH pip install ..., or "
               if os.path.isfile(os.path.join(bindir, "nvcc")) else "")
            + f"echo \"CUDA_ROOT = '{toolkit}'\" >> ~/.aksetup-defaults.py")


def cmd_info(args) -> int:
    """Versions, the GPU, the cache dir and, for GPU sorting, what is missing
    here and how to get it (each probe a function of its own, so that tests
    can stand in for a machine)."""
    import numpy as np

    from ..gpu import device, libcuda
    from ..version import __version__
    from ..tuning.cache import cache_dir

    missing = []  # (what, what to do)
    print(f"cudasortkit {__version__}, numpy {np.__version__}, python {sys.version.split()[0]}")
    pycuda_version = _pycuda_version()
    nvcc = _find_nvcc()
    print(f"pycuda: {pycuda_version or 'not installed'}")
    if pycuda_version is None:
        missing.append(("pycuda", 'pip install "cudasortkit[cuda]" builds it from source (PyPI has no '
                        "Linux wheels of pycuda); the build needs the CUDA toolkit's headers "
                        f"({', '.join(PYCUDA_BUILD_HEADERS)}) where it looks for them (see CUDA headers)"))
    print(f"nvcc: {nvcc} ({_nvcc_version(nvcc)})" if nvcc else "nvcc: not found on PATH")
    if nvcc is None:
        missing.append(("nvcc", "install the CUDA toolkit and put its bin/ on PATH: "
                        "GPU plugins compile their kernels with nvcc at run time"))
    if pycuda_version is None:  # the headers matter for building pycuda only
        runs = None  # the toolkit the nvcc on PATH runs, and its missing headers
        if nvcc is not None:
            root, _ = toolkit_of(nvcc)
            runs = root, _headers_missing([os.path.join(root, "include")])
            found = [h for h in PYCUDA_BUILD_HEADERS if h not in runs[1]]
            print(f"CUDA toolkit: {root} (the nvcc on PATH runs {os.path.join(root, 'bin', 'nvcc')}): "
                  + (f"{', '.join(found)} found" if found else "no headers found")
                  + (f"; missing: {', '.join(runs[1])}" if runs[1] else ""))
        dirs, why = pycuda_build_include_dirs(nvcc)
        absent = _headers_missing(dirs)
        where = ", ".join(dirs) or "nowhere"
        print(f"CUDA headers: {'not found' if absent else 'found'} where pycuda's build looks: "
              f"{where} ({why})" + (f"; missing: {', '.join(absent)}" if absent else ""))
        if absent:
            missing.append((f"CUDA headers ({', '.join(absent)})",
                            _headers_fix(dirs, runs) + " (README: The cuda extra)"))
        problem = libcuda.library_problem()
        print(f"CUDA driver: {problem or 'ok'}")
        if problem:
            missing.append(("CUDA driver", "a machine with an NVIDIA GPU and its driver"))
    reason = device.unavailable_reason()
    if reason:
        print(f"GPU: unavailable ({reason})")
        if pycuda_version is not None:
            missing.append(("GPU", reason))
    else:
        s = device.get_device()
        print(f"GPU {s.ordinal}: {s.name}, compute capability {s.compute_capability[0]}.{s.compute_capability[1]}, "
              f"{s.sm_count} SMs, {s.total_memory / 2**30:.1f} GiB, driver CUDA {device.driver_version()}")
    print(f"cache dir: {cache_dir()}")  # where the tuner reads and writes ($CUDASORTKIT_CACHE_DIR)
    if missing:
        print("\nMissing for sorting on the GPU (sorting on the CPU with NumPy works without it):")
        for what, fix in missing:
            print(f"  {what}: {fix}")
    return 0


def cmd_list(args) -> int:
    """One line per plugin (name, status, device, flags, summary) with its
    dtypes and tunables indented below; the name and status columns are as
    wide as their longest entry. A working GPU plugin's status is "ok, needs
    a GPU" where there is no GPU to run it."""
    from ..gpu import device
    from ..api import algorithms

    rows = algorithms()
    gpu = device.gpu_available()

    def status(row) -> str:
        if row["status"] != "ok":
            return "ERROR"
        return "ok" if gpu or row["device"] != "gpu" else "ok, needs a GPU"

    name_width = max((len(row["name"]) for row in rows), default=0)
    status_width = max((len(status(row)) for row in rows), default=0)
    indent = " " * (name_width + 1 + status_width + 2)
    for row in rows:
        head = f"{row['name']:{name_width}} {status(row):{status_width}}  "
        if row["status"] != "ok":
            print(f"{head}{row['target']}: {row['error']}")
            continue
        flags = ", ".join(f for f, on in (("stable", row["stable"]), ("pairs", row["pairs"])) if on)
        if row["kind"] != "sort":  # selection, search, multikey: their own kinds (docs/plugins.md)
            flags = row["kind"]
        tun = " ".join(f"{k}={v['default']}{list(v['values'])}" for k, v in row["tunables"].items())
        print(f"{head}{row['device']:3}  [{flags}]  {row['summary']}")
        if row["dtypes"]:
            print(f"{indent}dtypes: {' '.join(row['dtypes'])}")
        if tun:
            print(f"{indent}tunables: {tun}")
    return 0


def demo_size(text: str) -> int:
    """demo's -n: a whole number of keys, at least 1 (argparse reports the
    error, no traceback)."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of keys, got {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"the number of keys must be at least 1, got {n}")
    return n


def cmd_demo(args) -> int:
    """Sort n random float32 keys with auto, check against NumPy, and time a
    second call: on the GPU the first one also compiles kernels and may tune
    (once per device, cached), which is not what a sort costs afterwards.
    Where auto sorts on the CPU, it says so and why, and speaks of no GPU work."""
    import warnings

    import numpy as np

    from ..gpu import device
    from ..sdk import registry
    from ..api import explain, sort

    n = args.n
    gpu = device.gpu_available()
    rng = np.random.default_rng()
    first, second = (rng.random(n, dtype=np.float32) for _ in range(2))
    with warnings.catch_warnings():
        if not gpu:  # the warning that auto sorts on the CPU: said below instead
            warnings.filterwarnings("ignore", message="cudasortkit is sorting on the CPU")
        t0 = time.perf_counter()
        sort(first)
        t1 = time.perf_counter()
        got = sort(second)
        t2 = time.perf_counter()
        decision = explain(second)
    ok = np.array_equal(got, np.sort(second))
    name = decision.name
    plugin = registry.plugins().get(name)
    if plugin is not None and plugin.device == "gpu":
        print(f"sorted {n:,} random float32 keys (NumPy in, NumPy out) with algorithm={name!r} (auto): "
              f"{(t2 - t1) * 1e3:.1f} ms including host<->device copies; matches NumPy: {ok}")
        print(f"(first call, with kernel compilation and tuning for this size: {(t1 - t0) * 1e3:.0f} ms)")
    else:
        what = "NumPy's sort" if name == "numpy" else "a CPU plugin"
        why = (f"there is no GPU here: {device.unavailable_reason()} "
               "(python -m cudasortkit info says what is missing)" if not gpu else decision.reason)
        print(f"sorted {n:,} random float32 keys on the CPU with algorithm={name!r} ({what}, chosen by "
              f"auto): {(t2 - t1) * 1e3:.2f} ms; matches NumPy: {ok}")
        print(f"on the CPU because {why}")
    return 0 if ok else 1


def main(argv=None) -> int:
    from ..version import __version__

    parser = argparse.ArgumentParser(
        prog="python -m cudasortkit",
        description="cudasortkit's tools: what this machine has and lacks for sorting on the GPU "
                    "(info), the installed plugins (list), a first sort (demo), timings against "
                    "CuPy and NumPy (bench), and tuning auto's choices for this GPU (tune).")
    parser.add_argument("--version", action="version", version=f"cudasortkit {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.add_parser("info", help="versions, the GPU, the cache dir, and what this machine lacks for sorting on the GPU").set_defaults(func=cmd_info)
    sub.add_parser("list", help="plugins with status and errors").set_defaults(func=cmd_list)
    demo = sub.add_parser("demo", help="sort ten million random keys with algorithm='auto'")
    demo.add_argument("-n", type=demo_size, default=10_000_000, help="how many keys (at least 1)")
    demo.set_defaults(func=cmd_demo)
    from . import bench

    b = sub.add_parser("bench", help="time algorithms against CuPy and NumPy; profilers")
    bench.build_parser(b)
    b.set_defaults(func=lambda args: bench.main(args=args))
    from . import bench_profilers

    bench_profilers.add_tools(b)
    try:
        from . import tune
    except ImportError:
        tune = None
    if tune is not None:
        # what python -m cudasortkit.tune --help says, word for word
        t = sub.add_parser("tune", help="tune every plugin for this device",
                           description=tune.build_parser().description,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        tune.build_parser(t)
        t.set_defaults(func=lambda args: tune.main(args=args))
    args = parser.parse_args(argv)
    if args.command is None:  # the command alone: what it can do
        parser.print_help()
        return 0
    try:
        return args.func(args)
    except BrokenPipeError:
        # The reader left (`list | head`): stop quietly, as other command-line
        # tools do; stdout goes to devnull so the exit flush cannot fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(main())
