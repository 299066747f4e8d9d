"""One attempt of one job, run by its supervisor: start the command, wait for it, enforce its
time limit, carry out orders (terminate, signal), and say how it ended.

The job runs in its own session and process group, in its working directory, with its
environment, stdin from ``/dev/null`` and its output in its log files (or under a
pseudo-terminal, see :mod:`berth.daemon.supervisor.ptyrelay`). It is started with ``posix_spawn``
(vfork-fast, no Python in the child). When the job's leader exits, whatever it left behind is
killed: its process group at once, and, since the supervisor is a child subreaper, every other
descendant too, and every other process of the supervisor's cgroup (if it has one:
:mod:`berth.daemon.supervisor.ingroup`), whatever session it made for itself.

Orders come two ways: as messages on the supervisor's channel to the daemon (each names the
job and attempt, so it can never reach a later job), or, for an adopted attempt, as signals
(SIGTERM: terminate; SIGUSR1: deliver the signal written in ``<run file>.sig``).
"""

from __future__ import annotations

import array
import json
import mmap
import os
import select
import signal
import socket
import time
import zlib  # noqa: F401 - loaded once by the fork server: claim bodies carry a CRC

from berth.claims import files as claim_files
from berth.daemon.supervisor import gate, ingroup, jobfiles, runfile
from berth.daemon.supervisor.jobfiles import SpawnError, open_log, remove_stale_socket, which
from berth.daemon.supervisor.ptyrelay import PtyRelay
from berth.units import KILL_AFTER

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# Reset to default in the job: whatever the daemon or the fork server ignore or catch.
JOB_SIGDEF = (
    signal.SIGINT, signal.SIGHUP, signal.SIGTERM, signal.SIGQUIT, signal.SIGPIPE,
    signal.SIGUSR1, signal.SIGUSR2, signal.SIGCHLD, signal.SIGTSTP, signal.SIGTTIN,
    signal.SIGTTOU,
)  # fmt: skip
MAX_MESSAGE = 8 * 1024 * 1024  # of a message on a supervisor's or the fork server's socket


def _children(pid: int) -> list[int]:
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid and fields[0] != b"Z":
                out.append(int(name))
    return out


def kill_leftovers() -> None:
    """SIGKILL and reap every descendant still alive (they are our children: subreaper) and
    every other process of our cgroup."""
    for _ in range(100):
        ingroup.kill_others()
        try:
            while True:
                pid, _ = os.waitpid(-1, os.WNOHANG)
                if pid == 0:
                    break
        except ChildProcessError:
            return  # no children at all
        for child in _children(os.getpid()):
            try:
                os.kill(child, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.001)


# The job's user, filled by its supervisor once it has become them (HOME, USER, LOGNAME,
# SHELL): what a job whose captured environment lacks them gets.
IDENTITY: dict[str, str] = {}


class NotStarted(Exception):
    """Its start gate closed unopened: the command must not run."""


class AttemptRun:
    """Run one attempt (:meth:`run`). ``chan``: the channel to the daemon, or None once it
    has hung up; ``wakeup``: the read end of the supervisor's signal wakeup pipe; ``gate``:
    its start gate (:mod:`berth.daemon.supervisor.gate`), or -1 (none: notifications)."""

    def __init__(
        self,
        msg: dict[str, Any],
        run_fd: int,
        claims: tuple[int, ...],
        chan: socket.socket | None,
        wakeup: int,
        gate_fd: int = -1,
    ) -> None:
        self.spec: dict[str, Any] = msg["spec"]
        self.job: int = msg["job"]
        self.attempt: int = msg["attempt"]
        self.path: str = msg["path"]
        self.run_fd = run_fd
        self.claims = claims
        self.chan = chan
        self.wakeup = wakeup
        self.relay: PtyRelay | None = None
        self.cancelled = False
        self.timed_out = False
        self.kill_at: float | None = None
        self.grace = float(self.spec.get("kill_after") or KILL_AFTER)
        self.refused: list[dict[str, Any]] = []  # "run" orders that came while busy
        self.gate = gate_fd
        self.opened = True  # (through its gate, or none)

    def _through_gate(self, note: bool = True) -> bool:
        """Wait at the start gate, if there is one still to pass: True once the start is
        committed (then ``go`` is noted in the run file, unless not ``note``: NoSpace if it
        cannot be, and the command must not run), False if it never will be."""
        if self.gate >= 0:
            fd, self.gate = self.gate, -1
            self.opened = gate.passed(fd)
            if self.opened and note:
                runfile.note_go(self.run_fd, self.path)
        return self.opened

    def _spawn(self) -> int:
        """Start the job; its executable is looked up in the job's own PATH."""
        spec = self.spec
        argv = spec["argv"]
        os.umask(int(spec.get("umask", 0o077)))  # the job's and its logs'
        try:
            os.chdir(spec["cwd"])
        except OSError as e:
            raise SpawnError(
                f"cannot enter working directory {spec['cwd']!r}: {e.strerror}"
            ) from None
        exe = argv[0]
        if "/" not in exe:
            found = which(exe, spec["env"].get("PATH", os.defpath))
            if found is None:
                raise SpawnError(f"command not found: {exe!r} (in the job's PATH)")
            exe = found
        out = open_log(spec["stdout"])
        try:
            err = (
                out
                if spec["stderr"] == spec["stdout"] or spec.get("pty")
                else open_log(spec["stderr"])
            )
        except SpawnError:
            os.close(out)
            raise
        env = spec["env"]
        if IDENTITY:
            env = {**IDENTITY, **env}
        if spec.get("pty"):
            # The child opens the terminal by name after setsid(): it becomes its controlling
            # terminal. Output reaches the log through the relay.
            master, slave = jobfiles.openpty(out)
            name = os.ttyname(slave)
            os.close(slave)
            where = spec.get("pty_path") or self.path + ".pty"
            remove_stale_socket(where)
            try:
                self.relay = PtyRelay(master, out, where)
            except OSError as e:
                os.close(master)
                os.close(out)
                raise SpawnError(
                    f"cannot make its terminal's socket {where!r}: {e.strerror}"
                ) from None
            actions = [
                (os.POSIX_SPAWN_OPEN, 0, name, os.O_RDWR, 0),
                (os.POSIX_SPAWN_DUP2, 0, 1),
                (os.POSIX_SPAWN_DUP2, 0, 2),
            ]
            env = {**env, "TERM": env.get("TERM") or "xterm-256color"}
        else:
            actions = [
                (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                (os.POSIX_SPAWN_DUP2, out, 1),
                (os.POSIX_SPAWN_DUP2, err, 2),
            ]
        held: list[int] = []  # the job holds its claims too, read-only (issue 20.7)
        try:
            for fd in self.claims:
                held.append(claim_files.read_only(fd))
                os.set_inheritable(held[-1], True)
            if not self._through_gate():  # all is ready: wait for the start to be committed
                raise NotStarted
            return os.posix_spawn(
                exe, argv, env, file_actions=actions, setsid=True, setsigmask=(),
                setsigdef=JOB_SIGDEF,
            )  # fmt: skip
        except OSError as e:
            raise jobfiles.failed(f"cannot start {argv[0]!r}", e) from None
        finally:
            for fd in held:
                os.close(fd)
            if self.relay is None:
                os.close(out)
                if err != out:
                    os.close(err)

    def _name_holders(self, job_pid: int) -> None:
        """Name this supervisor and the job as the holders of the job's claims (the daemon
        made them): others then see the job's GPU processes as berth's own, and `berth
        status` shows who holds the GPU, whatever becomes of the daemon. No lock (the ledger
        has none: a reader that catches a body half-written reads it again)."""
        if not self.claims:
            return
        command = str(
            self.spec.get("claim_command") or self.spec.get("command") or " ".join(self.spec["argv"])
        )[:500]  # (claim_command: "(private)" under --private: claim files are read by all)
        try:
            for fd in self.claims:
                body = claim_files.decode_body(os.pread(fd, 65536, 0))
                if body is not None:
                    body.update(pids=[os.getpid(), job_pid], command=command)
                    claim_files.write_body(fd, claim_files.encode_body(body))
        except OSError:
            pass

    def _group(self, sig: int) -> None:
        try:
            os.killpg(self.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def _terminate(self) -> None:
        """SIGTERM to the job's group now, SIGKILL after the grace; a second order kills."""
        if self.kill_at is None:
            self.cancelled = True
            self._group(signal.SIGTERM)
            self.kill_at = time.time() + self.grace
        else:
            self._group(signal.SIGKILL)

    def run(self) -> dict[str, Any]:
        """Start the job (once through its gate), wait for it, and say how it ended. An
        attempt whose gate closed unopened says ``unstarted`` (nothing ran; its supervisor
        writes no ``exit`` line); one that could not start says why, once through its gate
        (nothing is reported of an attempt whose start is not durable)."""
        result: dict[str, Any] = {
            "rc": None, "signal": None, "timeout": False, "cancelled": False, "start": None,
            "end": None, "error": None,
        }  # fmt: skip
        try:
            try:
                self.pid = pid = self._spawn()
            except (SpawnError, OSError, ValueError) as e:
                waits = jobfiles.waits(e)  # (nothing ran: it waits for space, or for a limit)
                if waits is not None or not self._through_gate():
                    waits = waits if waits is not None and self._through_gate(note=False) else None
                    raise NotStarted(waits or "") from None
                result.update(rc=127, error=str(e), start=time.time(), end=time.time())
                return result
        except NotStarted as e:
            if self.relay is not None:
                self.relay.close()
            why = e.args[0] if e.args else None  # (exhausted: who waits, see engine/exhausted.py)
            result.update(
                rc=127, error=str(e) or "its start could not be recorded: not run",
                unstarted=True, nospace=str(e) or None, end=time.time(),
                nospace_path=getattr(why, "path", None), exhausted=getattr(why, "kind", None),
            )  # fmt: skip
            return result
        result["start"] = start = time.time()
        runfile.note(self.run_fd, f"job {pid}\n".encode())
        self._name_holders(pid)
        pidfd = os.pidfd_open(pid)
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        poller.register(self.wakeup, select.POLLIN)
        if self.chan is not None:
            poller.register(self.chan.fileno(), select.POLLIN)
        if self.relay is not None:
            self.relay.register(poller)
        limit = self.spec.get("time_limit")
        deadline = start + limit if limit else None
        while True:
            # (a day at most: poll takes its ms as a C int, 24.8 days; -t 25d killed us)
            wakes = [t for t in (deadline, self.kill_at, time.time() + 86400) if t is not None]
            timeout = None if not wakes else max(0, int((min(wakes) - time.time()) * 1000) + 1)
            events = poller.poll(timeout)
            if any(fd == pidfd for fd, _ in events):
                break
            for fd, _ in events:
                if fd == self.wakeup:
                    self._on_signals()
                elif self.chan is not None and fd == self.chan.fileno():
                    self._on_message(poller)
                elif self.relay is not None:
                    self.relay.handle(poller, fd)
            now = time.time()
            if deadline is not None and now >= deadline and self.kill_at is None:
                self.timed_out = True
                deadline = None
                self._group(signal.SIGTERM)
                self.kill_at = now + self.grace
            if self.kill_at is not None and now >= self.kill_at:
                self._group(signal.SIGKILL)
                self.kill_at = now + 3600
        # The leader has exited but is not reaped yet, so its pgid cannot be reused: kill what
        # it left behind in its group, then reap.
        self._group(signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        os.close(pidfd)
        kill_leftovers()
        if self.relay is not None:
            self.relay.close()
        if os.WIFSIGNALED(status):
            result["signal"] = os.WTERMSIG(status)
            result["rc"] = 128 + os.WTERMSIG(status)
        else:
            result["rc"] = os.waitstatus_to_exitcode(status)
        result.update(timeout=self.timed_out, cancelled=self.cancelled, end=time.time())
        return result

    def _on_signals(self) -> None:
        try:
            signals = os.read(self.wakeup, 4096)
        except BlockingIOError:
            return
        if signal.SIGTERM in signals:
            self._terminate()
        if signal.SIGUSR1 in signals:
            try:
                with open(self.path + ".sig") as f:
                    sig = int(f.read().strip() or 0)
            except (OSError, ValueError):
                return
            if sig > 0:
                self._group(sig)

    def _on_message(self, poller: select.poll) -> None:
        assert self.chan is not None
        msg, fds = receive(self.chan)
        if msg is None:  # the daemon has gone: finish this attempt, take no more
            poller.unregister(self.chan.fileno())
            self.chan = None
            return
        ours = msg.get("job") == self.job and msg.get("attempt") == self.attempt
        op = msg.get("op")
        if op == "run":  # never sent to a busy supervisor; refuse rather than lose it
            for fd in fds:
                os.close(fd)
            self.refused.append(msg)
        elif op == "term" and ours:
            self._terminate()
        elif op == "signal" and ours and int(msg.get("sig") or 0) > 0:
            self._group(int(msg["sig"]))


# Where a supervisor receives its messages: one anonymous mapping of MAX_MESSAGE bytes, made
# at its first message and reused (only the pages a message touches are ever resident).
# ``recvmsg(MAX_MESSAGE)`` would allocate (mmap) and shrink (mremap, a TLB shootdown of every
# CPU) 8 MiB per message.
_INBOX: list[mmap.mmap] = []


def receive(chan: socket.socket) -> tuple[dict[str, Any] | None, list[int]]:
    """One message and the descriptors it carries (close-on-exec); (None, []) at the end."""
    if not _INBOX:
        _INBOX.append(mmap.mmap(-1, MAX_MESSAGE))
    inbox = _INBOX[0]
    while True:
        try:
            size, anc, flags, _ = chan.recvmsg_into(
                [inbox], socket.CMSG_SPACE(64 * 4), socket.MSG_CMSG_CLOEXEC
            )
            data = inbox[:size]
            break
        except InterruptedError:  # pragma: no cover - PEP 475 retries already
            continue
        except (ConnectionError, OSError):
            return None, []
    fds: list[int] = []
    for level, kind, raw in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds += list(array.array("i", raw[: len(raw) - len(raw) % 4]))
    if not data:
        for fd in fds:
            os.close(fd)
        return None, []
    try:
        msg = json.loads(data)
    except ValueError:
        msg = {}
    msg = msg if isinstance(msg, dict) else {}
    if flags & socket.MSG_CTRUNC:  # (descriptors it sent were lost: no room for them here)
        msg["truncated"] = True
    return msg, fds
