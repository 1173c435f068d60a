"""Follow the caller's array through one call: which cudasortkit functions it
(or an object wrapping it) is handed to, in order.

    python tools/follow_calls.py [--host] [--op sort|argsort] [-n N]

Prints the modules entered, the moves between modules and the climbs (a move
into a module of a higher layer than the one it left; layers as in
docs/architecture.md, old flat module names mapped to the layer they moved to).
A warm call is followed (the first call, which compiles and tunes, runs before).
"""
from __future__ import annotations

import argparse
import sys

import numpy as np

import cudasortkit as csk

#: Layer of each subpackage or top module, higher = nearer the caller.
RANK = {"cli": 10, "dask": 10, "__main__": 10, "tune": 10, "api": 9, "__init__": 9, "testing": 8.5,
        "calls": 8, "tuning": 7, "dispatch": 6, "host": 5, "launch": 4, "plugins": 3.5, "sdk": 3,
        "build": 2, "gpu": 1, "errors": 0, "dtypes": 0, "order": 0, "settings": 0, "version": 0}
#: Where the modules of the flat layout (before the move) belong.
FLAT = {"arrays": "gpu", "batched": "calls", "compiler": "build", "corekernels": "build",
        "device": "gpu", "devicesort": "launch", "execute": "dispatch", "graphs": "launch",
        "hostkernels": "host", "hostmem": "host", "hostpipe": "host", "job": "sdk",
        "launchplan": "launch", "memlimit": "host", "merging": "calls", "outofcore": "host",
        "pinned": "host", "placement": "host", "plugin": "sdk", "prepared": "calls",
        "prototype": "build", "registry": "sdk", "render": "build", "scan": "sdk",
        "segmented_plugin": "sdk", "segments": "sdk", "select": "dispatch", "sizes": "settings",
        "streams": "gpu", "sweep": "sdk", "template": "build", "timing": "gpu",
        "transfer": "host", "tune": "cli", "tune_check": "cli"}


def rank(module: str) -> float:
    parts = module.split(".")
    key = parts[1] if len(parts) > 1 else "__init__"
    return RANK.get(FLAT.get(key, key), 0)


def holds(value, a) -> bool:
    if value is a:
        return True
    for attr in ("original", "array", "caller"):
        if getattr(value, attr, None) is a:
            return True
    return False


def follow(fn, a):
    seen = []

    def profile(frame, event, arg):
        if event != "call":
            return
        module = frame.f_globals.get("__name__", "")
        if not module.startswith("cudasortkit"):
            return
        code = frame.f_code
        args = [frame.f_locals.get(name) for name in code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]]
        if any(holds(v, a) for v in args):
            seen.append((module, code.co_name))

    sys.setprofile(profile)
    try:
        fn(a)
    finally:
        sys.setprofile(None)
    return seen


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--host", action="store_true", help="a NumPy array (default: CuPy)")
    p.add_argument("--op", default="sort", choices=("sort", "argsort"))
    p.add_argument("-n", type=int, default=1 << 20)
    p.add_argument("--general", action="store_true",
                   help="pass out= (a fresh array), so no prepared shortcut applies")
    p.add_argument("-v", action="store_true", help="print every call")
    args = p.parse_args()
    rng = np.random.default_rng(1)
    a = rng.integers(0, 2**32, args.n, dtype=np.uint32)
    if not args.host:
        import cupy as cp

        a = cp.asarray(a)
    fn = getattr(csk, args.op)
    if args.general and args.op == "sort":
        xp = np if args.host else __import__("cupy")
        fn = lambda x, _f=fn: _f(x, out=xp.empty_like(x))
    fn(a), fn(a)  # compile, tune, prepare: follow a warm call
    calls = follow(fn, a)
    modules = [m for m, _ in calls]
    moves = [(x, y) for x, y in zip(modules, modules[1:]) if x != y]
    climbs = [(x, y) for x, y in moves if rank(y) > rank(x)]
    if args.v:
        for m, f in calls:
            print(f"  {m}.{f}")
    print(f"{args.op}({'numpy' if args.host else 'cupy'} 2^{args.n.bit_length() - 1}): "
          f"{len(set(modules))} modules, {len(moves)} moves, {len(climbs)} climbs "
          f"({len(calls)} calls)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
