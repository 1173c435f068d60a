"""The compiled kernels kept on disk (cudasortkit/build/cubins.py), without a
GPU: a cubin is found again by a key computed without running the compiler
(no `nvcc --preprocess` per lookup, as pycuda's cache ran), one compile per
source however many threads ask, the key follows every header the source
includes, a refused source is not compiled again, and an unwritable folder
keeps cubins in memory. The last test compiles for real with nvcc."""
import os
import subprocess
import threading
import time
import warnings

import pytest

from cudasortkit import settings
from cudasortkit.build import cubins
from cudasortkit.build.template import KernelTemplate
from cudasortkit.errors import KernelCompileError

OPTIONS = ("-O3", "-std=c++17")


@pytest.fixture
def kernels_dir(tmp_path, monkeypatch):
    """An empty kernel cache folder, this process's copies dropped."""
    folder = tmp_path / "kernels"
    monkeypatch.setenv(settings.KERNEL_CACHE_DIR, str(folder))
    cubins.forget()
    yield folder
    cubins.forget()


@pytest.fixture
def fake_nvcc(kernels_dir, monkeypatch):
    """cubins._compile replaced by a stand-in that records each compile
    (the source's length and the thread) and returns bytes derived from the
    source; `fail` names sources it refuses."""
    class Compiled(list):
        state = {"delay": 0.0, "fail": set()}

    compiled = Compiled()
    state = compiled.state

    def compile_(source, include_dirs, options, arch):
        compiled.append((len(source), threading.get_ident()))
        time.sleep(state["delay"])
        if source in state["fail"]:
            raise KernelCompileError("nvcc failed:\nerror: stand-in refusal")
        return b"CUBIN" + source.encode()[:32]

    monkeypatch.setattr(cubins, "_compile", compile_)
    return compiled


def headers_package(tmp_path, text="#define X 1\n"):
    """A kernel folder whose source includes a header that includes another."""
    folder = tmp_path / "pkg"
    folder.mkdir(exist_ok=True)
    (folder / "outer.cuh").write_text('#include "inner.cuh"\n')
    (folder / "inner.cuh").write_text(text)
    (folder / "other.cuh").write_text("// not included\n")
    return str(folder)


SOURCE = '#include "outer.cuh"\nextern "C" __global__ void k(int* a) { a[0] = X; }\n'


def test_a_cubin_is_compiled_once_then_read_from_disk_without_the_compiler(fake_nvcc, tmp_path,
                                                                            monkeypatch):
    inc = [headers_package(tmp_path)]
    first = cubins.image(SOURCE, inc, OPTIONS, "sm_90")
    assert cubins.image(SOURCE, inc, OPTIONS, "sm_90") == first
    assert len(fake_nvcc) == 1
    before = cubins.counters()
    cubins.forget()  # as a new process: only the disk has it

    def no_subprocess(*args, **kwargs):  # (nvcc --version is read once a process, already)
        raise AssertionError(f"a lookup ran {args[0]!r}")

    monkeypatch.setattr(subprocess, "run", no_subprocess)
    monkeypatch.setattr(subprocess, "Popen", no_subprocess)
    assert cubins.image(SOURCE, inc, OPTIONS, "sm_90") == first
    assert len(fake_nvcc) == 1
    after = cubins.counters()
    assert after["read"] == before["read"] + 1 and after["compiled"] == before["compiled"]


def test_a_refused_cubin_is_compiled_again(fake_nvcc, tmp_path):
    inc = [headers_package(tmp_path)]
    first = cubins.image(SOURCE, inc, OPTIONS, "sm_90")
    path = next(p for p in (tmp_path / "kernels").rglob("*.cubin"))
    path.write_bytes(b"damaged")
    cubins.forget()
    assert cubins.image(SOURCE, inc, OPTIONS, "sm_90") == b"damaged"  # (read back as it is)
    assert cubins.recompile(SOURCE, inc, OPTIONS, "sm_90") == first
    assert len(fake_nvcc) == 2 and path.read_bytes() == first


def test_the_key_follows_every_included_header_and_the_compile_settings(kernels_dir, tmp_path):
    inc = [headers_package(tmp_path)]
    k = cubins.key(SOURCE, inc, OPTIONS, "sm_90")
    assert cubins.key(SOURCE, inc, OPTIONS, "sm_90") == k
    (tmp_path / "pkg" / "other.cuh").write_text("// changed, never included\n")
    assert cubins.key(SOURCE, inc, OPTIONS, "sm_90") == k
    assert cubins.key(SOURCE, inc, OPTIONS, "sm_100") != k
    assert cubins.key(SOURCE, inc, ("-O2", "-std=c++17"), "sm_90") != k
    assert cubins.key(SOURCE + " ", inc, OPTIONS, "sm_90") != k
    time.sleep(0.01)  # (headers are read again when their mtime moves)
    (tmp_path / "pkg" / "inner.cuh").write_text("#define X 2\n")  # included through outer.cuh
    os.utime(tmp_path / "pkg" / "inner.cuh", ns=(time.time_ns(), time.time_ns() + 10**9))
    assert cubins.key(SOURCE, inc, OPTIONS, "sm_90") != k


def test_the_key_of_a_real_template_covers_its_headers(kernels_dir):
    template = KernelTemplate("onesweep.cu")
    source = template.render("float32", 0, {"block_size": 512})
    from cudasortkit.build.prototype import headers

    names = {os.path.basename(path) for path, _ in headers(source, template.include_dirs)}
    assert {"onesweep.cuh", "keys.cuh", "overlap.cuh"} <= names


def test_threads_asking_for_one_source_share_one_compile(fake_nvcc, tmp_path):
    inc = [headers_package(tmp_path)]
    fake_nvcc.state["delay"] = 0.2
    got = []
    threads = [threading.Thread(target=lambda: got.append(cubins.image(SOURCE, inc, OPTIONS,
                                                                        "sm_90")))
               for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 8 and len(set(got)) == 1
    assert len(fake_nvcc) == 1


def test_a_refused_source_is_not_compiled_again(fake_nvcc, tmp_path):
    inc = [headers_package(tmp_path)]
    fake_nvcc.state["fail"].add(SOURCE)
    for who in ("radix: kernel a", "radix: kernel b"):
        with pytest.raises(KernelCompileError, match=f"^{who}: nvcc failed:\n.*stand-in refusal"):
            cubins.image(SOURCE, inc, OPTIONS, "sm_90", who)
    assert len(fake_nvcc) == 1


def test_an_unwritable_folder_keeps_cubins_in_memory(fake_nvcc, tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv(settings.KERNEL_CACHE_DIR, str(blocker / "kernels"))
    inc = [headers_package(tmp_path)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = cubins.image(SOURCE, inc, OPTIONS, "sm_90")
        assert cubins.image(SOURCE, inc, OPTIONS, "sm_90") == first
    assert len(fake_nvcc) == 1
    said = [w for w in caught if "cannot write compiled kernels" in str(w.message)]
    assert len(said) == 1 and settings.KERNEL_CACHE_DIR in str(said[0].message)


def test_the_folder_does_not_follow_the_tuning_cache(monkeypatch, tmp_path):
    monkeypatch.delenv(settings.KERNEL_CACHE_DIR, raising=False)
    monkeypatch.setenv(settings.CACHE_DIR, str(tmp_path / "tables"))
    assert not cubins.cache_dir().startswith(str(tmp_path))
    assert os.path.basename(cubins.cache_dir()) == "kernels"


@pytest.mark.nvcc
def test_nvcc_compiles_a_template_once_across_processes(kernels_dir, monkeypatch):
    """The real compiler: a rendered template compiles to a cubin, which a
    later process (this one's copies dropped) reads back without running
    any subprocess."""
    import shutil

    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not found")
    template = KernelTemplate("util.cu")
    source = template.render("uint32", 0, {"block_size": 256})
    before = cubins.counters()
    image = cubins.image(source, template.include_dirs, OPTIONS, "sm_90")
    assert image[:4] == b"\x7fELF"
    assert cubins.counters()["compiled"] == before["compiled"] + 1
    cubins.forget()
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: pytest.fail(f"ran {a[0]!r}"))
    assert cubins.image(source, template.include_dirs, OPTIONS, "sm_90") == image
