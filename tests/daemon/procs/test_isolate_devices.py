"""[daemon] isolate_devices (issue 25.4, Slurm's ConstrainDevices): a job may open the device
files of its own GPUs only (berth/daemon/procs/devfilter.py). The GPUs' files are made here
with mknod (major 195, minors 0 and 1, as /dev/nvidia0 and /dev/nvidia1): without the driver,
opening one that is allowed fails with ENXIO, one that is denied with EPERM.

Where the machine cannot enforce it (not root, no cgroup v2, a kernel that refuses the device
program), the daemon must say so plainly at start, in its log and `berth admin log`, and the
job then opens both: the test asserts that instead, never skips."""

from __future__ import annotations

import errno
import json
import os
import stat
import sys
from typing import Any

ENFORCED = "[daemon] isolate_devices: enforced"
CANNOT = "[daemon] isolate_devices: cannot be enforced: "

# The job: try to open each device file given, write {name: "open" | "denied" | errno name}.
OPENER = """
import errno, json, os, sys
out = {}
for path in sys.argv[2:]:
    try:
        os.close(os.open(path, os.O_RDWR))
        out[os.path.basename(path)] = "open"
    except OSError as e:
        out[os.path.basename(path)] = "denied" if e.errno == errno.EPERM else "open"
with open(sys.argv[1], "w") as f:
    json.dump(out, f)
"""


def _configure(daemon: Any, text: str) -> None:
    path = os.path.join(daemon.fake.root, "config.toml")
    with open(path, "w") as f:
        f.write(text)
    daemon.env["BERTH_CONFIG"] = path


def _nodes(root: str) -> list[str]:
    """Two GPU device files, 195:0 and 195:1 (ENXIO on open: no driver behind them)."""
    paths = []
    for minor in (0, 1):
        path = os.path.join(root, f"nvidia{minor}")
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(195, minor))
        paths.append(path)
    return paths


def _opens(daemon: Any, gpu: int, nodes: list[str]) -> dict[str, str]:
    """What a job given GPU ``gpu`` could open of ``nodes``."""
    out = os.path.join(daemon.fake.root, f"opened-{gpu}.json")
    job = daemon.submit(sys.executable, "-c", OPENER, out, *nodes, gpu_ids=[gpu])
    assert daemon.wait_done([job])[job]["state"] == "COMPLETED", daemon.job(job)
    with open(out) as f:
        opened: dict[str, str] = json.load(f)
    return opened


def _log_text(daemon: Any) -> str:
    with open(daemon.log) as f:
        return f.read()


def test_a_job_opens_its_own_gpu_and_is_denied_the_other(daemon, tmp_path):
    nodes = _nodes(str(tmp_path))
    _configure(daemon, "[daemon]\nisolate_devices = true\n")
    daemon.fake.setup(n=2)
    daemon.start(gpus=None)
    note = daemon.call("status")["enforce"]["devices"]
    admin = daemon.berth("admin", "log")
    assert admin.returncode == 0 and admin.stdout.splitlines()[0] == note, admin
    assert note in _log_text(daemon)
    first = _opens(daemon, 0, nodes)
    second = _opens(daemon, 1, nodes)  # (the same supervisor, idle again: its filter changes)
    if note.startswith(ENFORCED):
        assert first == {"nvidia0": "open", "nvidia1": "denied"}
        assert second == {"nvidia0": "denied", "nvidia1": "open"}
    else:  # this machine cannot: the daemon said why, plainly, and nothing is denied
        assert note.startswith(CANNOT) and len(note) > len(CANNOT) + 10, note
        assert first == second == {"nvidia0": "open", "nvidia1": "open"}


def test_the_device_file_is_the_one_nvml_names_not_the_index(daemon, tmp_path):
    nodes = _nodes(str(tmp_path))
    _configure(daemon, "[daemon]\nisolate_devices = true\n")
    daemon.fake.setup(n=2)
    daemon.fake.update(0, minor=1)  # GPU 0 is /dev/nvidia1, GPU 1 is /dev/nvidia0
    daemon.fake.update(1, minor=0)
    daemon.start(gpus=None)
    note = daemon.call("status")["enforce"]["devices"]
    opened = _opens(daemon, 0, nodes)
    if note.startswith(ENFORCED):
        assert opened == {"nvidia0": "denied", "nvidia1": "open"}
    else:
        assert note.startswith(CANNOT), note


def test_without_the_setting_nothing_is_filtered_and_nothing_is_said(daemon, tmp_path):
    nodes = _nodes(str(tmp_path))
    daemon.fake.setup(n=2)
    daemon.start(gpus=None)
    assert daemon.call("status")["enforce"]["devices"] == ""
    assert _opens(daemon, 0, nodes) == {"nvidia0": "open", "nvidia1": "open"}
    said = [line for line in _log_text(daemon).splitlines() if " check " not in line]
    assert not [line for line in said if "isolate_devices" in line]  # (doctor's line aside)


def test_where_it_cannot_be_enforced_the_daemon_says_why_and_runs_jobs(daemon):
    # NVML cannot give GPU 1's minor number: which file is GPU 1's is unknown.
    _configure(daemon, "[daemon]\nisolate_devices = true\n")
    daemon.fake.setup(n=2)
    daemon.fake.inject(1, "nvmlDeviceGetMinorNumber", "NOT_SUPPORTED")
    daemon.start(gpus=None)
    note = daemon.call("status")["enforce"]["devices"]
    assert note.startswith(CANNOT), note
    if os.geteuid() == 0:  # (else: "the daemon is not root")
        assert "cgroup" in note or "minor number for GPU(s) 1" in note, note
    assert note in _log_text(daemon)
    job = daemon.submit(sys.executable, "-c", "pass", gpu_ids=[1])
    assert daemon.wait_done([job])[job]["state"] == "COMPLETED"


def test_required_refuses_to_start_where_it_cannot_be_enforced(daemon):
    _configure(daemon, '[daemon]\nisolate_devices = "required"\n')
    daemon.fake.setup(n=2)
    daemon.fake.inject(0, "nvmlDeviceGetMinorNumber", "NOT_SUPPORTED")
    out = daemon.berth("daemon", "--foreground", timeout=60)
    assert out.returncode != 0
    said = out.stdout + out.stderr
    assert CANNOT in said and 'isolate_devices = "required"' in said, said
    assert not os.path.exists(daemon.socket)


def test_a_bad_value_is_refused_naming_it(daemon):
    _configure(daemon, '[daemon]\nisolate_devices = "yes"\n')
    out = daemon.berth("daemon", "--foreground", timeout=60)
    assert out.returncode != 0
    assert "isolate_devices = 'yes'" in out.stderr and '"required"' in out.stderr, out.stderr


def test_the_device_program_allows_only_its_own_minors_of_major_195():
    """The program's jumps, read back: each own minor jumps to `allow`; the last four
    instructions are deny (r0 = 0; exit) and allow (r0 = 1; exit)."""
    from berth.daemon.procs.devfilter import program

    code = program([3, 1, 3])
    insns = [code[i : i + 8] for i in range(0, len(code), 8)]
    assert len(insns) == 7 + 2 + 4
    allow = len(insns) - 2

    def target(i: int) -> int:
        return i + 1 + int.from_bytes(insns[i][2:4], "little", signed=True)

    def imm(i: int) -> int:
        return int.from_bytes(insns[i][4:8], "little", signed=True)

    assert [imm(i) for i in (4, 5, 6)] == [2, 195, 254]  # char, major 195, minors <= 254
    assert all(target(i) == allow for i in (4, 5, 6, 7, 8))
    assert [imm(7), imm(8)] == [1, 3]
    assert (insns[-4][0], imm(len(insns) - 4), insns[-1][0]) == (0xB7, 0, 0x95)
    assert (insns[-2][0], imm(allow)) == (0xB7, 1)


def _opened_in(joins: list[str], nodes: list[str]) -> dict[str, str]:
    """What a child that joined ``joins`` (as a supervisor does) can open of ``nodes``."""
    from berth.daemon.supervisor import ingroup

    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            for i, path in enumerate(joins):
                ingroup.enter(path, main=i == 0)
            out = {}
            for node in nodes:
                try:
                    os.close(os.open(node, os.O_RDWR))
                    out[os.path.basename(node)] = "open"
                except OSError as e:
                    out[os.path.basename(node)] = "denied" if e.errno == errno.EPERM else "open"
            os.write(w, json.dumps(out).encode())
        finally:
            os._exit(0)
    os.close(w)
    os.waitpid(pid, 0)
    with os.fdopen(r) as f:
        return dict(json.loads(f.read()))


def test_on_cgroup_v1_the_devices_controller_denies_the_other_gpu(tmp_path):
    """Jobs in the v1 freezer hierarchy (a host without cgroup v2): the supervisor joins a
    cgroup of the v1 devices hierarchy too, whose devices.deny lists the other GPUs. Where
    this machine has no such hierarchy (or is not root), find says why instead."""
    from berth.daemon.procs import cgroup, devfilter

    nodes = _nodes(str(tmp_path))
    freezer = cgroup.mine(cgroup.FREEZER) if os.geteuid() == 0 else None
    if freezer is None:
        groups = None if os.geteuid() else cgroup.Cgroups(cgroup.FREEZER, "/nonexistent")
        _, why = devfilter.find(groups, {0: 0, 1: 1})
        assert why.startswith(CANNOT) and ("not root" in why or "not mounted" in why), why
        return
    root = os.path.join(freezer, f"berth-test-dev-{os.getpid()}")
    os.mkdir(root)
    groups = cgroup.Cgroups(cgroup.FREEZER, root)
    try:
        filt, why = devfilter.find(groups, {0: 0, 1: 1})
        if filt is None:
            assert why.startswith(CANNOT) and "v1" in why, why
            return
        assert isinstance(filt, devfilter.V1Filter) and why.startswith(ENFORCED), why
        slot = groups.make(1)
        assert slot is not None
        extra = filt.make(slot)
        assert extra is not None and extra != slot
        filt.apply(slot, [0])
        assert _opened_in([slot, extra], nodes) == {"nvidia0": "open", "nvidia1": "denied"}
        filt.apply(slot, [1])  # (the next attempt of the same supervisor)
        assert _opened_in([slot, extra], nodes) == {"nvidia0": "denied", "nvidia1": "open"}
        groups.remove(slot)
        filt.remove(slot)
        assert not os.path.exists(extra)
        filt.sweep()
        assert not os.path.exists(filt.root)
    finally:
        os.rmdir(root)
