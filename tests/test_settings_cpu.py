"""cudasortkit/settings.py: the one reader of CUDASORTKIT_* environment
variables, the one size parser (command-line sizes and byte counts) and
the command lines' switches."""
import argparse
import pathlib
import re

import pytest

from cudasortkit import settings
from cudasortkit.gpu import device
from cudasortkit.host import memlimit, pinned, pipeline, transfer
from cudasortkit.tuning import cache, runtime

PACKAGE = pathlib.Path(settings.__file__).parent


@pytest.mark.parametrize("text, expected", [
    ("2^24", 1 << 24), (" 2 ^ 10 ", 1024), ("1e6", 10**6), ("65536", 65536), ("1.5", 1),
    ("1_000", 1000), ("512MiB", 512 << 20), ("1GiB", 1 << 30), ("2GB", 2 * 10**9), (7, 7),
])
def test_one_parser_reads_powers_numbers_and_units(text, expected):
    assert settings.parse_size(text) == expected


def test_byte_counts_must_be_positive_and_errors_name_the_setting():
    assert settings.parse_size("0") == 0  # a command-line size may be 0
    with pytest.raises(ValueError, match="CUDASORTKIT_HOST_PIECE must be a positive"):
        settings.parse_size("0", settings.HOST_PIECE, positive=True)
    with pytest.raises(ValueError, match=r"CUDASORTKIT_PINNED_LIMIT: cannot read '2\^x'.*2\^24"):
        settings.parse_size("2^x", settings.PINNED_LIMIT, positive=True)


def test_a_switch_on_by_default_can_be_turned_off():
    parser = argparse.ArgumentParser()
    settings.add_switch(parser, "--quick", "off unless named")
    settings.add_switch(parser, "--check", "on unless --no-check", on=True)
    assert vars(parser.parse_args([])) == {"quick": False, "check": True}
    assert vars(parser.parse_args(["--quick", "--no-check"])) == {"quick": True, "check": False}


def test_the_knobs_read_the_environment_when_asked(monkeypatch):
    for name in (settings.DEVICE_MEMORY_LIMIT, settings.HOST_PIPELINE_MIN, settings.HOST_PIECE,
                 settings.COPY_THREADS, settings.PINNED_LIMIT, settings.HOST_TRANSFER,
                 settings.DEVICE, settings.AUTOTUNE, settings.CACHE_DIR):
        monkeypatch.delenv(name, raising=False)
    assert pipeline.min_bytes() == pipeline.MIN_BYTES and memlimit.device_memory_limit() is None
    assert transfer.transfer_mode(True) == "registered" and not transfer.mode_chosen()
    assert device.default_ordinal() == 0 and runtime.autotune_enabled()
    assert pinned.PinnedPool(1 << 20).max_slots == pinned.DEFAULT_LIMIT >> 20
    monkeypatch.setenv(settings.HOST_PIPELINE_MIN, "2^20")
    monkeypatch.setenv(settings.DEVICE_MEMORY_LIMIT, "1GiB")
    monkeypatch.setenv(settings.PINNED_LIMIT, "4MiB")
    monkeypatch.setenv(settings.COPY_THREADS, "3")
    monkeypatch.setenv(settings.HOST_TRANSFER, " staged ")
    monkeypatch.setenv(settings.DEVICE, "1")
    monkeypatch.setenv(settings.AUTOTUNE, "Off")
    monkeypatch.setenv(settings.CACHE_DIR, "/tmp/csk-settings-test")
    assert pipeline.min_bytes() == 1 << 20 and memlimit.device_memory_limit() == 1 << 30
    assert pinned.PinnedPool(1 << 20).max_slots == 4 and transfer.copy_threads() == 3
    assert transfer.transfer_mode(True) == "staged" and transfer.mode_chosen()
    assert device.default_ordinal() == 1 and not runtime.autotune_enabled()
    assert cache.cache_dir() == "/tmp/csk-settings-test"
    monkeypatch.setenv(settings.HOST_TRANSFER, "fast")
    with pytest.raises(ValueError, match="CUDASORTKIT_HOST_TRANSFER must be one of"):
        transfer.transfer_mode()


def test_only_settings_reads_cudasortkit_variables():
    """Every CUDASORTKIT_* read goes through settings.py (the command-line
    tools may set one for a child process). `info` reads where the CUDA
    toolkit is (CUDA_HOME, CUDA_PATH, CUDA_ROOT), and the benches which GPUs
    a run may use (CUDA_VISIBLE_DEVICES): no knobs of ours."""
    readers = []
    for path in PACKAGE.rglob("*.py"):
        if path.name == "settings.py":
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if (re.search(r"environ\.get|getenv|environ\[[^]]*\](?!\s*=)", line)
                    and not re.search(r"\"CUDA_(HOME|PATH|ROOT|VISIBLE_DEVICES)\"", line)):
                readers.append(f"{path.relative_to(PACKAGE)}:{number}: {line.strip()}")
    assert readers == []


def test_every_variable_is_documented_in_settings():
    named = set(re.findall(r"CUDASORTKIT_[A-Z_]+", settings.__doc__))
    defined = {v for k, v in vars(settings).items() if k.isupper() and isinstance(v, str)
               and v.startswith("CUDASORTKIT_")}
    used = set()
    for path in PACKAGE.rglob("*.py"):
        used |= set(re.findall(r"CUDASORTKIT_[A-Z_]+[A-Z]", path.read_text()))
    assert named == defined and used <= defined


def test_index_dtype_and_host_cutoff_are_defined_once():
    import inspect

    from cudasortkit import dtypes
    from cudasortkit.dispatch import execute, select
    from cudasortkit.tuning import policy

    definitions = [str(path.relative_to(PACKAGE)) for path in PACKAGE.rglob("*.py")
                   if re.search(r"^INDEX_DTYPE\s*=", path.read_text(), re.M)]
    assert definitions == ["dtypes.py"]
    assert execute.INDEX_DTYPE is pipeline.INDEX_DTYPE is dtypes.INDEX_DTYPE
    assert inspect.signature(policy.decide).parameters["host_cutoff"].default is select.HOST_CUTOFF
