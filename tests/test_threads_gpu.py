"""Sorting from threads other than the main one: a thread that sorted and then
ended must not leave the CUDA context on its stack (pycuda aborts the whole
process at exit when one does), and sorts from many threads at once are right."""
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import cudasortkit as csk

pytestmark = pytest.mark.gpu


def test_a_process_whose_worker_threads_sorted_exits_cleanly():
    script = textwrap.dedent("""
        import threading
        import numpy as np
        import cudasortkit as csk
        a = np.random.default_rng(0).random(100_000).astype(np.float32)
        def work():
            assert (csk.sort(a, algorithm="onesweep") == np.sort(a)).all()
        threads = [threading.Thread(target=work) for _ in range(3)]
        for t in threads: t.start()
        for t in threads: t.join()
        print("sorted")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0 and "sorted" in done.stdout, done.stdout + done.stderr
    assert "PyCUDA ERROR" not in done.stderr, done.stderr


def test_sorts_from_a_thread_pool_are_right():
    rng = np.random.default_rng(4)
    inputs = [rng.integers(-10**6, 10**6, 50_001 + i).astype(np.int32) for i in range(16)]
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda a: csk.sort(a, algorithm="onesweep"), inputs))
    for a, got in zip(inputs, results):
        np.testing.assert_array_equal(got, np.sort(a))
