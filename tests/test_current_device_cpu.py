"""A public call leaves the calling thread's current device as it found it
(gpu.device.keeps_current_device), checked without a GPU: contexts are a
stand-in stack of ordinals, pushed and popped as pycuda's would be."""
import gc
import threading
from types import SimpleNamespace

import pytest

from cudasortkit.gpu import device


class Contexts:
    """pycuda.driver's Context.pop and a device's context.push, as a stack."""

    def __init__(self):
        self.stack = ["caller's own"]

    def driver(self):
        return SimpleNamespace(Context=SimpleNamespace(pop=self.stack.pop))

    def state(self, ordinal):
        """A DeviceState whose activate() runs the real rule on this stack."""
        state = object.__new__(device.DeviceState)
        state.ordinal = ordinal
        state.cuda = self.driver()
        state.context = SimpleNamespace(push=lambda: self.stack.append(ordinal))
        return state


@pytest.fixture
def contexts(monkeypatch):
    stack = Contexts()
    states = {}
    monkeypatch.setattr(device, "_thread", device._ThreadState())
    monkeypatch.setattr(device, "_driver", stack.driver)
    monkeypatch.setattr(device, "default_ordinal", lambda: 0)
    monkeypatch.setattr(device, "get_device", lambda ordinal=None: states.setdefault(
        0 if ordinal is None else ordinal, stack.state(0 if ordinal is None else ordinal))
        .activate())
    return stack


def on(ordinal, fail=False):
    """A public call on arrays of device `ordinal` (it activates that device)."""
    @device.keeps_current_device
    def call():
        device.get_device(ordinal)
        if fail:
            raise RuntimeError("the call failed")
        return ordinal
    return call


def test_a_call_on_another_device_hands_the_one_before_back(contexts):
    device.get_device(0)
    assert on(1)() == 1
    assert contexts.stack == ["caller's own", 0] and device.active_ordinal() == 0


def test_a_first_call_on_another_device_leaves_the_callers_own_context(contexts):
    on(1)()
    assert contexts.stack == ["caller's own"] and device._thread.ordinal is None
    assert device.active_ordinal() == 0  # the default device, where none is active


def test_a_first_call_on_the_default_device_keeps_its_context(contexts):
    on(0)()
    on(0)()
    assert contexts.stack == ["caller's own", 0]


def test_a_failing_call_hands_back_too(contexts):
    device.get_device(0)
    with pytest.raises(RuntimeError, match="failed"):
        on(2, fail=True)()
    assert contexts.stack == ["caller's own", 0]


def test_a_call_inside_a_call_on_the_same_device_changes_nothing(contexts):
    @device.keeps_current_device
    def outer():
        device.get_device(1)
        on(1)()
        assert contexts.stack == ["caller's own", 1]  # still the outer call's device
        return "done"

    device.get_device(0)
    assert outer() == "done"
    assert contexts.stack == ["caller's own", 0]


def test_a_worker_threads_context_is_popped_once(contexts):
    """A worker thread's first call on another device pushes a context and
    arms its pop at the thread's end; handing back pops it, and disarms that."""
    worker = threading.Thread(target=on(1))
    worker.start()
    worker.join()
    gc.collect()
    assert contexts.stack == ["caller's own"]
