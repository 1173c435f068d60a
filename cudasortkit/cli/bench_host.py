"""``python -m cudasortkit bench --host``: host (NumPy) arrays in and out.

Measures, in one run: the pinned host-to-device bandwidth (the yardstick),
then each case in a subprocess of its own, so that its host memory
high-water mark (VmHWM, reset before each timed call) is its own:
in-core sizes against the naive CuPy round trip (cupy.asarray -> cupy.sort
-> .get()) and numpy.sort, and out-of-core sizes under a device memory cap.
Per case: median time (of 3 calls after a warm-up call: the first of a size
may compile), GB/s of input, that as a fraction of the pinned
bandwidth, the peak host memory over what the process held before the call
(the input and the pinned staging pool already held are not counted; the
pool's size is printed), and whether the result was right and the input
untouched.

A case may name an operation first: `argsort:uint32:2^28:1GiB` (stable
argsort), `pairs:...` (sort_by_key with uint32 values), `inplace:...`
(sort with out=a: the input is the output, refilled before each call; its
peak is what sorting in place costs over the input). Without one: sort.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import numpy as np

DEFAULT_IN_CORE = "uint32:2^24,float64:2^26,uint32:2^28"
DEFAULT_OUT_OF_CORE = ("uint32:2^30:1GiB,float64:2^29:1GiB,uint32:2^30,argsort:uint32:2^28:1GiB,"
                       "pairs:uint32:2^28:1GiB,inplace:uint32:2^29:1GiB")
OPS = ("sort", "argsort", "pairs", "inplace")


def parse_cases(text: str) -> list:
    """'[op:]dtype:size[:cap],...' -> [(op, dtype, n, cap or None)]."""
    from ..settings import parse_size

    cases = []
    for item in filter(None, (t.strip() for t in text.split(","))):
        parts = item.split(":")
        op = parts.pop(0) if parts[0] in OPS else "sort"
        if len(parts) not in (2, 3):
            raise SystemExit(f"--sizes item {item!r}: write [op:]dtype:size[:cap], op one of "
                             f"{', '.join(OPS)}")
        cases.append((op, parts[0], parse_size(parts[1]), parts[2] if len(parts) == 3 else None))
    return cases


# ------------------------------------------------------------- measurements
def pinned_h2d_gb_s(nbytes: int = 256 << 20, repeats: int = 5) -> float:
    """Host-to-device bandwidth from page-locked memory, GB/s (median)."""
    from ..gpu.device import get_device

    state = get_device()
    cuda = state.cuda
    host = cuda.pagelocked_empty(nbytes, np.uint8)
    host[:] = 1
    dev = cuda.mem_alloc(nbytes)
    try:
        start, end = cuda.Event(), cuda.Event()
        times = []
        for _ in range(repeats + 1):
            start.record(state.stream)
            cuda.memcpy_htod_async(dev, host, state.stream)
            end.record(state.stream)
            end.synchronize()
            times.append(end.time_since(start) / 1e3)
        return nbytes / sorted(times[1:])[len(times[1:]) // 2] / 1e9
    finally:
        dev.free()
        host.base.free()


def proc_status(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def reset_peak_memory() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def make_keys(dtype: str, n: int, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return rng.integers(info.min, info.max, size=n, dtype=dt, endpoint=True)
    out = rng.standard_normal(n, dtype=np.float64 if dt.itemsize == 8 else np.float32)
    return out.astype(dt, copy=False)


def _fingerprint(a: np.ndarray) -> tuple:
    """A cheap multiset checksum of the keys' bits (order-independent)."""
    bits = a.view(np.dtype(f"u{a.itemsize}")).astype(np.uint64, copy=False)
    return (int(np.sum(bits, dtype=np.uint64)),
            int(np.sum(bits * bits, dtype=np.uint64)),
            int(np.bitwise_xor.reduce(bits)))


def _is_sorted(a: np.ndarray) -> bool:
    step = 1 << 26
    for i in range(0, len(a) - 1, step):
        part = a[i:i + step + 1]
        if not np.all(part[:-1] <= part[1:]):
            return False
    return True


def _stable_order(keys: np.ndarray, order: np.ndarray) -> bool:
    """True if the sorted keys `keys` hold equal keys in ascending `order`."""
    step = 1 << 26
    for i in range(0, len(keys) - 1, step):
        k, o = keys[i:i + step + 1], order[i:i + step + 1]
        same = k[1:] == k[:-1]
        if not np.all(o[1:][same] > o[:-1][same]):
            return False
    return True


def _ours(op: str):
    """op's call on (keys, values): cudasortkit's sort, stable argsort,
    sort_by_key or sort with out=keys."""
    import cudasortkit as csk

    return {"sort": lambda k, v: csk.sort(k),
            "argsort": lambda k, v: csk.argsort(k, stable=True),
            "pairs": lambda k, v: csk.sort_by_key(k, v),
            "inplace": lambda k, v: csk.sort(k, out=k)}[op]


def _ordered_right(op: str, keys, result) -> bool:
    """argsort / pairs: the result is the stable order of keys (its
    indices, or uint32 values made by arange), checked without a CPU sort."""
    order = result if op == "argsort" else result[1]
    got = keys[order]
    if op == "pairs" and not np.array_equal(got, result[0]):
        return False
    return (_is_sorted(got) and _stable_order(got, order)
            and _fingerprint(order) == _fingerprint(np.arange(len(keys), dtype=order.dtype)))


def run_case(what: str, dtype: str, n: int, cap: str | None, repeats: int,
             op: str = "sort") -> dict:
    """One case in this process: 'ours' (cudasortkit's `op`), 'cupy' (the
    naive round trip) or 'numpy' (numpy.sort)."""
    import cudasortkit as csk
    from ..host.pinned import pool

    keys = make_keys(dtype, n)
    values = np.arange(n, dtype=np.uint32) if op == "pairs" else None
    source = keys.copy() if op == "inplace" else None
    before = keys[:1 << 20].copy(), keys[-(1 << 20):].copy()
    exact = n <= 1 << 28
    ordered = op in ("argsort", "pairs")
    expected = np.sort(keys) if exact and not ordered else None
    fingerprint = None if exact or ordered else _fingerprint(keys)
    if what == "ours":
        call = _ours(op)
        if cap:
            csk.set_device_memory_limit(cap)
        warm = [make_keys(dtype, 1 << 22, 2)]  # compile and fill the pinned pool first
        if cap:  # an eighth of the size under the same cap: out of core, the same plugin
            warm.append(make_keys(dtype, max(2, n // 8), 2))
        for w in warm:
            call(w, np.arange(len(w), dtype=np.uint32))
        del warm

        def sort(h):
            return call(h, values)
    elif what == "cupy":
        import cupy

        cupy.sort(cupy.asarray(keys[:1 << 20])).get()

        def sort(h):
            return cupy.sort(cupy.asarray(h)).get()
    else:
        sort = np.sort
    times, peak, ok = [], 0, True
    for _ in range(repeats):
        result = None
        if source is not None:
            np.copyto(keys, source)
        base = proc_status("VmRSS")
        reset = reset_peak_memory()
        t0 = time.perf_counter()
        result = sort(keys)
        times.append(time.perf_counter() - t0)
        peak = max(peak, (proc_status("VmHWM") - base) if reset else -1)
        if ordered:
            ok = ok and _ordered_right(op, keys, result)
        elif exact:
            ok = ok and bool(np.array_equal(result, expected, equal_nan=True))
        else:
            ok = ok and _is_sorted(result) and _fingerprint(result) == fingerprint
        del result
    untouched = source is not None or (np.array_equal(keys[:1 << 20], before[0], equal_nan=True)
                                       and np.array_equal(keys[-(1 << 20):], before[1],
                                                          equal_nan=True))
    return {"what": what, "op": op, "dtype": dtype, "n": n, "cap": cap,
            "s": sorted(times)[len(times) // 2],
            "peak_extra": peak, "input_bytes": keys.nbytes, "ok": ok and untouched,
            "pinned_held": pool.held_bytes}


def _subprocess(what, dtype, n, cap, repeats, env=None, op="sort") -> dict:
    arg = json.dumps([what, dtype, n, cap, repeats, op])
    proc = subprocess.run([sys.executable, "-m", "cudasortkit.cli.bench_host", arg],
                          capture_output=True, text=True, env={**os.environ, **(env or {})})
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    return {"what": what, "op": op, "dtype": dtype, "n": n, "cap": cap,
            "error": (proc.stderr.strip().splitlines() or ["no output"])[-1][:200]}


def _row(r, bw) -> str:
    op = r.get("op", "sort")
    label = (r["what"] + (f" {op}" if op != "sort" else "")
             + (f" [{r['mode']}]" if r.get("mode") else ""))
    head = f"{r['dtype']:8} 2^{int(np.log2(r['n'])):<3} {r['cap'] or '-':>6} {label:20}"
    if "error" in r:
        return head + " " + r["error"]
    gb_s = r["input_bytes"] / r["s"] / 1e9
    extra = "" if r["peak_extra"] < 0 else f"{r['peak_extra'] / 2**30:8.2f}"
    return (head + f" {r['s'] * 1e3:10.1f} {gb_s:7.2f} {100 * gb_s / bw:6.1f}% {extra:>8}"
            f" {r['pinned_held'] / 2**20:7.0f} {'yes' if r['ok'] else 'NO':>4}")


def main(sizes_in_core=DEFAULT_IN_CORE, sizes_out_of_core=DEFAULT_OUT_OF_CORE, repeats=3,
         modes=("auto",), numpy_ref=True) -> int:
    bw = pinned_h2d_gb_s()
    print(f"pinned host-to-device bandwidth: {bw:.1f} GB/s")
    print(f"{'dtype':8} {'n':5} {'cap':>6} {'what':20} {'ms':>10} {'GB/s':>7} {'of bw':>7} "
          f"{'xhost GiB':>8} {'pin MiB':>7} {'ok':>4}")
    rows = []

    def ours(op, dtype, n, cap):
        for mode in modes:
            r = _subprocess("ours", dtype, n, cap, repeats, {"CUDASORTKIT_HOST_TRANSFER": mode}, op)
            r["mode"] = mode
            rows.append(r)
            print(_row(r, bw), flush=True)

    for op, dtype, n, cap in parse_cases(sizes_in_core):
        ours(op, dtype, n, cap)
        if op != "sort":  # the references sort
            continue
        refs = ("cupy", "numpy") if numpy_ref else ("cupy",)
        for what in refs:
            r = _subprocess(what, dtype, n, None, 1 if what == "numpy" else repeats)
            rows.append(r)
            print(_row(r, bw), flush=True)
        mine = [r for r in rows[-len(modes) - len(refs):] if r["what"] == "ours" and "s" in r]
        cupy = [r for r in rows[-len(refs):] if r["what"] == "cupy" and "s" in r]
        if mine and cupy:
            best = min(mine, key=lambda r: r["s"])
            print(f"  -> {dtype} 2^{int(np.log2(n))}: {cupy[0]['s'] / best['s']:.2f}x the CuPy round "
                  f"trip ({best['mode']})", flush=True)
    for op, dtype, n, cap in parse_cases(sizes_out_of_core):
        ours(op, dtype, n, cap)
    return 0 if all(r.get("ok") for r in rows) else 1


if __name__ == "__main__":
    what, dtype, n, cap, repeats, op = json.loads(sys.argv[1])
    print(json.dumps(run_case(what, dtype, n, cap, repeats, op)))
