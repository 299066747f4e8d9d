"""The per-job supervisor: a process that outlives the daemon, runs one attempt of one job,
waits for it, enforces its time limit, and records its exit status where the daemon finds it.

The daemon calls :func:`launch`, which ``fork()``s (no ``exec``: a fresh interpreter per job
would cap throughput near 10 jobs/s). The child calls ``setsid()`` so that nothing aimed at the
daemon (a ``kill -9``, a terminal's Ctrl-C) reaches it, closes every descriptor it does not
need, spawns the job in its own session and process group, and waits.

The *run file* ``<run_dir>/<job>.<attempt>`` is the rendezvous, written line by line::

    sup <supervisor pid>
    job <job pid>
    exit {"rc": 0, "signal": null, "timeout": false, "cancelled": false, ...}

The daemon creates it and takes an exclusive ``flock`` on it *before* forking, then closes its
copy: the lock lives exactly as long as the supervisor. So after a daemon crash, a run file that
is still locked has a live supervisor (adopt it), one with an ``exit`` line has a recorded
result, and one that is neither belongs to a supervisor that died uncleanly. No run file means
the fork never happened, and the job can safely start again.

Control, daemon -> supervisor: SIGTERM = terminate (SIGTERM to the job's process group, then
SIGKILL after ``kill_after`` seconds); SIGUSR1 = deliver the signal number written in
``<run file>.sig`` to the job's process group.
"""

from __future__ import annotations

import fcntl
import gc
import json
import os
import select
import signal
import stat
import time

from berth.daemon.ptyrelay import PtyRelay

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    _signal = signal
else:
    import _signal


# Everything the forked supervisor needs is imported here, in the daemon, once: an import in
# the child would cost milliseconds per job.
try:
    import ctypes

    _LIBC: ctypes.CDLL | None = ctypes.CDLL(None, use_errno=True)
except (ImportError, OSError):  # pragma: no cover
    _LIBC = None
# Bound here, in the fork server: looking a function up in a CDLL creates (and caches) its
# foreign-function object, which every supervisor would otherwise do anew.
_PRCTL: Any = getattr(_LIBC, "prctl", None)

# Per job, the supervisor calls ``_signal`` (the C module) directly: ``signal``'s wrappers turn
# every number into an enum member, which costs ~20 us a call in a freshly forked process.
_SIG_DFL = int(signal.SIG_DFL)
_SIG_IGN = int(signal.SIG_IGN)
# Highest descriptor the supervisor closes up to (``close_range`` makes the span free).
_MAXFD = max(os.sysconf("SC_OPEN_MAX"), 1024)


def run_file(run_dir: str, job_id: int, attempt: int) -> str:
    return os.path.join(run_dir, f"{job_id}.{attempt}")


SPARE = "spare."  # prefix of a run file kept for reuse (see :func:`open_run_file`)


def open_run_file(path: str, spare: str | None = None) -> int:
    """Create the run file ``path``, empty and locked (``LOCK_EX``); return its descriptor.

    ``spare``: a run file of an ended attempt, kept (renamed to ``spare.N``) instead of
    removed. It is locked and emptied *before* it takes the new name, so the name never shows
    another attempt's lines, exactly as a new file would; reusing it spares the filesystem an
    inode allocation and a removal per job (on ext4 without a journal, allocation skips every
    recently freed inode, which makes both dear under a stream of short jobs)."""
    if spare is not None:
        try:
            fd = os.open(spare, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
        except OSError:
            fd = -1
        if fd >= 0:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                os.ftruncate(fd, 0)
                os.rename(spare, path)
                return fd
            except OSError:
                os.close(fd)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise
    return fd


def launch(
    launch_spec: dict[str, Any],
    path: str,
    keep_fds: tuple[int, ...] = (),
    spare: str | None = None,
) -> int:
    """Fork a supervisor for one attempt; return its pid. ``launch_spec`` holds argv, env,
    cwd, stdout, stderr, time_limit, kill_after, pty. ``keep_fds`` (claim leases) are
    inherited by the supervisor and the job; the caller closes its own copies if it wants.
    ``spare``: a used run file to recycle as ``path`` (see :func:`open_run_file`)."""
    fd = open_run_file(path, spare)
    # Control signals stay blocked until the child has its handlers: a cancel sent the moment
    # it is born is kept pending, not fatal.
    old_mask = _signal.pthread_sigmask(signal.SIG_BLOCK, _CONTROL)
    try:
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child never returns
            code = 70
            try:
                code = _supervise(launch_spec, fd, keep_fds, path)
            finally:
                os._exit(code)
    finally:
        _signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
        os.close(fd)
    return pid


_CONTROL = {signal.SIGTERM, signal.SIGUSR1}
_CONTROL_CHLD = _CONTROL | {signal.SIGCHLD}
# Reset to default in the job: whatever the daemon or the fork server ignore or catch.
_JOB_SIGDEF = (
    signal.SIGINT, signal.SIGHUP, signal.SIGTERM, signal.SIGQUIT, signal.SIGPIPE,
    signal.SIGUSR1, signal.SIGUSR2, signal.SIGCHLD, signal.SIGTSTP, signal.SIGTTIN,
    signal.SIGTTOU,
)  # fmt: skip


def _close_fds(keep: set[int]) -> None:
    """Close every descriptor above 2 but those in ``keep`` (``close_range`` per gap)."""
    low = 3
    for fd in sorted(keep):
        if fd >= low:
            os.closerange(low, fd)
            low = fd + 1
    os.closerange(low, max(_MAXFD, low + 1))


def _nothing(*_: object) -> None:
    pass


def _supervise(spec: dict[str, Any], fd: int, keep_fds: tuple[int, ...], path: str = "") -> int:
    gc.disable()  # short-lived, allocates little: a collection would copy the parent's pages
    os.setsid()
    r, w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    _signal.set_wakeup_fd(w)
    _signal.signal(signal.SIGTERM, _nothing)
    _signal.signal(signal.SIGUSR1, _nothing)
    _signal.signal(signal.SIGCHLD, _SIG_DFL)
    _signal.signal(signal.SIGPIPE, _SIG_DFL)
    _signal.signal(signal.SIGINT, _SIG_IGN)
    _signal.signal(signal.SIGHUP, _SIG_IGN)
    # Pending control signals arrive now, and are recorded.
    _signal.pthread_sigmask(signal.SIG_UNBLOCK, _CONTROL_CHLD)
    _close_fds({fd, r, w, *keep_fds})
    null = os.open(os.devnull, os.O_RDWR)
    for std in (0, 1, 2):
        os.dup2(null, std)
    os.close(null)
    os.write(fd, f"sup {os.getpid()}\n".encode())
    _become_subreaper()
    _drop_privileges(spec)
    # The run file's absolute name (the job's working directory becomes ours).
    if not path.startswith("/"):
        path = os.readlink(f"/proc/self/fd/{fd}")
    sup = _Supervisor(spec, fd, keep_fds, path)
    sup.wakeup = r
    result = sup.run()
    # One write: the daemon reads either nothing or the whole line.
    os.write(fd, b"exit " + _encode(result) + b"\n")
    return 0


def _encode(result: dict[str, Any]) -> bytes:
    """``json.dumps(result).encode()`` for the flat result dict, without building an encoder
    in every supervisor (same text for None, bools, ints, floats and strings)."""
    parts = []
    for key, value in result.items():
        if value is None:
            text = "null"
        elif value is True:
            text = "true"
        elif value is False:
            text = "false"
        elif type(value) is int or (type(value) is float and value - value == 0):
            text = repr(value)
        elif type(value) is str:
            text = _encode_str(value)
        else:
            text = json.dumps(value)
        parts.append(f"{_encode_str(key)}: {text}")
    return ("{" + ", ".join(parts) + "}").encode()


_encode_str = json.encoder.encode_basestring_ascii


def _drop_privileges(spec: dict[str, Any]) -> None:
    """A root daemon runs each job as its submitter: the supervisor becomes that user before
    it opens the logs or spawns anything (its run file and claims are already open)."""
    uid, gid = spec.get("uid"), spec.get("gid")
    if os.geteuid() != 0 or uid is None or gid is None or uid == 0:
        return
    os.initgroups(spec.get("user") or str(uid), gid)
    os.setgid(gid)
    os.setuid(uid)


def _become_subreaper() -> None:
    """Orphaned descendants of the job become our children (not init's), so we can reap
    and kill what the job leaves behind even outside its process group."""
    if _PRCTL is not None:
        _PRCTL(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER


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


def _kill_leftovers() -> None:
    """SIGKILL and reap every descendant still alive (they are our children: subreaper)."""
    for _ in range(100):
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


def _which(exe: str, path: str) -> str | None:
    """``shutil.which(exe, path=path)`` for a bare name on POSIX, in fewer calls: the first
    executable non-directory ``dir/exe`` along ``path`` (each directory tried once)."""
    if not path:
        return None
    seen = set()
    for d in path.split(os.pathsep):
        if d in seen:
            continue
        seen.add(d)
        name = d + exe if not d or d.endswith("/") else f"{d}/{exe}"  # os.path.join
        try:  # access() first: it answers a missing file without raising
            if os.access(name, os.X_OK) and not stat.S_ISDIR(os.stat(name).st_mode):
                return name
        except (OSError, ValueError):
            continue
    return None


class _SpawnError(Exception):
    """The job could not be started (the message says why)."""


class _Supervisor:
    def __init__(
        self, spec: dict[str, Any], fd: int, keep_fds: tuple[int, ...], path: str = ""
    ) -> None:
        self.spec = spec
        self.path = path
        self.relay: PtyRelay | None = None
        self.wakeup = -1  # read end of the signal wakeup pipe
        self.fd = fd
        self.keep_fds = keep_fds
        self.cancelled = False
        self.timed_out = False
        self.kill_at: float | None = None

    def _open_log(self, path: str) -> int:
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND
        try:
            return os.open(path, flags, 0o644)
        except FileNotFoundError:  # its directory is missing: create it (once per daemon)
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
            return os.open(path, flags, 0o644)

    def _spawn(self) -> int:
        """Start the job: its own session, its cwd, its env, stdin from /dev/null, output to
        its logs, the claim descriptors inherited. ``posix_spawn`` (vfork-fast, no Python in
        the child); the executable is looked up in the job's own PATH."""
        spec = self.spec
        argv = spec["argv"]
        try:
            os.chdir(spec["cwd"])
        except OSError as e:
            raise _SpawnError(
                f"cannot enter working directory {spec['cwd']!r}: {e.strerror}"
            ) from None
        exe = argv[0]
        if "/" not in exe:
            found = _which(exe, spec["env"].get("PATH", os.defpath))
            if found is None:
                raise _SpawnError(f"command not found: {exe!r} (in the job's PATH)")
            exe = found
        out = self._open_log(spec["stdout"])
        for fd in self.keep_fds:
            os.set_inheritable(fd, True)
        if spec.get("pty"):
            # The child opens the terminal by name after setsid(): it becomes its controlling
            # terminal. Output reaches the log through the relay.
            master, slave = os.openpty()
            name = os.ttyname(slave)
            os.close(slave)
            self.relay = PtyRelay(master, out, self.path + ".pty")
            actions = [
                (os.POSIX_SPAWN_OPEN, 0, name, os.O_RDWR, 0),
                (os.POSIX_SPAWN_DUP2, 0, 1),
                (os.POSIX_SPAWN_DUP2, 0, 2),
            ]
            env = {**spec["env"], "TERM": spec["env"].get("TERM") or "xterm-256color"}
            try:
                return os.posix_spawn(
                    exe, argv, env, file_actions=actions, setsid=True,
                    setsigmask=(), setsigdef=_JOB_SIGDEF,
                )  # fmt: skip
            except OSError as e:
                raise _SpawnError(f"cannot start {argv[0]!r}: {e.strerror}") from None
        err = out if spec["stderr"] == spec["stdout"] else self._open_log(spec["stderr"])
        actions = [
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_DUP2, out, 1),
            (os.POSIX_SPAWN_DUP2, err, 2),
        ]
        try:
            return os.posix_spawn(
                exe, argv, spec["env"], file_actions=actions, setsid=True,
                setsigmask=(), setsigdef=_JOB_SIGDEF,
            )  # fmt: skip
        except OSError as e:
            raise _SpawnError(f"cannot start {argv[0]!r}: {e.strerror}") from None
        finally:
            os.close(out)
            if err != out:
                os.close(err)

    def _signal_group(self, pgid: int, sig: int) -> None:
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def run(self) -> dict[str, Any]:
        start = time.time()
        result: dict[str, Any] = {
            "rc": None,
            "signal": None,
            "timeout": False,
            "cancelled": False,
            "start": start,
            "end": None,
            "error": None,
        }
        r = self.wakeup
        try:
            pid = self._spawn()
        except (_SpawnError, OSError, ValueError) as e:
            result.update(rc=127, error=str(e), end=time.time())
            return result
        os.write(self.fd, f"job {pid}\n".encode())
        pidfd = os.pidfd_open(pid)
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        poller.register(r, select.POLLIN)
        if self.relay is not None:
            self.relay.register(poller)
        limit = self.spec.get("time_limit")
        deadline = start + limit if limit else None
        grace = float(self.spec.get("kill_after") or 30.0)
        while True:
            now = time.time()
            wakes = [t for t in (deadline, self.kill_at) if t is not None]
            timeout = None if not wakes else max(0, int((min(wakes) - now) * 1000) + 1)
            events = poller.poll(timeout)
            if any(fd == pidfd for fd, _ in events):
                break
            if self.relay is not None:
                for fd, _ in events:
                    self.relay.handle(poller, fd)
            if any(fd == r for fd, _ in events):
                signals = os.read(r, 4096)
                if signal.SIGTERM in signals:
                    if self.kill_at is None:
                        self.cancelled = True
                        self._signal_group(pid, signal.SIGTERM)
                        self.kill_at = time.time() + grace
                    else:
                        self._signal_group(pid, signal.SIGKILL)
                if signal.SIGUSR1 in signals:
                    self._forward(pid)
            now = time.time()
            if deadline is not None and now >= deadline and self.kill_at is None:
                self.timed_out = True
                deadline = None
                self._signal_group(pid, signal.SIGTERM)
                self.kill_at = now + grace
            if self.kill_at is not None and now >= self.kill_at:
                self._signal_group(pid, signal.SIGKILL)
                self.kill_at = now + 3600
        # The leader has exited but is not reaped yet, so its pgid cannot be reused: kill what
        # it left behind in its group, then reap.
        self._signal_group(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        _kill_leftovers()
        if self.relay is not None:
            self.relay.close()
        if os.WIFSIGNALED(status):
            result["signal"] = os.WTERMSIG(status)
            result["rc"] = 128 + os.WTERMSIG(status)
        else:
            result["rc"] = os.waitstatus_to_exitcode(status)
        result.update(timeout=self.timed_out, cancelled=self.cancelled, end=time.time())
        return result

    def _forward(self, pid: int) -> None:
        try:
            with open(self.path + ".sig") as f:
                sig = int(f.read().strip() or 0)
        except (OSError, ValueError):
            return
        if sig > 0:
            self._signal_group(pid, sig)


def read_run_file(path: str) -> dict[str, Any]:
    """What a run file says: ``sup`` pid, ``job`` pid, ``exit`` result (each may be absent)."""
    out: dict[str, Any] = {}
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return out
    for line in data.split(b"\n")[:-1]:  # only complete lines
        key, _, value = line.partition(b" ")
        if key == b"exit":
            try:
                out["exit"] = json.loads(value)
            except ValueError:
                pass
        elif key in (b"sup", b"job"):
            try:
                out[key.decode()] = int(value)
            except ValueError:
                pass
    return out


def supervisor_alive(path: str) -> bool:
    """True if a supervisor still holds the run file's lock."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def terminate(pidfd: int) -> None:
    """Ask the supervisor (named by a pidfd, so a reused pid cannot be hit) to stop the job:
    SIGTERM to its process group, SIGKILL after the grace period."""
    try:
        signal.pidfd_send_signal(pidfd, signal.SIGTERM)
    except ProcessLookupError:
        pass  # it has just ended; its exit will be recorded


def send_signal(path: str, pidfd: int, sig: int) -> None:
    """Ask the supervisor to deliver ``sig`` to the job's process group."""
    tmp = path + ".sig.tmp"
    with open(tmp, "w") as f:
        f.write(str(sig))
    os.replace(tmp, path + ".sig")
    try:
        signal.pidfd_send_signal(pidfd, signal.SIGUSR1)
    except ProcessLookupError:
        pass
