"""Selection from measurements: pure functions over a cache table (no GPU).

`decide(table, request, candidates)` estimates every candidate's time for the
request from the measured size buckets (log-log interpolation between buckets,
scaled beyond them) and picks the fastest. For host (NumPy) input a GPU
plugin also pays the measured host overhead of that size (uploads, downloads,
allocation and launch latency, "host" table) while the CPU `numpy` plugin pays
its measured time, so the CPU/GPU crossover comes from measurements.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..sdk import registry
from ..dispatch.select import HOST_CUTOFF, Decision, priority_of
from ..gpu.device import current_limits
from ..sdk.plugin import config_is_valid
from .cache import warn_once

#: Smallest and largest size bucket (log2 of n); sweeps step by 2 (factor 4).
MIN_BUCKET, MAX_BUCKET = 10, 32

#: Measured operations: sort (keys only), argsort (int64 indices), pairs
#: (sort_by_key with 4-byte values) and pairs8 (with 8-byte values: what a
#: pair sort carries, or gathers, differs from argsort's positions).
OPS = ("sort", "argsort", "pairs", "pairs8")
OP_SHAPE = {"sort": ("sort", 0), "argsort": ("argsort", 8), "pairs": ("pairs", 4),
            "pairs8": ("pairs", 8)}

#: Uniform rows (a sort along an axis) are measured apart from 1-D sorts:
#: under the op's name with this suffix ("sort@rows"), by the bucket of the
#: row length (log2, any integer), with ROWS_TOTAL keys in all; a request of
#: n keys is estimated at n / ROWS_TOTAL times that. Ragged segments are
#: chosen by the plugins' declarations.
ROWS = "@rows"
ROWS_TOTAL_BUCKET = 22
#: Row-length buckets of `python -m cudasortkit.tune --rows` by default.
ROW_BUCKETS = (1, 4, 7, 10, 12, 14, 17, 20)


def bucket_of(n: int) -> int:
    """The size bucket of n: the nearest even power of two, at least 2^10."""
    if n <= 1 << MIN_BUCKET:
        return MIN_BUCKET
    b = 2 * math.floor(math.log2(n) / 2 + 0.5)
    return max(MIN_BUCKET, min(MAX_BUCKET, b))


def op_of(request) -> str:
    """Which measured operation a request behaves like: argsort (int32
    indices too), or pairs by its values' width."""
    if request.kind == "sort":
        return "sort"
    if request.kind == "argsort":
        return "argsort"
    return "pairs8" if request.value_bytes == 8 else "pairs"


#: Where an op has no measurement, the ops whose measurements stand in,
#: nearest first (pairs of 8-byte values move as many bytes as argsort).
SIMILAR_OPS = {"sort": ("sort",), "argsort": ("argsort", "pairs8", "pairs"),
               "pairs": ("pairs", "pairs8", "argsort"), "pairs8": ("pairs8", "argsort", "pairs")}


def _similar_ops(op: str) -> tuple:
    base, rows, _ = op.partition(ROWS)
    return tuple(o + rows for o in SIMILAR_OPS[base])


def row_bucket(row_len: int) -> int:
    """The row-length bucket of uniform rows: the nearest power of two's log2."""
    return max(0, round(math.log2(max(row_len, 1))))


def measured_shape(request):
    """(table op, size to interpolate at, factor on the estimate) of a
    request: its op and n for one array; for uniform rows the op + ROWS and
    the row length, scaled from ROWS_TOTAL keys to the request's; None for
    ragged segments (nothing measured for them)."""
    op = op_of(request)
    segments = request.segments
    if segments is None:
        return op, request.n, 1.0
    if not segments.uniform:
        return None
    return op + ROWS, segments.row_len, request.n / (1 << ROWS_TOTAL_BUCKET)


def points(by_bucket: dict, key: str = "ms") -> dict:
    """{bucket(int): value} of usable entries (measured, not failed)."""
    out = {}
    for b, e in (by_bucket or {}).items():
        v = e.get(key) if isinstance(e, dict) else None
        if isinstance(v, (int, float)) and v > 0 and not e.get("failed"):
            out[int(b)] = float(v)
    return out


def interpolate(pts: dict, n: int, above: str = "nlogn") -> float | None:
    """Estimated value at n from {bucket: value}.

    Between buckets: linear in (log2 n, log value). Below the smallest: the
    smallest's value (small sorts are latency-bound). Above the largest:
    scaled by n/N ("linear"), n log n / N log N ("nlogn") or log n / log N
    ("log": the row length of rows measured at one total size).
    """
    if not pts:
        return None
    x = math.log2(max(n, 1))
    bs = sorted(pts)
    if x <= bs[0]:
        return pts[bs[0]]
    if x >= bs[-1]:
        top = bs[-1]
        log_ratio = x / max(top, 1)
        if above == "log":
            return pts[top] * log_ratio
        ratio = 2.0 ** (x - top)
        if above == "nlogn":
            ratio *= log_ratio
        return pts[top] * ratio
    for lo, hi in zip(bs, bs[1:]):
        if lo <= x <= hi:
            t = (x - lo) / (hi - lo)
            return math.exp((1 - t) * math.log(pts[lo]) + t * math.log(pts[hi]))
    return pts[bs[-1]]  # unreachable


def nearest_config(by_bucket: dict, n: int):
    """The tuned config of the measured bucket nearest to n (log scale)."""
    usable = {int(b): e for b, e in (by_bucket or {}).items()
              if isinstance(e, dict) and e.get("config") is not None and not e.get("failed")}
    if not usable:
        return None
    x = math.log2(max(n, 1))
    best = min(usable, key=lambda b: (abs(b - x), b))
    return dict(usable[best]["config"])


def fits(config: dict, plugin) -> bool:
    """True if `config` sets exactly the tunables `plugin` declares, each to
    one of its declared values. The tuner only writes such configs, so a
    cached one that does not fit is corrupt and never reaches plugin code
    (which would fail on it, and be taken out of service for it). Stand-ins
    without declared tunables accept any config."""
    tunables = getattr(plugin, "tunables", None)
    if tunables is None:
        return True
    return set(config) == set(tunables) and all(config[k] in t.values for k, t in tunables.items())


@dataclass
class Estimate:
    name: str
    ms: float
    config: dict | None
    note: str = ""


def plugin_results(table: dict, name: str) -> dict:
    block = table.get("plugins", {}).get(name)
    return block.get("results", {}) if isinstance(block, dict) else {}


def _entries(table, name, op, dtype):
    res = plugin_results(table, name)
    for o in _similar_ops(op):
        by_bucket = res.get(o, {}).get(dtype)
        if points(by_bucket):
            return o, by_bucket
    return None, None


def estimate(table: dict, name: str, plugin, request) -> Estimate | None:
    """A plugin's estimated time for the request from its own measurements."""
    shape = measured_shape(request)
    if shape is None:
        return None
    op, size, factor = shape
    used_op, by_bucket = _entries(table, name, op, request.dtype)
    if by_bucket is None:
        return None
    above = "linear" if getattr(plugin, "device", "gpu") == "gpu" else "nlogn"
    if request.segments is not None:
        above = "log"  # rows at one total size: longer rows cost their log more
    ms = interpolate(points(by_bucket), size, above) * factor
    config = nearest_config(by_bucket, size)
    note = f"from {used_op} measurements" if used_op != op else ""
    problem = None
    if config is not None and plugin is not None and not fits(config, plugin):
        problem = "cached config does not fit the plugin's tunables"
        warn_once(f"config:{name}", f"cudasortkit: the tuning cache holds a config for {name} "
                                    f"that does not fit its tunables ({str(config)[:120]}); "
                                    "ignoring it, default config used")
    elif config is not None and plugin is not None and hasattr(plugin, "valid_config"):
        with registry.guarded(plugin, "valid_config"):
            valid = config_is_valid(plugin, config, request.dtype, request.value_bytes,
                                    current_limits())
        if not valid:
            problem = "tuned config invalid here"
    if problem is not None:
        config = None
        note = (note + "; " if note else "") + problem + ", default used"
    return Estimate(name, ms, config, note)


def measured_at(table: dict, name: str, request) -> bool:
    """Whether `name`'s measurements for the request's op and dtype reach its
    size: its size bucket (row-length bucket for uniform rows) lies between
    the smallest and largest bucket measured. Outside that range an estimate
    is an extrapolation, which keeps the order of the nearest measured size:
    it cannot see a plugin whose fixed costs amortise with size (counting's
    65,536 bins), or one that leaves the L2 cache later than another."""
    shape = measured_shape(request)
    if shape is None:
        return False
    op, size, _ = shape
    _, by_bucket = _entries(table, name, op, request.dtype)
    pts = points(by_bucket)
    if not pts:
        return False
    b = row_bucket(size) if request.segments is not None else bucket_of(size)
    return min(pts) <= b <= max(pts)


def host_extra(table: dict, request) -> float | None:
    """Measured extra cost of host input for a GPU plugin (copies, allocation, latency)."""
    host = table.get("host", {})
    for o in _similar_ops(op_of(request)):
        pts = points(host.get(o, {}).get(request.dtype), "extra_ms")
        if pts:
            return interpolate(pts, request.n, "linear")
    return None


#: Device measurements within this share of the fastest do not tell plugins
#: apart (at a few thousand keys a measured call is mostly its fixed cost,
#: tens of microseconds against kernels of a few): among them the declared
#: priority decides, as it does where nothing is measured.
TIE = 0.02


def decide(table: dict, request, candidates: dict, host_cutoff: int = HOST_CUTOFF) -> Decision | None:
    """The measured-fastest candidate for `request`, or None if nothing is measured.

    `candidates` maps name -> plugin (already filtered for the request).
    """
    gpu = {n: p for n, p in candidates.items() if getattr(p, "device", "gpu") == "gpu"}
    cpu = {n: p for n, p in candidates.items() if n not in gpu}
    estimates, unmeasured = [], []
    for name, plugin in sorted(gpu.items()):
        e = estimate(table, name, plugin, request)
        (estimates.append(e) if e is not None else unmeasured.append(name))
    if not estimates:
        return None
    # Estimates extrapolated beyond a plugin's measured sizes compete only
    # where no candidate is measured at this size (see measured_at).
    inside = {n for n in (gpu if request.on_device else candidates)
              if measured_at(table, n, request)}
    if inside:
        for e in estimates:
            if e.name not in inside:
                e.note = (e.note + "; " if e.note else "") + \
                    "extrapolated: after those measured at this size"

    def order(e):
        return (bool(inside) and e.name not in inside, e.ms)

    op = op_of(request)
    rows = "" if request.segments is None else \
        f" in {request.segments.count:,} rows of {request.segments.row_len:,}"
    if request.on_device:
        estimates.sort(key=order)
        first = order(estimates[0])
        tied = [e for e in estimates
                if order(e)[0] == first[0] and e.ms <= first[1] * (1 + TIE)]
        best = min(tied, key=lambda e: (priority_of(gpu[e.name], request), e.ms))
        if best is not estimates[0]:
            estimates.remove(best)
            estimates.insert(0, best)
        reason = (f"fastest measured for {op} of {request.n:,} {request.dtype} keys{rows} on the device"
                  + (f" ({estimates[1].name} ~{estimates[1].ms / best.ms:.2f}x slower)"
                     if len(estimates) > 1 else ""))
        return Decision(best.name, best.config, best.ms, reason, estimates, unmeasured)
    # Host input: GPU plugins pay the measured host overhead; CPU plugins run as measured.
    extra = host_extra(table, request)
    host_ests = []
    cpu_ests = [e for e in (estimate(table, n, p, request) for n, p in sorted(cpu.items())) if e]
    if extra is None:
        for e in estimates:
            host_ests.append(Estimate(e.name, e.ms, e.config, "device arrays only"))
        if cpu and request.n < host_cutoff:
            name = "numpy" if "numpy" in cpu else sorted(cpu)[0]
            best = next((e for e in cpu_ests if e.name == name), None)
            return Decision(name, None, best.ms if best else None,
                            f"host input below {host_cutoff:,} keys and no host overhead measured "
                            "(documented default cutoff)", cpu_ests + host_ests, unmeasured)
    else:
        for e in estimates:
            host_ests.append(Estimate(e.name, e.ms + extra, e.config,
                                      f"{e.ms:.4f} on device + {extra:.4f} host overhead"))
    unmeasured += [n for n in sorted(cpu) if n not in {e.name for e in cpu_ests}]
    every = sorted(host_ests + cpu_ests, key=order)
    best = every[0]
    where = "CPU" if best.name in cpu else "GPU"
    reason = f"fastest measured for {op} of {request.n:,} {request.dtype} host keys, on the {where}"
    if len(every) > 1:
        reason += f" (next {every[1].name} ~{every[1].ms / best.ms:.2f}x slower)"
    return Decision(best.name, best.config, best.ms, reason, every, unmeasured)
