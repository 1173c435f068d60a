"""exchange="nccl": one collective sort among the workers, placed and
tracked by Dask (as dask-cuda's explicit-comms did).

It runs eagerly when called: the input is persisted, `client.who_has` tells
which worker holds each chunk, and each worker gets ONE task
(collective.sort_on_rank) taking its own chunks in chunk order; the workers
then sort together through a communicator (comm.py: NCCL among GPUs, so
device chunks never pass through host memory). Each output chunk is one
small slicing task on the worker that holds it, and the result is a dask
array of those futures with known chunks. Tasks: P (the input) + W + Q per
returned array, linear in the chunk count.

Communicators live in a WorkerPlugin (Collectives) on every worker, made
once per set of workers: the id from one worker (NCCL's unique id), then
`client.run` on all workers at once (NCCL's init is collective). A
distributed.Lock held by the client while the W tasks run lets one
collective sort run at a time per cluster, so two sorts never interleave
their collectives. When a sort fails, its communicator is dropped and the
next sort makes a new one.

The first sort of a dtype also warms, on every worker, the kernels a sort
of that dtype uses (warm_up); `prepare` does both ahead of the first sort,
so that it runs as fast as the later ones.
"""
from __future__ import annotations

import sys
import threading
import time
import uuid
from operator import getitem

import numpy as np
from distributed import WorkerPlugin

from . import chunks, cluster, comm, counting
from .collective import Local, Spec, position_dtype, sort_on_rank
from .cuts import worker_starts

NAME = "cudasortkit-collectives"
LOCK = "cudasortkit-collective-sort"
#: keys per worker the warm-up sorts at most (per dtype and operation):
#: large enough that cudasortkit picks the plugins of large sorts on GPUs
WARM_KEYS = {"cupy": 1 << 26, "numpy": 1 << 16}


class Collectives(WorkerPlugin):
    """One worker's communicators, by (communicator id, worker address: in
    an in-process cluster the workers may share one plugin object), and the
    (dtype, op, descending) warmed."""
    name = NAME

    def __init__(self):
        self.comms = {}
        self.warmed = set()


# ------------------------------------------------------------ on the workers
def _plugin(dask_worker):
    plugin = dask_worker.plugins.get(NAME)
    if plugin is None:
        raise RuntimeError("cudasortkit.dask: this worker has no collective communicators "
                           "(it joined or restarted after the sort began); sort again")
    return plugin


def _has_plugin(dask_worker=None) -> bool:
    return NAME in dask_worker.plugins


def _create(cid: str, transport: str, uid, ranks: dict, dask_worker=None) -> None:
    """This worker's communicator `cid` (NCCL: returns once all ranks joined)."""
    me = dask_worker.address
    _plugin(dask_worker).comms[(cid, me)] = comm.make(transport, uid, len(ranks), ranks[me])


def _forget(cid: str, dask_worker=None) -> None:
    _plugin(dask_worker).comms.pop((cid, dask_worker.address), None)


def warm_up(dtype, op: str, descending: bool, n: int, module: str, dask_worker=None) -> None:
    """Compile, once per worker, what a collective sort of n keys of `dtype`
    runs: the collective itself on a communicator of this worker alone
    (its chunks as two runs: the local sorts into the send arena, their
    merge, and for integer keys a narrow range's counts and fills), and the
    counts the exact cuts search with (of the keys, and of the positions
    for argsort and sort_by_key), which one rank alone has no boundary for."""
    plugin = _plugin(dask_worker)
    what = (np.dtype(dtype).str, op, bool(descending))
    if what in plugin.warmed or n <= 0:
        return
    xp = np if module == "numpy" else __import__(module)
    dtype = np.dtype(dtype)
    values = None if op != "sort_by_key" else np.dtype(np.int64)
    spec = Spec(op, bool(descending), dtype, (0, n), (n,), (0,), True, values, module)
    # one hub per thread, made once (a new id each time would leave a hub behind)
    alone = comm.make("threads", f"cudasortkit-warm-up-{threading.get_ident()}", 1, 0)
    half = n // 2
    keys = _random_keys(xp, n, dtype)
    # Integer keys of a narrow range take other plugins (counting): those
    # too, made in place (the warm-up holds one set of keys at a time).
    for narrow in (False, True) if dtype.kind in "iu" else (False,):
        if narrow:
            keys &= 15
        parts = [keys[:half], keys[half:]]       # two runs: their starts are not adjacent
        vals = None if values is None else [xp.arange(len(p), dtype=values) for p in parts]
        out = sort_on_rank(alone, spec, Local(parts, [0, half + 1], [0, 1], [half, n - half], vals))
        first = out[0] if out[0] is not None else parts[0]
        zero, full = xp.zeros(1, np.int64), xp.full(1, len(first), np.int64)
        counting.count_words(first, xp.zeros((1, 4), np.uint64), zero, full, descending, 1)
        if op != "sort":
            positions = xp.arange(16, dtype=position_dtype(spec))
            counting.count_words(positions, xp.zeros((1, 4), np.uint64), zero, xp.full(1, 16, np.int64), False, 0)
    if xp is not np:
        xp.cuda.get_current_stream().synchronize()
    plugin.warmed.add(what)


def close_links(dask_worker=None) -> None:
    """Close this worker's mappings of its peers' memory (CUDA IPC) that
    its communicators keep between sorts (options keep=1). Run it on every
    worker (client.run) before free_buffers: a worker may free what its
    peers mapped only after they closed it."""
    plugin = dask_worker.plugins.get(NAME) if dask_worker is not None else None
    for c in ([] if plugin is None else plugin.comms.values()):
        c.unshare(False)


def free_buffers(dask_worker=None) -> None:
    """Free this worker's arenas (the collective's send and receive buffers
    kept between sorts) and the blocks the pools keep unused; after
    close_links has run on every worker."""
    plugin = dask_worker.plugins.get(NAME) if dask_worker is not None else None
    for c in ([] if plugin is None else plugin.comms.values()):
        for arena in c.arenas.values():
            arena.release()
    if "cupy" in sys.modules:
        import cupy

        from ..gpu.device import get_device

        get_device(cupy.cuda.Device().id).free_unused()


def _random_keys(xp, n: int, dtype: np.dtype):
    """n keys of `dtype` with random bits (bools 0 or 1): n * itemsize bytes."""
    if xp is np:
        bits = np.random.default_rng(0).integers(0, 256, n * dtype.itemsize, dtype=np.uint8)
    else:
        bits = xp.random.randint(0, 256, n * dtype.itemsize, dtype=np.uint8)
    return bits.astype(bool) if dtype.kind == "b" else bits.view(dtype)


def _run_rank(cid: str, spec: Spec, keys: list, starts: list, index: list, sizes: list, values):
    """One worker's task: its (keys, values or None, phase times)."""
    from distributed import get_worker

    began = time.time()   # the host clock: ranks of one machine compare with the client's
    worker = get_worker()
    c = _plugin(worker).comms.get((cid, worker.address))
    if c is None:
        raise RuntimeError("cudasortkit.dask: this worker lost its communicator (it restarted?); sort again")
    local = Local(keys, starts, index, sizes, values)
    if spec.timings:
        local.times["began"] = began
    try:
        k, v = sort_on_rank(c, spec, local)
    except comm.CollectiveAborted:
        raise
    except Exception:
        c.abort()     # the other ranks fail instead of waiting for this one
        raise
    return k, v, local.times


def _slice(result, field: int, a: int, b: int):
    return result[field][a:b]


def _nccl_available(dask_worker=None) -> bool:
    return comm.nccl_available()


# ------------------------------------------------------------- on the client
#: (scheduler, transport, ((worker address, worker id), ...)) -> communicator id
_communicators: dict = {}
#: (scheduler, ((worker address, worker id), ...)) -> whether every worker has NCCL
_nccl_ready: dict = {}
#: (communicator id, dtype, op, descending) warmed on every worker
_warmed: set = set()


def _workers(client) -> dict:
    """Every worker's info, asked of the scheduler itself: the client's own
    scheduler_info() returns a cached identity that the client's periodic
    refresh may replace, between the fetch and the return, with one that
    lists no workers."""
    try:
        return client.sync(client.scheduler.identity, n_workers=-1)["workers"]
    except TypeError:   # older distributed: identity() lists all of them, no n_workers
        return client.sync(client.scheduler.identity)["workers"]


def _members(client):
    info = _workers(client)
    return tuple((w, info[w].get("id", "")) for w in sorted(info))


def nccl_ready(client) -> bool:
    """Whether every worker of `client`'s cluster can make NCCL communicators."""
    key = (client.scheduler.address, _members(client))
    if key not in _nccl_ready:
        answers = client.run(_nccl_available)
        _nccl_ready[key] = bool(answers) and all(answers.values())
    return _nccl_ready[key]


def communicator(client, transport: str):
    """(communicator id, {worker address: rank}) joining all of the cluster's
    workers, made on first use."""
    members = _members(client)
    key = (client.scheduler.address, transport, members)
    if key in _communicators:
        return _communicators[key]
    workers = [w for w, _ in members]
    if not all(client.run(_has_plugin).values()):
        client.register_plugin(Collectives())    # replaces every worker's: old communicators gone
        for k in [k for k in _communicators if k[0] == client.scheduler.address]:
            del _communicators[k]
    if transport == "nccl":
        if not nccl_ready(client):
            raise RuntimeError("cudasortkit.dask: exchange='nccl' needs CuPy with NCCL (cupy.cuda.nccl) on "
                               "every worker; install nvidia-nccl-cu13 (or use exchange='tasks')")
        uid = client.run(comm.new_id, transport, workers=[workers[0]])[workers[0]]
    else:
        uid = comm.new_id(transport)
    cid = uuid.uuid4().hex
    ranks = {w: r for r, w in enumerate(workers)}
    client.run(_create, cid, transport, uid, ranks)    # all workers at once: NCCL's init is collective
    _communicators[key] = (cid, ranks)
    return cid, ranks


def _drop(client, transport: str, cid: str) -> None:
    for k in [k for k, v in _communicators.items() if v[0] == cid]:
        del _communicators[k]
    try:
        client.run(_forget, cid)
    except Exception:
        pass


def prepare(dtypes=("float32",), ops=("sort",), descending=(False,), transport: str = "nccl",
            module: str = "cupy", keys_per_worker: int | None = None) -> None:
    """Make the communicators among the default client's workers and warm
    the kernels of every (dtype, op, descending) on all of them (sorting
    keys_per_worker keys, default WARM_KEYS), so that the first sort runs as
    fast as the later ones."""
    n = WARM_KEYS[module] if keys_per_worker is None else int(keys_per_worker)
    client = cluster.default_client()
    if client is None:
        raise RuntimeError("cudasortkit.dask.prepare: make a distributed.Client first")
    cid, _ = communicator(client, transport)
    for dtype in dtypes:
        for op in ops:
            if op not in ("sort", "argsort", "sort_by_key"):
                raise ValueError(f"op={op!r}: one of 'sort', 'argsort', 'sort_by_key'")
            for desc in descending:
                warm = (cid, np.dtype(dtype).str, op, bool(desc))
                if warm not in _warmed:
                    client.run(warm_up, np.dtype(dtype), op, bool(desc), n, module)
                    _warmed.add(warm)


def wait_watching(client, parts, workers, poll: float = 1.0) -> None:
    """Wait for the W tasks; if one of their workers leaves the cluster first,
    raise instead of waiting forever (its task cannot move: the others wait
    for it inside the collective)."""
    from distributed import wait

    while True:
        try:
            wait(parts, timeout=poll)
            return
        except TimeoutError:
            alive = _workers(client)
            gone = [w for w, p in zip(workers, parts) if w not in alive and p.status == "pending"]
            if gone:
                raise RuntimeError(f"cudasortkit.dask: worker {gone[0]} left the cluster during a collective "
                                   "sort; the other workers may still wait for it inside NCCL (which cannot "
                                   "be interrupted): restart the cluster") from None


def _persisted(client, x):
    """`x` with every chunk held by a worker: as it is where each of its
    chunks already is a finished future of this client (a persisted array:
    asking the scheduler again would cost a message, and queue the sort's
    own messages behind the client's 10 ms batching interval), else
    persisted and waited for."""
    from dask.core import flatten
    from distributed import Future, wait

    graph = x.__dask_graph__()
    held = [graph.get(k) for k in flatten(x.__dask_keys__())]
    if all(isinstance(f, Future) and f.client is client and f.status == "finished" for f in held):
        return x
    x = client.persist(x)
    wait(x)
    return x


def run(op: str, keys, values, descending: bool, out_chunks, transport: str = "nccl", timings=None) -> list:
    """The collective sort of the dask array `keys` (and `values`, same
    chunks, for sort_by_key) into out_chunks: [sorted keys] (sort),
    [indices] (argsort) or [keys, values] (sort_by_key), dask arrays of
    futures. `timings`: a list that receives one dict of phase seconds per
    worker, in logical rank order (the device synchronised at each phase)."""
    from dask.array.utils import meta_from_array
    from dask.base import tokenize
    from dask.core import flatten
    from distributed import Lock, wait

    import dask.array as da

    client = cluster.default_client()
    if client is None:
        raise RuntimeError(f"cudasortkit.dask: exchange={transport!r} runs on Dask's distributed scheduler "
                           "(a distributed.Client); use exchange='tasks' for other schedulers")
    keys = _persisted(client, keys)
    values = None if values is None else _persisted(client, values)
    names = list(flatten(keys.__dask_keys__()))
    futures = [keys.__dask_graph__()[k] for k in names]
    vfutures = None if values is None else [values.__dask_graph__()[k] for k in flatten(values.__dask_keys__())]
    sizes = [int(n) for n in keys.chunks[0]]
    begin = comm.offsets(sizes)

    cid, ranks = communicator(client, transport)
    who = client.who_has(futures)
    owner = {}
    for i, k in enumerate(names):
        if sizes[i]:
            holders = [w for w in who.get(k, ()) if w in ranks]
            if not holders:
                raise RuntimeError(f"cudasortkit.dask: input chunk {i} is on no worker of the cluster")
            owner[i] = holders[0]
    # Logical ranks: workers by their first chunk (then those with none), so
    # chunks placed in contiguous runs keep index order across ranks.
    first = {}
    for i, w in owner.items():
        first.setdefault(w, i)
    order = sorted(ranks, key=lambda w: (first.get(w, len(sizes)), ranks[w]))
    logical = {w: r for r, w in enumerate(order)}
    placed = [logical[owner[i]] for i in sorted(owner)]
    mine = {w: [] for w in order}
    for i in sorted(owner):
        mine[owner[i]].append(i)
    declared = [sum(sizes[i] for i in mine[w]) for w in order]
    out_bounds = tuple(int(b) for b in comm.offsets(out_chunks))
    spec = Spec(op, bool(descending), np.dtype(keys.dtype), out_bounds, tuple(declared),
                tuple(ranks[w] for w in order), placed == sorted(placed),
                None if values is None else np.dtype(values.dtype), chunks.array_module(keys._meta).__name__,
                timings is not None)
    warm = (cid, spec.dtype.str, op, spec.descending)
    if warm not in _warmed:
        client.run(warm_up, spec.dtype, op, spec.descending, min(max(declared), WARM_KEYS[spec.module]),
                   spec.module)
        _warmed.add(warm)

    # The output chunks' slicing tasks go in with the W tasks (their ranges
    # are known from the declared chunk lengths), so they run as soon as
    # their worker's part is done.
    token = tokenize(keys.name, op, descending, out_bounds, uuid.uuid4().hex)
    starts, first_chunk = worker_starts(declared, out_bounds)
    fields = {"sort": [0], "argsort": [1], "sort_by_key": [0, 1]}[op]
    metas = {0: meta_from_array(keys, ndim=1),
             1: meta_from_array(keys, ndim=1, dtype=np.int64) if op == "argsort" else
             (None if values is None else meta_from_array(values, ndim=1))}
    with Lock(LOCK):   # the default client's scheduler: one collective sort at a time
        submitted = time.time()
        parts = [client.submit(_run_rank, cid, spec, [futures[i] for i in mine[w]], [int(begin[i]) for i in mine[w]],
                               mine[w], [sizes[i] for i in mine[w]],
                               None if vfutures is None else [vfutures[i] for i in mine[w]],
                               key=f"csk-collective-{token}-{r}", workers=[w], allow_other_workers=False,
                               pure=False)
                 for r, w in enumerate(order)]
        graphs = {field: {} for field in fields}
        for field in fields:
            name = f"csk-result-{field}-{token}"
            for r, w in enumerate(order):
                for j in range(first_chunk[r], first_chunk[r + 1]):
                    a, b = out_bounds[j] - starts[r], out_bounds[j + 1] - starts[r]
                    graphs[field][(name, j)] = client.submit(_slice, parts[r], field, int(a), int(b),
                                                             key=(name, j), workers=[w], pure=False)
        wait_watching(client, parts, order)
    failed = [p.exception() for p in parts if p.status == "error"]
    if failed:
        _drop(client, transport, cid)
        raise next((e for e in failed if not isinstance(e, comm.CollectiveAborted)), failed[0])
    if timings is not None:
        # "start": seconds from the client's submission to the rank's task
        # starting (clocks of one machine; across machines they need not agree).
        ranks = client.gather([client.submit(getitem, p, 2, pure=False) for p in parts])
        for times in ranks:
            times["start"] = times.pop("began", submitted) - submitted
        timings.extend(ranks)
    return [da.Array(graphs[field], f"csk-result-{field}-{token}", chunks=(tuple(out_chunks),), meta=metas[field])
            for field in fields]
