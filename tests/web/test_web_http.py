"""The dashboard's HTTP layer against a hostile local user: size and count limits, Host
checks, no anonymous writes, no anonymous reads when configured so; and the daemon's own
socket keeps answering whatever the web port suffers."""

from __future__ import annotations

import asyncio
import json
import socket
from typing import Any

import pytest
from helpers import wait_until

from berth.web import httpio


def status_of(reply: bytes) -> int:
    return int(reply.split(b" ", 2)[1])


def host(web: Any) -> bytes:
    return f"Host: 127.0.0.1:{web.port}\r\n".encode()


def test_limits_refuse_with_the_status_that_says_why(web: Any) -> None:
    web.start(gpus=1)
    h = host(web)
    big = b"GET / HTTP/1.1\r\n" + h + b"X-Pad: " + b"a" * 9000 + b"\r\n\r\n"
    assert status_of(web.raw(big)) == 431
    many = b"GET / HTTP/1.1\r\n" + h + b"".join(b"X-%d: 1\r\n" % i for i in range(70)) + b"\r\n"
    assert status_of(web.raw(many)) == 431
    assert status_of(web.raw(b"GARBAGE\r\n\r\n")) == 400
    assert status_of(web.raw(b"GET / HTTP/2.0\r\n" + h + b"\r\n")) == 400
    assert status_of(web.raw(b"GET http://x/ HTTP/1.1\r\n" + h + b"\r\n")) == 400
    post = b"POST /api/jobs/1/cancel HTTP/1.1\r\n" + h
    assert status_of(web.raw(post + b"\r\n")) == 401  # no body, no length: fine (curl -X POST)
    assert status_of(web.raw(post + b"Content-Length: 99999\r\n\r\n")) == 413
    assert status_of(web.raw(post + b"Transfer-Encoding: chunked\r\n\r\n")) == 501
    two = b"Content-Length: 0\r\nContent-Length: 0\r\n\r\n"
    assert status_of(web.raw(post + two)) == 400
    assert status_of(web.raw(b"DELETE / HTTP/1.1\r\n" + h + b"\r\n")) == 405
    assert web.get("/nothing")[0] == 404
    assert web.get("/api/history?span=soon")[0] == 400
    assert web.get("/api/history?" + "&".join(f"f{i}=1" for i in range(30)))[0] == 400
    assert web.json("/api/history?span=60")["span"] == 3600  # (spans are few: cached)
    # A page elsewhere that rebinds its DNS name to 127.0.0.1 names itself in Host: refused.
    evil = b"GET /api/state HTTP/1.1\r\nHost: evil.example:%d\r\n\r\n" % web.port
    assert status_of(web.raw(evil)) == 421
    assert status_of(web.raw(b"GET /api/state HTTP/1.1\r\nHost: 127.0.0.1:1\r\n\r\n")) == 421
    status, headers, _ = web.get("/")
    assert status == 200 and "script-src 'self'" in headers["content-security-policy"]
    assert headers["x-frame-options"] == "DENY" and headers["connection"] == "close"


def test_the_global_stream_cap_answers_503_and_the_socket_still_serves(web: Any) -> None:
    """Below the global caps each user has a share (tests/web/test_web_caps.py); users who
    each keep to theirs still meet the global cap, which answers 503 and says why."""
    from berth.web import caps

    web.start(gpus=1)
    users = range(caps.MAX_STREAMS // caps.STREAMS_PER_USER)
    tokens = [web.token_for(5000 + u) for u in users]
    live = []
    try:
        for token in tokens:
            for _ in range(caps.STREAMS_PER_USER):
                s = socket.create_connection((web.host, web.port), timeout=10)
                s.sendall(b"GET /api/events HTTP/1.1\r\n" + host(web)
                          + f"Authorization: Bearer {token}\r\n\r\n".encode())  # fmt: skip
                live.append(s)
                # (read before the next: all 32 come from one kernel uid, whose connections
                # not read yet have a share of 16, caps.PENDING_PER_OWNER)
                assert s.recv(12) == b"HTTP/1.1 200"
        status, _, body = web.get("/api/events", token=web.token_for(6000))
        assert status == 503, body
        assert f"more than {caps.MAX_STREAMS} live viewers" in json.loads(body)["error"]["message"]
        assert web.get("/")[0] == 200  # (connections are not all streams)
        assert web.daemon.call("ping")["pid"]  # the UNIX socket is not slowed
    finally:
        for s in live:
            s.close()

    def served() -> bool:
        with socket.create_connection((web.host, web.port), timeout=10) as s:
            s.sendall(b"GET /api/events HTTP/1.1\r\n" + host(web) + b"\r\n")
            return s.recv(12) == b"HTTP/1.1 200"

    wait_until(served, timeout=10, message="the streams given back")


def test_a_slow_head_times_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(httpio, "HEAD_TIMEOUT", 0.2)

    async def slow() -> int:
        reader = asyncio.StreamReader(limit=httpio.MAX_HEAD)
        reader.feed_data(b"GET / HTTP/1.1\r\nHost: 127.0.0.1:1\r\n")  # and nothing more
        try:
            await httpio.read_request(reader)
        except httpio.HttpError as e:
            return e.status
        return 200

    assert asyncio.run(slow()) == 408


def test_no_write_without_a_token_and_origin_checked(web: Any) -> None:
    web.start(gpus=1)
    job = web.daemon.submit("true", hold=True)
    status, headers, body = web.post(f"/api/jobs/{job}/cancel")
    assert status == 401 and headers["www-authenticate"].startswith("Bearer")
    assert "berth web-token" in json.loads(body)["error"]["message"]
    assert web.post(f"/api/jobs/{job}/cancel", token="berth2.0.1.0123456789abcdef")[0] == 401
    assert (
        web.post(
            f"/api/jobs/{job}/cancel", token=web.token[:-1] + ("0" if web.token[-1] != "0" else "1")
        )[0]
        == 401
    )
    other_site = {"Origin": "http://evil.example"}
    assert web.post(f"/api/jobs/{job}/cancel", token=web.token, headers=other_site)[0] == 403
    assert web.post(f"/api/jobs/{job}/cancel", token=web.token_for(4242))[0] == 403
    assert web.get(f"/api/jobs/{job}/log")[0] == 401
    assert web.get(f"/api/jobs/{job}/log", token=web.token_for(4242))[0] == 403
    assert web.daemon.job(job)["state"] == "PENDING"  # nothing above changed anything
    status, _, body = web.post(f"/api/jobs/{job}/release", token=web.token)
    assert status == 200 and json.loads(body)["result"]["job_ids"] == [job]
    assert web.post(f"/api/jobs/{job}/hold", token=web.token)[0] in (200, 409)
    status, _, body = web.post("/api/jobs/999/cancel", token=web.token)
    assert status == 404 and "no job 999" in json.loads(body)["error"]["message"]


def test_anonymous_reads_can_be_turned_off(web: Any) -> None:
    web.start("--http-no-anonymous", gpus=1)
    assert web.get("/")[0] == 200  # the page itself (to sign in)
    for path in ("/api/state", "/api/history", "/api/events", "/metrics"):
        assert web.get(path)[0] == 401, path
    assert web.json("/api/state", token=web.token)["gpus"][0]["index"] == 0
    assert web.get("/metrics", token=web.token)[0] == 200
    assert web.json("/api/whoami", token=web.token)["user"] == "root"


def test_the_web_token_helps_curl_example_works(web: Any) -> None:
    """`berth web-token --help`'s example: a POST with the token and no body (curl -X POST
    sends no Content-Length): it was refused with 411 (issue 27.11)."""
    web.start(gpus=1)
    job = web.daemon.submit("true", hold=True)
    h = host(web)
    post = (f"POST /api/jobs/{job}/cancel HTTP/1.1\r\n".encode() + h
            + f"Authorization: Bearer {web.token}\r\n\r\n".encode())  # fmt: skip
    assert status_of(web.raw(post)) == 200
    assert web.daemon.job(job)["state"] == "CANCELLED"
