"""`berth status` against fake GPUs."""

from __future__ import annotations

import json
import os
import pwd
import signal
import subprocess
import sys

from helpers import wait_until

from berth.cli.status import render
from berth.cli.status_section import Section
from berth.devices.model import GpuProcess, GpuSnapshot
from berth.errors import EXIT_NO_DRIVER, EXIT_USAGE

SNAPSHOT_FIELDS = set(GpuSnapshot.__slots__)


def test_status_shows_busy_gpus_with_their_processes(fake_gpus):
    fake_gpus.setup(n=4)
    w1 = fake_gpus.spawn_workload(visible="1", mem="10G", util=50)
    w3 = fake_gpus.spawn_workload(visible="3", mem="20G", util=80)
    r = fake_gpus.berth("status")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["GPU", "NAME", "MEMORY", "UTIL", "MEM", "POWER", "TEMP", "STATE"]
    gpu_rows = {line.split()[0]: line for line in lines[1:] if line[:3].strip().isdigit()}
    assert "idle" in gpu_rows["0"] and "idle" in gpu_rows["2"]
    assert "busy" in gpu_rows["1"] and "50%" in gpu_rows["1"] and "10.0G / 80.0G" in gpu_rows["1"]
    assert "busy" in gpu_rows["3"] and "80%" in gpu_rows["3"]
    me = pwd.getpwuid(os.getuid()).pw_name
    for proc, mem in ((w1, "10.0G"), (w3, "20.0G")):
        (line,) = [ln for ln in lines if ln.split()[:1] == [str(proc.pid)]]
        assert me in line and mem in line and "workload.py" in line
    # the process lines sit under their GPU
    text = r.stdout
    assert text.index(gpu_rows["1"]) < text.index(str(w1.pid)) < text.index(gpu_rows["2"])


def test_json_has_every_field(fake_gpus):
    fake_gpus.setup(n=2)
    w = fake_gpus.spawn_workload(visible="0", mem="4G", util=30)
    r = fake_gpus.berth("status", "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["source"] == "nvml"
    assert len(data["gpus"]) == 2
    for g in data["gpus"]:
        assert SNAPSHOT_FIELDS <= set(g)
        assert g["banned"] is None
    g0 = data["gpus"][0]
    assert g0["uuid"] == fake_gpus.uuids[0]
    assert g0["memory_total"] == 80 * 1024**3 and g0["utilization"] == 30
    assert g0["power_draw"] == 60.0 and g0["temperature"] == 35
    (p,) = g0["processes"]
    assert p["pid"] == w.pid and p["used_memory"] == 4 * 1024**3
    assert set(p) == {"pid", "used_memory", "kind", "user", "command"}


def test_power_not_supported_shows_na_and_lost_gpu_unhealthy(fake_gpus):
    fake_gpus.setup(n=3)
    fake_gpus.update(1, power_mw=None)
    fake_gpus.inject(2, "*", "GPU_IS_LOST")
    r = fake_gpus.berth("status")
    assert r.returncode == 0, r.stderr
    rows = [ln for ln in r.stdout.splitlines() if ln[:3].strip().isdigit()]
    assert "n/a" in rows[1] and "idle" in rows[1]
    assert "UNHEALTHY" in rows[2]
    data = json.loads(fake_gpus.berth("status", "--json").stdout)
    assert data["gpus"][1]["power_draw"] is None
    assert data["gpus"][2]["healthy"] is False and data["gpus"][2]["error"]


def test_all_ignores_cuda_visible_devices(fake_gpus):
    fake_gpus.setup(n=4)
    env = {"CUDA_VISIBLE_DEVICES": "2"}
    data = json.loads(fake_gpus.berth("status", "--json", env=env).stdout)
    assert [g["index"] for g in data["gpus"]] == [2]
    data = json.loads(fake_gpus.berth("status", "--json", "--all", env=env).stdout)
    assert [g["index"] for g in data["gpus"]] == [0, 1, 2, 3]


def test_banned_gpus_are_marked(fake_gpus, tmp_path):
    fake_gpus.setup(n=3)
    cfg = tmp_path / "c.toml"
    cfg.write_text('[inventory]\nban = [1]\nban_names = ["T4"]\n')
    fake_gpus.update(2, name="Tesla T4")
    r = fake_gpus.berth("status", env={"BERTH_CONFIG": str(cfg)})
    rows = [ln for ln in r.stdout.splitlines() if ln[:3].strip().isdigit()]
    assert "not managed" not in rows[0]
    assert "not managed: banned in config" in rows[1]
    assert "not managed: name matches banned 'T4'" in rows[2]


def test_declared_inventory_without_driver(fake_gpus, tmp_path):
    fake_gpus.setup(n=1)
    fake_gpus.remove_state()
    cfg = tmp_path / "c.toml"
    cfg.write_text("[inventory]\ngpus = 3\nunavailable = [2]\n")
    env = {"BERTH_CONFIG": str(cfg)}
    r = fake_gpus.berth("status", env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("(declared, no telemetry)") == 3
    assert "declared unavailable" in r.stdout
    data = json.loads(fake_gpus.berth("status", "--json", env=env).stdout)
    assert data["source"] == "declared" and len(data["gpus"]) == 3


def test_no_driver_exit_code(fake_gpus):
    fake_gpus.setup(n=1)
    fake_gpus.remove_state()
    for args in (["status"], ["status", "--json"]):
        r = fake_gpus.berth(*args)
        assert r.returncode == EXIT_NO_DRIVER
        assert "NVIDIA driver" in r.stderr and len(r.stderr.strip().splitlines()) == 1
        assert r.stdout == ""


def test_bad_watch_interval(fake_gpus):
    fake_gpus.setup(n=1)
    r = fake_gpus.berth("status", "--watch", "soon")
    assert r.returncode == EXIT_USAGE and "'soon'" in r.stderr


def test_watch_refreshes_in_place_and_ctrl_c_exits_0(fake_gpus):
    fake_gpus.setup(n=2)
    proc = subprocess.Popen(
        [sys.executable, "-m", "berth.cli.main", "status", "--watch", "0.05"],
        env=fake_gpus.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        os.set_blocking(proc.stdout.fileno(), False)
        seen = bytearray()

        def refreshed_twice() -> bool:
            chunk = proc.stdout.read()  # type: ignore[union-attr]
            if chunk:
                seen.extend(chunk)
            return seen.count(b"\x1b[H\x1b[2J") >= 2

        wait_until(refreshed_twice, timeout=20, message="two refreshes")
        fake_gpus.update(1, util=77)
        wait_until(lambda: refreshed_twice() and b"77%" in seen, timeout=20, message="new reading")
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for s in (proc.stdout, proc.stderr):
            if s:
                s.close()


def test_render_hooks_for_other_sections():
    gpus = [
        GpuSnapshot(0, "GPU-a", "A100", memory_total=80 << 30, memory_used=0, utilization=0),
        GpuSnapshot(
            1,
            "GPU-b",
            "A100",
            processes=(GpuProcess(42, 1 << 30, user="ann", command="python x.py"),),
        ),
    ]
    claims = Section(
        "claims", "CLAIMS", ["lease 3f2a  ann  GPU 1  0:05:00"], notes={1: ["held by ann"]}
    )
    text = render(gpus, {}, [claims])
    lines = text.splitlines()
    assert lines.index("CLAIMS") > 2 and "lease 3f2a" in lines[-1]
    held = next(ln for ln in lines if "held by ann" in ln)
    assert lines.index(held) < next(k for k, ln in enumerate(lines) if "42" in ln)
    assert "python x.py" in text and "n/a" in text
    narrow = render(gpus, {}, width=30)
    assert all(len(ln) <= 30 for ln in narrow.splitlines())
