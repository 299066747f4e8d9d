"""Tokens: made only by the daemon, for the caller of `berth web-token`; a secret others could
read is refused; a job's log is read only if it is a regular file of the job's owner."""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import wait_until

from berth.errors import BerthError
from berth.web import auth, httpio
from berth.web.routes import read_log


def test_tokens_are_per_uid_and_per_daemon(tmp_path: Path) -> None:
    secret = auth.load_secret(str(tmp_path))
    assert stat.S_IMODE(os.stat(tmp_path / auth.SECRET_FILE).st_mode) == 0o600
    assert auth.load_secret(str(tmp_path)) == secret  # made once, then kept
    token = auth.make_token(secret, 1000)
    assert auth.check_token(secret, token) == 1000
    assert auth.check_token(secret, token.replace(".1000.", ".1001.")) is None
    assert auth.check_token(secret, token[:-1] + ("0" if token[-1] != "0" else "1")) is None
    assert auth.check_token(os.urandom(32), token) is None  # another daemon's
    for junk in ("", "berth1", "berth1.x.y", "berth2.1000", "Bearer " + token, "berth2.-1.1.aa",
                 "berth2.\u00b2.1.aa", "berth2.\u0661.1.aa", "berth2.1000.1.\udcff"):  # fmt: skip
        assert auth.check_token(secret, junk) is None
    assert auth.bearer({"authorization": f"Bearer {token}"}) == token
    assert auth.bearer({"authorization": f"Basic {token}"}) is None


def test_a_token_expires_and_can_be_revoked(tmp_path: Path) -> None:
    secret = auth.load_secret(str(tmp_path))
    made = 1_700_000_000_000  # (Unix ms)
    token = auth.make_token(secret, 1000, made)
    at = made / 1000
    assert auth.check_token(secret, token, ttl=3600, now=at + 3599) == 1000
    assert auth.check_token(secret, token, ttl=3600, now=at + 3601) is None  # expired
    assert auth.check_token(secret, token, ttl=3600, now=at - 3600) is None  # from the future
    assert auth.check_token(secret, token, 3600, {1000: made}, now=at + 1) is None  # revoked
    assert auth.check_token(secret, token, 3600, {1000: made - 1}, now=at + 1) == 1000
    assert auth.check_token(secret, token, 3600, {1001: made}, now=at + 1) == 1000
    forged = token.replace(f".{made}.", f".{made + 3_600_000}.")  # a later time, same MAC
    assert auth.check_token(secret, forged, 3600, now=at + 3601) is None
    tokens = auth.Tokens(str(tmp_path))
    mine, theirs = tokens.make(1000), tokens.make(1001)
    tokens.revoke(1000)
    assert tokens.check(mine) is None and tokens.check(theirs) == 1001
    assert tokens.check(tokens.make(1000)) == 1000  # a new one, made after the revocation
    again = auth.Tokens(str(tmp_path))  # (another daemon on this state: it is kept)
    assert again.check(mine) is None and again.check(theirs) == 1001
    assert stat.S_IMODE(os.stat(tmp_path / auth.REVOKED_FILE).st_mode) == 0o600


def test_the_dashboard_refuses_expired_and_revoked_tokens(web: Any) -> None:
    web.start(gpus=1)
    assert web.get("/api/whoami", token=web.token)[0] == 200
    secret = auth.load_secret(web.daemon.state_dir)
    old = int((time.time() - auth.DEFAULT_TTL - 60) * 1000)
    status, _, body = web.get("/api/whoami", token=auth.make_token(secret, 0, old))
    assert status == 401 and b"expired" in body
    other = web.token_for(4242)  # another user's: untouched by root's revocation
    r = web.daemon.berth("web-token", "--revoke")
    assert r.returncode == 0 and "revoked every dashboard token of root" in r.stderr, r.stderr
    assert web.get("/api/whoami", token=web.token)[0] == 401
    assert web.get("/api/whoami", token=r.stdout.strip())[0] == 200
    assert web.get("/api/whoami", token=other)[0] == 200


def test_a_token_with_any_characters_is_refused_cleanly(web: Any) -> None:
    """A token with a non-ASCII digit gave HTTP 500 and a traceback (issue 20.16): 401."""
    web.start()
    for token in ("berth2.\u00b2.1.aa", "berth2.0.1.\u00e9", "berth2.\u00b9\u00b3.1.aa"):
        header = f"Bearer {token}"  # (sent as latin-1 bytes, read back as latin-1)
        status, _, body = web.get("/api/state", headers={"Authorization": header})
        assert status == 401 and b"not valid" in body, (token, status, body)
    with open(web.daemon.log) as f:
        assert "Traceback" not in f.read()


def test_a_secret_others_may_read_is_refused(tmp_path: Path) -> None:
    path = tmp_path / auth.SECRET_FILE
    path.write_bytes(os.urandom(32))
    os.chmod(path, 0o644)
    with pytest.raises(BerthError, match="mode 0600"):
        auth.load_secret(str(tmp_path))
    os.chmod(path, 0o600)
    path.write_bytes(b"short")
    with pytest.raises(BerthError, match="damaged"):
        auth.load_secret(str(tmp_path))
    path.unlink()
    os.symlink("/etc/hostname", path)
    with pytest.raises(BerthError, match="cannot read"):
        auth.load_secret(str(tmp_path))


def test_web_token_prints_the_callers_token_and_link(web: Any) -> None:
    web.start(gpus=1)
    r = web.daemon.berth("web-token")
    assert r.returncode == 0, r.stderr
    token = r.stdout.strip()
    assert token.startswith("berth2.0.")  # (each one made when asked for: it expires)
    data = json.loads(web.daemon.berth("web-token", "--json").stdout)
    assert data["user"] == "root" and data["login_url"] == f"{web.url}#token={data['token']}"
    assert time.time() < data["expires"] <= time.time() + auth.DEFAULT_TTL
    assert web.json("/api/whoami", token=token) == {"user": "root", "uid": 0, "admin": True}


def test_bad_http_address_is_refused_before_the_daemon_starts(web: Any) -> None:
    daemon = web.daemon
    daemon.fake.setup(n=1)
    r = daemon.berth("daemon", "--foreground", "--http", "10.1.2.3:8765")
    assert r.returncode != 0 and "not a loopback address" in r.stderr and "10.1.2.3" in r.stderr
    r = daemon.berth("daemon", "--foreground", "--http", "127.0.0.1:99999")
    assert r.returncode != 0 and "99999" in r.stderr
    r = daemon.berth("daemon", "--foreground", "--http", "gpu-box:8765")
    assert r.returncode != 0 and "not an IP address" in r.stderr


def test_a_port_held_by_another_keeps_only_the_dashboard_down(web: Any) -> None:
    """Another process holds the dashboard's port at start: the queue runs anyway, `berth
    status` and the log say the dashboard is unavailable, and the dashboard comes up once the
    port is free (then /metrics says how long it waited)."""
    import socket

    daemon = web.daemon
    daemon.fake.setup(n=1)
    taken = socket.create_server(("127.0.0.1", 0))
    port = taken.getsockname()[1]
    try:
        daemon.start("--http", f"127.0.0.1:{port}", "--poll-interval", "0.2")
        job = daemon.submit("true")
        assert daemon.wait_done([job])[job]["state"] == "COMPLETED"  # the queue serves
        r = daemon.berth("status")
        assert r.returncode == 0, r.stderr
        assert f"dashboard unavailable: cannot serve the dashboard on 127.0.0.1:{port}" in r.stdout
        reply = daemon.call("web_token")
        assert reply["url"] is None and "dashboard unavailable" in reply["unavailable"]
    finally:
        taken.close()
    url = f"http://127.0.0.1:{port}/"
    wait_until(lambda: daemon.call("web_token")["url"] == url, timeout=20, message="bound")
    web.url, web.port = url, port
    status, _, body = web.get("/metrics")
    assert status == 200 and b"berth_dashboard_port_waited_seconds " in body
    assert "dashboard unavailable" not in daemon.berth("status").stdout
    with open(daemon.log) as f:
        assert "the queue runs without it" in f.read()


def test_the_system_daemons_default_port_is_one_only_root_may_bind() -> None:
    from berth import units

    assert units.default_http_port(system=True) < 1024
    assert units.parse_bind("127.0.0.1", default=units.default_http_port(True)) == (
        "127.0.0.1", 865)  # fmt: skip
    assert units.default_http_port(system=False) == units.HTTP_PORT


def test_a_log_is_read_only_if_it_is_the_owners_regular_file(tmp_path: Path) -> None:
    log = tmp_path / "job.out"
    log.write_text("".join(f"line {i}\n" for i in range(5000)))
    uid = os.getuid()
    tail = read_log(str(log), uid, None)
    assert tail["text"].startswith("line ") and tail["text"].endswith("line 4999\n")
    assert tail["offset"] == log.stat().st_size and len(tail["text"]) <= 16384
    with open(log, "a") as f:
        f.write("new line\n")
    assert read_log(str(log), uid, tail["offset"])["text"] == "new line\n"
    with pytest.raises(httpio.HttpError) as e:
        read_log(str(log), uid + 4242, None)  # not the owner's file (e.g. /etc/shadow)
    assert e.value.status == 403
    link = tmp_path / "link.out"
    os.symlink(log, link)
    with pytest.raises(httpio.HttpError):
        read_log(str(link), uid, None)  # a link is not followed
    fifo = tmp_path / "fifo.out"
    os.mkfifo(fifo)
    with pytest.raises(httpio.HttpError):
        read_log(str(fifo), uid, None)  # refused at once, not blocking on a writer
    assert read_log(str(tmp_path / "none.out"), uid, None)["missing"] is True
