"""No NVML: one clear error (exit code 3 in the CLI); a declared inventory needs no NVML."""

from __future__ import annotations

import subprocess
import sys

import pytest

from berth import config
from berth.devices import read_gpus
from berth.errors import EXIT_NO_DRIVER, NvmlUnavailable

READ = (
    "from berth.devices import read_gpus\n"
    "from berth.errors import NvmlUnavailable\n"
    "try:\n    read_gpus()\n"
    "except NvmlUnavailable as e:\n    print(e); raise SystemExit(e.exit_code)\n"
)


def _without_library(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k != "LD_LIBRARY_PATH"}


def test_no_library_gives_one_clear_error(fake_gpus) -> None:
    fake_gpus.setup(2)
    out = subprocess.run(
        [sys.executable, "-c", READ],
        env=_without_library(fake_gpus.env),
        capture_output=True,
        text=True,
    )
    assert out.returncode == EXIT_NO_DRIVER, out.stderr
    assert out.stdout.startswith("NVIDIA driver not found: libnvidia-ml.so.1 could not be loaded")
    assert "berth help config" in out.stdout


@pytest.mark.parametrize("command", [["status"], ["select"], ["select", "-n", "2"]])
def test_cli_without_library_exits_3_with_the_message(fake_gpus, command) -> None:
    fake_gpus.setup(2)
    out = fake_gpus.berth(*command, env={"LD_LIBRARY_PATH": ""})
    assert out.returncode == EXIT_NO_DRIVER
    assert "NVIDIA driver not found: libnvidia-ml.so.1 could not be loaded" in out.stderr
    assert "Traceback" not in out.stderr
    assert out.stderr.count("\n") == 1  # one line


def test_driver_not_loaded(fake_gpus) -> None:
    # the library is there but no driver answers (the fake: no state file)
    with pytest.raises(NvmlUnavailable, match="NVIDIA driver not loaded") as e:
        read_gpus()
    assert e.value.exit_code == EXIT_NO_DRIVER


def test_init_refused_has_its_own_message(fake_gpus) -> None:
    fake_gpus.setup(1)
    fake_gpus.inject(None, "nvmlInitWithFlags", "NO_PERMISSION")
    with pytest.raises(NvmlUnavailable, match="no permission"):
        read_gpus()
    fake_gpus.inject(None, "nvmlInitWithFlags", "LIB_RM_VERSION_MISMATCH")
    with pytest.raises(NvmlUnavailable, match="version mismatch"):
        read_gpus()
    fake_gpus.inject(None, "nvmlInitWithFlags", None)
    assert len(read_gpus()) == 1


def test_count_failure_after_init_is_nvml_unavailable(fake_gpus) -> None:
    fake_gpus.setup(1)
    fake_gpus.inject(None, "nvmlDeviceGetCount", "UNKNOWN")
    with pytest.raises(NvmlUnavailable, match="cannot count the GPUs: Unknown Error"):
        read_gpus()


def _declare(fake_gpus, monkeypatch, text: str) -> None:
    path = fake_gpus.root / "config.toml"
    path.write_text(text)
    fake_gpus.env["BERTH_CONFIG"] = str(path)
    monkeypatch.setenv("BERTH_CONFIG", str(path))
    config.reset()


def test_declared_inventory_replaces_nvml(fake_gpus, monkeypatch) -> None:
    fake_gpus.setup(8)  # NVML would say 8 A100s; the declaration wins
    _declare(
        fake_gpus,
        monkeypatch,
        '[inventory]\ngpus = 5\nunavailable = [3, 4]\nmemory = "24G"\nname = "RTX"\n',
    )
    gpus = read_gpus()
    assert [g.uuid for g in gpus] == [f"LOGICAL-{i}" for i in range(5)]
    assert [g.index for g in gpus] == [0, 1, 2, 3, 4]  # unavailable ones are still listed
    for g in gpus:
        assert g.logical and g.healthy and g.name == "RTX" and g.memory_total == 24 << 30
        assert g.memory_used is g.memory_free is g.utilization is g.power_draw is None
        assert g.processes is None


def test_declared_inventory_works_without_the_library(fake_gpus, monkeypatch) -> None:
    _declare(fake_gpus, monkeypatch, "[inventory]\ngpus = 3\n")
    code = READ.replace(
        "read_gpus()", "print(len(read_gpus())); import sys; print('pynvml' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=_without_library(fake_gpus.env),
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["3", "False"]
    sel = fake_gpus.berth("select", "-n", "2", env={"LD_LIBRARY_PATH": ""})
    assert sel.returncode == 0, sel.stderr
    ids = sel.stdout.strip().split(",")
    assert len(set(ids)) == 2 and set(ids) <= {"0", "1", "2"}
