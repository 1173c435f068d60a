"""``python -m cudasortkit bench --select``: selection against its target
speedups, cudasortkit (auto) against the peers in the same run:

- csk.topk against torch.topk on float32 torch tensors: (1, 2^23) k=1000,
  (4096, 32000) k=50, (2^16, 1024) k=8, 2^24 keys k=2^20;
- csk.argpartition against cupy.argpartition on 2^24 float32, kth = n/2.

Every result is checked first (topk: torch.topk's values exactly, and
the indices point at them; argpartition: a permutation that partitions at
kth with NumPy's key there); a wrong result is reported and not timed.
Times are medians of CUDA-event timings after warm-up (gpu/timing.py);
`speedup` is the peer's time over ours, `bar` the speedup the case
should reach."""
from __future__ import annotations

import numpy as np

from .bench_family import warm_median_ms

#: (what, shape, k or kth, bar): topk cases first, then argpartition.
CASES = [("topk", (1, 1 << 23), 1000, 2.0), ("topk", (4096, 32000), 50, 1.5),
         ("topk", (1 << 16, 1024), 8, 1.5), ("topk", (1 << 24,), 1 << 20, 2.0),
         ("argpartition", (1 << 24,), 1 << 23, 3.0)]


def _check_topk(csk, torch, t, k) -> bool:
    v, i = csk.topk(t, k)
    tv, _ = torch.topk(t, k)
    return bool(torch.equal(v, tv) and torch.equal(torch.gather(t, -1, i), v))


def _check_argpartition(csk, cupy, a, host, kth) -> bool:
    idx = csk.argpartition(a, kth)
    if not bool((cupy.sort(idx) == cupy.arange(len(host))).all()):
        return False
    p = a[idx]
    want = np.partition(host, kth)[kth]
    return bool(p[kth] == want and (p[:kth] <= p[kth]).all() and (p[kth + 1:] >= p[kth]).all())


def table(repeats: int = 10, cases=CASES) -> list:
    import cupy
    import torch

    import cudasortkit as csk

    rng = np.random.default_rng(0)
    rows = []
    for what, shape, k, bar in cases:
        host = rng.standard_normal(shape, dtype=np.float32)
        t = torch.from_numpy(host).cuda()
        row = {"op": what, "shape": "x".join(map(str, shape)),
               ("k" if what == "topk" else "kth"): k, "bar": bar}
        if what == "topk":
            row["algorithm"] = csk.explain(t, kind="topk", k=k).name
            row["ok"] = _check_topk(csk, torch, t, k)
            peer = lambda: torch.topk(t, k)  # noqa: E731
            ours = lambda: csk.topk(t, k)  # noqa: E731
            row["peer"] = "torch.topk"
        else:
            a = cupy.asarray(t)
            row["algorithm"] = csk.explain(a, kind="partition", kth=k).name
            row["ok"] = _check_argpartition(csk, cupy, a, host, k)
            peer = lambda: cupy.argpartition(a, k)  # noqa: E731
            ours = lambda: csk.argpartition(a, k)  # noqa: E731
            row["peer"] = "cupy.argpartition"
        if row["ok"]:
            row["csk_ms"] = warm_median_ms(ours, repeats)
            row["peer_ms"] = warm_median_ms(peer, repeats)
            row["speedup"] = row["peer_ms"] / row["csk_ms"]
            row["met"] = row["speedup"] >= bar
        rows.append(row)
    return rows


def main(repeats: int = 10) -> int:
    rows = table(repeats)
    print(f"{'op':13} {'shape':12} {'k/kth':>8} {'algorithm':13} {'csk ms':>9} {'peer':18} "
          f"{'peer ms':>9} {'speedup':>8} {'bar':>5}  result")
    failed = False
    for r in rows:
        kk = r.get("k", r.get("kth"))
        if not r["ok"]:
            failed = True
            print(f"{r['op']:13} {r['shape']:12} {kk:>8} {r['algorithm']:13} WRONG RESULT (not timed)")
            continue
        print(f"{r['op']:13} {r['shape']:12} {kk:>8} {r['algorithm']:13} {r['csk_ms']:9.3f} "
              f"{r['peer']:18} {r['peer_ms']:9.3f} {r['speedup']:7.2f}x {r['bar']:4.1f}x  "
              f"{'bar met' if r['met'] else 'BELOW BAR'}")
    return 1 if failed else 0
