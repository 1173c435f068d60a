"""Where an out-of-core host sort spends its time: the phases of
cudasortkit/host/outofcore.py timed on the host (each ends synchronised), the
device sorts inside them timed with CUDA events, and the host pieces the
phases are made of (pinned DMA both ways, host copy and first-touch rates,
page-locking the caller's memory) measured alone.

    python tools/profile_outofcore.py uint32:2^30:1GiB float64:2^29:1GiB
"""
from __future__ import annotations

import ctypes
import sys
import time

import numpy as np

import cudasortkit as csk
from cudasortkit.host import outofcore
from cudasortkit.host import transfer
from cudasortkit.cli.bench_host import make_keys, proc_status, reset_peak_memory
from cudasortkit.gpu.device import get_device
from cudasortkit.settings import parse_size


def _median(xs):
    return sorted(xs)[len(xs) // 2]


def host_pieces(nbytes=1 << 30):
    state = get_device()
    cuda = state.cuda
    out = {}
    host = cuda.pagelocked_empty(256 << 20, np.uint8)
    host2 = cuda.pagelocked_empty(256 << 20, np.uint8)
    host[:] = 1
    dev, dev2 = cuda.mem_alloc(256 << 20), cuda.mem_alloc(256 << 20)
    down = transfer.download_stream(state)
    for name in ("h2d", "d2h", "both"):
        ts = []
        for _ in range(4):
            state.stream.synchronize()
            t0 = time.perf_counter()
            if name in ("h2d", "both"):
                cuda.memcpy_htod_async(dev, host, state.stream)
            if name in ("d2h", "both"):
                cuda.memcpy_dtoh_async(host2, dev2, down)
            state.stream.synchronize()
            down.synchronize()
            ts.append(time.perf_counter() - t0)
        out[f"pinned {name} GB/s"] = (256 << 20) * (2 if name == "both" else 1) / _median(ts[1:]) / 1e9
    dev.free()
    dev2.free()
    src = np.ones(nbytes, np.uint8)
    dst = np.empty(nbytes, np.uint8)
    t0 = time.perf_counter()
    transfer.parallel_copy(dst, src, 8 << 20)
    out["first-touch copy GB/s"] = nbytes / (time.perf_counter() - t0) / 1e9
    ts = []
    for _ in range(3):
        t0 = time.perf_counter()
        transfer.parallel_copy(dst, src, 8 << 20)
        ts.append(time.perf_counter() - t0)
    out[f"host copy GB/s ({transfer.copy_threads()} threads)"] = nbytes / _median(ts) / 1e9
    lib = ctypes.CDLL("libcuda.so.1")
    lib.cuMemHostRegister_v2.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint)
    lib.cuMemHostUnregister.argtypes = (ctypes.c_void_p,)
    for name, arr in (("present", src), ("fresh", np.empty(nbytes, np.uint8))):
        addr = arr.__array_interface__["data"][0]
        t0 = time.perf_counter()
        rc = lib.cuMemHostRegister_v2(addr, nbytes, 0)
        t1 = time.perf_counter()
        lib.cuMemHostUnregister(addr)
        t2 = time.perf_counter()
        out[f"register {name} GiB/s (rc {rc})"] = 1 / (t1 - t0)
        out[f"unregister {name} GiB/s"] = 1 / (t2 - t1)
    # the staged pipe alone: 1 GiB up, 1 GiB down, both at once
    d = state.allocate(nbytes, "profile")
    d2 = state.allocate(nbytes, "profile")
    for name in ("up", "down", "both"):
        ts = []
        for _ in range(3):
            t0 = time.perf_counter()
            with transfer.Pipe(state) as pipe:
                if name in ("down", "both"):
                    pipe.after_device_work()
                    pipe.download(dst, int(d2))
                if name in ("up", "both"):
                    pipe.upload(int(d), src)
                pipe.drain()
            ts.append(time.perf_counter() - t0)
        out[f"pipe {name} GB/s"] = nbytes * (2 if name == "both" else 1) / _median(ts) / 1e9
    d.free()
    d2.free()
    return out


class Phases:
    def __init__(self):
        self.t = {}
        self.sort_ms = 0.0
        self.sorts = 0
        self.events = []

    def wrap(self, name, fn):
        def timed(*a, **k):
            state = get_device()
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                state.stream.synchronize()
                transfer.download_stream(state).synchronize()
                self.t[name] = self.t.get(name, 0.0) + time.perf_counter() - t0
        return timed

    def wrap_sort(self, fn):
        def timed(plugin, config, request, state, n, *rest):
            cuda = state.cuda
            e0, e1 = cuda.Event(), cuda.Event()
            e0.record(state.stream)
            fn(plugin, config, request, state, n, *rest)
            e1.record(state.stream)
            self.events.append((e0, e1))
        return timed

    def collect(self):
        for e0, e1 in self.events:
            e1.synchronize()
            self.sort_ms += e1.time_since(e0)
            self.sorts += 1
        self.events.clear()


def profile(dtype, n, cap, kind="sort", repeats=3):
    csk.set_device_memory_limit(cap)
    keys = make_keys(dtype, n)
    csk.sort(make_keys(dtype, 1 << 22, 2))
    phases = [name for name in ("_splitters", "_count", "_distribute", "_sort_buckets",
                                "_distribute_placed", "_move_buckets") if hasattr(outofcore, name)]
    real = {name: getattr(outofcore, name) for name in phases + ["run_job"]}
    values = np.arange(n, dtype=np.int64) if kind == "pairs" else None
    rows = []
    try:
        for _ in range(repeats):
            ph = Phases()
            for name in phases:
                setattr(outofcore, name, ph.wrap(name.strip("_"), real[name]))
            outofcore.run_job = ph.wrap_sort(real["run_job"])
            base = proc_status("VmRSS")
            reset_peak_memory()
            t0 = time.perf_counter()
            if kind == "argsort":
                result = csk.argsort(keys)
            elif kind == "pairs":
                result = csk.sort_by_key(keys, values)
            else:
                result = csk.sort(keys)
            total = time.perf_counter() - t0
            ph.extra = proc_status("VmHWM") - base
            ph.collect()
            del result
            rows.append((total, ph))
    finally:
        for name, fn in real.items():
            setattr(outofcore, name, fn)
        csk.set_device_memory_limit(None)
    total, ph = sorted(rows, key=lambda r: r[0])[len(rows) // 2]
    phases = " ".join(f"{k} {v * 1e3:.0f}" for k, v in ph.t.items())
    print(f"{kind} {dtype} 2^{int(np.log2(n))} cap {cap}: total {total * 1e3:.0f} ms "
          f"(all: {', '.join(f'{r[0] * 1e3:.0f}' for r in rows)}) {keys.nbytes / total / 1e9:.2f} GB/s; "
          f"phases ms: {phases}; device sorts {ph.sort_ms:.0f} ms in {ph.sorts}; extra host "
          f"{ph.extra / 2**30:.2f} GiB over {keys.nbytes / 2**30:.2f} GiB of keys", flush=True)


if __name__ == "__main__":
    print("cudasortkit from", csk.__file__)
    args = sys.argv[1:]
    if args and args[0] == "--pieces":
        for k, v in host_pieces().items():
            print(f"  {k}: {v:.2f}", flush=True)
        args = args[1:]
    for item in args:
        parts = item.split(":")
        kind = parts[3] if len(parts) > 3 else "sort"
        profile(parts[0], parse_size(parts[1]), parts[2], kind)
