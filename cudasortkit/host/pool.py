"""Worker threads of the host path: a thread pool per purpose (host copies,
prefaulting), each made on first use and kept for the process.

Separate pools, not one: prefault pieces queued when a result array is made
must not hold up the copies queued behind them, and each pool has its own
thread count.
"""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor


class LazyPool:
    """`pool()` is the ThreadPoolExecutor of `threads()` workers named
    `prefix`-N, made on the first call (threads() is read then, once)."""

    def __init__(self, threads, prefix: str):
        self._threads, self._prefix = threads, prefix
        self._executor = None
        self._lock = threading.Lock()

    def __call__(self) -> ThreadPoolExecutor:
        if self._executor is None:
            with self._lock:
                if self._executor is None:
                    self._executor = ThreadPoolExecutor(self._threads(),
                                                        thread_name_prefix=self._prefix)
        return self._executor
