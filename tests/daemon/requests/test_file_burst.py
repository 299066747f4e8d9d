"""A jobs file's request (``submit_all``, as `berth submit --file` sends 10,000 lines at a
time) through the daemon's socket layer and intake, in the test's process (the real
:class:`~berth.daemon.requests.server.Server`, tests/daemon/enginekit.py's engine, a writer
thread committing), so what it leaves behind can be counted (issue 35: the daemon's memory
with 100,000 jobs queued through ``--file``):

- a burst's answer (a jobs file's request, an array's 10,000 tasks), once written, is followed
  by one trim of the C heap (``on_large``, the daemon's
  :class:`~berth.daemon.process.Trimmer`), a small request's by none;
- the request's jobs share one submit time (one ``submitted`` history, as an array's tasks),
  and their identities are kept in memory until durable, then forgotten together;
- what the client is told is unchanged: one answer a line, in order, each its own id and log;
  a bad line refuses the whole request, named by its place, and queues nothing.
"""

from __future__ import annotations

import asyncio
import socket
import struct
from pathlib import Path
from typing import Any

from enginekit import EngineRig

from berth.daemon.engine.admission import unique
from berth.daemon.engine.front import Front
from berth.daemon.requests.answers import LARGE
from berth.daemon.requests.server import Server
from berth.wire import cjson, protocol

LINES = 2000  # lines of the request (its frame is over LARGE: a burst)


def _exchange(path: str, msgs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Send each request after the answer to the one before (as the CLI does), on one
    connection; the answers."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    s.settimeout(120)
    answers = []
    buf = b""
    for msg in msgs:
        s.sendall(protocol.encode(msg))
        while len(buf) < 4 or len(buf) < 4 + struct.unpack(">I", buf[:4])[0]:
            data = s.recv(1 << 16)
            assert data, f"the daemon closed the connection after {len(answers)} answers"
            buf += data
        n = struct.unpack(">I", buf[:4])[0]
        answers.append(cjson.loads(buf[4 : 4 + n]))
        buf = buf[4 + n :]
    s.close()
    return answers


def _lines(tmp: Path, bad: int | None = None) -> list[dict[str, Any]]:
    """The jobs of a file of LINES lines, as the CLI sends them (no ``env``: the request's);
    line ``bad`` (from 1) asks for a GPU this machine lacks."""
    pad = "x" * 100  # (a line as long as a real one's command)
    jobs: list[dict[str, Any]] = [
        {"argv": ["true", f"{pad}{i}"], "cwd": str(tmp), "gpus": 1, "umask": 0o22}
        for i in range(LINES)
    ]
    if bad is not None:
        jobs[bad - 1]["gpu_ids"] = [7]
    return jobs


def _serve(rig: EngineRig, path: str, msgs: list[dict[str, Any]]) -> tuple[list[Any], int]:
    """(the answers to ``msgs`` after the handshake, the trims made)."""
    trims = [0]

    def trim() -> None:
        trims[0] += 1

    server = Server(Front(rig.engine))
    server.on_large = trim

    async def go() -> list[dict[str, Any]]:
        srv = await asyncio.start_unix_server(server.handle, path=path)
        try:
            hello = {"type": "hello", "version": protocol.PROTOCOL_VERSION}
            return await asyncio.get_running_loop().run_in_executor(
                None, _exchange, path, [hello, *msgs]
            )
        finally:
            srv.close()
            await server.close(1.0)

    answers = rig.loop.run_until_complete(go())
    assert answers[0]["ok"]
    return answers[1:], trims[0]


def test_a_jobs_files_request_is_answered_as_before_then_trimmed_once(tmp_path: Path) -> None:
    rig = EngineRig(tmp_path, gpus=1)
    rig.engine.accounts.config["max_jobs"] = None
    rig.submit("sleep", "60")
    rig.turn()  # (the one GPU busy: the request's jobs stay pending, as queued)
    rig.use_writer()
    env = {"PATH": "/bin", "HOME": "/root", "LANG": "C.UTF-8"}
    request = {"type": "submit_all", "jobs": _lines(tmp_path), "env": env}
    assert len(protocol.encode(request)) > LARGE
    few = [{"argv": ["true", str(i)], "cwd": str(tmp_path), "gpus": 1} for i in range(3)]
    small = {"type": "submit_all", "jobs": few, "env": env}
    clock = rig.clock

    def tick() -> float:  # (the clock moves between any two looks, as the daemon's does)
        clock.t += 0.001
        return clock.t

    setattr(clock, "time", tick)  # noqa: B010
    try:
        before = set(rig.engine.jobs)
        (answer, little), trims = _serve(rig, str(tmp_path / "s.sock"), [request, small])
        assert trims == 1  # (the burst's; not the small request's)
        replies = answer["replies"]
        assert answer["ok"] and len(replies) == LINES and len(little["replies"]) == 3
        ids = [r["job_id"] for r in replies]
        assert ids == list(range(ids[0], ids[0] + LINES))  # one a line, in the file's order
        assert all(r["stdout"].endswith(f"/{r['job_id']}.out") for r in replies)
        jobs = [rig.engine.jobs[i] for i in ids]
        assert set(rig.engine.jobs) - before == set(ids) | {r["job_id"] for r in little["replies"]}
        # one submit time, one `submitted` history for the request's jobs (not one a line)
        assert {j.submit_time for j in jobs} == {jobs[0].submit_time}
        assert all(j.history is jobs[0].history for j in jobs)
        # each identity found (the store's index, once durable), none left in memory
        keys = [rig.engine.journal.peek(i) or rig.engine.store.spec(i) for i in ids[:3]]
        for job_id, spec in zip(ids[:3], keys, strict=True):
            assert spec is not None and spec.unique_key is not None
            assert spec.unique_key not in rig.engine.unique
            assert unique.newest(rig.engine, spec.unique_key) == (job_id, "PENDING")
    finally:
        delattr(clock, "time")
        rig.close()


def test_a_bad_line_refuses_the_request_and_names_it(tmp_path: Path) -> None:
    rig = EngineRig(tmp_path, gpus=1)
    rig.engine.accounts.config["max_jobs"] = None
    rig.use_writer()
    try:
        before = set(rig.engine.jobs)
        request = {"type": "submit_all", "jobs": _lines(tmp_path, bad=1234), "env": {}}
        (answer,), _ = _serve(rig, str(tmp_path / "s.sock"), [request])
        assert not answer["ok"]
        assert answer["error"]["message"].startswith(f"job 1234 of {LINES}: no GPU 7 here")
        assert set(rig.engine.jobs) == before and not rig.engine.unique  # nothing queued
    finally:
        rig.close()


def test_an_array_of_10000_tasks_is_a_burst_too(tmp_path: Path) -> None:
    """Its request is small, its answer names its 10,000 tasks (over LARGE): trimmed after."""
    rig = EngineRig(tmp_path, gpus=1)
    rig.engine.accounts.config["max_jobs"] = None
    rig.use_writer()
    try:
        job = {"argv": ["true"], "env": {}, "cwd": str(tmp_path), "gpus": 1, "hold": True}
        one = {"type": "submit", "job": job}
        array = {"type": "submit", "job": {**job, "array": "0-9999"}}
        (single, answer), trims = _serve(rig, str(tmp_path / "s.sock"), [one, array])
        assert single["ok"] and answer["ok"] and len(answer["tasks"]) == 10_000
        assert trims == 1
    finally:
        rig.close()
