"""hostmem.Prefault: pages a fresh array in without touching its contents."""
import numpy as np

from cudasortkit.host import memory as hostmem


def test_prefault_keeps_contents_written_before_and_during():
    a = np.empty((hostmem.MIN_BYTES * 3) // 8 + 5, np.uint64)  # 3 pieces and a ragged end
    a[: len(a) // 2] = np.arange(len(a) // 2, dtype=np.uint64)
    with hostmem.Prefault(a):
        a[len(a) // 2:] = 7  # copies may fill the array while it is paged in
    assert np.array_equal(a[: len(a) // 2], np.arange(len(a) // 2, dtype=np.uint64))
    assert (a[len(a) // 2:] == 7).all()


def test_prefault_skips_small_none_and_strided():
    small = np.zeros(1000, np.uint8)
    strided = np.zeros(2 * hostmem.MIN_BYTES, np.uint8)[::2]
    p = hostmem.Prefault(small, None, strided)
    assert p.pieces == 0
    p.wait()


def test_wait_twice_and_after_cancel():
    p = hostmem.Prefault(np.empty(hostmem.MIN_BYTES * 4, np.uint8))
    assert p.pieces == 4
    p.wait()
    assert p.pieces == 0
    p.wait()
