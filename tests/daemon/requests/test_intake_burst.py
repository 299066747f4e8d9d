"""A burst of pipelined submits with the spec the CLI sends (issue 35: the whole environment,
``--export ALL``): what the daemon does once per burst, not once per submit. The daemon's
socket layer and intake run in the test's process (tests/daemon/enginekit.py's engine, the
real :class:`~berth.daemon.requests.server.Server`, a writer thread committing), the client is
a plain socket in a thread, so what the daemon does can be counted:

- the answers of one commit go out in one write (they went out one write each);
- the user's environment is decoded once and encoded once, not once a submit (to read the
  request; for the job's size);
- every answer still says its job, in order, and each job is durable before it.
"""

from __future__ import annotations

import asyncio
import os
import socket
import sqlite3
import struct
import threading
from pathlib import Path
from typing import Any

import pytest
from enginekit import EngineRig

from berth.daemon.engine.front import Front
from berth.daemon.requests.server import Server
from berth.wire import cjson, protocol

N = 600  # submits in the burst
MARK = "burst-" + "m" * 40  # a variable's value only the environment has


def _frame(msg: dict[str, Any]) -> bytes:
    return protocol.encode(msg)


def _client(path: str, frames: bytes, count: int) -> list[dict[str, Any]]:
    """Send ``frames`` (in a thread of its own, as fast as the daemon reads), read ``count``
    answers."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    s.settimeout(120)
    sender = threading.Thread(target=s.sendall, args=(frames,), daemon=True)
    sender.start()
    answers = []
    buf = b""
    while len(answers) < count:
        while len(buf) < 4 or len(buf) < 4 + struct.unpack(">I", buf[:4])[0]:
            data = s.recv(1 << 16)
            assert data, f"the daemon closed the connection after {len(answers)} answers"
            buf += data
        n = struct.unpack(">I", buf[:4])[0]
        answers.append(cjson.loads(buf[4 : 4 + n]))
        buf = buf[4 + n :]
    sender.join(60)
    s.close()
    return answers


def test_a_burst_of_cli_submits_is_answered_per_commit_and_its_environment_encoded_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = {**os.environ, "BERTH_BURST": MARK}  # (the CLI's --export ALL: ~1-2 KB)
    job = {"argv": ["true"], "env": env, "cwd": str(tmp_path), "hold": True, "umask": 0o22}
    frames = _frame({"type": "hello", "version": protocol.PROTOCOL_VERSION})
    frames += b"".join(_frame({"type": "submit", "job": job}) for _ in range(N))

    writes = [0]
    real_write = asyncio.StreamWriter.write

    def write(self: asyncio.StreamWriter, data: Any) -> None:
        writes[0] += 1
        real_write(self, data)

    encoded = [0]
    real_dumps = cjson.dumps

    def dumps(obj: object) -> str:
        text = real_dumps(obj)
        if MARK in text:
            encoded[0] += 1
        return text

    decoded = [0]
    real_loads = cjson.loads

    def loads(data: bytes) -> Any:
        if MARK.encode() in data:
            decoded[0] += 1
        return real_loads(data)

    rig = EngineRig(tmp_path, gpus=1)
    writer = rig.use_writer()
    server = Server(Front(rig.engine))
    path = str(tmp_path / "s.sock")
    try:

        async def burst() -> list[dict[str, Any]]:
            srv = await asyncio.start_unix_server(server.handle, path=path)
            try:
                loop = asyncio.get_running_loop()
                return await loop.run_in_executor(None, _client, path, frames, N + 1)
            finally:
                srv.close()
                await server.close(1.0)

        commits = writer.commits
        monkeypatch.setattr(asyncio.StreamWriter, "write", write)
        monkeypatch.setattr(cjson, "dumps", dumps)
        monkeypatch.setattr(cjson, "loads", loads)
        answers = rig.loop.run_until_complete(burst())
        monkeypatch.undo()
        commits = writer.commits - commits
    finally:
        rig.close()

    assert answers[0]["ok"] and answers[0]["version"] == protocol.PROTOCOL_VERSION
    ids = [a["job_id"] for a in answers[1:]]
    assert all(a["ok"] for a in answers[1:])
    assert ids == list(range(ids[0], ids[0] + N))  # in the order sent, each its own job
    with sqlite3.connect(tmp_path / "berth.db") as db:  # (each durable before its answer)
        (stored,) = db.execute(
            "SELECT count(*) FROM jobs WHERE id BETWEEN ? AND ?", (ids[0], ids[-1])
        ).fetchone()
    assert stored == N
    # one write for the hello's answer, then one per commit at most (each answered N times)
    assert writes[0] <= commits + 1, f"{writes[0]} writes for {N} answers and {commits} commits"
    assert writes[0] <= N // 10
    # the environment's JSON made once for its size (and once for the store's row of it)
    assert encoded[0] <= 2, f"the environment was encoded {encoded[0]} times for {N} submits"
    # the frames read without decoding it again once it is kept (the first submit's)
    assert decoded[0] <= 2, f"the environment was decoded {decoded[0]} times for {N} submits"
