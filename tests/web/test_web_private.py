"""A daemon with ``--private`` hides others' commands and paths from non-admins (README,
docs/daemon.md): its dashboard too, for an anonymous viewer and another user's token alike,
in every way it shows them (the state, its live stream, /metrics, a job's page and log)."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

from helpers import wait_until
from userkit import A, B, ensure_users, passwd, request_as

SECRET = "hunter2-private-dashboard"


def _first_event(web: Any, token: str | None) -> bytes:
    """The first state the live stream (``/api/events``) sends."""
    auth = f"Authorization: Bearer {token}\r\n".encode() if token else b""
    with socket.create_connection((web.host, web.port), timeout=10) as s:
        s.sendall(b"GET /api/events HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n" % web.port + auth + b"\r\n")
        got = b""
        while b"\ndata:" not in got or not got.rstrip(b" ").endswith(b"\n\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
        return got


def test_a_private_daemons_dashboard_shows_no_others_command_or_path(web: Any) -> None:
    ensure_users()
    web.start("--private", gpus=2)
    daemon = web.daemon
    os.chmod(daemon.sockdir, 0o755)
    os.chmod(daemon.socket, 0o666)
    theirs = Path(daemon.sockdir) / f"dir-{SECRET}"  # (B's directory, its name a secret)
    theirs.mkdir()
    os.chown(theirs, passwd(B).pw_uid, passwd(B).pw_gid)
    spec = {"argv": ["sh", "-c", "sleep 600", f"--api-key={SECRET}"],
            "env": {"PATH": "/usr/bin:/bin"}, "cwd": str(theirs),
            "stdout": str(theirs / "%j.out")}  # fmt: skip
    running = request_as(B, daemon.socket, "submit", job=spec)["ok"]["job_id"]
    pending = request_as(B, daemon.socket, "submit", job={**spec, "gpus": 2})["ok"]["job_id"]
    wait_until(lambda: daemon.job(running)["state"] == "RUNNING", timeout=20)
    # A process outside berth (root's, on GPU 1) whose command says the secret too.
    daemon.fake.spawn_workload(visible="1", args=("--record", f"/tmp/{SECRET}.jsonl"))

    def shown() -> bool:
        g = {x["index"]: x for x in web.json("/api/state")["gpus"]}
        return any(h["kind"] == "outside" for h in g[1]["holders"]) and any(
            h["kind"] == "job" for h in g[0]["holders"]
        )

    wait_until(shown, timeout=20, message="the job and the outside process on the page")
    b_token, a_token = web.token_for(passwd(B).pw_uid), web.token_for(passwd(A).pw_uid)
    for viewer in (None, a_token):  # anonymous, and another user signed in
        for path in ("/api/state", "/metrics", "/api/history"):
            status, _, body = web.get(path, token=viewer)
            assert status == 200 and SECRET.encode() not in body, (path, body[:2000])
        event = _first_event(web, viewer)
        assert b'"gpus"' in event and SECRET.encode() not in event, event[:300]
    for job in (running, pending):
        for path in (f"/api/jobs/{job}", f"/api/jobs/{job}/log"):
            assert web.get(path)[0] == 401
            assert web.get(path, token=a_token)[0] == 403
    # The owner (and an admin) sees it whole: what was hidden is there to hide.
    status, _, body = web.get(f"/api/jobs/{running}", token=b_token)
    assert status == 200 and SECRET.encode() in body
    status, _, body = web.get(f"/api/jobs/{pending}", token=web.token)
    assert status == 200 and SECRET.encode() in body
