"""The Usage tab's figures as each viewer may see them (docs/web.md, "Who may see and do what"):
anonymous, the totals only; signed in, one's own rows and the totals. Rows are the users'
names: a Unix user named ``anonymous`` is a user like any other, not the anonymous viewers'
share (whose rows every viewer without a token would otherwise read)."""

from __future__ import annotations

import json
import os
from typing import Any

from helpers import wait_until
from userkit import A, B, ensure_user, ensure_users, passwd, request_as

NAMED_ANONYMOUS = "anonymous"  # a Unix user of that name (made if missing, as userkit does)


def _names(report: dict[str, Any]) -> set[str]:
    """Every user a report's rows name (its users, per-day and project rows)."""
    rows = [*report["users"], *report["daily"], *report["projects"]]
    return {str(r["user"]) for r in rows if r.get("user") is not None}


def test_each_viewer_sees_the_totals_and_only_their_own_rows(web: Any) -> None:
    ensure_users()
    ensure_user(NAMED_ANONYMOUS)
    web.start(gpus=2)
    daemon = web.daemon
    os.chmod(daemon.sockdir, 0o755)
    os.chmod(daemon.socket, 0o666)
    spec = {"argv": ["sleep", "0.3"], "env": {"PATH": "/usr/bin:/bin"}, "cwd": "/",
            "stdout": "/dev/null"}  # fmt: skip
    ids = [request_as(u, daemon.socket, "submit", job=spec)["ok"]["job_id"]
           for u in (A, B, NAMED_ANONYMOUS)]  # fmt: skip
    daemon.wait_done(ids)
    everyone = {A, B, NAMED_ANONYMOUS}

    def full() -> dict[str, Any] | None:  # (root's view: every user's rows, once all are in)
        status, _, body = web.get("/api/usage", token=web.token)
        report: dict[str, Any] = json.loads(body)
        return report if status == 200 and everyone <= _names(report) else None

    total = wait_until(full, timeout=30, message="every user's usage")["totals"]["gpu_hours"]
    anon = json.loads(web.get("/api/usage")[2])
    assert anon["totals"]["gpu_hours"] == total and _names(anon) == set(), anon
    assert anon["idle"] == [], anon
    for user in (A, NAMED_ANONYMOUS):
        status, _, body = web.get("/api/usage", token=web.token_for(passwd(user).pw_uid))
        mine = json.loads(body)
        assert status == 200 and _names(mine) == {user}, (user, mine)
        assert mine["totals"]["gpu_hours"] == total
