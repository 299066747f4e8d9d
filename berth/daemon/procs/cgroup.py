"""One cgroup per supervisor: what a job starts cannot leave it, and the daemon can end it all.

A root daemon makes a directory of cgroups of its own (:func:`find`): under its own cgroup in
the cgroup v2 hierarchy where one is mounted and writable, else in the v1 ``freezer``
hierarchy, else in the v1 ``pids`` one (as Slurm's proctrack/cgroup). Each supervisor it
starts joins a new cgroup there (``s<tag>-<slot>``, made by the daemon, joined by the
supervisor while it is still root, before it becomes the job's user:
:func:`berth.daemon.supervisor.ingroup.enter`), so the supervisor and every process
of the attempt it runs are in it, whatever they do: ``setsid()``, closing their descriptors,
double forks. The cgroup's files are root's: the user cannot move a process out of it, nor
make cgroups inside it.

Ending a cgroup (:meth:`Cgroups.kill`): ``cgroup.kill`` on v2 (Linux >= 5.14); else freeze
it (v2 ``cgroup.freeze``, v1 ``freezer.state``), SIGKILL every process ``cgroup.procs``
lists, and thaw it, so nothing forks between the read and the kill; the ``pids`` hierarchy
cannot freeze, so its members are killed until none is left. The pids come from the kernel's
list of the cgroup's members: never from a file a user wrote.

Where none of these is writable (no cgroup filesystem, a read-only one, a daemon that is not
root), :func:`find` says why and the daemon logs it at start: jobs are then tracked as before
by their process group, their session and their claims' descriptors (:mod:`.reap`), and by
the supervisor as a child subreaper.
"""

from __future__ import annotations

import hashlib
import logging
import os
import signal
import time

from berth.daemon.supervisor.ingroup import members

log = logging.getLogger("berth.daemon")

V2, FREEZER, PIDS = "v2", "freezer", "pids"
MOUNTS = "/proc/self/mounts"


class Cgroups:
    """The daemon's directory of cgroups (``root``), of kind :data:`V2`, :data:`FREEZER` or
    :data:`PIDS`."""

    def __init__(self, kind: str, root: str) -> None:
        self.kind = kind
        self.root = root
        self.tag = f"{os.getpid()}-{time.time_ns() // 1_000_000 % 100_000_000}"
        # cgroup.kill (Linux >= 5.14, v2); without it, freeze and kill each member
        self.has_kill = kind == V2 and os.path.exists(os.path.join(root, "cgroup.kill"))

    def path(self, slot: int) -> str:
        """The cgroup of the supervisor of pool slot ``slot``."""
        return os.path.join(self.root, f"s{self.tag}-{slot}")

    def make(self, slot: int) -> str | None:
        """Make the cgroup of the supervisor of pool slot ``slot`` (which joins it); None
        if it cannot be made (that supervisor is then tracked as without cgroups)."""
        path = self.path(slot)
        try:
            os.mkdir(path)
            os.chmod(path, 0o755)  # (whatever the umask: its supervisor reads its members)
        except OSError as e:
            log.warning("cannot make the cgroup %s: %s", path, e.strerror)
            return None
        return path

    def owns(self, path: str) -> bool:
        """Whether ``path`` is one of the cgroups of this directory."""
        return os.path.dirname(path) == self.root and os.path.basename(path).startswith("s")

    def of_pid(self, pidfd: int, pid: int) -> str | None:
        """The cgroup of ours the process ``pid`` is in (read while its ``pidfd`` is held,
        and checked alive after: the pid cannot have been reused), or None."""
        mount = _mount(self.kind)
        try:
            with open(f"/proc/{pid}/cgroup") as f:
                lines = f.read().splitlines()
            signal.pidfd_send_signal(pidfd, 0)
        except OSError:
            return None
        for line in lines:
            _, names, rel = line.split(":", 2)
            if mount is not None and _names(self.kind, names):
                path = os.path.normpath(mount + rel)
                return path if self.owns(path) else None
        return None

    def kill(self, path: str) -> int:
        """SIGKILL every process of the cgroup ``path``; how many there were."""
        pids = members(path)
        if not pids:
            return 0
        if self.has_kill:
            _write(os.path.join(path, "cgroup.kill"), "1")
            return len(pids)
        freeze = {V2: ("cgroup.freeze", "1", "0"), FREEZER: ("freezer.state", "FROZEN", "THAWED")}
        knob = freeze.get(self.kind)
        if knob is not None and _write(os.path.join(path, knob[0]), knob[1]):
            try:
                _wait_frozen(path, self.kind)
                pids = _kill_all(path)
            finally:
                _write(os.path.join(path, knob[0]), knob[2])
            return len(pids)
        killed: set[int] = set()
        for _ in range(100):  # (pids: no freezing; a fork bomb is bounded by pids.max)
            left = _kill_all(path)
            if not left:
                break
            killed.update(left)
        return len(killed)

    def remove(self, path: str) -> bool:
        """Remove the cgroup ``path`` once it is empty; False if it is not (yet)."""
        try:
            os.rmdir(path)
        except FileNotFoundError:
            return True
        except OSError:
            return False
        return True

    def orphans(self, keep: set[str]) -> list[str]:
        """The cgroups of ours not in ``keep`` that still hold processes."""
        try:
            names = os.listdir(self.root)
        except OSError:
            return []
        paths = [os.path.join(self.root, n) for n in names if n.startswith("s")]
        return [p for p in paths if p not in keep and os.path.isdir(p) and members(p)]

    def close(self, exiting: list[str]) -> None:
        """The daemon stops: remove the empty cgroups (those in ``exiting``, of supervisors
        told to exit, once they have: a second at most), and the directory if it is empty (a
        busy supervisor's cgroup stays, for the next daemon to adopt)."""
        deadline = time.monotonic() + 1.0
        while exiting and time.monotonic() < deadline:
            exiting = [p for p in exiting if not self.remove(p)]
            if exiting:
                time.sleep(0.01)
        self.sweep()
        self.remove(self.root)

    def sweep(self) -> None:
        """Remove the empty cgroups a previous daemon left (those with processes are an
        adopted supervisor's, or will be ended with its attempt)."""
        try:
            names = os.listdir(self.root)
        except OSError:
            return
        for name in names:
            path = os.path.join(self.root, name)
            if name.startswith("s") and os.path.isdir(path) and not members(path):
                self.remove(path)


def find(state_dir: str) -> tuple[Cgroups | None, str]:
    """The cgroups this daemon can make for its supervisors, and a line for its log saying
    which (or why none). One directory per state directory (so one daemon's)."""
    if os.geteuid() != 0:
        return None, "not root: jobs are tracked by their process group and session, no cgroup"
    name = _name(state_dir)
    why = []
    for kind in (V2, FREEZER, PIDS):
        mount = _mount(kind)
        if mount is None:
            why.append(f"{kind}: not mounted")
            continue
        root = os.path.join(mount + _own(kind), name)
        try:
            os.makedirs(root, exist_ok=True)
            os.chmod(root, 0o755)  # (passable: a supervisor reads its own cgroup's members)
            probe = os.path.join(root, f"probe-{os.getpid()}")
            os.mkdir(probe)
            os.rmdir(probe)
        except OSError as e:
            why.append(f"{kind} at {mount}: {e.strerror}")
            continue
        groups = Cgroups(kind, root)
        groups.sweep()
        how = "cgroup.kill" if groups.has_kill else "freeze, kill, thaw"
        how = how if kind != PIDS else "kill until empty"
        return groups, f"each job's processes tracked by a cgroup ({kind}: {root}; {how})"
    return None, (
        "no writable cgroup hierarchy (" + "; ".join(why) + "): jobs are tracked by their "
        "process group and session only"
    )


def remove_all(state_dir: str) -> None:
    """Kill every process of the cgroups of the daemon of ``state_dir`` and remove them (a
    test's clean-up, after its daemon). Makes nothing."""
    for kind in (V2, FREEZER, PIDS):
        mount = _mount(kind)
        root = os.path.join(mount + _own(kind), _name(state_dir)) if mount else ""
        if not root or not os.path.isdir(root):
            continue
        groups = Cgroups(kind, root)
        for name in os.listdir(root):
            path = os.path.join(root, name)
            if os.path.isdir(path):
                groups.kill(path)
                for _ in range(200):
                    if groups.remove(path):
                        break
                    time.sleep(0.005)
        groups.remove(root)


def mine(kind: str) -> str | None:
    """This process's cgroup in the hierarchy of ``kind`` (a v1 controller's name, or
    :data:`V2`), as a path; None where that hierarchy is not mounted."""
    mount = _mount(kind)
    return None if mount is None else mount + _own(kind)


def _name(state_dir: str) -> str:
    """The name of the directory of cgroups of the daemon of ``state_dir``."""
    return "berth-" + hashlib.sha256(os.path.realpath(state_dir).encode()).hexdigest()[:12]


def _mount(kind: str) -> str | None:
    """Where the hierarchy of ``kind`` is mounted (v2: the cgroup2 filesystem)."""
    try:
        with open(MOUNTS) as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        fields = line.split()
        if len(fields) < 4:
            continue
        if kind == V2 and fields[2] == "cgroup2":
            return fields[1]
        if kind != V2 and fields[2] == "cgroup" and kind in fields[3].split(","):
            return fields[1]
    return None


def _own(kind: str) -> str:
    """This process's cgroup in the hierarchy of ``kind`` ("" for the root)."""
    try:
        with open("/proc/self/cgroup") as f:
            lines = f.read().splitlines()
    except OSError:
        return ""
    for line in lines:
        _, names, rel = line.split(":", 2)
        if _names(kind, names):
            return rel.rstrip("/")
    return ""


def _names(kind: str, names: str) -> bool:
    """Whether a line of /proc/PID/cgroup with these controller ``names`` is ``kind``'s."""
    return names == "" if kind == V2 else kind in names.split(",")


def _write(path: str, value: str) -> bool:
    try:
        with open(path, "w") as f:
            f.write(value)
        return True
    except OSError:
        return False


def _wait_frozen(path: str, kind: str) -> None:
    """Until the cgroup is frozen (at most about a second: then kill what is there)."""
    for _ in range(200):
        try:
            if kind == V2:
                with open(os.path.join(path, "cgroup.events")) as f:
                    if "frozen 1" in f.read():
                        return
            else:
                with open(os.path.join(path, "freezer.state")) as f:
                    if f.read().strip() == "FROZEN":
                        return
        except OSError:
            return
        time.sleep(0.005)


def _kill_all(path: str) -> list[int]:
    pids = members(path)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    return pids
