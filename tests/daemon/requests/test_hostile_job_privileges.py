"""docs/daemon.md, "Who may do what": a daemon running as root runs each job as its submitter,
"initgroups, setgid and setuid (real, effective and saved: no way back, checked)". The job
itself tries the way back: its saved ids, its capabilities, `setuid(0)`, `setgid(0)`,
`setgroups`, and every descriptor it inherited (none of root's may be writable: its claim is
read-only, its logs are its own).

Needs root (to act as the other users), as CI runs the suite.
"""

from __future__ import annotations

import json
import os
import pwd
from typing import Any

import pytest
from test_system_mode import System
from userkit import A

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as other users")


@pytest.fixture
def system(daemon: Any) -> System:
    return System(daemon)


PROBE = r"""
import json, os
out = {"res": [list(os.getresuid()), list(os.getresgid())], "caps": {}, "tries": {}, "fds": {}}
for line in open("/proc/self/status"):
    key, _, value = line.partition(":")
    if key in ("CapPrm", "CapEff", "CapAmb"):
        out["caps"][key] = int(value, 16)
for name, act in (("setuid", lambda: os.setuid(0)), ("seteuid", lambda: os.seteuid(0)),
                  ("setgid", lambda: os.setgid(0)), ("setgroups", lambda: os.setgroups([0]))):
    try:
        act()
        out["tries"][name] = "done"
    except OSError as e:
        out["tries"][name] = e.errno
for fd in sorted(int(n) for n in os.listdir("/proc/self/fd")):
    try:
        target = os.readlink(f"/proc/self/fd/{fd}")
        flags = int(open(f"/proc/self/fdinfo/{fd}").read().split("flags:")[1].split()[0], 8)
        owner = os.fstat(fd).st_uid
    except OSError:
        continue  # (the listing's own descriptor)
    out["fds"][fd] = [target, flags & 3, owner]
print(json.dumps(out))
"""


def test_a_job_run_as_its_user_has_no_way_back_to_root(system: System) -> None:
    system.start()
    job = system.submit(A, "-g", "1", "--wait", "--", "/usr/bin/python3", "-c", PROBE)
    row = system.rig.wait_done([job])[job]
    assert row["state"] == "COMPLETED", system.rig.job(job)
    with open(system.rig.job(job)["stdout"]) as f:
        got: dict[str, Any] = json.loads(f.read().splitlines()[-1])
    pw = pwd.getpwnam(A)
    assert got["res"] == [[pw.pw_uid] * 3, [pw.pw_gid] * 3]  # real, effective and saved
    assert got["caps"] == {"CapPrm": 0, "CapEff": 0, "CapAmb": 0}
    assert set(got["tries"].values()) == {1}, got["tries"]  # EPERM, each of them
    roots = [t for t, _, owner in got["fds"].values() if owner == 0]
    assert any("/c.GPU-" in t for t in roots), got["fds"]  # its claim, root's, is among them
    for fd, (target, access, owner) in got["fds"].items():
        if owner == pw.pw_uid:
            continue  # (its own logs, its terminal, its pipes)
        assert access == os.O_RDONLY, (fd, target, access, owner)  # root's: read-only
