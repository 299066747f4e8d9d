"""Supervisors: processes that outlive the daemon and run the jobs, one attempt at a time.

A supervisor is forked (no ``exec``: a fresh interpreter per job would cap throughput near 10
jobs/s) by the fork server (:mod:`berth.daemon.procs.spawner`), or by the daemon if that is gone,
for one owner (the user its jobs run as). It calls ``setsid()`` so that nothing aimed at the
daemon (a ``kill -9``, a terminal's Ctrl-C) reaches it, closes every descriptor but its
channel to the daemon, joins a cgroup of its own if the daemon names one (it and the jobs it
runs can never leave it: :mod:`berth.daemon.procs.cgroup`), becomes a child subreaper, drops
to its owner's uid and gid, and then
serves the daemon: each ``run`` message carries one attempt (job id, attempt number, launch
spec) with the attempt's locked run file, its start gate and its claims attached; the
supervisor prepares it, waits at the gate until its start is durable (:mod:`berth.daemon.supervisor.gate`),
runs it (:class:`berth.daemon.supervisor.attempt.AttemptRun`), writes the result to the run file, lets go of the
run file's lock and the claims, and answers ``done`` with the result. Then it waits for the
next attempt: under a stream of short jobs, a handful of supervisors run them all, and no
process is forked per job but the job itself.

When the daemon goes away (end of file on the channel), an idle supervisor exits at once and a
busy one finishes its attempt, records it, and exits: exactly one attempt per supervisor is
ever left for a restarted daemon to adopt (see :mod:`berth.daemon.supervisor.runfile`). The daemon ends
idle supervisors by closing their channel.
"""

from __future__ import annotations

import json
import os
import pwd
import signal
import socket

from berth.daemon.supervisor import ingroup, runfile
from berth.daemon.supervisor.attempt import IDENTITY, AttemptRun, receive

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    _signal = signal
else:
    import _signal  # signal's wrappers would turn every number into an enum member


# Everything a supervisor needs is imported by the fork server, once: an import in a forked
# child costs milliseconds, per child.
try:
    import ctypes

    _LIBC: ctypes.CDLL | None = ctypes.CDLL(None, use_errno=True)
except (ImportError, OSError):  # pragma: no cover
    _LIBC = None
# Bound once: looking a function up in a CDLL creates (and caches) its foreign-function object.
_PRCTL: Any = getattr(_LIBC, "prctl", None)

_SIG_DFL = int(signal.SIG_DFL)
_SIG_IGN = int(signal.SIG_IGN)
_MAXFD = max(os.sysconf("SC_OPEN_MAX"), 1024)
_CONTROL = {signal.SIGTERM, signal.SIGUSR1}
_CONTROL_CHLD = _CONTROL | {signal.SIGCHLD}


def start(chan: int, owner: dict[str, Any]) -> int:
    """Fork a supervisor serving the channel ``chan`` (a SOCK_SEQPACKET end) for ``owner``
    (``uid``, ``gid``, ``user``, ``cgroup``: the one to make and join, or None; ``confined``:
    its cgroup confines its devices, so not joining it is fatal; ``devices``: on cgroup v1, the
    devices hierarchy's cgroup to join too); return its
    pid. The caller closes its copy of ``chan``."""
    # Control signals stay blocked until the child has its handlers: an order sent the moment
    # it is born is kept pending, not fatal.
    old_mask = _signal.pthread_sigmask(signal.SIG_BLOCK, _CONTROL)
    try:
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child never returns
            code = 70
            try:
                code = serve(chan, owner)
            finally:
                os._exit(code)
    finally:
        _signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
    return pid


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


def serve(chan_fd: int, owner: dict[str, Any]) -> int:  # pragma: no cover - forked child
    r = _quiet_process(chan_fd)
    chan: socket.socket | None = socket.socket(fileno=chan_fd)
    assert chan is not None
    try:
        set_name(b"berth-sup")
        if owner.get("cgroup"):  # (as root still; without it, tracked as without cgroups)
            try:
                ingroup.enter(str(owner["cgroup"]))
                if owner.get("devices"):  # (cgroup v1: its devices are another hierarchy's)
                    ingroup.enter(str(owner["devices"]), main=False)
            except OSError as e:
                if owner.get("confined"):  # (its cgroup is what keeps it off others' GPUs)
                    raise OSError(
                        f"cannot join its cgroup {owner['cgroup']}: {e.strerror}"
                    ) from None
        _become_subreaper()
        _drop_privileges(owner)
    except Exception as e:  # say why, so the jobs given to us fail with a reason
        fatal = json.dumps({"op": "fatal", "error": f"{type(e).__name__}: {e}"})
        try:
            chan.sendmsg([fatal.encode()], [], socket.MSG_NOSIGNAL)
        except OSError:
            pass
        return 70
    me = f"sup {os.getpid()}\n".encode()
    while chan is not None:
        msg, fds = receive(chan)
        if msg is None:
            return 0  # the daemon has gone, or wants us gone
        _drain(r)  # signals sent while idle were meant for an attempt that has ended
        if msg.get("op") == "notify":
            for fd in fds:
                os.close(fd)
            try:
                chan = _notify(msg, chan, r)
                if chan is None:
                    return 0
                chan.sendmsg([b'{"op": "notified"}'], [], socket.MSG_NOSIGNAL)
            except OSError:
                return 0
            continue
        if msg.get("op") != "run" or not fds or msg.get("truncated"):
            for fd in fds:
                os.close(fd)
            if msg.get("op") == "run" and msg.get("truncated"):  # (no room for its files)
                try:
                    chan.sendmsg([done(msg, _NO_ROOM)], [], socket.MSG_NOSIGNAL)
                except OSError:
                    return 0
            continue
        chan = _one_attempt(msg, fds, chan, r, me)
    return 0


def _quiet_process(chan_fd: int) -> int:  # pragma: no cover - forked child
    """A session of its own, the signals it waits on routed to a wakeup pipe (its read end
    returned), every descriptor but the channel closed, stdio on /dev/null."""
    os.setsid()
    r, w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    _signal.set_wakeup_fd(w)
    _signal.signal(signal.SIGTERM, _nothing)
    _signal.signal(signal.SIGUSR1, _nothing)
    _signal.signal(signal.SIGCHLD, _SIG_DFL)
    _signal.signal(signal.SIGPIPE, _SIG_DFL)
    _signal.signal(signal.SIGINT, _SIG_IGN)
    _signal.signal(signal.SIGHUP, _SIG_IGN)
    # Pending control signals arrive now (and are drained with the next attempt's start).
    _signal.pthread_sigmask(signal.SIG_UNBLOCK, _CONTROL_CHLD)
    _close_fds({chan_fd, r, w})
    null = os.open(os.devnull, os.O_RDWR)
    for std in (0, 1, 2):
        os.dup2(null, std)
    os.close(null)
    os.set_inheritable(chan_fd, False)
    return r


def _one_attempt(  # pragma: no cover - forked child
    msg: dict[str, Any], fds: list[int], chan: socket.socket, r: int, me: bytes
) -> socket.socket | None:
    """Run one attempt (``run``) and say how it ended; the channel, or None when the
    daemon has gone (the supervisor then exits)."""
    gated = bool(msg.get("gate")) and len(fds) > 1
    run_fd, gate_fd = fds[0], (fds[1] if gated else -1)
    claims = tuple(fds[2:] if gated else fds[1:])
    runfile.note(run_fd, me)
    attempt = AttemptRun(msg, run_fd, claims, chan, r, gate_fd)
    result = attempt.run()
    # One write: a reader sees either nothing or the whole line. Then the claims and the
    # run file's lock go: the attempt is over for everyone. (One whose start never became
    # durable leaves no line: it never ran, see berth.daemon.supervisor.gate.)
    line = encode(result)
    if not result.get("unstarted"):
        runfile.note(run_fd, b"exit " + line + b"\n")
    for fd in claims:
        os.close(fd)
    os.close(run_fd)
    try:
        os.chdir("/")  # do not keep the job's directory busy while idle
    except OSError:
        pass
    if attempt.chan is None:
        return None  # the daemon hung up during the attempt: nobody to tell, nothing to take
    try:
        attempt.chan.sendmsg([done(msg, line)], [], socket.MSG_NOSIGNAL)
        for refused in attempt.refused:
            attempt.chan.sendmsg([done(refused, _BUSY)], [], socket.MSG_NOSIGNAL)
    except OSError:
        return None
    return attempt.chan


def _notify(msg: dict[str, Any], chan: socket.socket, wakeup: int) -> socket.socket | None:
    """Run a job's notifications (:mod:`berth.daemon.engine.notify`) one after the other, each as
    an attempt without GPUs or run file (its time limit, its leftovers killed); how they end
    is nobody's business but their log's. The channel, or None if the daemon hung up.
    Raises OSError if the channel fails."""
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        for spec in msg.get("runs") or ():
            if not isinstance(spec, dict):
                continue
            order = {"spec": spec, "job": msg.get("job"), "attempt": 0, "path": os.devnull}
            attempt = AttemptRun(order, null, (), chan, wakeup)
            attempt.run()
            if attempt.chan is None:
                return None
            for refused in attempt.refused:  # (never sent to a busy one; refuse, not lose)
                chan.sendmsg([done(refused, _BUSY)], [], socket.MSG_NOSIGNAL)
    finally:
        os.close(null)
        try:
            os.chdir("/")
        except OSError:
            pass
    return chan


# An attempt whose descriptors (run file, gate, claims) found no room in our file table: not
# run; its job waits (berth/daemon/engine/exhausted.py), and we take no other attempt.
_NO_ROOM = (
    b'{"rc": 127, "signal": null, "timeout": false, "cancelled": false, "start": null, '
    b'"end": null, "error": "its supervisor had no descriptor left for its files", '
    b'"unstarted": true, "nospace": "its supervisor had no descriptor left for its files '
    b'(Too many open files)", "nospace_path": null, "exhausted": "EMFILE"}'
)
_BUSY = (
    b'{"rc": 127, "signal": null, "timeout": false, "cancelled": false, "start": null, '
    b'"end": null, "error": "internal error: its supervisor was busy"}'
)


def done(msg: dict[str, Any], result: bytes) -> bytes:
    return b'{"op": "done", "job": %d, "attempt": %d, "result": %s}' % (
        int(msg["job"]),
        int(msg["attempt"]),
        result,
    )


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 4096):
            pass
    except BlockingIOError:
        pass


def encode(result: dict[str, Any]) -> bytes:
    """``json.dumps(result).encode()`` for the flat result dict, without building an encoder
    (same text for None, bools, ints, floats and strings)."""
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


def _drop_privileges(owner: dict[str, Any]) -> None:
    """A root daemon runs each job as its submitter: the supervisor becomes that user (their
    groups from the system's group database, then gid, then uid: real, effective and saved,
    so there is no way back) before it opens a log or spawns anything (run files and claims
    come to it already open). A daemon that is not root runs only its own user's jobs."""
    uid, gid = owner.get("uid"), owner.get("gid")
    me = os.geteuid()
    if me != 0:
        if uid is not None and uid != me:
            raise PermissionError(f"a daemon of uid {me} cannot run a job of uid {uid}")
        return
    if uid is None or gid is None:
        return  # (no owner named: the daemon's own user, as for a user's own daemon)
    try:
        pw: Any = pwd.getpwuid(uid)
        name, home, shell = pw.pw_name, pw.pw_dir, pw.pw_shell
    except (KeyError, OverflowError):
        name, home, shell = owner.get("user") or str(uid), "/", "/bin/sh"
    if uid == 0:
        IDENTITY.update(HOME=home, USER=name, LOGNAME=name, SHELL=shell)
        return
    os.initgroups(name, gid)
    os.setgid(gid)
    os.setuid(uid)
    if os.getresuid() != (uid, uid, uid) or os.getresgid() != (gid, gid, gid):
        raise PermissionError(f"could not become uid {uid} gid {gid} for good")
    try:
        os.setuid(0)
    except PermissionError:
        pass
    else:  # pragma: no cover - the kernel would have to be broken
        raise PermissionError("could become root again after dropping privileges")
    IDENTITY.update(HOME=home, USER=name, LOGNAME=name, SHELL=shell)


def set_name(name: bytes) -> None:
    """The process's name as ``ps -o comm``, ``top`` and ``pkill`` show it (15 bytes)."""
    if _PRCTL is not None:
        _PRCTL(15, name[:15], 0, 0, 0)  # PR_SET_NAME


def _become_subreaper() -> None:
    """Orphaned descendants of a job become our children (not init's), so we can reap and
    kill what the job leaves behind even outside its process group."""
    if _PRCTL is not None:
        _PRCTL(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
