"""read_gpus over NVML: snapshot fields, unsupported readings, unhealthy GPUs, processes."""

from __future__ import annotations

import getpass
import os
import signal
import subprocess
import sys
import threading

from helpers import wait_until

from berth.devices import nvml, read_gpus


def test_snapshot_fields_match_the_state_file(fake_gpus) -> None:
    fake_gpus.setup(4)
    fake_gpus.update(
        2,
        name="NVIDIA H100 80GB HBM3",
        memory_total=80 << 30,
        memory_used=5 << 30,
        util=17,
        mem_util=9,
        power_mw=123456,
        power_limit_mw=700000,
        temp=61,
        pstate=2,
        processes=[{"pid": 999999, "used_memory": 4 << 30, "type": "compute"}],
    )
    gpus = read_gpus()
    assert [g.index for g in gpus] == [0, 1, 2, 3]
    g = gpus[2]
    assert g.uuid == fake_gpus.uuids[2]
    assert g.name == "NVIDIA H100 80GB HBM3"
    assert g.pci_bus_id == "00000000:47:00.0"
    assert (g.memory_total, g.memory_used, g.memory_free) == (80 << 30, 5 << 30, 75 << 30)
    assert (g.utilization, g.memory_utilization) == (17, 9)
    assert (g.power_draw, g.power_limit) == (123.456, 700.0)
    assert (g.temperature, g.performance_state) == (61, 2)
    assert g.healthy and g.error is None and not g.logical
    (p,) = g.processes
    assert (p.pid, p.used_memory, p.kind) == (999999, 4 << 30, "compute")
    assert p.user is None and p.command is None  # no such process here: not visible
    assert gpus[0].processes == () and gpus[0].memory_used == 0


def test_memory_the_driver_reserves_is_not_used_memory(fake_gpus, monkeypatch) -> None:
    """As the real driver (issue 37: an idle H200, driver 580): NVML's v1 memory info counts
    the ~615 MiB the driver reserves for itself as used, v2 and nvidia-smi do not. berth shows
    v2's used (0 on an idle GPU) and the reserve apart; an older driver without v2 gives v1."""
    monkeypatch.setattr(nvml, "_memory_v2", [])  # (whether v2 answers: learned afresh)
    fake_gpus.setup(2)
    fake_gpus.update(0, memory_total=140 << 30, memory_used=0, memory_reserved=615 << 20)
    fake_gpus.update(1, memory_total=140 << 30, memory_used=3 << 30, memory_reserved=615 << 20)
    idle, busy = read_gpus()
    assert (idle.memory_used, idle.memory_reserved) == (0, 615 << 20)
    assert idle.memory_free == (140 << 30) - (615 << 20)  # (free is the same either way)
    assert (busy.memory_used, busy.memory_free) == (3 << 30, (137 << 30) - (615 << 20))
    fake_gpus.update(0, errors={"nvmlDeviceGetMemoryInfo_v2": "FUNCTION_NOT_FOUND"})
    monkeypatch.setattr(nvml, "_memory_v2", [])
    old, busy = read_gpus()  # (learned on GPU 0: no v2 here; GPU 1 read by v1 too)
    assert (old.memory_used, old.memory_reserved, old.healthy) == (615 << 20, None, True)
    assert old.memory_free == (140 << 30) - (615 << 20)
    assert (busy.memory_used, busy.memory_reserved) == ((3 << 30) + (615 << 20), None)


def test_state_is_read_afresh_on_every_call(fake_gpus) -> None:
    fake_gpus.setup(2)
    assert read_gpus()[1].utilization == 0
    fake_gpus.update(1, util=80)
    assert read_gpus()[1].utilization == 80


def test_unsupported_readings_are_none_and_the_gpu_stays_healthy(fake_gpus) -> None:
    fake_gpus.setup(2)
    fake_gpus.update(1, power_mw=None, pstate=None)
    fake_gpus.inject(1, "nvmlDeviceGetTemperature", "NOT_SUPPORTED")
    fake_gpus.inject(1, "nvmlDeviceGetEnforcedPowerLimit", "NO_PERMISSION")
    g = read_gpus()[1]
    assert g.power_draw is None and g.performance_state is None
    assert g.temperature is None and g.power_limit is None
    assert g.healthy and g.error is None
    assert g.memory_total == 80 << 30  # the rest is still read


def test_process_list_without_permission_is_unknown_not_empty(fake_gpus) -> None:
    fake_gpus.setup(1)
    fake_gpus.inject(0, "nvmlDeviceGetComputeRunningProcesses", "NO_PERMISSION")
    fake_gpus.inject(0, "nvmlDeviceGetGraphicsRunningProcesses", "NO_PERMISSION")
    g = read_gpus()[0]
    assert g.processes is None and g.process_count is None and g.healthy


def test_lost_gpu_is_reported_unhealthy_not_dropped(fake_gpus) -> None:
    fake_gpus.setup(4)
    fake_gpus.inject(1, "*", "GPU_IS_LOST")
    fake_gpus.inject(3, "nvmlDeviceGetMemoryInfo", "UNKNOWN")
    gpus = read_gpus()
    assert len(gpus) == 4
    lost = gpus[1]
    assert not lost.healthy and "GPU is lost" in (lost.error or "")
    assert lost.index == 1 and lost.memory_free is None and lost.processes is None
    assert lost.uuid == "UNKNOWN-1"  # not even a handle: docs/devices.md's placeholder
    broken = gpus[3]
    assert not broken.healthy and "nvmlDeviceGetMemoryInfo" in (broken.error or "")
    assert broken.uuid == fake_gpus.uuids[3] and broken.memory_total is None
    assert broken.utilization == 0  # other readings still there
    assert gpus[0].healthy and gpus[2].healthy


def test_workload_appears_with_details_and_disappears_after_kill_9(fake_gpus) -> None:
    fake_gpus.setup(4)
    proc = fake_gpus.spawn_workload(visible="1,3", mem="10G", util=40)
    gpus = read_gpus()
    for i in (1, 3):
        (p,) = gpus[i].processes
        assert p.pid == proc.pid and p.used_memory == 10 << 30 and p.kind == "compute"
        assert p.user == getpass.getuser()
        assert "workload.py" in (p.command or "") and "--mem 10G" in (p.command or "")
        assert gpus[i].memory_used == 10 << 30 and gpus[i].utilization == 40
    assert gpus[0].processes == () and gpus[2].processes == ()
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    wait_until(lambda: read_gpus()[1].processes == ())
    assert read_gpus()[3].memory_used == 0


def test_compute_and_graphics_processes_are_merged_by_pid(fake_gpus) -> None:
    fake_gpus.setup(1)
    fake_gpus.update(
        0,
        processes=[
            {"pid": 11, "used_memory": 100, "type": "compute"},
            {"pid": 11, "used_memory": 100, "type": "graphics"},
            {"pid": 12, "used_memory": None, "type": "graphics"},
        ],
    )
    procs = {p.pid: p for p in read_gpus()[0].processes}
    assert procs[11].kind == "compute+graphics" and procs[11].used_memory == 100
    assert procs[12].kind == "graphics" and procs[12].used_memory is None


def test_without_process_details_user_and_command_are_not_read(fake_gpus) -> None:
    fake_gpus.setup(2)
    proc = fake_gpus.spawn_workload(visible="0")
    (p,) = read_gpus(process_details=False)[0].processes
    assert p.pid == proc.pid and p.user is None and p.command is None


def test_fast_path_imports_nothing_heavy(fake_gpus) -> None:
    fake_gpus.setup(2)
    fake_gpus.spawn_workload(visible="0")
    code = (
        "import sys; from berth.devices import read_gpus; g = read_gpus(process_details=False);"
        "assert g[0].processes; heavy = {'psutil', 'dataclasses', 'typing', 'asyncio'} & "
        "set(sys.modules); print(sorted(heavy))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=fake_gpus.env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_nvml_is_initialised_once_and_shut_down_at_exit(fake_gpus, tmp_path) -> None:
    fake_gpus.setup(2)
    log = tmp_path / "nvml.log"
    code = (
        "from berth.devices import read_gpus, nvml; read_gpus(); read_gpus(); nvml.driver_version()"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**fake_gpus.env, "FAKE_NVML_LOG": str(log)},
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    assert [line.split()[0] for line in log.read_text().splitlines()] == ["init", "shutdown"]


def test_concurrent_first_reads_share_one_session(fake_gpus, tmp_path) -> None:
    fake_gpus.setup(3)
    log = tmp_path / "nvml.log"
    os.environ["FAKE_NVML_LOG"] = str(log)
    try:
        results: list[int] = []
        threads = [
            threading.Thread(target=lambda: results.append(len(read_gpus()))) for _ in range(8)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        del os.environ["FAKE_NVML_LOG"]
    assert results == [3] * 8
    assert log.read_text().split()[0::2] == ["init"]


def test_driver_version_and_gpu_that_vanished(fake_gpus) -> None:
    fake_gpus.setup(3, driver="535.104.05")
    assert nvml.driver_version() == "535.104.05"
    state = fake_gpus.read()
    state["gpus"].pop()
    fake_gpus.write(state)
    assert len(read_gpus()) == 2


def test_light_read_for_selection_skips_only_telemetry(fake_gpus) -> None:
    fake_gpus.setup(n=2, memory="80G")
    fake_gpus.spawn_workload(visible="1", mem="10G", util=40)
    light = read_gpus(process_details=False, telemetry=False)
    full = read_gpus(process_details=False)
    for a, b in zip(light, full, strict=True):
        assert (a.uuid, a.name, a.memory_used, a.utilization, a.healthy) == (
            b.uuid, b.name, b.memory_used, b.utilization, b.healthy,
        )  # fmt: skip
        assert [p.pid for p in a.processes] == [p.pid for p in b.processes]
        assert a.power_draw is a.temperature is a.pci_bus_id is None
        assert b.power_draw is not None and b.pci_bus_id is not None
    assert light[1].utilization == 40 and light[1].process_count == 1


def test_minor_numbers_are_nvmls_or_none_where_it_cannot_say(fake_gpus) -> None:
    fake_gpus.setup(3)
    fake_gpus.update(1, minor=7)  # (/dev/nvidia7: minors need not follow the indices)
    fake_gpus.inject(2, "nvmlDeviceGetMinorNumber", "NOT_SUPPORTED")
    assert nvml.minor_numbers() == {0: 0, 1: 7, 2: None}


def test_process_details_are_read_from_proc_as_psutil_reads_them(fake_gpus) -> None:
    """User and command line of a GPU process, without importing psutil (~13 ms of `berth
    status`'s start): the same as psutil says; a pid that is gone has neither."""
    import psutil

    fake_gpus.setup(1)
    proc = fake_gpus.spawn_workload(visible="0")
    fake_gpus.update(0, processes=[
        {"pid": proc.pid, "used_memory": 1 << 30, "type": "compute"},
        {"pid": 4_000_000, "used_memory": 1 << 30, "type": "compute"},  # (no such process)
    ])  # fmt: skip
    procs = {p.pid: p for p in read_gpus()[0].processes}
    ps = psutil.Process(proc.pid)
    assert procs[proc.pid].user == ps.username()
    assert procs[proc.pid].command == " ".join(ps.cmdline())
    assert procs[4_000_000].user is None and procs[4_000_000].command is None
    code = (
        "import sys; from berth.devices import read_gpus; g = read_gpus();"
        "assert g[0].processes[0].command; print('psutil' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], env=fake_gpus.env, capture_output=True,
                         text=True)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
