"""CUDA graphs of launch plans: a plan replayed on the same buffers again runs
as one graph launch.

A launch plan's replay (cudasortkit/launch/plans.py) issues its memsets,
copies and launches one driver call at a time, several microseconds of host
time each, and the GPU idles between the first of them while the host
queues the next. When a plan comes back with the same buffers (pools hand
the same blocks out again; callers sort the same arrays), its operations on
those addresses are captured once into a CUDA graph and every later replay
launches that graph: one driver call, the operations back to back on the
GPU.

Rules kept:
- A set of buffers is captured on its second replay, never its first, so a
  one-off call pays nothing for a graph it would not use again.
- Capture runs on a non-blocking stream of its own, in thread-local capture
  mode: the work it records is not run, and nothing the caller or other
  threads queue elsewhere can join or break the capture. The graph is then
  launched on the job's stream, ordered like the operations it replaces.
- A plan keeps graphs for its MAX_GRAPHS most recently used sets of buffers
  (a graph evicted is destroyed; all are destroyed with the plan).
- Capturing costs more than issuing the operations once, so a plan whose
  buffers keep changing must not capture on and on: past
  CAPTURES_BEFORE_CHECK captures, it captures once more only for every
  LAUNCHES_PER_CAPTURE launches of its graphs. Such a plan stops capturing
  after a few more, and starts again as its graphs are launched: a burst
  of new buffers (two callers' results, a bench's contenders) never turns
  graphs off for good. (They did: a plan that captured 8 times in its first
  18 launches stayed ungraphed, every later call of 2^24 keys issuing its
  six launches one by one, ~10% slower on an H100.)
- Anything failing in capture turns graphs off for that plan, whose replays
  then issue operations one by one as before.
"""
from __future__ import annotations

import ctypes
import threading
from collections import OrderedDict

from ..errors import KernelError
from ..gpu import libcuda

#: Graphs kept per launch plan (sets of buffers), and buffer sets remembered
#: as seen once. Two prepared calls of one shape (say a sort by name and by
#: auto) on three inputs, each result alternating between two blocks, use
#: twelve sets.
MAX_GRAPHS = 16
MAX_SEEN = 32
#: Past this many captures a plan captures once more for every this many
#: launches of its graphs.
CAPTURES_BEFORE_CHECK = 8
LAUNCHES_PER_CAPTURE = 4
_CAPTURE_THREAD_LOCAL = 1  # CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
_STREAM_NON_BLOCKING = 1  # CU_STREAM_NON_BLOCKING


_capture_streams: dict = {}  # device ordinal -> pycuda Stream capture runs on
_lock = threading.Lock()  # the capture streams and every capture


def _capture_stream(state):
    stream = _capture_streams.get(state.ordinal)
    if stream is None:
        stream = _capture_streams[state.ordinal] = state.cuda.Stream(flags=_STREAM_NON_BLOCKING)
    return stream


class PlanGraphs:
    """One launch plan's graphs, by the buffer addresses of the replay."""

    def __init__(self):
        self._execs = OrderedDict()  # addresses (tuple) -> CUgraphExec handle, LRU last
        self._seen: set = set()
        self._lock = threading.Lock()
        self.captures = self.launches = 0
        #: Why graphs are off for this plan (None while they are on).
        self.off = None

    def __len__(self) -> int:
        return len(self._execs)

    def launch(self, key: tuple, job, stream: int | None = None) -> bool:
        """Launch the graph of these addresses on the job's stream (or on the
        CUstream handle `stream`), if there is one; False if not (the caller
        issues the operations)."""
        with self._lock:
            graph = self._execs.get(key)
            if graph is None:
                return False
            self._execs.move_to_end(key)
            driver = libcuda.driver()
            status = driver.cuGraphLaunch(graph, job.stream.handle if stream is None else stream)
            if status:
                raise KernelError.failed(job.plugin.name, None, job.dtype, job.config,
                                         "launching the graph of its recorded operations",
                                         driver.describe(status, "cuGraphLaunch"))
            self.launches += 1
        return True

    def wants(self, key: tuple) -> bool:
        """Whether to capture this replay: graphs are on and these addresses
        were replayed before."""
        if self.off is not None:
            return False
        with self._lock:
            if key in self._seen:
                return self.captures < CAPTURES_BEFORE_CHECK + self.launches // LAUNCHES_PER_CAPTURE
            if len(self._seen) >= MAX_SEEN:
                self._seen.clear()
            self._seen.add(key)
        return False

    def capture(self, key: tuple, job, issue) -> bool:
        """Record what issue() queues on job.stream as the graph of `key`, and
        launch it on job.stream. False (graphs now off for the plan, nothing
        queued) if capture failed: the caller issues the operations itself."""
        own = job.stream
        with _lock:
            try:
                driver = libcuda.driver()
                stream = _capture_stream(job.state)
            except (OSError, AttributeError, job.state.cuda.Error) as exc:
                self.off = f"no graph driver calls: {exc}"
                return False
            graph, instance = ctypes.c_void_p(), ctypes.c_void_p()
            try:
                driver.check(driver.cuStreamBeginCapture_v2(stream.handle, _CAPTURE_THREAD_LOCAL),
                             "cuStreamBeginCapture")
                job.stream = stream
                try:
                    issue()
                finally:
                    job.stream = own
                    status = driver.cuStreamEndCapture(stream.handle, ctypes.byref(graph))
                driver.check(status, "cuStreamEndCapture")
                driver.check(driver.cuGraphInstantiateWithFlags(ctypes.byref(instance), graph, 0),
                             "cuGraphInstantiateWithFlags")
            except Exception as exc:  # noqa: BLE001 - any failure: this plan stays ungraphed
                self.off = f"capture failed: {type(exc).__name__}: {exc}"
                return False
            finally:
                if graph.value:
                    driver.cuGraphDestroy(graph)
        with self._lock:
            self.captures += 1
            self._seen.discard(key)
            if len(self._execs) >= MAX_GRAPHS:
                _, evicted = self._execs.popitem(last=False)
                driver.cuGraphExecDestroy(evicted)  # one still running is freed when it ends
            self._execs[key] = instance.value
        return self.launch(key, job)

    def _destroy_all(self) -> None:
        for graph in self._execs.values():
            libcuda.driver().cuGraphExecDestroy(graph)
        self._execs.clear()

    def __del__(self):
        try:
            self._destroy_all()
        except Exception:  # noqa: BLE001 - interpreter or driver shutting down
            pass
