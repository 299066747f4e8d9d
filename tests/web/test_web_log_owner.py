"""A job's log on the dashboard is read by the daemon (root) only if it is a regular file of
the job's owner, opened without following a link (docs/web.md, "A stolen token"), as a user
meets it: their own job whose output names /etc/shadow, or their link to it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from userkit import B, ensure_users, passwd, request_as


def test_a_jobs_log_naming_a_file_not_its_owners_is_not_shown(web: Any) -> None:
    """docs/web.md: the daemon (root) reads a job's log only if it is a regular file of the
    job's owner, opened without following a link: a job whose output names /etc/shadow, or a
    link to it, shows nothing of it on its owner's page."""
    ensure_users()
    web.start(gpus=1)
    daemon = web.daemon
    os.chmod(daemon.sockdir, 0o755)
    os.chmod(daemon.socket, 0o666)
    theirs = Path(daemon.sockdir) / "b"
    theirs.mkdir()
    os.chown(theirs, passwd(B).pw_uid, passwd(B).pw_gid)
    link = theirs / "out.log"
    os.symlink("/etc/shadow", link)
    os.lchown(link, passwd(B).pw_uid, passwd(B).pw_gid)
    shadow = Path("/etc/shadow").read_bytes()
    b_token = web.token_for(passwd(B).pw_uid)
    for path in ("/etc/shadow", str(link)):
        spec = {"argv": ["true"], "env": {"PATH": "/usr/bin:/bin"}, "cwd": str(theirs),
                "stdout": path, "stderr": path}  # fmt: skip
        reply = request_as(B, daemon.socket, "submit", job=spec)
        if "ok" not in reply:  # (refused at submit: nothing to show, and nothing shown)
            continue
        job = reply["ok"]["job_id"]
        daemon.wait_done([job])
        for stream in ("out", "err"):
            status, _, body = web.get(f"/api/jobs/{job}/log?stream={stream}", token=b_token)
            assert status == 403 and shadow[:40] not in body, (path, status, body[:300])
    assert Path("/etc/shadow").read_bytes() == shadow  # (and the job wrote nothing there)
