"""The exchange through Dask distributed's P2P shuffle engine (the one behind
dask.dataframe's shuffle="p2p" and dask.array's rechunk(method="p2p")).

P transfer tasks (one per sorted input chunk: it cuts the chunk by its split
row and hands every nonempty piece to the engine, which sends it straight to
the worker that will own the output chunk), one barrier, and Q output tasks
(one per output chunk: its pieces in input chunk order, then merged). The
scheduler sees P + 1 + Q tasks instead of P x Q; the workers move the pieces
among themselves, batched per worker pair, with retries, spilling to disk
(distributed.p2p.storage.disk) and a restart of the whole exchange when a
worker is lost.

The engine's extension points (ShuffleSpec, ShuffleRun, P2PBarrierTask) are
distributed's own but not public API: `available()` checks they are there as
this module uses them (checked with distributed 2026.7 and 2026.8), and the
sort falls back to the tasks exchange without them. The engine carries host
buffers only (it measures shards with memoryview() and pickles small ones):
device (CuPy) chunks are copied to the host by their transfer task and each
output chunk back to the device before its merge (one copy each way).
"""
from __future__ import annotations

import inspect
import os
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from . import chunks

_RUN_ARGS = ("id", "run_id", "span_id", "local_address", "directory", "executor", "rpc",
             "digest_metric", "scheduler", "memory_limiter_disk", "memory_limiter_comms",
             "disk", "loop")


def available() -> bool:
    """Whether the installed distributed has the P2P engine as used here."""
    try:
        from distributed.shuffle import _core

        return (all(hasattr(_core, n) for n in ("ShuffleRun", "ShuffleSpec", "P2PBarrierTask",
                                                  "p2p_barrier", "barrier_key", "get_worker_plugin"))
                and tuple(inspect.signature(_core.ShuffleRun.__init__).parameters)[1:] == _RUN_ARGS)
    except Exception:  # an older or newer distributed: the tasks exchange instead
        return False


def layer(plan, local_name: str, bounds_key, with_values: bool, value_dtype) -> dict:
    """The exchange and merge tasks of `plan`, {key: task}: the merged chunks
    at (plan.name("merge"), j), as the tasks exchange leaves them."""
    from dask._task_spec import Task, TaskRef
    from distributed.shuffle._core import P2PBarrierTask, ShuffleId, barrier_key, p2p_barrier

    id = ShuffleId(f"csk-{plan.token}")
    transfer, merged = plan.name("transfer"), plan.name("merge")
    dsk = {}
    for i in range(len(plan.sizes)):
        dsk[(transfer, i)] = Task((transfer, i), transfer_chunk, TaskRef((local_name, i)), TaskRef(bounds_key),
                                  id, i, plan.descending)
    spec = SortExchangeSpec(id=id, disk=_disk(), n_out=len(plan.out_chunks), key_dtype=plan.dtype,
                            value_dtype=value_dtype if with_values else None, module=plan.module)
    barrier = barrier_key(id)
    dsk[barrier] = P2PBarrierTask(barrier, p2p_barrier, id, *(TaskRef((transfer, i)) for i in range(len(plan.sizes))),
                                  spec=spec)
    for j in range(len(plan.out_chunks)):
        dsk[(merged, j)] = Task((merged, j), merge_output, id, j, TaskRef(barrier), plan.descending)
    return dsk


def _disk() -> bool:
    import dask

    return bool(dask.config.get("distributed.p2p.storage.disk", True))


# ------------------------------------------------------------ on the workers
def transfer_chunk(chunk, bounds, id, index: int, descending: bool) -> int:
    """Hand sorted chunk `index`'s pieces to the engine; its run id."""
    from distributed import get_worker
    from distributed.shuffle._core import get_worker_plugin, handle_transfer_errors

    try:
        get_worker()
    except ValueError:
        raise RuntimeError("cudasortkit.dask: exchange='p2p' runs only on Dask's distributed scheduler "
                           "(a distributed.Client); sort with exchange='tasks' for other schedulers") from None
    with handle_transfer_errors(id):
        chunk = on_host(chunk)
        row = chunks.split_row(chunk[0], bounds, index, descending)
        return get_worker_plugin().add_partition((chunk, row), partition_id=index, id=id)


def on_host(chunk):
    """(keys, values or None) as host (NumPy) arrays: device ones copied."""
    keys, values = chunk
    return chunks.to_host(keys), None if values is None else chunks.to_host(values)


def on_module(chunk, module: str):
    """(keys, values or None) as arrays of `module` ("numpy" or "cupy")."""
    if module == "numpy":
        return chunk
    xp = __import__(module)
    keys, values = chunk
    return xp.asarray(keys), None if values is None else xp.asarray(values)


def merge_output(id, out: int, run_id: int, descending: bool):
    """Output chunk `out`: what every input chunk sent it, merged."""
    from distributed.shuffle._core import get_worker_plugin, handle_unpack_errors

    with handle_unpack_errors(id):
        received = get_worker_plugin().get_output_partition(id, run_id, out)
    return chunks.merge(received, descending)


def _engine():
    from distributed.shuffle._core import ShuffleRun, ShuffleSpec

    class SortExchangeRun(ShuffleRun):
        """One worker's part of one exchange: pieces out by output chunk,
        pieces in kept (in memory or on disk) until their output task runs."""

        def __init__(self, worker_for, spec, **kwargs):
            super().__init__(**kwargs)
            self.worker_for = worker_for
            self.spec = spec

        def _shard_partition(self, data, partition_id):
            # data = ((keys, values), row): piece j is row[j]:row[j + 1], sent
            # as (input chunk, keys[, values]) (no None: the engine measures
            # every leaf with memoryview); empty pieces are not sent. Copies,
            # so the sorted chunk can be freed.
            (keys, values), row = data
            out = defaultdict(list)
            for j in np.flatnonzero(np.diff(row)):
                a, b = int(row[j]), int(row[j + 1])
                piece = (partition_id, keys[a:b].copy()) + (() if values is None else (values[a:b].copy(),))
                out[self.worker_for[int(j)]].append((int(j), piece))
            return {w: (partition_id, shards) for w, shards in out.items()}

        async def _receive(self, data):
            self.raise_if_closed()
            by_out = defaultdict(list)
            for source, shards in data:
                if source in self.received:   # a retried send: already here
                    continue
                self.received.add(source)
                for j, piece in shards:
                    by_out[(j,)].append(piece)
                    self.total_recvd += sum(a.nbytes for a in piece[1:])
            if by_out:
                try:
                    await self._write_to_disk(by_out)
                except Exception as e:
                    self._exception = e
                    raise

        def _get_output_partition(self, partition_id, key, **kwargs):
            from distributed.shuffle._exceptions import DataUnavailable

            try:
                pieces = self._read_from_disk((partition_id,))
            except DataUnavailable:   # no input chunk sent this output chunk anything
                pieces = []
            pieces = sorted((p for group in pieces for p in _flatten(group)), key=lambda p: p[0])
            return on_module(_concatenate(pieces, self.spec), self.spec.module)

        def read(self, path):
            import mmap

            from distributed.shuffle._pickle import unpickle_bytestream

            with path.open(mode="r+b") as fh:
                buffer = memoryview(mmap.mmap(fh.fileno(), 0))
            return list(unpickle_bytestream(buffer)), buffer.nbytes

        def deserialize(self, buffer):
            return buffer

        def _get_assigned_worker(self, i):
            return self.worker_for[i]

    @dataclass(frozen=True)
    class SortExchangeSpec(ShuffleSpec):
        n_out: int
        key_dtype: np.dtype
        value_dtype: np.dtype | None
        module: str = "numpy"      # the chunks' array module: outputs go back to it

        @property
        def output_partitions(self):
            yield from range(self.n_out)

        def pick_worker(self, partition, workers):
            # Contiguous runs of output chunks per worker, as rechunk does.
            return workers[len(workers) * partition // max(self.n_out, 1)]

        def create_run_on_worker(self, run_id, span_id, worker_for, plugin):
            worker = plugin.worker
            return SortExchangeRun(
                worker_for, self, id=self.id, run_id=run_id, span_id=span_id,
                local_address=worker.address,
                directory=os.path.join(worker.local_directory, f"shuffle-{self.id}-{run_id}"),
                executor=plugin._executor, rpc=worker.rpc, digest_metric=worker.digest_metric,
                scheduler=worker.scheduler, memory_limiter_disk=plugin.memory_limiter_disk,
                memory_limiter_comms=plugin.memory_limiter_comms, disk=self.disk, loop=worker.loop)

    return SortExchangeRun, SortExchangeSpec


def _flatten(group):
    """Pieces as the buffers return them: one piece, or (on disk) a list of them."""
    return group if isinstance(group, list) else [group]


def _concatenate(pieces, spec):
    """(keys, values or None) of one output chunk from its pieces in input order."""
    if not pieces:
        keys = np.empty(0, spec.key_dtype)
        return keys, None if spec.value_dtype is None else np.empty(0, spec.value_dtype)
    return chunks.concatenate([(p[1], p[2] if len(p) > 2 else None) for p in pieces])


# Module-level names, so that pickled specs (the scheduler unpickles the
# barrier's) and runs refer to importable classes.
if available():
    SortExchangeRun, SortExchangeSpec = _engine()
    SortExchangeRun.__qualname__ = SortExchangeRun.__name__ = "SortExchangeRun"
    SortExchangeSpec.__qualname__ = SortExchangeSpec.__name__ = "SortExchangeSpec"
