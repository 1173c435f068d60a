"""python -m cudasortkit (info, list, demo, its help and version, bench's
and tune's help) as a new user meets it, CPU only: the machine (pycuda, nvcc, CUDA headers, driver, GPU)
is stood in for by monkeypatching the probes cli.py, device.py and libcuda.py use."""
import subprocess
import sys

import pytest

import cudasortkit as csk
from cudasortkit import SortPlugin
from cudasortkit.cli import main as cli
from cudasortkit.gpu import device, libcuda
from cudasortkit.sdk import registry


@pytest.fixture
def machine(tmp_path, monkeypatch):
    """A machine with nothing CUDA: no pycuda, no nvcc, no driver, no
    pycuda build config, no toolkit anywhere cli.py guesses. Tests add what
    they need with monkeypatch."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setattr(cli, "AKSETUP_FILES", ("~/.aksetup-defaults.py",))
    for var in ("CUDA_HOME", "CUDA_PATH", "CUDA_ROOT"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(cli, "TOOLKIT_GUESSES", (str(tmp_path / "cuda-*"),))
    monkeypatch.setattr(cli, "_pycuda_version", lambda: None)
    monkeypatch.setattr(cli, "_find_nvcc", lambda: None)
    monkeypatch.setattr(cli, "_nvcc_version", lambda nvcc: "Build cuda_13.0")
    monkeypatch.setattr(libcuda, "library_problem",
                        lambda: "libcuda.so.1 not found: no NVIDIA driver is installed")
    monkeypatch.setattr(device, "unavailable_reason",
                        lambda: "pycuda is not installed (No module named 'pycuda'); install cudasortkit[cuda]")
    monkeypatch.setattr(device, "gpu_available", lambda: False)
    return tmp_path


def toolkit(root, headers=("cuda.h", "curand.h")):
    """A CUDA toolkit folder: bin/nvcc and include/ with `headers`."""
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "nvcc").write_text("#!/bin/sh\n")
    (root / "include").mkdir()
    for h in headers:
        (root / "include" / h).write_text("")
    return root


def info(capsys):
    """(the lines before the 'Missing' section, {what: what to do} in it)."""
    assert cli.main(["info"]) == 0
    out = capsys.readouterr().out
    head, _, tail = out.partition("\nMissing for sorting on the GPU")
    missing = dict(line.strip().split(": ", 1) for line in tail.splitlines()[1:] if line.strip())
    return head.splitlines(), missing


# ----------------------------------------------------------------------- info
def test_info_names_everything_missing_on_a_bare_machine(machine, capsys):
    lines, missing = info(capsys)
    assert "pycuda: not installed" in lines
    assert "nvcc: not found on PATH" in lines
    assert "CUDA driver: libcuda.so.1 not found: no NVIDIA driver is installed" in lines
    assert any(l.startswith("CUDA headers: not found where pycuda's build looks: nowhere") for l in lines)
    assert sorted(missing) == ["CUDA driver", "CUDA headers (cuda.h, curand.h)", "nvcc", "pycuda"]
    assert 'pip install "cudasortkit[cuda]" builds it from source' in missing["pycuda"]
    assert "cuda.h, curand.h" in missing["pycuda"]
    assert "PATH" in missing["nvcc"]


def test_info_sees_through_a_wrapper_nvcc_and_names_the_toolkit_to_use(machine, monkeypatch, capsys):
    # nvcc on PATH is a wrapper in <tmp>/wrapper/bin; the toolkit with the
    # headers is <tmp>/cuda-13.0, which pycuda's build would not look in.
    wrapper = toolkit(machine / "wrapper", headers=())
    real = toolkit(machine / "cuda-13.0")
    monkeypatch.setattr(cli, "_find_nvcc", lambda: str(wrapper / "bin" / "nvcc"))
    lines, missing = info(capsys)
    assert (f"CUDA headers: not found where pycuda's build looks: {wrapper / 'include'} "
            f"(CUDA_ROOT/include, CUDA_ROOT being the folder above {wrapper / 'bin' / 'nvcc'}); "
            "missing: cuda.h, curand.h") in lines
    fix = missing["CUDA headers (cuda.h, curand.h)"]
    assert f"the toolkit at {real} has them" in fix
    assert f"PATH={real / 'bin'}:$PATH pip install" in fix
    assert f"CUDA_ROOT = '{real}'" in fix and "~/.aksetup-defaults.py" in fix
    assert "nvcc" not in missing


def test_info_reads_cuda_root_from_pycudas_build_config(machine, monkeypatch, capsys):
    real = toolkit(machine / "toolkit", headers=("cuda.h",))
    monkeypatch.setattr(cli, "_find_nvcc", lambda: "/somewhere/else/bin/nvcc")
    (machine / "home" / ".aksetup-defaults.py").write_text(f"CUDA_ROOT = {str(real)!r}\n")
    lines, missing = info(capsys)
    assert (f"CUDA headers: not found where pycuda's build looks: {real / 'include'} "
            f"(CUDA_ROOT = {str(real)!r} in ~/.aksetup-defaults.py); missing: curand.h") in lines
    assert "CUDA headers (curand.h)" in missing
    (real / "include" / "curand.h").write_text("")
    lines, missing = info(capsys)
    assert any(l.startswith(f"CUDA headers: found where pycuda's build looks: {real / 'include'}")
               for l in lines)
    assert sorted(missing) == ["CUDA driver", "pycuda"]


def test_info_with_pycuda_names_a_missing_gpu_and_nothing_else(machine, monkeypatch, capsys):
    monkeypatch.setattr(cli, "_pycuda_version", lambda: "2026.1")
    monkeypatch.setattr(cli, "_find_nvcc", lambda: "/usr/local/cuda/bin/nvcc")
    monkeypatch.setattr(device, "unavailable_reason", lambda: "the CUDA driver sees no device")
    lines, missing = info(capsys)
    assert "pycuda: 2026.1" in lines and "nvcc: /usr/local/cuda/bin/nvcc (Build cuda_13.0)" in lines
    assert not any(l.startswith(("CUDA headers", "CUDA driver")) for l in lines)  # pycuda is built
    assert missing == {"GPU": "the CUDA driver sees no device"}


def test_info_with_everything_there_has_nothing_missing(machine, monkeypatch, capsys):
    class State:
        ordinal, name, compute_capability, sm_count, total_memory = 0, "Fake H100", (9, 0), 132, 80 * 2**30

    monkeypatch.setattr(cli, "_pycuda_version", lambda: "2026.1")
    monkeypatch.setattr(cli, "_find_nvcc", lambda: "/usr/local/cuda/bin/nvcc")
    monkeypatch.setattr(device, "unavailable_reason", lambda: None)
    monkeypatch.setattr(device, "get_device", lambda: State())
    monkeypatch.setattr(device, "driver_version", lambda: "13.0")
    lines, missing = info(capsys)
    assert missing == {}
    assert "GPU 0: Fake H100, compute capability 9.0, 132 SMs, 80.0 GiB, driver CUDA 13.0" in lines


def test_driver_probe_names_a_missing_driver_library(monkeypatch):
    monkeypatch.setattr(libcuda, "_driver", None)  # (not loaded yet, as in a fresh process)
    monkeypatch.setattr(libcuda, "DRIVER_LIBRARY", "libcudasortkit-no-such-driver.so.1")
    assert libcuda.library_problem() == (
        "libcudasortkit-no-such-driver.so.1 not found: no NVIDIA driver is installed")


# ----------------------------------------------------------------------- demo
@pytest.mark.parametrize("n, message", [("-5", "must be at least 1, got -5"),
                                        ("0", "must be at least 1, got 0"),
                                        ("ten", "expected a whole number of keys, got 'ten'")])
def test_demo_refuses_a_size_below_one_with_a_usage_error(n, message, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["demo", "-n", n])
    assert exc.value.code == 2
    assert capsys.readouterr().err.strip().endswith(message)


def test_demo_command_with_a_negative_size_prints_no_traceback():
    done = subprocess.run([sys.executable, "-m", "cudasortkit", "demo", "-n", "-5"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        "python -m cudasortkit demo: error: argument -n: the number of keys must be at least 1, got -5")


def test_demo_without_a_gpu_says_it_sorted_on_the_cpu_and_why(machine, capsys):
    assert cli.main(["demo", "-n", "1000"]) == 0
    captured = capsys.readouterr()
    first, why = captured.out.splitlines()
    assert first.startswith("sorted 1,000 random float32 keys on the CPU with algorithm='numpy' "
                            "(NumPy's sort, chosen by auto): ")
    assert first.endswith("matches NumPy: True")
    assert why == ("on the CPU because there is no GPU here: pycuda is not installed (No module named "
                   "'pycuda'); install cudasortkit[cuda] (python -m cudasortkit info says what is missing)")
    assert "host<->device" not in captured.out and "compil" not in captured.out
    assert captured.err == ""  # the library's own CPU warning is not repeated


@pytest.mark.gpu
def test_demo_on_a_gpu_times_a_gpu_sort(capsys):
    assert cli.main(["demo", "-n", str(1 << 20)]) == 0
    out = capsys.readouterr().out
    assert "including host<->device copies; matches NumPy: True" in out
    assert "on the CPU" not in out


# ----------------------------------------------------------------------- list
class LongNamed(SortPlugin):
    """A CPU plugin whose name is longer than the 12 columns list once had."""

    name = "a_plugin_with_a_long_name"
    dtypes = ("int32",)
    device = "cpu"
    summary = "long-named test plugin"

    def run(self, job):
        raise AssertionError("never run")


@pytest.fixture
def long_named():
    registry.register(LongNamed)
    yield LongNamed.name
    registry.refresh()


def listing(capsys):
    """{name: (its line, the indented lines below it)} of `list`."""
    assert cli.main(["list"]) == 0
    table = {}
    for line in capsys.readouterr().out.splitlines():
        if line.startswith(" "):
            table[name][1].append(line)
        else:
            name = line.split()[0]
            table[name] = (line, [])
    return table


def test_list_columns_are_as_wide_as_the_longest_name(machine, long_named, capsys):
    table = listing(capsys)
    width = len(long_named)
    assert width > 12 and set(table) == {row["name"] for row in csk.algorithms()}
    for name, (line, below) in table.items():
        # name, padded to the longest, one space, then the status column
        assert line[:width].rstrip() == name and line[width] == " " and line[width + 1] != " ", line
        assert all(len(b) - len(b.lstrip()) == len(below[0]) - len(below[0].lstrip()) for b in below)
    device_column = {line.index(" cpu ") if " cpu " in line else line.index(" gpu ")
                     for line, _ in table.values()}
    assert len(device_column) == 1  # every row's device in one column
    indents = {len(b) - len(b.lstrip()) for _, below in table.values() for b in below}
    assert indents == {device_column.pop() + 1}  # dtypes and tunables start under the device


def test_list_without_a_gpu_says_gpu_plugins_need_one(machine, capsys):
    table = listing(capsys)
    gpu_plugins = [row["name"] for row in csk.algorithms() if row["device"] == "gpu" and row["status"] == "ok"]
    assert gpu_plugins
    for name in gpu_plugins:
        assert table[name][0].split(None, 1)[1].startswith("ok, needs a GPU  gpu  ["), table[name][0]
    assert table["numpy"][0].split(None, 1)[1].split()[:2] == ["ok", "cpu"]


def test_list_with_a_gpu_says_plain_ok(machine, monkeypatch, capsys):
    monkeypatch.setattr(device, "gpu_available", lambda: True)
    table = listing(capsys)
    for row in csk.algorithms():
        if row["status"] == "ok":
            assert table[row["name"]][0].split()[1:3] == ["ok", row["device"]]


def test_list_into_a_closed_pipe_ends_without_a_traceback(tmp_path):
    """`python -m cudasortkit list | head -1`: the reader leaves early."""
    done = subprocess.run(f"{sys.executable} -m cudasortkit list | head -1", shell=True,
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert done.stdout.strip() and "Traceback" not in done.stderr, done.stderr


# ------------------------------------------------------ the command line itself
def _run(*argv, **kwargs):
    return subprocess.run([sys.executable, *argv], capture_output=True, text=True, timeout=120,
                          **kwargs)


def test_the_command_alone_prints_its_help():
    done = _run("-m", "cudasortkit")
    assert done.returncode == 0 and done.stderr == ""
    assert done.stdout.startswith("usage: python -m cudasortkit")
    for command in ("info", "list", "demo", "bench", "tune"):
        assert command in done.stdout


def test_version():
    done = _run("-m", "cudasortkit", "--version")
    assert done.returncode == 0 and done.stdout.strip() == f"cudasortkit {csk.__version__}"


def _options(help_text: str) -> dict:
    """{option: its help} of an argparse --help text (the options section)."""
    import re

    found, current = {}, None
    for line in help_text.split("options:", 1)[1].splitlines():
        m = re.match(r"^  (-[-\w]+)(?:[ ,][^ ].*?)?(?:  +(.*))?$", line)
        if m:
            current = m.group(1)
            found[current] = (m.group(2) or "").strip()
        elif current and line.startswith("     "):
            found[current] = (found[current] + " " + line.strip()).strip()
    return found


def test_bench_help_describes_itself_and_every_option_in_the_users_words(capsys):
    import re

    with pytest.raises(SystemExit) as done:
        cli.main(["bench", "--help"])
    assert done.value.code == 0
    text = capsys.readouterr().out
    description = text.split("\n\n")[1]
    assert description.strip() and not description.lstrip().startswith("options:")
    options = _options(text)
    assert {"--repeats", "--inputs", "--sizes", "--peers"} <= set(options)
    for option, words in options.items():
        assert words, f"{option} is not explained"
    assert not re.search(r"\w+\.py\b|cudasortkit\.cli|\bissue\b|#\d", text), text


def test_tune_help_is_the_same_from_both_commands():
    """`python -m cudasortkit tune --help` says what `python -m
    cudasortkit.tune --help` says (the description and its examples too)."""
    one = _run("-m", "cudasortkit", "tune", "--help")
    two = _run("-m", "cudasortkit.tune", "--help")
    assert one.returncode == two.returncode == 0
    assert "measure every plugin on this GPU" in two.stdout
    def same(text):  # the program's name aside
        return text.replace("python -m cudasortkit tune", "PROG").replace(
            "python -m cudasortkit.tune", "PROG")

    assert same(one.stdout) == same(two.stdout)


# ------------------------------------------------------- info and nvcc wrappers
def _executable(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


def _fake_nvcc(root, dryrun=True):
    """<root>/bin/nvcc that answers --version and, as nvcc does, names its
    toolkit (TOP=...) in a --dryrun compile."""
    top = f'echo "#\\$ TOP={root}/bin/.." >&2' if dryrun else ":"
    return _executable(root / "bin" / "nvcc", f"""#!/bin/sh
case "$*" in
  *--dryrun*) {top} ;;
  *--version*) echo "Cuda compilation tools, release 13.0, V13.0.88"
               echo "Build cuda_13.0.r13.0/compiler.36424714_0" ;;
esac
""")


@pytest.mark.parametrize("how", ["exec wrapper", "wrapper, target read", "symlink"])
@pytest.mark.parametrize("curand", [True, False])
def test_info_sees_through_an_nvcc_wrapper_on_path_to_its_toolkit(how, curand, machine,
                                                                   monkeypatch, capsys):
    """nvcc on PATH runs a toolkit's nvcc elsewhere (a wrapper script in
    <tmp>/usr/bin, or a symlink): info names that toolkit, checks cuda.h
    and curand.h in it, and says what to do about what is missing."""
    real = machine / "opt" / "toolkit-13"  # not where cli.py guesses toolkits
    _fake_nvcc(real, dryrun=how == "exec wrapper")
    (real / "include").mkdir()
    (real / "include" / "cuda.h").write_text("")
    if curand:
        (real / "include" / "curand.h").write_text("")
    bindir = machine / "usr" / "bin"
    if how == "symlink":
        bindir.mkdir(parents=True)
        (bindir / "nvcc").symlink_to(real / "bin" / "nvcc")
    else:
        _executable(bindir / "nvcc", f'#!/bin/sh\nexec {real}/bin/nvcc "$@"\n')
    monkeypatch.setenv("PATH", f"{bindir}:/usr/bin:/bin")
    monkeypatch.setattr(cli, "_find_nvcc", FIND_NVCC)
    monkeypatch.setattr(cli, "_nvcc_version", NVCC_VERSION)
    lines, missing = info(capsys)
    assert f"nvcc: {bindir / 'nvcc'} (Build cuda_13.0.r13.0/compiler.36424714_0)" in lines
    toolkit_line = next(l for l in lines if l.startswith("CUDA toolkit: "))
    assert toolkit_line.startswith(f"CUDA toolkit: {real} (the nvcc on PATH runs {real / 'bin' / 'nvcc'})")
    fix = missing[next(k for k in missing if k.startswith("CUDA headers"))]
    if curand:
        assert toolkit_line.endswith("cuda.h, curand.h found")
        assert f"the toolkit at {real} has them" in fix and f"PATH={real / 'bin'}:$PATH" in fix
    else:
        assert toolkit_line.endswith("cuda.h found; missing: curand.h")
        assert f"the toolkit at {real} (which nvcc runs) lacks curand.h" in fix
        assert "cuRAND" in fix


FIND_NVCC, NVCC_VERSION = cli._find_nvcc, cli._nvcc_version
