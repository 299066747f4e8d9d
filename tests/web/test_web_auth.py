"""Tokens: made only by the daemon, for the caller of `berth web-token`; a secret others could
read is refused; a job's log is read only if it is a regular file of the job's owner."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from berth.errors import BerthError
from berth.web import auth, wire
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
    for junk in ("", "berth1", "berth1.x.y", "berth1.1000", "Bearer " + token, "berth1.-1.aa",
                 "berth1.\u00b2.aa", "berth1.\u0661.aa", "berth1.1000.\udcff"):  # fmt: skip
        assert auth.check_token(secret, junk) is None
    assert auth.bearer({"authorization": f"Bearer {token}"}) == token
    assert auth.bearer({"authorization": f"Basic {token}"}) is None


def test_a_token_with_any_characters_is_refused_cleanly(web: Any) -> None:
    """A token with a non-ASCII digit gave HTTP 500 and a traceback (issue 20.16): 401."""
    web.start()
    for token in ("berth1.\u00b2.aa", "berth1.0.\u00e9", "berth1.\u00b9\u00b3.aa"):
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
    assert token == web.token and token.startswith("berth1.0.")
    data = json.loads(web.daemon.berth("web-token", "--json").stdout)
    assert data["user"] == "root" and data["login_url"] == f"{web.url}#token={token}"
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


def test_the_port_in_use_fails_the_start(web: Any) -> None:
    import socket

    daemon = web.daemon

    daemon.fake.setup(n=1)
    taken = socket.create_server(("127.0.0.1", 0))
    try:
        port = taken.getsockname()[1]
        r = daemon.berth("daemon", "--foreground", "--http", f"127.0.0.1:{port}", timeout=30)
        assert r.returncode != 0 and f"cannot serve the dashboard on 127.0.0.1:{port}" in r.stderr
    finally:
        taken.close()


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
    with pytest.raises(wire.HttpError) as e:
        read_log(str(log), uid + 4242, None)  # not the owner's file (e.g. /etc/shadow)
    assert e.value.status == 403
    link = tmp_path / "link.out"
    os.symlink(log, link)
    with pytest.raises(wire.HttpError):
        read_log(str(link), uid, None)  # a link is not followed
    fifo = tmp_path / "fifo.out"
    os.mkfifo(fifo)
    with pytest.raises(wire.HttpError):
        read_log(str(fifo), uid, None)  # refused at once, not blocking on a writer
    assert read_log(str(tmp_path / "none.out"), uid, None)["missing"] is True
