"""`berth admin doctor` (issue 39.2): one line per check, ok / warn / fail and the fix, exit
0 / 1 / 2. Each check is made to fail by the real condition: a read-only cgroup filesystem
(remounted in a mount namespace), a claims dir of the wrong mode or owner, a full disk (a tiny
tmpfs), a missing admin group, no driver, a config with an unknown key, a stale socket, a
clock set back, a leftover daemon."""

from __future__ import annotations

import fcntl
import json
import os
import shlex
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

BERTH = [sys.executable, "-m", "berth"]
NOBODY = 65534


def _ready(fake: Any, tmp_path: Path, config: str = "") -> dict[str, str]:
    """A host as doctor wants it, but for the system daemon's socket and unit (warnings)."""
    fake.setup(n=2)
    claims = Path(fake.claims_dir)
    claims.mkdir(exist_ok=True)
    os.chmod(claims, 0o1777)
    state = Path(fake.state_dir)
    state.mkdir(mode=0o711, exist_ok=True)
    os.chmod(state, 0o711)
    cfg = tmp_path / "config.toml"
    cfg.write_text(config or '[claims]\nadmin_group = "root"\n')
    return {**fake.env, "BERTH_CONFIG": str(cfg)}


def _doctor(env: dict[str, str], prefix: str = "") -> tuple[int, dict[str, dict[str, str]]]:
    command = shlex.join([*BERTH, "admin", "doctor", "--json"])
    if prefix:
        argv = ["unshare", "-m", "sh", "-c", f"{prefix} && exec {command}"]
    else:
        argv = [*BERTH, "admin", "doctor", "--json"]
    out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode in (0, 1, 2), out.stderr
    reply = json.loads(out.stdout)
    assert reply["status"] == out.returncode
    checks: dict[str, dict[str, str]] = {}
    for c in reply["checks"]:
        checks.setdefault(c["check"], c)
    return out.returncode, checks


def test_a_ready_host_has_only_the_daemon_to_start(fake_gpus: Any, tmp_path: Path) -> None:
    code, checks = _doctor(_ready(fake_gpus, tmp_path))
    levels = {name: c["level"] for name, c in checks.items()}
    assert {n for n, level in levels.items() if level != "ok"} == {"socket", "unit"}, checks
    assert code == 1  # warnings only
    assert "driver 550.54.15" in checks["nvml"]["said"] and "2 GPU(s)" in checks["nvml"]["said"]
    text = subprocess.run([*BERTH, "admin", "doctor"], env=_ready(fake_gpus, tmp_path),
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert text.returncode == 1
    assert "warn  socket: no socket at " in text.stdout and "fix: systemctl" in text.stdout


def test_a_read_only_cgroup_filesystem_fails(fake_gpus: Any, tmp_path: Path) -> None:
    env = _ready(fake_gpus, tmp_path, '[claims]\nadmin_group = "root"\n'
                 '[daemon]\nisolate_devices = "required"\n')  # fmt: skip
    assert _doctor(env)[1]["cgroups"]["level"] == "ok"  # (writable here: the test can see it)
    ro = ("for m in $(awk '$3 ~ /^cgroup/ {print $2}' /proc/self/mounts); "
          "do mount -o remount,bind,ro $m; done")  # fmt: skip
    code, checks = _doctor(env, ro)
    assert code == 2
    assert checks["cgroups"]["level"] == "fail"
    assert "Read-only file system" in checks["cgroups"]["said"]
    assert checks["isolate_devices"]["level"] == "fail"


def test_a_claims_dir_of_the_wrong_mode_or_owner_fails(fake_gpus: Any, tmp_path: Path) -> None:
    env = _ready(fake_gpus, tmp_path)
    os.chmod(fake_gpus.claims_dir, 0o755)
    code, checks = _doctor(env)
    assert code == 2 and checks["claims dir"]["level"] == "fail"
    assert "mode 0755" in checks["claims dir"]["said"]
    assert checks["claims dir"]["fix"] == f"chmod 1777 {fake_gpus.claims_dir}"
    os.chmod(fake_gpus.claims_dir, 0o1777)
    os.chown(fake_gpus.claims_dir, NOBODY, -1)
    code, checks = _doctor(env)
    assert code == 2 and f"uid {NOBODY}, not root" in checks["claims dir"]["said"]


def test_a_full_disk_under_the_state_dir_fails(fake_gpus: Any, tmp_path: Path) -> None:
    env = _ready(fake_gpus, tmp_path)
    state = fake_gpus.state_dir
    full = (f"mount -t tmpfs -o size=1m,mode=0711 tmpfs {shlex.quote(state)} && "
            f"(dd if=/dev/zero of={shlex.quote(state)}/fill bs=64k 2>/dev/null; true)")  # fmt: skip
    code, checks = _doctor(env, full)
    assert code == 2 and checks["state disk"]["level"] == "fail"
    assert "0B free on tmpfs" in checks["state disk"]["said"]
    assert os.listdir(state) == []  # (the tmpfs was the namespace's only)


def test_a_missing_admin_group_fails(fake_gpus: Any, tmp_path: Path) -> None:
    env = _ready(fake_gpus, tmp_path, '[claims]\nadmin_group = "berth-no-such-group"\n')
    code, checks = _doctor(env)
    assert code == 2 and checks["admin group"]["level"] == "fail"
    assert checks["admin group"]["fix"] == "groupadd --system berth-no-such-group"
    env = _ready(fake_gpus, tmp_path, "[daemon]\npoll_interval = 5\n")  # (none configured)
    assert _doctor(env)[1]["admin group"]["level"] == "warn"


def test_no_driver_or_an_unreadable_gpu(fake_gpus: Any, tmp_path: Path) -> None:
    env = _ready(fake_gpus, tmp_path)
    fake_gpus.inject(1, "*", "GPU_IS_LOST")
    code, checks = _doctor(env)
    assert checks["gpu 1"]["level"] == "warn" and "GPU is lost" in checks["gpu 1"]["said"]
    assert "gpus" not in checks  # (no "all readable")
    code, checks = _doctor({**env, "LD_LIBRARY_PATH": str(tmp_path)})  # (no libnvidia-ml)
    assert code == 2 and checks["nvml"]["level"] == "fail"
    assert "[inventory] gpus = N" in checks["nvml"]["fix"]


def test_cuda_visible_devices_and_an_unknown_config_key(fake_gpus: Any, tmp_path: Path) -> None:
    env = _ready(fake_gpus, tmp_path)
    assert _doctor({**env, "CUDA_VISIBLE_DEVICES": "1"})[1]["cuda env"]["level"] == "warn"
    env = _ready(fake_gpus, tmp_path, '[claims]\nadmin_grup = "root"\n')
    code, checks = _doctor(env)
    assert code == 2 and checks["config"]["level"] == "fail"
    assert "unknown key 'admin_grup'" in checks["config"]["said"]


def test_a_stale_or_foreign_socket(fake_gpus: Any, tmp_path: Path) -> None:
    env = _ready(fake_gpus, tmp_path)
    s = socket.socket(socket.AF_UNIX)
    s.bind(fake_gpus.socket)
    s.close()  # (the file stays; nobody listens)
    code, checks = _doctor(env)
    assert checks["socket"]["level"] == "warn" and "stale" in checks["socket"]["said"]
    os.chown(fake_gpus.socket, NOBODY, -1)
    code, checks = _doctor(env)
    assert code == 2 and "not root" in checks["socket"]["said"]


def test_a_clock_set_back_and_a_leftover_daemon(fake_gpus: Any, tmp_path: Path) -> None:
    env = _ready(fake_gpus, tmp_path)
    db = sqlite3.connect(os.path.join(fake_gpus.state_dir, "berth.db"))
    db.execute("CREATE TABLE jobs(submitted_at REAL, ended_at REAL)")
    db.execute("INSERT INTO jobs VALUES (?, NULL)", (time.time() + 3600,))
    db.commit()
    db.close()
    lock = os.open(os.path.join(fake_gpus.state_dir, "daemon.lock"), os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)  # (a daemon that holds its state, with no socket)
        checks = _doctor(env)[1]
    finally:
        os.close(lock)
    assert checks["clock"]["level"] == "warn" and "set back" in checks["clock"]["said"]
    assert checks["leftover daemon"]["level"] == "warn"
    assert "leftover daemon" not in _doctor(env)[1]


@pytest.mark.parametrize("mode", [0o755, 0o700])
def test_a_state_dir_others_may_read_fails(fake_gpus: Any, tmp_path: Path, mode: int) -> None:
    env = _ready(fake_gpus, tmp_path)
    os.chmod(fake_gpus.state_dir, mode)
    level = _doctor(env)[1]["state dir"]["level"]
    assert level == ("fail" if mode & 0o066 else "ok")


def test_a_user_who_is_not_root_is_told_to_ask_root(fake_gpus: Any, tmp_path: Path) -> None:
    from userkit import B, berth_as, ensure_users

    ensure_users()
    env = _ready(fake_gpus, tmp_path)
    os.environ["BERTH_CONFIG"] = env["BERTH_CONFIG"]  # (berth_as runs with the test's env)
    try:
        out = berth_as(B, "admin", "doctor", "--json")
    finally:
        del os.environ["BERTH_CONFIG"]
    assert out.returncode in (1, 2), out.stderr
    checks = {c["check"]: c for c in json.loads(out.stdout)["checks"]}
    assert (
        checks["cgroups"]["level"] == "warn"
        and checks["cgroups"]["fix"] == "sudo berth admin doctor"
    )


def test_a_gpu_in_mig_mode_is_said(fake_gpus: Any, tmp_path: Path) -> None:
    env = _ready(fake_gpus, tmp_path)
    assert "gpu 0" not in _doctor(env)[1]
    fake_gpus.update(0, mig=["MIG-11111111-2222-3333-4444-555555555555"])
    checks = _doctor(env)[1]
    assert checks["gpu 0"]["level"] == "warn" and "MIG is enabled" in checks["gpu 0"]["said"]
