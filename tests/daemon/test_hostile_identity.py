"""Local users against the system daemon's idea of who they are and what is theirs (issue 20:
identity and claims). A pid is never an identity (invariant 7): who calls is the socket's
uid at connect time, group membership comes from the user database, and a process is
signalled only when it is proven to be the job's.

The tests that force a pid to be reused (``/proc/sys/kernel/ns_last_pid``) live in this one
module, which pytest runs serially. Needs root (to create the users and run as them), as CI
runs the suite.
"""

from __future__ import annotations

import grp
import os
import pwd
from typing import Any

import pytest
from test_system_mode import System
from userrun import ADMINS, B, ensure_users

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as other users")


@pytest.fixture
def system(daemon: Any) -> System:
    ensure_users()
    return System(daemon)


def _forked_as(user: str, groups: list[int], fn: Any) -> Any:
    """``fn()`` in a child root forks that keeps ``groups`` as its supplementary groups
    and then becomes ``user``: its /proc status shows groups the user database does not give
    the user."""
    import json

    import berth.client  # noqa: F401  (imported before the switch: see userrun)

    pw = pwd.getpwnam(user)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        try:
            os.close(r)
            os.setgroups(groups)
            os.setgid(pw.pw_gid)
            os.setuid(pw.pw_uid)
            out = fn()
        except BaseException as e:
            out = {"error": f"{type(e).__name__}: {e}"}
        os.write(w, json.dumps(out).encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        data = f.read()
    os.waitpid(pid, 0)
    return json.loads(data)


def test_groups_a_process_carries_do_not_make_its_user_an_admin(system: System) -> None:
    """B is not in the admin group. A process of B's whose supplementary groups include it
    (root kept them across setuid, or B's membership was revoked since login) is B, no more:
    before issue 20 the daemon read them from /proc/PID/status and let it pause GPUs."""
    system.start()
    admin_gid = grp.getgrnam(ADMINS).gr_gid
    assert B not in grp.getgrnam(ADMINS).gr_mem
    sock = system.sock

    def pause() -> Any:
        from berth.client import Client, DaemonError

        try:
            with Client(sock) as c:
                return {"ok": c.call("pause", gpus=["0"])}
        except DaemonError as e:
            return {"code": e.code, "message": str(e)}

    got = _forked_as(B, [admin_gid], pause)
    assert got.get("code") == "NOT_OWNER" and "may not pause GPUs" in got["message"], got
