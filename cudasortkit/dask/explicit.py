"""exchange="nccl": one collective sort among the workers, placed and
tracked by Dask (as dask-cuda's explicit-comms did).

It runs eagerly when called: the input is persisted, and one call to the
scheduler (turns.begin) takes the sort's turn and tells which worker holds
each chunk; each worker gets ONE task (collective.sort_on_rank) taking its
own chunks in chunk order, and the workers then sort together through a
communicator (comm.py: NCCL among GPUs, so device chunks never pass through
host memory). Each output chunk is one small slicing task on the worker
that holds it, submitted with the W rank tasks as one graph, and the result
is a dask array of those futures with known chunks. Tasks: P (the input) +
W + Q per returned array, linear in the chunk count.

Communicators live in a WorkerPlugin (Collectives) on every worker, made
once per set of workers: the id from one worker (NCCL's unique id), then
`client.run` on all workers at once (NCCL's init is collective). The
scheduler's Turns plugin (turns.py) lets one collective sort run at a time
per cluster, so two sorts never interleave their collectives; a turn ends
when the sort's rank tasks do. When a sort fails, its communicator is
dropped and the next sort makes a new one; when a worker leaves during a
sort (wait_watching), the other workers' communicator is aborted from the
client, so their ranks fail instead of waiting, and the sort raises
WorkerLost (a RuntimeError naming the worker).

The first sort of a dtype also warms, on every worker, the kernels a sort
of that dtype uses (warm_up), in a thread while the communicator is made
(ready); `prepare` does both ahead of the first sort, so that it runs as
fast as the later ones.
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
        self.warming = {}   # worker address -> its warm-up thread's future (_warm_start)


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
#: (scheduler, transport, ((worker address, worker id), ...)) -> (communicator id, {address: rank})
_communicators: dict = {}
#: scheduler -> (((worker address, worker id), ...), whether every worker has NCCL)
_nccl_ready: dict = {}
#: (communicator id, dtype, op, descending) warmed on every worker
_warmed: set = set()
#: schedulers known to run the Turns plugin (turns.py)
_turns: set = set()
#: (scheduler, members) whose workers all have the Collectives plugin
_plugged: set = set()
#: prepare(wait=False)'s futures, waited for by the next sort (_prepared)
_preparing: list = []
#: seconds between checks that the ranks' workers are still there
POLL = 1.0


class WorkerLost(RuntimeError):
    """A worker of a collective sort left the cluster before its rank ended."""

    def __init__(self, worker: str):
        super().__init__(f"cudasortkit.dask: worker {worker} left the cluster during a collective sort; the "
                         "sort was cancelled and the other workers' communicator aborted: sort again (Dask "
                         "recomputes the input chunks that worker held)")
        self.worker = worker


def _members(client) -> tuple:
    """((address, worker id), ...) of every worker, by address, from the
    scheduler: the id tells a worker restarted at the same address (its
    name, which identity() gives, does not)."""
    from . import turns

    return tuple(tuple(m) for m in client.run_on_scheduler(turns.members))


def nccl_ready(client) -> bool:
    """Whether every worker of `client`'s cluster can make NCCL communicators
    (asked once per scheduler; asked again after a sort saw other workers)."""
    address = client.scheduler.address
    if address not in _nccl_ready:
        members = _members(client)
        answers = client.run(_nccl_available)
        _nccl_ready[address] = (members, bool(answers) and all(answers.values()))
    return _nccl_ready[address][1]


def communicator(client, transport: str, members=None):
    """(communicator id, {worker address: rank}) joining all of the cluster's
    workers (`members`: ((address, id), ...) as the scheduler lists them,
    asked for when not given), made on first use."""
    members = _members(client) if members is None else tuple(tuple(m) for m in members)
    key = (client.scheduler.address, transport, members)
    if key in _communicators:
        return _communicators[key]
    workers = [w for w, _ in members]
    _ensure_plugin(client, members)
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


async def _abort(cid: str, dask_worker=None) -> None:
    """(On a worker, from the client.) Abort this worker's communicator `cid`,
    so that its rank's collective calls fail instead of waiting for a rank
    that will never come; off the event loop (NCCL's abort may take a while)."""
    import asyncio

    plugin = dask_worker.plugins.get(NAME)
    c = None if plugin is None else plugin.comms.get((cid, dask_worker.address))
    if c is not None:
        await asyncio.get_running_loop().run_in_executor(None, c.abort)


def _abort_ranks(client, cid: str, workers) -> None:
    """Abort communicator `cid` on `workers` without waiting for them."""
    members = dict(_members(client))
    alive = [w for w in workers if w in members]
    if alive:
        try:
            client.run(_abort, cid, workers=alive, wait=False, on_error="ignore")
        except Exception:   # a worker leaving meanwhile; the others were told
            pass


def _take_turn(client, token: str, keys: list) -> dict:
    """This sort's turn (turns.py), and where its input chunks are: one
    round trip to the scheduler (registering the Turns plugin the first time)."""
    from . import turns

    for attempt in (0, 1):
        _ensure_turns(client)
        try:
            return client.run_on_scheduler(turns.begin, client.id, token, keys)
        except KeyError:         # a restarted scheduler at the same address: no plugin yet
            _turns.discard(client.scheduler.address)
            if attempt:
                raise


def _ensure_turns(client) -> None:
    """The scheduler runs the Turns plugin (asked once per scheduler)."""
    from . import turns

    address = client.scheduler.address
    if address not in _turns:
        if not client.run_on_scheduler(turns.registered):
            client.register_plugin(turns.Turns())
        _turns.add(address)


def _end_turn(client) -> None:
    """Give this client's turn back (it will not submit its ranks)."""
    from . import turns

    try:
        client.run_on_scheduler(turns.end, client.id)
    except Exception:   # the scheduler gives it back when this client leaves
        pass


async def _warm_start(whats, n: int, module: str, dask_worker=None) -> None:
    """(On a worker.) Start warm_up of every (dtype str, op, descending) of
    `whats` in a thread, so the event loop stays free (for NCCL's init)."""
    import asyncio

    def work():
        for dtype, op, descending in whats:
            warm_up(np.dtype(dtype), op, descending, n, module, dask_worker=dask_worker)

    _plugin(dask_worker).warming[dask_worker.address] = asyncio.get_running_loop().run_in_executor(None, work)


async def _warm_wait(dask_worker=None) -> None:
    """(On a worker.) Wait for _warm_start's thread; its error is raised here."""
    warming = _plugin(dask_worker).warming.pop(dask_worker.address, None)
    if warming is not None:
        await warming


def _ensure_plugin(client, members) -> None:
    """Every worker of `members` has the Collectives plugin (registered once:
    registering replaces every worker's, and the communicators with it)."""
    key = (client.scheduler.address, members)
    if key in _plugged:
        return
    if not all(client.run(_has_plugin).values()):
        client.register_plugin(Collectives())
        for k in [k for k in _communicators if k[0] == client.scheduler.address]:
            del _communicators[k]
    _plugged.add(key)


def ready(client, transport: str, members, warm, n: int, module: str):
    """communicator(client, transport, members), and every (dtype str, op,
    descending) of `warm` warmed on all workers (warm_up of n keys), the two
    at once: the warm-ups run in a thread on each worker while the
    communicator is made in its event loop (NCCL's init waits for all)."""
    members = tuple(tuple(m) for m in members)
    made = _communicators.get((client.scheduler.address, transport, members))
    todo = [tuple(w) for w in warm if made is None or (made[0], *w) not in _warmed]
    if made is not None and not todo:
        return made
    _ensure_plugin(client, members)
    client.run(_warm_start, todo, int(n), module)    # returns once every worker's thread started
    try:
        cid, ranks = communicator(client, transport, members)
    finally:
        client.run(_warm_wait)          # raises a worker's warm-up error
    _warmed.update((cid, *w) for w in todo)
    return cid, ranks


def prepare(dtypes=("float32",), ops=("sort",), descending=(False,), transport: str = "nccl",
            module: str = "cupy", keys_per_worker: int | None = None, wait: bool = True) -> None:
    """Make the communicators among the default client's workers and warm
    the kernels of every (dtype, op, descending) on all of them (sorting
    keys_per_worker keys, default WARM_KEYS), so that the first sort runs as
    fast as the later ones: both at once (ready); and registers the
    scheduler's Turns plugin. wait=False: in a thread of this process,
    returning at once; the next collective sort waits for it (and raises
    its error)."""
    n = WARM_KEYS[module] if keys_per_worker is None else int(keys_per_worker)
    client = cluster.default_client()
    if client is None:
        raise RuntimeError("cudasortkit.dask.prepare: make a distributed.Client first")
    for op in ops:
        if op not in ("sort", "argsort", "sort_by_key"):
            raise ValueError(f"op={op!r}: one of 'sort', 'argsort', 'sort_by_key'")
    warm = [(np.dtype(d).str, op, bool(desc)) for d in dtypes for op in ops for desc in descending]

    def work():
        _ensure_turns(client)
        ready(client, transport, _members(client), warm, n, module)

    if wait:
        _prepared()
        work()
        return
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(1, thread_name_prefix="cudasortkit-prepare")
    _preparing.append(pool.submit(work))
    pool.shutdown(wait=False)       # its thread ends with the work


def _prepared() -> None:
    """Wait for the prepares started with wait=False; raise the first error."""
    while _preparing:
        _preparing.pop(0).result()


def wait_watching(client, parts, workers, poll: float | None = None, on_failure=None) -> None:
    """Wait for the W rank tasks `parts` (of `workers`: addresses, or
    (address, worker id) pairs, one per part). If a worker leaves the
    cluster (or is replaced by another at its address) before its part
    ended, raise WorkerLost instead of waiting forever: its task cannot
    move, and the other ranks wait for it inside the collective.
    on_failure(addresses of the workers whose parts still run) is called
    once, when the first part fails and before WorkerLost is raised: a rank
    that failed before it reached its collective calls, or never ran, cannot
    release the others itself."""
    from distributed import wait

    poll = POLL if poll is None else poll
    addresses = [w if isinstance(w, str) else w[0] for w in workers]
    failed = False

    def running():
        return [a for a, p in zip(addresses, parts) if p.status == "pending"]

    while True:
        pending = [p for p in parts if p.status == "pending"]
        if not pending:
            return
        if not failed and any(p.status == "error" for p in parts):
            failed = True
            if on_failure is not None:
                on_failure(running())
        try:
            wait(pending, timeout=poll, return_when="FIRST_COMPLETED")
        except TimeoutError:
            alive = dict(_members(client))
            for w, p in zip(workers, parts):
                address, wid = (w, None) if isinstance(w, str) else w
                if p.status == "pending" and (address not in alive or wid not in (None, alive[address])):
                    if on_failure is not None and not failed:
                        on_failure([a for a in running() if a != address])
                    raise WorkerLost(address) from None


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
    worker, in logical rank order (the device synchronised at each phase).

    Messages to the scheduler, once communicators and kernels are ready and
    `keys` is persisted: one call that takes this sort's turn and says which
    workers hold its chunks (turns.begin), one graph of the W rank tasks and
    the output chunks' slicing tasks; then the client waits for the ranks."""
    from dask.base import tokenize
    from dask.core import flatten

    client = cluster.default_client()
    if client is None:
        raise RuntimeError(f"cudasortkit.dask: exchange={transport!r} runs on Dask's distributed scheduler "
                           "(a distributed.Client); use exchange='tasks' for other schedulers")
    keys = _persisted(client, keys)
    values = None if values is None else _persisted(client, values)
    _prepared()
    names = list(flatten(keys.__dask_keys__()))
    token = tokenize(keys.name, op, descending, tuple(out_chunks), uuid.uuid4().hex)
    place = _take_turn(client, token, names)
    try:
        members = tuple(tuple(m) for m in place["workers"])
        known = _nccl_ready.get(client.scheduler.address)
        if known is not None and known[0] != members:    # other workers than auto asked about
            del _nccl_ready[client.scheduler.address]
        placed = _place(op, keys, values, descending, out_chunks, timings is not None, names,
                        place["who_has"], {w: r for r, (w, _) in enumerate(members)})
        spec = placed["spec"]
        cid, ranks = ready(client, transport, members, [(spec.dtype.str, op, spec.descending)],
                           min(max(spec.declared), WARM_KEYS[spec.module]), spec.module)
        parts, slices, times, order, submitted = _submit(client, keys, values, token, names, cid, placed)
    except BaseException:
        _end_turn(client)
        raise
    ids = dict(members)
    try:
        wait_watching(client, parts, [(w, ids[w]) for w in order],
                      on_failure=lambda running: _abort_ranks(client, cid, running))
    except WorkerLost:
        client.cancel(parts + [f for fs in slices.values() for f in fs] + times)
        _drop(client, transport, cid)
        raise
    failed = [p.exception() for p in parts if p.status == "error"]
    if failed:
        client.cancel([f for fs in slices.values() for f in fs] + times)
        _drop(client, transport, cid)
        raise next((e for e in failed if not isinstance(e, comm.CollectiveAborted)), failed[0])
    if timings is not None:
        # "start": seconds from the client's submission to the rank's task
        # starting (clocks of one machine; across machines they need not agree).
        ranks_times = client.gather(times)
        for t in ranks_times:
            t["start"] = t.pop("began", submitted) - submitted
        timings.extend(ranks_times)
    return [_result(keys, values, op, field, token, out_chunks, slices[field]) for field in slices]


def _place(op, keys, values, descending, out_chunks, timed, names, who, ranks) -> dict:
    """Which worker's rank sorts which input chunks (`who`: the scheduler's
    who_has of the chunk keys `names`; `ranks`: {worker address: rank}):
    {"order": workers in logical rank order, "mine": {worker: its chunk
    numbers}, "spec": the ranks' Spec}."""
    sizes = [int(n) for n in keys.chunks[0]]
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
                timed)
    return {"order": order, "mine": mine, "spec": spec}


def _submit(client, keys, values, token, names, cid, placed):
    """Submit the sort's W rank tasks and its output chunks' slicing tasks as
    ONE graph (one message), each worker's tasks pinned to it: (rank
    futures, {field: slice futures}, timing futures, workers in logical
    rank order, the time.time() of the submission)."""
    from dask._task_spec import Task, TaskRef, parse_input
    from dask.core import flatten
    from dask.highlevelgraph import HighLevelGraph, MaterializedLayer

    from . import turns

    order, mine, spec = placed["order"], placed["mine"], placed["spec"]
    futures = [keys.__dask_graph__()[k] for k in names]
    vfutures = None if values is None else [values.__dask_graph__()[k] for k in
                                            flatten(values.__dask_keys__())]
    sizes = [int(n) for n in keys.chunks[0]]
    begin = comm.offsets(sizes)
    out_bounds, declared, op, timed = spec.out_bounds, spec.declared, spec.op, spec.timings

    # The output chunks' slicing tasks go in with the W tasks (their ranges
    # are known from the declared chunk lengths), so they run as soon as
    # their worker's part is done. Rank r of the turn is worker order[r].
    starts, first_chunk = worker_starts(declared, out_bounds)
    fields = {"sort": [0], "argsort": [1], "sort_by_key": [0, 1]}[op]
    layers, parts, slices, times = {}, [], {f: [] for f in fields}, []
    for r, w in enumerate(order):
        part = turns.rank_key(token, r)
        dsk = {part: Task(part, _run_rank, cid, spec, parse_input([futures[i] for i in mine[w]]),
                          [int(begin[i]) for i in mine[w]], mine[w], [sizes[i] for i in mine[w]],
                          None if vfutures is None else parse_input([vfutures[i] for i in mine[w]]))}
        parts.append(part)
        for field in fields:
            name = f"csk-result-{field}-{token}"
            for j in range(first_chunk[r], first_chunk[r + 1]):
                a, b = out_bounds[j] - starts[r], out_bounds[j + 1] - starts[r]
                dsk[(name, j)] = Task((name, j), _slice, TaskRef(part), field, int(a), int(b))
                slices[field].append((name, j))
        if timed:
            dsk[f"{part}-times"] = Task(f"{part}-times", getitem, TaskRef(part), 2)
            times.append(f"{part}-times")
        layers[part] = MaterializedLayer(dsk, annotations={"workers": [w], "allow_other_workers": False})
    graph = HighLevelGraph(layers, {name: set() for name in layers})
    wanted = parts + [k for ks in slices.values() for k in ks] + times
    submitted = time.time()   # the host clock: ranks of one machine compare with it
    got = dict(zip(wanted, client.get(graph, wanted, sync=False)))
    return ([got[k] for k in parts], {f: [got[k] for k in ks] for f, ks in slices.items()},
            [got[k] for k in times], order, submitted)


def _result(keys, values, op: str, field: int, token: str, out_chunks, futures):
    """Output field `field` (0 keys, 1 indices or values) as a dask array of
    its slicing futures."""
    import dask.array as da
    from dask.array.utils import meta_from_array

    meta = (meta_from_array(keys, ndim=1) if field == 0 else
            meta_from_array(keys, ndim=1, dtype=np.int64) if op == "argsort" else meta_from_array(values, ndim=1))
    return da.Array({f.key: f for f in futures}, f"csk-result-{field}-{token}", chunks=(tuple(out_chunks),),
                    meta=meta)
