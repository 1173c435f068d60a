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


def test_host_pools_come_from_one_lazy_pool_each_made_once():
    import threading

    from cudasortkit.host import transfer
    from cudasortkit.host.pool import LazyPool

    made = []
    pool = LazyPool(lambda: made.append(1) or 3, "csk-test")
    got = []
    threads = [threading.Thread(target=lambda: got.append(pool())) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert made == [1] and all(g is got[0] for g in got)
    assert got[0]._max_workers == 3 and got[0].submit(threading.current_thread).result(
        ).name.startswith("csk-test")
    got[0].shutdown()
    assert isinstance(transfer.workers, LazyPool) and isinstance(hostmem._workers, LazyPool)
    assert transfer.workers() is transfer.workers()
    assert transfer.workers()._max_workers == transfer.copy_threads()
    assert hostmem._workers()._max_workers == hostmem._threads()
