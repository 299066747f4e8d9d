"""The engine's real process port (:class:`berth.daemon.ports.Processes`): the supervisors
that run its jobs, reached through their pool (:mod:`berth.daemon.procs.pool`), or, for those a
previous daemon left, through their pidfd and run file; the run files themselves (made,
read, kept as spares, removed: :mod:`berth.daemon.supervisor.runfile`); start gates
(:mod:`berth.daemon.supervisor.gate`); and what a dead supervisor left (:mod:`berth.daemon.procs.reap`,
and its cgroup: :mod:`berth.daemon.procs.cgroup`).

A supervisor runs as the job's user, who can stop it (``kill -STOP``): then it enforces no
time limit and carries out no cancel. So the daemon keeps its own watch (:mod:`.overdue`):
an attempt still running :data:`.overdue.GRACE` seconds after its time limit and kill grace,
or after a cancel and its grace, gets its supervisor continued (SIGCONT) and the order again;
still running :data:`.overdue.LAST_CHANCE` seconds later, its supervisor and every process of
the attempt are killed (its cgroup, else the supervisor and what :mod:`.reap` finds), and
the attempt is recorded as timed out or cancelled.
"""

from __future__ import annotations

import logging
import os
import signal
import time

from berth.daemon.ports import LiveAttempt
from berth.daemon.procs import cgroup, devfilter, overdue, reap
from berth.daemon.procs.pool import Pool
from berth.daemon.supervisor import gate, ingroup, runfile
from berth.units import KILL_AFTER

TYPE_CHECKING = False
if TYPE_CHECKING:
    import asyncio
    from collections.abc import Callable
    from typing import Any

    from berth.daemon.ports import OnDone, OnExit, OnGone, Owner

log = logging.getLogger("berth.daemon")

MAX_SPARES = 256  # used run files kept for reuse


class Supervisors:
    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        run_dir: str,
        ledger_dir: str,
        late: tuple[float, float] = (overdue.GRACE, overdue.LAST_CHANCE),
    ) -> None:
        """``run_dir``: where run files live (made if missing); ``ledger_dir``: the claim
        ledger's directory (where a dead supervisor's job is found by its claims); ``late``:
        the overdue watch's grace and last chance (:mod:`.overdue`)."""
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
        self.cgroups, why = cgroup.find(os.path.dirname(os.path.abspath(run_dir)))
        log.log(logging.INFO if self.cgroups or os.geteuid() else logging.WARNING, "%s", why)
        self.pool.cgroups = self.cgroups
        self.devices_note = ""  # [daemon] isolate_devices: enforced, or why not (see isolate)
        self.cgroup_of: dict[str, str] = {}  # run file -> the cgroup of its supervisor
        self.overdue = overdue.Overdue(self, *late)

    def isolate(self, minors: dict[int, int | None]) -> bool:
        """Confine each attempt to its GPUs' device files (``minors``: each GPU's, by NVML
        index) where this host allows it; whether it does. :attr:`devices_note` says so, or
        why not, and the log too."""
        self.pool.devices, self.devices_note = devfilter.find(self.cgroups, minors)
        log.log(logging.INFO if self.pool.devices else logging.WARNING, "%s", self.devices_note)
        return self.pool.devices is not None

    def listen(self, on_done: OnDone, on_gone: OnGone, on_exit: OnExit) -> None:
        watch = self.overdue

        def done(job: int, attempt: int, result: dict[str, Any]) -> None:
            watch.forget(job)
            self.pool.verdicts.pop((job, attempt), None)  # (it made it after all)
            on_done(job, attempt, result)

        def gone(job: int, attempt: int, why: str, started: bool) -> None:
            watch.forget(job)
            on_gone(job, attempt, why, started)

        def exited(job: int) -> None:
            watch.forget(job)
            on_exit(job)

        self.pool.on_done, self.pool.on_gone, self._on_exit = done, gone, exited

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
        gpus: list[int],
    ) -> LiveAttempt:
        """The run file is made and locked here, and goes to the supervisor with the attempt
        (its lock is then held exactly as long as the supervisor works on it)."""
        path = runfile.run_file(self.run_dir, job_id, attempt)
        run_fd = runfile.open_run_file(path, self.spares.pop() if self.spares else None)
        try:
            msg = {"job": job_id, "attempt": attempt, "path": path, "spec": spec, "gate": 1}
            slot = self.pool.run(owner, msg, [run_fd, *fds], gpus)
        except OSError:
            _unlink(path)
            raise
        finally:
            os.close(run_fd)  # the supervisor holds its lock now
        if slot.cgroup is not None:
            self.cgroup_of[path] = slot.cgroup
        run = LiveAttempt(path, attempt, lease_id, slot)
        limit = spec.get("time_limit")
        grace = float(spec.get("kill_after") or KILL_AFTER)
        self.overdue.started(job_id, run, float(limit) if limit else None, grace)
        return run

    def order(self, run: LiveAttempt, job_id: int, op: str, sig: int = 0) -> None:
        if op == "term":
            self.overdue.cancel(job_id, run)
        if not isinstance(run.handle, int):  # one of our pool's: a message names the attempt
            self.pool.order(run.handle, job_id, run.attempt, op, sig)
        elif op == "term":  # adopted (its pidfd): signals, see runfile
            runfile.terminate(run.handle)
        else:
            runfile.send_signal(run.path, run.handle, sig)

    def adopt(
        self, job_id: int, attempt: int, pid: int, path: str, lease_id: str | None
    ) -> LiveAttempt:
        pidfd = os.pidfd_open(pid)
        if not runfile.supervisor_alive(path):  # it ended between reading and opening
            os.close(pidfd)
            raise ProcessLookupError(pid)
        self.loop.add_reader(pidfd, self._adopted_exit, job_id, pidfd)
        where = self.cgroups.of_pid(pidfd, pid) if self.cgroups is not None else None
        if where is not None:
            self.cgroup_of[path] = where
        return LiveAttempt(path, attempt, lease_id, pidfd, sup_pid=pid)

    def _adopted_exit(self, job_id: int, pidfd: int) -> None:
        self.loop.remove_reader(pidfd)
        os.close(pidfd)
        if self._on_exit is not None:
            self._on_exit(job_id)

    def signal_supervisor(self, run: LiveAttempt, sig: int) -> None:
        """Send ``sig`` to the supervisor of ``run`` (through its pidfd: never a reused pid)."""
        pidfd = run.handle if isinstance(run.handle, int) else run.handle.pidfd
        if pidfd is None:
            return
        try:
            signal.pidfd_send_signal(pidfd, sig)
        except OSError:
            pass  # it has ended: its end is on its way

    def kill_attempt(self, job_id: int, run: LiveAttempt, verdict: dict[str, Any]) -> None:
        """Kill the supervisor of ``run`` and every process of its attempt; once its death is
        heard, the attempt is recorded with ``verdict`` (see :mod:`.overdue`)."""
        where = self.cgroup_of.get(run.path)
        if where is not None and self.cgroups is not None:
            self.cgroups.kill(where)
        if isinstance(run.handle, int):  # adopted: its run file carries the verdict
            runfile.append_exit(run.path, verdict)
            self.signal_supervisor(run, signal.SIGKILL)
            return
        self.pool.verdicts[(job_id, run.attempt)] = verdict
        self.signal_supervisor(run, signal.SIGKILL)
        uid = run.handle.owner[0]
        self.end_leftovers(run.path, os.geteuid() if uid is None else uid, run.lease_id, 0.0)

    def notify(self, owner: Owner, msg: dict[str, Any]) -> None:
        self.pool.notify(owner, msg)

    def end_leftovers(
        self, path: str, uid: int, lease_id: str | None, grace: float,
        then: Callable[[], None] | None = None,
    ) -> list[int]:  # fmt: skip
        """SIGTERM what the attempt left (its cgroup's processes, and those :mod:`.reap`
        finds), SIGKILL after ``grace`` (the whole cgroup); ``then`` once all have ended."""
        job_pid = runfile.read_run_file(path).get("job")
        claims = reap.claim_paths(self.ledger_dir, lease_id)
        pids = reap.leftovers(job_pid if isinstance(job_pid, int) else None, uid, claims)
        where = self.cgroup_of.get(path)
        if where is not None and self.cgroups is not None:
            found = {pid for pid, _ in pids}
            members = [p for p in ingroup.members(where) if p not in found]
            pids += self._in_cgroup(members, where)
            self.loop.call_later(grace, self._end_cgroup, where)
        return sorted(reap.end(pids, grace, self.loop, then))

    def _in_cgroup(self, pids: list[int], where: str) -> list[tuple[int, int]]:
        """(pid, pidfd) of those of ``pids`` (read from a cgroup's list) still in cgroup
        ``where``, proven through the pidfd taken first: a pid reused since is left alone."""
        assert self.cgroups is not None
        out = []
        for pid in pids:
            try:
                fd = os.pidfd_open(pid)
            except OSError:
                continue  # gone already
            if self.cgroups.of_pid(fd, pid) == where:
                out.append((pid, fd))
            else:
                os.close(fd)
        return out

    def _end_cgroup(self, where: str) -> None:
        assert self.cgroups is not None
        self.cgroups.kill(where)
        self.pool.forget_cgroup(where)

    # -- run files ----------------------------------------------------------------------------

    def run_file(self, job_id: int, attempt: int) -> str:
        return runfile.run_file(self.run_dir, job_id, attempt)

    def record(self, path: str) -> dict[str, Any]:
        return runfile.read_run_file(path)

    def alive(self, path: str) -> bool:
        return runfile.supervisor_alive(path)

    def retire(self, path: str, leftovers: bool) -> None:
        """The run file becomes a spare (or goes)."""
        self.cgroup_of.pop(path, None)
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
        self.cgroup_of.pop(path, None)
        _unlink(path)

    def discard_strays(self, keep: set[str]) -> None:
        """(Start-up, after recovery.) Also: end every cgroup of ours that holds no adopted
        supervisor: what the supervisors that died while the daemon was down left."""
        if self.cgroups is not None:
            adopted = set(self.cgroup_of.values())
            for where in self.cgroups.orphans(adopted):
                log.warning("ending %d process(es) of the cgroup %s: their supervisor died",
                            self.cgroups.kill(where), where)  # fmt: skip
                self.pool.forget_cgroup(where)
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
