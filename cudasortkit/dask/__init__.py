"""Sorting 1-D dask arrays across a Dask cluster, with cudasortkit on every worker.

    import cudasortkit.dask as cskd
    s = cskd.sort(x)                    # x: 1-D dask array of NumPy or CuPy chunks
    i = cskd.argsort(x)                 # global int64 indices, numpy.argsort(kind="stable")
    k, v = cskd.sort_by_key(keys, values)

`exchange=` picks how the sorted pieces move between workers: "auto"
(default), "nccl" (CuPy chunks: one collective sort among the workers over
NCCL, run when called; explicit.py), "p2p" (Dask distributed's P2P shuffle
engine: tasks grow linearly with the chunk count; CuPy chunks go through
host memory) or "tasks" (a tree of about P log P tasks on Dask's local
schedulers, tree.py; P x Q piece tasks on a distributed Client); see
SortPlan.

Results are lazy dask arrays with known chunks: by default the input's
chunking (`chunks=` asks for another), each output chunk holding exactly its
slice of the global order. Ordering is cudasortkit's (NumPy's): NaNs last in
both directions, and argsort and sort_by_key are stable, also descending.
The algorithm (a sample sort with exact splitters) is described in
SortPlan below, cudasortkit/dask/splitters.py and docs/dask.md.
Needs the `dask` extra: pip install "cudasortkit[dask]".
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from operator import getitem

import numpy as np

try:
    import dask.array as da
except ImportError as e:  # the extra is not installed: say which
    raise ImportError('cudasortkit.dask needs Dask (dask[array] and distributed): '
                      'pip install "cudasortkit[dask]"') from e
from dask.array.core import normalize_chunks
from dask.array.utils import meta_from_array
from dask.base import tokenize
from dask.highlevelgraph import HighLevelGraph

from ..dtypes import value_bytes
from . import chunks, cluster, p2p, tree
from .splitters import brackets, exact_boundaries, output_boundaries, samples_per_chunk

__all__ = ["sort", "argsort", "sort_by_key", "prepare", "SortPlan", "plan", "EXCHANGES"]


# The sample sort as a Dask graph: one layer of tasks per stage, built as
# plain dicts (no dask.delayed: its per-task graphs made building cost
# P^3). Tasks, for P input and Q output chunks:
#
#     local sort   P        each input chunk sorted by cudasortkit (checked
#                           against its declared length and dtype)
#     sample       P + 1    regular samples of each, one task brackets the boundaries
#     window       P + 1    each chunk's windows, one task finds the exact
#                           boundary elements (Q - 1 of them, not a P x Q table)
#     exchange, "p2p":      P transfer tasks, 1 barrier, Q output tasks that
#                           merge (p2p.py: Dask's P2P shuffle engine moves the
#                           pieces worker to worker)
#     exchange, "tasks":    with a distributed Client (layout "pieces"): P split
#                           rows, P x Q pieces (views), Q concatenations, Q
#                           merges (Dask's scheduler moves every piece once);
#                           on a local scheduler (layout "tree", tree.py): P
#                           split rows, then about max(P, Q) tasks a level over
#                           ceil(log_32(max(P, Q))) levels, the last one Q
#                           merges (whole chunks referenced, no piece tasks)
#     result       Q per returned array (field 0 keys, 1 values)
#
# "nccl" is not a graph: explicit.py runs one collective sort among the
# workers when sort() is called (P + W + Q tasks, W workers).
#
# "auto" picks nccl for device (CuPy) chunks when a distributed Client is the
# default scheduler and every worker has NCCL, p2p on a distributed Client
# when P x Q >= P2P_MIN_PIECES (host chunks) or DEVICE_P2P_MIN_PIECES
# (device chunks without NCCL: p2p copies them through host memory), else
# tasks; the tasks
# exchange's pieces layout refuses more than TASKS_MAX_PIECES pieces (a graph
# no scheduler could run). Measured on a 2-worker CPU LocalCluster, 1024-key chunks:
# P = 8 (64 pieces) tasks 0.12-0.16 s, p2p 0.15-0.17 s; P = 16: 0.45-0.49
# against 0.28-0.34 s; P = 32: 1.0-1.3 against 0.37-0.39 s.
EXCHANGES = ("auto", "nccl", "p2p", "tasks")
P2P_MIN_PIECES = 100
#: Device (CuPy) chunks without NCCL: the p2p exchange copies them through
#: host memory (once each way), the tasks exchange's pieces move worker to
#: worker (device to device under UCX) at a scheduler task each (about 1 ms);
#: from this many pieces on (an estimate, not measured on GPUs), p2p.
DEVICE_P2P_MIN_PIECES = 1024
TASKS_MAX_PIECES = 1 << 18


@dataclass(frozen=True)
class SortPlan:
    sizes: tuple          # input chunk lengths (P)
    out_chunks: tuple     # output chunk lengths (Q), same total
    descending: bool
    token: str            # names this sort's tasks
    dtype: np.dtype = np.dtype(np.float64)   # the keys'
    exchange: str = "tasks"                  # "nccl", "p2p" or "tasks", as chosen by _plan
    layout: str = "pieces"                   # the tasks exchange's: "pieces" (P x Q) or "tree" (tree.py)
    module: str = "numpy"                    # the chunks' array module ("numpy" or "cupy")

    @property
    def targets(self) -> np.ndarray:
        return output_boundaries(self.out_chunks)

    def name(self, stage: str) -> str:
        return f"csk-{stage}-{self.token}"

    def stages(self, keys: da.Array, values: da.Array | None, with_indices: bool) -> dict:
        """{stage name: {key: task}}, in order, every stage reading only its
        predecessors and the inputs: local-sort, sample, brackets, window,
        boundaries, then the exchange's (p2p: transfer, barrier and merge in
        one layer; tasks: splits, then piece, exchange, merge or the
        tree's levels, the last the merge); the last layer
        holds the merged (keys, values) of output chunk j at (merge name, j)."""
        if self.exchange == "nccl":
            raise ValueError("exchange='nccl' is no task graph: it runs when sort() is called; time its "
                             "phases with cudasortkit.dask.explicit.run(..., timings=[])")
        p, q, desc = len(self.sizes), len(self.out_chunks), self.descending
        local, sample, brackets_, window, bounds = (self.name(s) for s in (
            "local-sort", "sample", "brackets", "window", "boundaries"))
        out = {}
        if with_indices:
            offsets = np.concatenate([[0], np.cumsum(self.sizes)[:-1]]).astype(np.int64)
            out[local] = {(local, i): (chunks.sort_input_with_indices, (keys.name, i), int(offsets[i]), i,
                                       self.sizes[i], self.dtype, desc) for i in range(p)}
        else:
            out[local] = {(local, i): (chunks.sort_input, (keys.name, i), None if values is None else (values.name, i),
                                       i, self.sizes[i], self.dtype, desc) for i in range(p)}
        count = samples_per_chunk(sum(self.sizes), p, q)
        out[sample] = {(sample, i): (chunks.sample, (local, i), count) for i in range(p)}
        out[brackets_] = {brackets_: (brackets, [(sample, i) for i in range(p)], self.sizes, self.targets, desc)}
        out[window] = {(window, i): (chunks.window, (local, i), i, brackets_, desc) for i in range(p)}
        out[bounds] = {bounds: (exact_boundaries, [(window, i) for i in range(p)], brackets_, self.targets, desc)}
        if self.exchange == "p2p":
            value_dtype = np.dtype(np.int64) if with_indices else (None if values is None else values.dtype)
            out[self.name("p2p")] = p2p.layer(self, local, bounds, with_indices or values is not None,
                                              value_dtype)
            return out
        row, piece, gather, merged = (self.name(s) for s in ("splits", "piece", "exchange", "merge"))
        out[row] = {(row, i): (chunks.splits, (local, i), bounds, i, desc) for i in range(p)}
        if self.layout == "tree":
            out.update(tree.layers(self, local, row))
            return out
        out[piece] = {(piece, i, j): (chunks.piece, (local, i), (row, i), j) for i in range(p) for j in range(q)}
        out[gather] = {(gather, j): (chunks.concatenate, [(piece, i, j) for i in range(p)]) for j in range(q)}
        out[merged] = {(merged, j): (chunks.merge, (gather, j), desc) for j in range(q)}
        return out

    @property
    def merged_name(self) -> str:
        """Where the stages leave output chunk j's (keys, values): (name, j)."""
        return self.name("merge")

    def graph(self, keys: da.Array, values: da.Array | None, with_indices: bool) -> HighLevelGraph:
        """All stages on top of the inputs' graphs, one layer per stage."""
        inputs = [keys] if values is None else [keys, values]
        layers, deps = {}, {}
        for c in inputs:
            g = c.__dask_graph__()
            layers.update(g.layers)
            deps.update(g.dependencies)
        previous = {n for c in inputs for n in c.__dask_layers__()}
        for name, layer in self.stages(keys, values, with_indices).items():
            layers[name], deps[name] = layer, set(previous)
            previous = previous | {name}
        return HighLevelGraph(layers, deps)

    def assemble(self, graph: HighLevelGraph, fields, metas) -> list:
        """Fields 0 (keys) and/or 1 (values) of the merged chunks as dask
        arrays with chunks out_chunks (empty ones too)."""
        arrays = []
        for field, meta in zip(fields, metas):
            name = f"csk-result-{field}-{self.token}"
            layer = {(name, j): (getitem, (self.merged_name, j), field) for j in range(len(self.out_chunks))}
            g = HighLevelGraph({**graph.layers, name: layer},
                               {**graph.dependencies, name: set(graph.layers)})
            arrays.append(da.Array(g, name, chunks=(self.out_chunks,), meta=meta))
        return arrays


def sort(x, descending=False, *, chunks=None, exchange="auto"):
    """Sorted copy of the 1-D dask array `x`, a dask array of the same chunk type."""
    p = _plan(x, descending, chunks, exchange, "sort")
    if not sum(p.sizes):
        return x.rechunk((p.out_chunks,))
    if p.exchange == "nccl":
        return _explicit().run("sort", x, None, p.descending, p.out_chunks)[0]
    return p.assemble(p.graph(x, None, with_indices=False), [0], [meta_from_array(x, ndim=1)])[0]


def argsort(x, descending=False, *, chunks=None, exchange="auto"):
    """Global int64 indices that sort `x` stably (numpy.argsort(kind="stable"))."""
    p = _plan(x, descending, chunks, exchange, "argsort")
    if not sum(p.sizes):
        return x.astype(np.int64).rechunk((p.out_chunks,))
    if p.exchange == "nccl":
        return _explicit().run("argsort", x, None, p.descending, p.out_chunks)[0]
    meta = meta_from_array(x, ndim=1, dtype=np.int64)
    return p.assemble(p.graph(x, None, with_indices=True), [1], [meta])[0]


def sort_by_key(keys, values, descending=False, *, chunks=None, exchange="auto"):
    """(sorted keys, values in the same order), stable; values are 1-D dask
    arrays of 4- or 8-byte numbers, as long as keys (rechunked to keys' chunks)."""
    values = _check_values(values, keys)
    p = _plan(keys, descending, chunks, exchange, "sort-by-key", values.name)
    if not sum(p.sizes):
        return keys.rechunk((p.out_chunks,)), values.rechunk((p.out_chunks,))
    if p.exchange == "nccl":
        return tuple(_explicit().run("sort_by_key", keys, values, p.descending, p.out_chunks))
    k, v = p.assemble(p.graph(keys, values, with_indices=False), [0, 1],
                      [meta_from_array(keys, ndim=1), meta_from_array(values, ndim=1)])
    return k, v


def prepare(dtypes=("float32",), ops=("sort",), descending=(False,), keys_per_worker=None, *,
            wait=True) -> None:
    """Ready the default client's GPU workers for exchange="nccl": make
    their NCCL communicators and compile the kernels that sorts of `dtypes`
    (ops: "sort", "argsort", "sort_by_key") use, by sorting keys_per_worker
    keys on each (default 2^26; the size your sorts give each worker picks
    the same kernels), so the first sort is as fast as the later ones.
    Optional: the first sort does it otherwise. wait=False returns at once
    and readies the workers in the background (while you make your data);
    the first collective sort waits for it to end."""
    _explicit().prepare(tuple(dtypes), tuple(ops), tuple(descending), keys_per_worker=keys_per_worker,
                        wait=bool(wait))


def plan(x, descending=False, chunks=None, exchange="auto") -> SortPlan:
    """The SortPlan of sort(x, descending, chunks=chunks, exchange=exchange):
    its stages (SortPlan.stages) to run and time one by one."""
    return _plan(x, descending, chunks, exchange, "sort")


def _plan(x, descending, chunks, exchange, *names) -> SortPlan:
    """The SortPlan of sorting `x` (checked) into `chunks` (default: x's)
    through `exchange`; `names` tell this sort's tasks from other sorts of x."""
    _check_keys(x)
    if not isinstance(descending, (bool, np.bool_)):
        raise TypeError(f"descending must be True or False, got {descending!r}")
    if exchange not in EXCHANGES:
        raise ValueError(f"exchange={exchange!r}: exchange is one of {', '.join(map(repr, EXCHANGES))}")
    sizes = tuple(int(n) for n in x.chunks[0])
    out = sizes if chunks is None else _out_chunks(chunks, x)
    host, client = _on_host(x), cluster.default_client()
    exchange = _exchange(exchange, host, client, len(sizes) * len(out))
    if exchange != "nccl":          # NCCL moves the data itself, whatever Dask talks
        cluster.check_transport(x)
    # Local schedulers hold every result in one process: the tree's tasks
    # take whole chunks at no cost there, where they would pull them across
    # a distributed cluster's network.
    layout = "pieces" if client is not None else "tree"
    return SortPlan(sizes, out, bool(descending),
                    tokenize(x.name, bool(descending), out, exchange, layout, *names),
                    np.dtype(x.dtype), exchange, layout, "numpy" if host else "cupy")


def _explicit():
    """explicit.py (imported when used: it imports distributed)."""
    from . import explicit

    return explicit


def _on_host(x) -> bool:
    """Whether x's chunks are host (NumPy) arrays, as chunks.array_module
    tells, without importing cupy."""
    return type(x._meta).__module__.split(".")[0] != "cupy"


def _exchange(requested: str, host: bool, client, pieces: int) -> str:
    """The exchange to use (the rule above EXCHANGES), or why it cannot be,
    for chunks on the host or not and the distributed Client (or None)."""
    if requested == "auto":
        if not host and client is not None and _explicit().nccl_ready(client):
            return "nccl"
        many = pieces >= (P2P_MIN_PIECES if host else DEVICE_P2P_MIN_PIECES)
        fits = many and p2p.available() and client is not None
        requested = "p2p" if fits else "tasks"
    if requested == "nccl":
        if host:
            raise ValueError("exchange='nccl' sorts device (CuPy) chunks among GPU workers; for NumPy "
                             "chunks use exchange='p2p' or 'tasks'")
        if client is None:
            raise ValueError("exchange='nccl' runs on Dask's distributed scheduler: make a "
                             "distributed.Client first (or use exchange='tasks')")
    elif requested == "p2p":
        if not p2p.available():
            raise ValueError("exchange='p2p' needs distributed's P2P shuffle engine as of distributed "
                             "2026.7 or later; use exchange='tasks'")
    elif pieces > TASKS_MAX_PIECES and client is not None:   # the pieces layout
        raise ValueError(f"{pieces} pieces (input x output chunks) are too many for the tasks exchange "
                         f"(at most {TASKS_MAX_PIECES}) on a distributed Client; use fewer, larger chunks, "
                         "exchange='p2p' or, for CuPy chunks on GPU workers, exchange='nccl'")
    return requested


# ------------------------------------------------------------ argument checks
def _check_keys(x) -> None:
    if not isinstance(x, da.Array):
        raise TypeError(f"cudasortkit.dask sorts dask arrays, got {type(x).__module__}.{type(x).__name__}; "
                        "use cudasortkit.sort for NumPy/CuPy/PyTorch arrays")
    if x.ndim != 1:
        raise ValueError(f"cudasortkit.dask sorts 1-D dask arrays, got {x.ndim}-D")
    if any(math.isnan(n) for n in x.chunks[0]):
        raise ValueError("chunk sizes are unknown; call x.compute_chunk_sizes() first")
    if np.dtype(x.dtype).kind not in "biuf":
        raise TypeError(f"dtype {x.dtype} is not supported: keys are bool, integers or floats")


CHUNKS_ACCEPTED = ("a chunk length (an int >= 1), -1 (one chunk), a byte size or 'auto' (a str), "
                   "or the chunk lengths (ints >= 0 adding up to the number of keys)")


def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _out_chunks(chunks, x) -> tuple:
    """The output chunk lengths `chunks` asks for, read as dask.array reads a
    1-D chunk spec (CHUNKS_ACCEPTED; a one-item sequence is that item, as in
    dask), after checking it: dask itself divides by zero for a length of 0
    and makes negative lengths of one below -1."""
    spec = chunks[0] if isinstance(chunks, (tuple, list)) and len(chunks) == 1 else chunks
    if isinstance(spec, (tuple, list)):
        if not all(_is_int(c) for c in spec):
            raise TypeError(f"chunks={chunks!r}: chunk lengths must be ints; chunks is {CHUNKS_ACCEPTED}")
        if any(c < 0 for c in spec) or sum(spec) != x.shape[0]:
            raise ValueError(f"chunks={chunks!r}: chunk lengths must be >= 0 and add up to the "
                             f"{x.shape[0]} keys; chunks is {CHUNKS_ACCEPTED}")
    elif _is_int(spec):
        if spec < 1 and spec != -1:
            raise ValueError(f"chunks={chunks!r}: a chunk length must be at least 1; chunks is {CHUNKS_ACCEPTED}")
    elif not isinstance(spec, str):
        raise TypeError(f"chunks={chunks!r} is not a chunk spec; chunks is {CHUNKS_ACCEPTED}")
    return tuple(int(n) for n in normalize_chunks(chunks, shape=x.shape, dtype=x.dtype)[0])


def _check_values(values, keys):
    _check_keys(keys)
    if not isinstance(values, da.Array) or values.ndim != 1:
        raise TypeError(f"values must be a 1-D dask array, got {type(values).__name__}")
    if any(math.isnan(n) for n in values.chunks[0]):
        raise ValueError("values chunk sizes are unknown; call values.compute_chunk_sizes() first")
    if values.shape != keys.shape:
        raise ValueError(f"keys and values differ in length: {keys.shape[0]} != {values.shape[0]}")
    value_bytes(values.dtype)  # the rule cudasortkit.sort_by_key keeps (complex64 too)
    return values.rechunk(keys.chunks)
