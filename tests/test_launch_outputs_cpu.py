"""launch/outputs.py: a job's temporaries, argsort's index buffer and the
test poison, with a fake device state (no GPU)."""
import types

from cudasortkit.gpu import arrays
from cudasortkit.launch import outputs


class _Buf:
    def __init__(self, ptr, log):
        self.ptr, self.log = ptr, log

    def __int__(self):
        return self.ptr

    def free(self):
        self.log.append(("free", self.ptr))


def _state():
    log = []
    counter = iter(range(0x1000, 0x100000, 0x1000))
    cuda = types.SimpleNamespace(
        memset_d8_async=lambda ptr, byte, nbytes, stream: log.append(("memset", ptr, byte, nbytes)))
    state = types.SimpleNamespace(cuda=cuda, stream="s", log=log,
                                  allocate=lambda nbytes, who: (log.append(("alloc", nbytes, who))
                                                                or _Buf(next(counter), log)))
    return state


def test_temporaries_are_kept_and_freed_together():
    state, bufs = _state(), []
    a = outputs.temporary(state, bufs, 16, "a")
    b = outputs.temporary(state, bufs, 32, "b")
    assert (a, b) == (0x1000, 0x2000) and len(bufs) == 2
    outputs.free_all(bufs)
    assert bufs == [] and state.log[-2:] == [("free", 0x1000), ("free", 0x2000)]


def test_index_buffer_fills_from_start_with_its_index_width():
    state, bufs, fills = _state(), [], []

    def fill(st, ptr, n, index_bytes, start):
        fills.append((ptr, n, index_bytes, start))

    ptr = outputs.index_buffer(state, bufs, 10, "indices", fill, 4, 7)
    assert state.log == [("alloc", 40, "indices")] and fills == [(ptr, 10, 4, 7)]
    ptr = outputs.index_buffer(state, bufs, 5, "indices", fill, 8, 3)
    assert fills[-1] == (ptr, 5, 8, 3) and len(bufs) == 2


def test_poison_only_when_tests_set_it(monkeypatch):
    state = _state()
    outputs.poison(state, 0x1000, 8, 0x2000, 16)
    assert state.log == []  # POISON_BYTE unset: no work
    monkeypatch.setattr(arrays, "POISON_BYTE", 0xA5)
    outputs.poison(state, 0x1000, 8, 0, 16)  # address 0: no such output
    outputs.poison(state, 0x3000, 0, 0x4000, 4)  # 0 bytes: nothing to fill
    assert state.log == [("memset", 0x1000, 0xA5, 8), ("memset", 0x4000, 0xA5, 4)]
