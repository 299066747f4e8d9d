"""How long the client waits for the daemon's answer, and what it says when none comes.

A daemon can accept a connection and never answer: stopped (SIGSTOP, Ctrl-Z on a foreground
``berth daemon``), wedged, or some other process squatting on its socket. A command must not
hang a terminal, a cron job or a CI step on it (docs/daemon.md, "A daemon that does not
answer"). :class:`berth.client.Client` reads in steps of its ``POLL`` seconds; each silent
step comes here (imported only then: a daemon that answers never loads this module):

- a request due at once (queue, show, submit, cancel, hold...) gives up once the daemon has
  been silent for its patience (``BERTH_ANSWER_TIMEOUT`` seconds, default 60: the client's
  ``_patience``, far above the slowest answer measured: a 100,000-job queue, bench/RESULTS.md);
- a long wait by design (a ``wait`` request: ``berth wait``, ``logs -f``, ``submit --wait``)
  is given its own deadline, the longest the daemon may take to answer it plus that patience;
- either gives up as soon as the process serving the socket (SO_PEERCRED) has been seen
  stopped (``/proc/PID/stat`` state ``T``) for :data:`STOPPED_FOR` seconds: it cannot answer
  until someone resumes it, and the message says so.

The error (:class:`berth.errors.DaemonSilent`, exit 5 as for no daemon) is one line: the
socket, how long it waited, who serves it, what to do; after a submit, that the job may have
been queued.
"""

from __future__ import annotations

import _socket  # (builtin, loaded already by berth.client)
import sys

from berth.errors import DaemonSilent

STOPPED_FOR = 3.0  # seen stopped this long: give up without waiting out the patience
ENV = "BERTH_ANSWER_TIMEOUT"  # (named in the message; the client reads it)
SUBMITS = ("submit", "submit_all", "submit_file")


def peer_pid(sock: _socket.socket) -> int:
    """The pid of the process serving ``sock`` (SO_PEERCRED: pid, uid, gid), 0 if unknown."""
    try:
        raw = sock.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, 12)
    except OSError:
        return 0
    return int.from_bytes(raw[0:4], sys.byteorder, signed=True)


def state(pid: int) -> tuple[str, str]:
    """``(state letter, command name)`` of ``pid`` from /proc (``("", "")``: gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read().decode(errors="replace")
    except OSError:
        return "", ""
    name, _, rest = raw.partition(" (")[2].rpartition(")")
    return rest.split()[0] if rest.split() else "", name


def stopped(pid: int) -> bool:
    return pid > 0 and state(pid)[0] == "T"


def silent(path: str, sock: _socket.socket, waited: float, asked: str) -> DaemonSilent:
    """The error for a daemon that has not answered ``asked`` in ``waited`` seconds."""
    pid = peer_pid(sock)
    letter, name = state(pid) if pid > 0 else ("", "")
    head = f"the daemon on {path} did not answer in {waited:g} s"
    if letter == "T":
        what = (
            f": the daemon (pid {pid}) is stopped (SIGSTOP or Ctrl-Z); `kill -CONT {pid}` "
            "resumes it (its owner or root), or ask your admin"
        )
    else:
        who = f"pid {pid} ({name})" if letter else f"pid {pid}" if pid > 0 else "its server"
        what = (
            f": {who} accepted the connection but says nothing (wedged, overloaded, or not a "
            "berth daemon); `berth admin doctor` checks the system daemon, `systemctl status "
            f"berth` or your own daemon's log says more; {ENV}=SECONDS waits longer"
        )
    tail = ""
    if asked in SUBMITS:
        tail = (
            "; the job may have been queued: `berth queue` shows it once the daemon answers "
            "(a retry with --unique cannot queue it twice)"
        )
    return DaemonSilent(head + what + tail, path)


def still_waiting(
    path: str, sock: _socket.socket, asked: str, silent_for: float, stopped_for: float,
    limit: float | None, step: float,
) -> float:  # fmt: skip
    """After a silent step of ``step`` seconds (``silent_for`` in all): raise DaemonSilent if
    the daemon has been silent past ``limit`` (None: no limit) or stopped for
    :data:`STOPPED_FOR`; else how long it has been seen stopped now."""
    if stopped(peer_pid(sock)):
        stopped_for += step
        if stopped_for >= STOPPED_FOR:
            raise silent(path, sock, round(silent_for, 1), asked)
    else:
        stopped_for = 0.0
    if limit is not None and silent_for >= limit:
        raise silent(path, sock, round(silent_for, 1), asked)
    return stopped_for
