"""The engine's real process port (:class:`berth.daemon.engine.ports.Processes`): the supervisors
that run its jobs, reached through their pool (:mod:`berth.daemon.procs.pool`), or, for those a
previous daemon left, through their pidfd and run file; the run files themselves (made,
read, kept as spares, removed: :mod:`berth.daemon.supervisor.runfile`); start gates
(:mod:`berth.daemon.supervisor.gate`); and what a dead supervisor left (:mod:`berth.daemon.procs.reap`).
"""

from __future__ import annotations

import os
import time

from berth.daemon.engine.ports import Run
from berth.daemon.procs import reap
from berth.daemon.procs.pool import Pool
from berth.daemon.supervisor import gate, runfile

TYPE_CHECKING = False
if TYPE_CHECKING:
    import asyncio
    from typing import Any

    from berth.daemon.engine.ports import OnDone, OnExit, OnGone, Owner

MAX_SPARES = 256  # used run files kept for reuse


class Supervisors:
    def __init__(self, loop: asyncio.AbstractEventLoop, run_dir: str, ledger_dir: str) -> None:
        """``run_dir``: where run files live (made if missing); ``ledger_dir``: the claim
        ledger's directory (where a dead supervisor's job is found by its claims)."""
        self.loop = loop
        self.run_dir = run_dir
        self.ledger_dir = ledger_dir
        os.makedirs(run_dir, mode=0o700, exist_ok=True)
        # Run files of ended attempts, kept for reuse (see runfile.open_run_file).
        self.spares = [
            os.path.join(run_dir, n) for n in os.listdir(run_dir) if n.startswith(runfile.SPARE)
        ][:MAX_SPARES]
        self._spare_seq = 0
        self._spare_tag = f"{os.getpid()}-{time.time_ns()}"
        self._on_exit: OnExit | None = None
        self.pool = Pool(loop, _unheard, _unheard)

    def listen(self, on_done: OnDone, on_gone: OnGone, on_exit: OnExit) -> None:
        self.pool.on_done = on_done
        self.pool.on_gone = on_gone
        self._on_exit = on_exit

    # -- attempts -----------------------------------------------------------------------------

    def gate(self) -> tuple[int, int]:
        return gate.make()

    def close(self, fd: int) -> None:
        os.close(fd)

    def start(
        self,
        owner: Owner,
        job_id: int,
        attempt: int,
        spec: dict[str, Any],
        fds: list[int],
        lease_id: str | None,
    ) -> Run:
        """The run file is made and locked here, and goes to the supervisor with the attempt
        (its lock is then held exactly as long as the supervisor works on it)."""
        path = runfile.run_file(self.run_dir, job_id, attempt)
        run_fd = runfile.open_run_file(path, self.spares.pop() if self.spares else None)
        try:
            msg = {"job": job_id, "attempt": attempt, "path": path, "spec": spec, "gate": 1}
            slot = self.pool.run(owner, msg, [run_fd, *fds])
        except OSError:
            _unlink(path)
            raise
        finally:
            os.close(run_fd)  # the supervisor holds its lock now
        return Run(path, attempt, lease_id, slot)

    def order(self, run: Run, job_id: int, op: str, sig: int = 0) -> None:
        if not isinstance(run.handle, int):  # one of our pool's: a message names the attempt
            self.pool.order(run.handle, job_id, run.attempt, op, sig)
        elif op == "term":  # adopted (its pidfd): signals, see runfile
            runfile.terminate(run.handle)
        else:
            runfile.send_signal(run.path, run.handle, sig)

    def adopt(self, job_id: int, attempt: int, pid: int, path: str, lease_id: str | None) -> Run:
        pidfd = os.pidfd_open(pid)
        if not runfile.supervisor_alive(path):  # it ended between reading and opening
            os.close(pidfd)
            raise ProcessLookupError(pid)
        self.loop.add_reader(pidfd, self._adopted_exit, job_id, pidfd)
        return Run(path, attempt, lease_id, pidfd, sup_pid=pid)

    def _adopted_exit(self, job_id: int, pidfd: int) -> None:
        self.loop.remove_reader(pidfd)
        os.close(pidfd)
        if self._on_exit is not None:
            self._on_exit(job_id)

    def notify(self, owner: Owner, msg: dict[str, Any]) -> None:
        self.pool.notify(owner, msg)

    def end_leftovers(self, path: str, uid: int, lease_id: str | None, grace: float) -> list[int]:
        job_pid = runfile.read_run_file(path).get("job")
        claims = reap.claim_paths(self.ledger_dir, lease_id)
        pids = reap.leftovers(job_pid if isinstance(job_pid, int) else None, uid, claims)
        return reap.end(pids, grace, self.loop)

    # -- run files ----------------------------------------------------------------------------

    def run_file(self, job_id: int, attempt: int) -> str:
        return runfile.run_file(self.run_dir, job_id, attempt)

    def record(self, path: str) -> dict[str, Any]:
        return runfile.read_run_file(path)

    def alive(self, path: str) -> bool:
        return runfile.supervisor_alive(path)

    def retire(self, path: str, leftovers: bool) -> None:
        """The run file becomes a spare (or goes)."""
        if leftovers:
            _unlink(path + ".sig", path + ".pty")
        if len(self.spares) < MAX_SPARES:
            self._spare_seq += 1
            spare = os.path.join(
                self.run_dir, f"{runfile.SPARE}{self._spare_tag}.{self._spare_seq}"
            )
            try:
                os.rename(path, spare)
                self.spares.append(spare)
                return
            except FileNotFoundError:
                return
            except OSError:
                pass
        _unlink(path)

    def discard(self, path: str) -> None:
        _unlink(path)

    def discard_strays(self, keep: set[str]) -> None:
        try:
            names = os.listdir(self.run_dir)
        except OSError:
            return
        for name in names:
            job, dot, attempt = name.partition(".")
            if not (dot and job.isdigit() and attempt.isdigit()):
                continue  # (spares, .sig and .pty files)
            path = os.path.join(self.run_dir, name)
            if path not in keep and not runfile.supervisor_alive(path):
                _unlink(path)


def _unlink(*paths: str) -> None:
    for p in paths:
        try:
            os.unlink(p)
        except FileNotFoundError:
            pass


def _unheard(*_: Any) -> None:
    """(Until the engine listens.)"""
