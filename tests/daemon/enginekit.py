"""An engine in the test's own process, given a fake clock and a fake process port
(berth/daemon/ports.py): its passes, commits and state changes are the real ones (a real
SQLite store, the real claim ledger in a temporary directory, declared GPUs), but nothing is
forked: each attempt handed to the fake port "runs" `sleep N` in fake time.

    rig = EngineRig(tmp_path, gpus=1)
    a = rig.submit("sleep", "100", time_limit=60)
    rig.turn()                   # the pass that starts it
    rig.advance_to(rig.t0 + 60)  # ends, starts and passes, in time order
    rig.state(a)                 # "TIMEOUT"

The fake port plays the supervisors: an attempt waits at its start gate (the real pipe the
engine made; the journal opens it) and starts when the fake finds it open; it ends at its
`sleep` time, or at the time limit it was given (``timeout``), or when ordered to terminate;
``kill(job)`` makes its supervisor die.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from berth.config import Config, Inventory
from berth.daemon.ports import LiveAttempt
from berth.daemon.requests.authority import Peer

FAKE_PID = 4_000_000  # (beyond any real pid)


class FakeClock:
    def __init__(self, t: float) -> None:
        self.t = t

    def time(self) -> float:
        return self.t


class FakeAttempt:
    def __init__(
        self, job: int, attempt: int, spec: dict[str, Any], gate: int, claims: list[int]
    ) -> None:
        self.job = job
        self.attempt = attempt
        self.spec = spec
        self.gate = gate
        self.claims = claims
        self.path = f"/fake/run/{job}.{attempt}"
        self.state = "gated"  # then "running", "ended"
        self.start: float | None = None
        self.record: dict[str, Any] = {"sup": FAKE_PID}  # what its run file would say

    def ends_at(self) -> tuple[float, bool]:
        """(when it ends by itself, whether by its time limit)."""
        assert self.start is not None
        argv = self.spec["argv"]
        seconds = float(argv[1]) if argv[0] == "sleep" else 0.0
        limit = self.spec.get("time_limit")
        if limit and limit <= seconds:
            return self.start + limit, True
        return self.start + seconds, False


class FakeProcesses:
    """The process port, in memory (see the module)."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.attempts: dict[str, FakeAttempt] = {}  # by run file path
        self.handed: list[tuple[int, int]] = []  # (job, attempt) as handed over
        self.started: list[tuple[int, int]] = []  # as they passed their gate
        self.retired: list[str] = []
        self.discarded: list[str] = []
        self.refuse: str | None = None  # start() raises OSError(refuse)

    def listen(self, on_done: Any, on_gone: Any, on_exit: Any) -> None:
        self.on_done, self.on_gone, self.on_exit = on_done, on_gone, on_exit

    def gate(self) -> tuple[int, int]:
        return os.pipe2(os.O_CLOEXEC)

    def close(self, fd: int) -> None:
        os.close(fd)

    def start(
        self,
        owner: Any,
        job_id: int,
        attempt: int,
        spec: dict[str, Any],
        fds: list[int],
        lease_id: str | None,
        gpus: list[int],
    ) -> LiveAttempt:
        if self.refuse is not None:
            raise OSError(self.refuse)
        gate = os.dup(fds[0])  # (what travels to a supervisor is a copy)
        os.set_blocking(gate, False)
        a = FakeAttempt(job_id, attempt, spec, gate, [os.dup(fd) for fd in fds[1:]])
        self.attempts[a.path] = a
        self.handed.append((job_id, attempt))
        return LiveAttempt(a.path, attempt, lease_id, a)

    def order(self, run: LiveAttempt, job_id: int, op: str, sig: int = 0) -> None:
        a: FakeAttempt = run.handle
        if op == "term" and a.state == "running":
            self._end(a, rc=143, signal=15, cancelled=True)

    def adopt(
        self, job_id: int, attempt: int, pid: int, path: str, lease_id: str | None
    ) -> LiveAttempt:
        raise ProcessLookupError(pid)

    def run_file(self, job_id: int, attempt: int) -> str:
        return f"/fake/run/{job_id}.{attempt}"

    def record(self, path: str) -> dict[str, Any]:
        a = self.attempts.get(path)
        return dict(a.record) if a is not None else {}

    def alive(self, path: str) -> bool:
        a = self.attempts.get(path)
        return a is not None and a.state != "ended"

    def end_leftovers(
        self, path: str, uid: int, lease_id: str | None, grace: float, then: Any = None
    ) -> list[int]:
        return []

    def retire(self, path: str, leftovers: bool) -> None:
        self.retired.append(path)

    def discard(self, path: str) -> None:
        self.discarded.append(path)

    def discard_strays(self, keep: set[str]) -> None:
        pass

    def notify(self, owner: Any, msg: dict[str, Any]) -> None:
        pass

    # -- what the test does ---------------------------------------------------------------

    def poll_gates(self) -> None:
        """Attempts whose gate opened start now; those whose gate closed unopened say so."""
        for a in list(self.attempts.values()):
            if a.state != "gated":
                continue
            try:
                word = os.read(a.gate, 1)
            except BlockingIOError:
                continue
            os.close(a.gate)
            if word:
                a.state, a.start = "running", self.clock.time()
                a.record.update(go=True, job=FAKE_PID + len(self.started) + 1)
                self.started.append((a.job, a.attempt))
            else:
                self._release(a)
                result = {"rc": 127, "error": "not run", "unstarted": True}
                self.on_done(a.job, a.attempt, result)

    def running(self) -> list[FakeAttempt]:
        return [a for a in self.attempts.values() if a.state == "running"]

    def kill(self, job: int) -> None:
        """The supervisor of ``job``'s current attempt dies (kill -9)."""
        a = next(a for a in self.attempts.values() if a.job == job and a.state != "ended")
        self._release(a)
        self.on_gone(a.job, a.attempt, "its supervisor died", True)

    def _end(self, a: FakeAttempt, **result: Any) -> None:
        self._release(a)
        full = {"rc": 0, "signal": None, "timeout": False, "cancelled": False, "error": None}
        full.update(result, start=a.start, end=self.clock.time())
        a.record["exit"] = full
        self.on_done(a.job, a.attempt, full)

    def _release(self, a: FakeAttempt) -> None:
        a.state = "ended"
        for fd in a.claims:
            os.close(fd)
        a.claims = []


class EngineRig:
    def __init__(self, tmp: Path, gpus: int = 1, **options: Any) -> None:
        from berth.claims.ledger import Ledger
        from berth.daemon.engine.engine import Engine
        from berth.daemon.engine.resources import Resources
        from berth.daemon.options import Options
        from berth.daemon.store.store import Store

        self.tmp = tmp
        self.loop = asyncio.new_event_loop()
        cfg = Config()
        cfg.inventory = Inventory(declared=gpus, memory=80 << 30)
        cfg.claims_dir = str(tmp / "claims")
        os.makedirs(cfg.claims_dir, mode=0o1777, exist_ok=True)
        os.chmod(cfg.claims_dir, 0o1777)
        self.ledger = Ledger(cfg.claims_dir)
        res = Resources(cfg, self.ledger)
        res.poll()
        assert len(res.inventory) == gpus, res.error
        self.store = Store.open(str(tmp / "berth.db"))
        self.t0 = 1_700_000_000.0  # (not now: everything the engine stamps comes from its clock)
        self.clock = FakeClock(self.t0)
        self.procs = FakeProcesses(self.clock)
        from berth.daemon.engine.admission import userdir

        os.makedirs(tmp / "state", mode=0o700)
        userdir.prepare(str(tmp / "state"))  # (as the daemon's start does)
        opts = Options(str(tmp / "d.sock"), str(tmp / "state"), **options)
        self.engine = Engine(opts, self.store, res, self.loop, clock=self.clock, procs=self.procs)
        self.peer = Peer(os.getpid(), os.getuid(), os.getgid(), False)

    def close(self) -> None:
        writer = self.engine.journal.writer
        if writer is not None:
            self.loop.run_until_complete(self.engine.drain())
            self.engine.journal.writer = None
            writer.close()
        self.loop.close()
        self.store.close()

    def submit(self, *argv: str, **job: Any) -> int:
        """Submit through the daemon's own intake; the job is durable when it returns."""
        from berth.daemon.engine.admission import admit

        spec = {"argv": list(argv), "env": {"PATH": "/bin"}, "cwd": str(self.tmp), **job}
        reply = self.loop.run_until_complete(admit.submit(self.engine, self.peer, spec))
        return int(reply["job_id"])

    def use_writer(self) -> Any:
        """Commit on a writer thread from now on, as the daemon does (no fork: a thread)."""
        from berth.daemon.store.writer import Writer

        writer = Writer(str(self.tmp / "berth.db"), self.loop)
        self.engine.journal.writer = writer
        return writer

    def until(self, done: Any, message: str) -> None:
        """Turn the loop (and look at the gates) until ``done()``: commits on the writer's
        thread answer in their own time."""
        from helpers import wait_until

        def step() -> bool:
            self.loop.run_until_complete(asyncio.sleep(0))
            self.procs.poll_gates()
            return bool(done())

        wait_until(step, message=message)

    def turn(self) -> None:
        """Run what the loop has to do now (passes, commits, what follows them), and start
        the attempts whose gates opened."""
        for _ in range(3):
            self.engine.schedule_pass()
            self.loop.run_until_complete(asyncio.sleep(0))
            self.procs.poll_gates()

    def advance_to(self, t: float) -> None:
        """Move the clock to ``t``, ending attempts in time order (and letting the engine
        react to each end at its time)."""
        while True:
            due = [(a.ends_at(), a) for a in self.procs.running()]
            due = [d for d in due if d[0][0] <= t]
            if not due:
                break
            (when, timed_out), a = min(due, key=lambda d: d[0][0])
            self.clock.t = when
            if timed_out:
                self.procs._end(a, rc=143, signal=15, timeout=True)
            else:
                self.procs._end(a, rc=0)
            self.turn()
        self.clock.t = t
        self.turn()

    def state(self, job_id: int) -> str:
        job = self.engine.jobs.get(job_id) or self.engine.settling.get(job_id)
        if job is not None:
            return job.state.value
        return self.engine.finished_states[job_id].value

    def job(self, job_id: int) -> Any:
        from berth.core.job import Job

        data = self.store.job(job_id)
        assert data is not None
        return Job.from_dict(data)
