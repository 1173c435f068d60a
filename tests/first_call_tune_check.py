"""The bars of a new size's first call and of `tune --quick`, in one run on a
GPU machine, each part in fresh processes (run it with nothing else on the
machine: part b is timed alone).

(a) First call of a new size: 3,000,000 float32 CuPy keys sorted right after
    a 2^24 sort, in a new process each time: first with empty caches (the
    tuning tables' CUDASORTKIT_CACHE_DIR and the compiled kernels'
    CUDASORTKIT_KERNEL_CACHE_DIR, both new folders: nvcc compiles from
    scratch, as on a fresh machine), then again with the kernel cache that
    process filled, and (after b) with the tuned table. Prints the seconds
    of the 2^24 call, the first and second calls of the new size, and a
    call after the config built aside is done; each result is checked
    against NumPy. Bar: first call <= 0.1 s every time.
(b) `python -m cudasortkit.tune --quick` end to end (wall clock, process
    start included) into new folders (kernels compiled from scratch), with
    its per-phase lines. Bar: <= 60 s.
(c) `bench`'s auto cells after it: auto against onesweep, radix,
    merge_sort and bitonic, uint32 and float32, 2^10..2^24, on b's table.
    Bar: auto <= 1.05x the best plugin of its cell.

`python tests/first_call_tune_check.py [--skip-tune]`; exits 1 if a bar is
missed. About two to three minutes on an H200.
"""
import json
import os
import subprocess
import sys
import tempfile
import time

FIRST_CALL_BAR_S, TUNE_BAR_S, AUTO_BAR = 0.1, 60.0, 1.05
N_BIG, N_NEW = 1 << 24, 3_000_000

PROBE = r"""
import json, time
import numpy as np
import cupy
import cudasortkit as csk
from cudasortkit.launch import built

def timed(fn):
    t = time.perf_counter()
    out = fn()
    cupy.cuda.Device().synchronize()
    return out, time.perf_counter() - t

rng = np.random.default_rng(51)
big = cupy.asarray(rng.standard_normal(%(big)d).astype(np.float32))
h = rng.standard_normal(%(new)d).astype(np.float32)
x = cupy.asarray(h)
cupy.cuda.Device().synchronize()
_, big_s = timed(lambda: csk.sort(big))
y1, first_s = timed(lambda: csk.sort(x))
stood_in = built.counters()["stand_ins"]
y2, second_s = timed(lambda: csk.sort(x))
t = time.perf_counter()
built.wait()
wait_s = time.perf_counter() - t
y3, after_s = timed(lambda: csk.sort(x))
want = np.sort(h)
ok = all(np.array_equal(y.get(), want) for y in (y1, y2, y3))
print("PROBE " + json.dumps({"big_s": big_s, "first_s": first_s, "second_s": second_s,
                             "build_wait_s": wait_s, "after_build_s": after_s, "ok": ok,
                             "stand_ins": stood_in, "counters": built.counters(),
                             "explain": str(csk.explain(x)).splitlines()[0]}))
"""


def run(cmd, env, label):
    """Run cmd, echo its output, return (stdout, wall seconds, exit status)."""
    print(f"\n=== {label}: {' '.join(cmd)}", flush=True)
    t = time.perf_counter()
    done = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seconds = time.perf_counter() - t
    return done.stdout, seconds, done.returncode


def probe(env, label) -> bool:
    out, seconds, rc = run([sys.executable, "-c", PROBE % {"big": N_BIG, "new": N_NEW}], env, label)
    line = next((l for l in out.splitlines() if l.startswith("PROBE ")), None)
    if rc != 0 or line is None:
        print(out)
        print(f"FAIL {label}: the probe failed (exit {rc})")
        return False
    r = json.loads(line[6:])
    good = r["ok"] and r["first_s"] <= FIRST_CALL_BAR_S
    print(f"2^24 call {r['big_s']:.3f} s; 3,000,000 keys: first call {r['first_s']:.4f} s, "
          f"second {r['second_s']:.4f} s, after its build ({r['build_wait_s']:.2f} s waited) "
          f"{r['after_build_s']:.4f} s; stand-in calls {r['counters']['stand_ins']}, builds "
          f"{r['counters']['builds']} ({r['counters']['failed']} failed); results "
          f"{'right' if r['ok'] else 'WRONG'}; process {seconds:.1f} s")
    print(f"  explain: {r['explain']}")
    print(f"{'ok  ' if good else 'FAIL'} {label}: first call {r['first_s']:.4f} s "
          f"(bar {FIRST_CALL_BAR_S} s)")
    return good


def main(argv) -> int:
    skip_tune = "--skip-tune" in argv
    base = dict(os.environ)
    base.pop("CUDASORTKIT_BUILD_ASIDE", None)  # (the default: on)
    fresh = lambda tag: tempfile.mkdtemp(prefix=f"csk-{tag}-")  # noqa: E731
    results = []
    t0 = time.perf_counter()

    # (a) empty caches, then the kernels that process compiled
    env_a = dict(base, CUDASORTKIT_CACHE_DIR=fresh("tables-a"),
                 CUDASORTKIT_KERNEL_CACHE_DIR=fresh("kernels-a"))
    results.append(probe(env_a, "(a1) first call, empty caches"))
    results.append(probe(env_a, "(a2) first call, second process, kernel cache filled"))
    if skip_tune:
        print(f"\ntotal {time.perf_counter() - t0:.0f} s")
        return 0 if all(results) else 1

    # (b) tune --quick, alone, into new folders (kernels compiled from scratch)
    env_b = dict(base, CUDASORTKIT_CACHE_DIR=fresh("tables-b"),
                 CUDASORTKIT_KERNEL_CACHE_DIR=fresh("kernels-b"))
    summary = os.path.join(env_b["CUDASORTKIT_CACHE_DIR"], "tune-summary.json")
    out, seconds, rc = run([sys.executable, "-m", "cudasortkit.tune", "--quick", "--json", summary],
                           env_b, "(b) tune --quick")
    print(out[-6000:])
    good = rc == 0 and seconds <= TUNE_BAR_S
    results.append(good)
    print(f"{'ok  ' if good else 'FAIL'} (b) tune --quick: {seconds:.1f} s end to end, exit {rc} "
          f"(bar {TUNE_BAR_S:.0f} s)")

    # (a3) the first call with the tuned table
    results.append(probe(env_b, "(a3) first call, tuned table"))

    # (c) bench's auto cells after tune
    rows_file = os.path.join(env_b["CUDASORTKIT_CACHE_DIR"], "bench-auto.json")
    sizes = ",".join(f"2^{b}" for b in range(10, 25, 2))
    out, seconds, rc = run([sys.executable, "-m", "cudasortkit.cli.bench", "--algorithms",
                            "auto,onesweep,radix,merge_sort,bitonic", "--dtypes", "uint32,float32",
                            "--sizes", sizes, "--json", rows_file], env_b, "(c) bench auto cells")
    if rc != 0:
        print(out[-4000:])
        print(f"FAIL (c) bench exited {rc}")
        results.append(False)
    else:
        rows = json.load(open(rows_file))
        cells = {}
        for r in rows:
            if "median_ms" in r and r["algorithm"] != "cupy":
                cells.setdefault((r["dtype"], r["n"]), {})[r["algorithm"]] = r["median_ms"]
        worst = 0.0
        for (dtype, n), times in sorted(cells.items()):
            plugins = {k: v for k, v in times.items() if k != "auto"}
            if "auto" not in times or not plugins:
                print(f"FAIL (c) {dtype} {n}: auto or every plugin failed")
                results.append(False)
                continue
            best = min(plugins, key=plugins.get)
            ratio = times["auto"] / plugins[best]
            worst = max(worst, ratio)
            results.append(ratio <= AUTO_BAR)
            print(f"{'ok  ' if ratio <= AUTO_BAR else 'FAIL'} (c) {dtype:8} {n:>9}: auto "
                  f"{times['auto']:.4f} ms, best {best} {plugins[best]:.4f} ms, {ratio:.3f}x "
                  f"(bar {AUTO_BAR}x)")
        print(f"(c) worst auto / best {worst:.3f}x over {len(cells)} cells; bench {seconds:.0f} s")
    print(f"\n{'ALL BARS MET' if all(results) else 'SOME BARS MISSED'}; "
          f"total {time.perf_counter() - t0:.0f} s")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
