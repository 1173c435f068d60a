"""One collective sort at a time per cluster, kept by the scheduler.

Two collective sorts must not interleave their ranks (on one communicator
their calls would mix; on two, each worker's one thread could wait in the
other's). A Turns plugin on the scheduler hands out turns in the order they
are asked for, and a sort asks for its turn in the same call (`begin`,
client.run_on_scheduler) that asks which workers there are and which hold
its input chunks: one round trip, where a distributed.Lock, the scheduler's
identity and who_has took four. The turn passes on without a message from
the client: when every rank task of the sort is done (in memory, failed or
forgotten: finished, raised, or cancelled), when its client leaves, or when
none of its rank tasks reached the scheduler within SUBMIT_TIMEOUT seconds
of the turn (a client that stopped between the two). `end` gives a turn
back at once (the client failed before submitting).

Runs on the scheduler: cudasortkit must be importable there, as it is for
the scheduler to read any cudasortkit task.
"""
from __future__ import annotations

import asyncio

from distributed.diagnostics.plugin import SchedulerPlugin

NAME = "cudasortkit-turns"
#: Task states after which a rank no longer runs.
DONE = frozenset(("memory", "erred", "forgotten"))
#: Seconds a turn waits for any of its rank tasks to reach the scheduler.
SUBMIT_TIMEOUT = 60.0


class Turns(SchedulerPlugin):
    name = NAME

    def __init__(self):
        self.lock = None        # asyncio.Lock on the scheduler's loop (start)
        self.client = None      # the turn's holder
        self.ranks = set()      # its rank task keys not yet done
        self.turn = 0           # counts turns, so a late timeout spares the next one

    async def start(self, scheduler) -> None:
        self.scheduler = scheduler
        self.lock = asyncio.Lock()

    def hold(self, client: str, ranks) -> None:
        """(The lock taken.) The turn is `client`'s until `ranks` are done."""
        self.client, self.ranks = client, set(ranks)
        self.turn += 1
        asyncio.get_running_loop().call_later(SUBMIT_TIMEOUT, self._unsubmitted, self.turn)

    def give_back(self) -> None:
        if self.client is not None:
            self.client, self.ranks = None, set()
            self.lock.release()

    def _unsubmitted(self, turn: int) -> None:
        if turn == self.turn and self.client is not None and not any(
                k in self.scheduler.tasks for k in self.ranks):
            self.give_back()

    def transition(self, key, start, finish, *args, **kwargs) -> None:
        if key in self.ranks and finish in DONE:
            self.ranks.discard(key)
            if not self.ranks:
                self.give_back()

    def remove_client(self, scheduler, client: str) -> None:
        if client == self.client:
            self.give_back()


async def begin(client: str, token: str, keys: list, dask_scheduler=None) -> dict:
    """Wait for the turn of `client`'s sort `token`, whose ranks will be
    rank_key(token, r) for r < W (one per worker), then say where its input
    is: {"workers": [(address, id), ...] by address, "who_has": {key:
    [address, ...]}} for the input chunk keys `keys`."""
    turns = dask_scheduler.plugins[NAME]
    await turns.lock.acquire()
    if client not in dask_scheduler.clients:     # it left while it waited
        turns.lock.release()
        raise RuntimeError(f"cudasortkit.dask: client {client} left before its sort's turn")
    workers = members(dask_scheduler)
    turns.hold(client, [rank_key(token, r) for r in range(len(workers))])
    tasks = dask_scheduler.tasks
    return {"workers": workers,
            "who_has": {k: [ws.address for ws in (tasks[k].who_has or ())] if k in tasks else [] for k in keys}}


def end(client: str, dask_scheduler=None) -> None:
    """Give back `client`'s turn (it will not submit its ranks)."""
    turns = dask_scheduler.plugins[NAME]
    if turns.client == client:
        turns.give_back()


def members(dask_scheduler=None) -> list:
    """[(address, worker id), ...] of every worker, by address."""
    return sorted((ws.address, ws.server_id) for ws in dask_scheduler.workers.values())


def registered(dask_scheduler=None) -> bool:
    return NAME in dask_scheduler.plugins


def rank_key(token: str, rank: int) -> str:
    """The task key of rank `rank` of the collective sort named `token`."""
    return f"csk-collective-{token}-{rank}"
