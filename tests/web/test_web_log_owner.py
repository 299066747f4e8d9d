"""A job's log on the dashboard is read by the daemon (root) only if it is a regular file of
the job's owner, opened without following a link (docs/web.md, "A stolen token"), as a user
meets it: their own job whose output names /etc/shadow, or their link to it; and to an admin
of the group (not root) only a log they could read themselves."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from userkit import ADMINS, A, B, C, ensure_users, passwd, request_as


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


def test_an_admin_groups_member_reads_on_the_page_only_the_logs_they_could_read(web: Any) -> None:
    """docs/admin.md: reading a log the user's umask keeps private needs root itself, not only
    the admin group (`sudo berth logs`): the daemon reads as root, so the page must not read
    for a member of the group what they could not read themselves."""
    ensure_users()
    config = web.daemon.fake.root / "admins.toml"
    config.write_text(f'[claims]\nadmin_group = "{ADMINS}"\n')
    web.daemon.env["BERTH_CONFIG"] = str(config)
    web.start(gpus=1)
    daemon = web.daemon
    os.chmod(daemon.sockdir, 0o755)
    os.chmod(daemon.socket, 0o666)
    theirs = Path(daemon.sockdir) / "a"
    theirs.mkdir()
    os.chown(theirs, passwd(A).pw_uid, passwd(A).pw_gid)
    theirs.chmod(0o755)
    ids = {}
    for umask in (0o077, 0o022):
        spec = {"argv": ["sh", "-c", f"echo secret-{umask:o}"], "env": {"PATH": "/usr/bin:/bin"},
                "cwd": str(theirs), "stdout": str(theirs / f"{umask:o}.out"), "umask": umask}  # fmt: skip
        ids[umask] = request_as(A, daemon.socket, "submit", job=spec)["ok"]["job_id"]
    daemon.wait_done(list(ids.values()))
    assert (theirs / "77.out").stat().st_mode & 0o777 == 0o600
    admin, owner = web.token_for(passwd(C).pw_uid), web.token_for(passwd(A).pw_uid)
    assert web.json("/api/whoami", token=admin)["admin"] is True
    status, _, body = web.get(f"/api/jobs/{ids[0o077]}/log", token=admin)
    assert status == 403 and b"secret" not in body and b"sudo berth logs" in body, body
    for token in (owner, web.token):  # its owner, root
        status, _, body = web.get(f"/api/jobs/{ids[0o077]}/log", token=token)
        assert status == 200 and b"secret-77" in body, body
    status, _, body = web.get(f"/api/jobs/{ids[0o022]}/log", token=admin)  # (others may read)
    assert status == 200 and b"secret-22" in body, body
