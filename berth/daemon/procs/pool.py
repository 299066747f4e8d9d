"""The daemon's side of its supervisors: a pool of them per owner, each on its own channel.

An attempt goes to an idle supervisor of the job's owner, or to a new one (forked by the fork
server, or by the daemon itself if that is gone). The daemon sends the attempt and learns how
it ended on the supervisor's channel, a SOCK_SEQPACKET pair; messages are JSON:

- daemon -> supervisor: ``{"op": "run", "job", "attempt", "path", "spec", "gate": 1}`` with
  the run file, the read end of the attempt's start gate (:mod:`berth.daemon.supervisor.gate`) and the
  claims attached; ``{"op": "term", "job", "attempt"}`` (SIGTERM to the job's group,
  SIGKILL after its grace); ``{"op": "signal", "job", "attempt", "sig"}``. Orders name their
  attempt: one that arrives after it ended is ignored, never applied to the next job.
- supervisor -> daemon: ``{"op": "done", "job", "attempt", "result"}``, sent after the result
  is in the run file and the claims and the run file's lock are let go; ``{"op": "fatal",
  "error"}`` if it cannot set itself up (then it exits).
- ``{"op": "notify", "job", "runs"}``: run a job's notifications (:mod:`berth.daemon.engine.notify`)
  on an idle supervisor of its owner, which is busy until it answers ``{"op": "notified"}``.

End of file on a channel means its supervisor died: the attempt it had (if any) is settled
from its run file, or by the verdict of the daemon that killed it (:attr:`Pool.verdicts`:
a supervisor that would not carry out a time limit or a cancel, see
:mod:`berth.daemon.procs.port`). An idle supervisor is ended by closing its channel, once it
has waited :data:`IDLE_SECONDS` for work.

Each supervisor joins a cgroup of its own (:mod:`berth.daemon.procs.cgroup`) where the daemon
can make them; the pool names it, and removes it once it is empty. With ``[daemon]
isolate_devices``, that cgroup lets the processes in it open the device files of the GPUs of
the attempt they run and of no other GPU (:mod:`berth.daemon.procs.devfilter`), set before
each attempt reaches the supervisor; a supervisor that cannot be confined runs nothing.
"""

from __future__ import annotations

import json
import logging
import os
import socket

from berth.daemon.ports import SUPERVISOR_DIED
from berth.daemon.procs.spawner import pair
from berth.daemon.supervisor import serve
from berth.daemon.supervisor.attempt import MAX_MESSAGE
from berth.daemon.supervisor.jobfiles import own_limit

TYPE_CHECKING = False
if TYPE_CHECKING:
    import asyncio
    from collections.abc import Callable
    from typing import Any

    from berth.daemon.procs.cgroup import Cgroups
    from berth.daemon.procs.devfilter import DeviceFilter
    from berth.daemon.procs.spawner import Spawner

    Owner = tuple[int | None, int | None, str | None]

log = logging.getLogger("berth.daemon")

IDLE_SECONDS = 30.0
CGROUP_TRIES = 20  # sweeps (poll intervals) a supervisor's cgroup waits to be empty
_REPLY_MAX = 65536  # a `done` message is a few hundred bytes


class Unconfined(OSError):
    """An attempt's supervisor cannot be confined to the attempt's GPUs' device files."""


class Slot:
    """One supervisor, as the daemon sees it."""

    __slots__ = (
        "attempt", "cgroup", "chan", "fatal", "forked", "id", "idle_since", "job", "owner", "pid",
        "pidfd", "theirs",
    )  # fmt: skip

    def __init__(self, slot_id: int, owner: Owner, chan: socket.socket) -> None:
        self.id = slot_id
        self.owner = owner
        self.chan = chan
        self.pid: int | None = None  # known once forked
        self.forked = False  # forked by the daemon itself (so the daemon reaps it)
        self.job: int | None = None  # the attempt it runs
        self.attempt = 0
        self.idle_since = 0.0
        self.fatal: str | None = None  # why it could not serve, if it said so before dying
        self.theirs: socket.socket | None = None  # its end, until it is forked
        self.pidfd: int | None = None  # (to signal it: SIGCONT, SIGKILL; never a reused pid)
        self.cgroup: str | None = None  # the cgroup it joins, if any


class Pool:
    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        on_done: Callable[[int, int, dict[str, Any]], None],
        on_gone: Callable[[int, int, str, bool], None],
    ) -> None:
        """``on_done(job, attempt, result)``; ``on_gone(job, attempt, why, started)``: the
        supervisor of that attempt died (``started``: False if it never existed)."""
        self.loop = loop
        self.on_done = on_done
        self.on_gone = on_gone
        self.spawner: Spawner | None = None
        self.idle: dict[Owner, list[Slot]] = {}
        self.slots: dict[int, Slot] = {}
        self._seq = 0
        self._zombies: list[int] = []  # supervisors the daemon forked and has let go
        self.cgroups: Cgroups | None = None  # where its supervisors' cgroups are, if anywhere
        self.devices: DeviceFilter | None = None  # [daemon] isolate_devices, where enforced
        # (job, attempt) -> the result to record when its supervisor's death is heard (the
        # daemon killed it: it would not carry out a time limit or a cancel).
        self.verdicts: dict[tuple[int, int], dict[str, Any]] = {}
        self._emptying: dict[str, int] = {}  # cgroup -> tries left to remove it

    # -- sending ------------------------------------------------------------------------------

    def run(self, owner: Owner, msg: dict[str, Any], fds: list[int], gpus: list[int]) -> Slot:
        """Hand an attempt (``msg`` without its op) and its descriptors (run file first, then
        its gate if ``msg`` says so, then the claims) to a supervisor of ``owner``; the caller
        closes its copies afterwards. With :attr:`devices`, the supervisor's cgroup lets it
        open the device files of ``gpus`` only, before the attempt reaches it."""
        data = json.dumps({"op": "run", **msg}).encode()
        if len(data) > MAX_MESSAGE:
            raise OSError(f"its launch spec is too large ({len(data)} bytes)")
        while True:
            idle = self.idle.get(owner)
            fresh = not idle
            slot = idle.pop() if idle else self._new(owner)  # the most recently busy: warm
            try:
                if not fresh:
                    self._confine(slot, gpus)
                socket.send_fds(slot.chan, [data], fds)
                if fresh:  # forked once its first attempt waits for it: it never misses it
                    self._start(slot, gpus)
                break
            except OSError as e:
                self._close(slot)  # an idle one that has just died: try the next
                if fresh or isinstance(e, Unconfined):
                    raise
        slot.job, slot.attempt = int(msg["job"]), int(msg["attempt"])
        return slot

    def notify(self, owner: Owner, msg: dict[str, Any]) -> None:
        """Hand a job's notifications (``msg`` without its op) to a supervisor of ``owner``;
        it takes no attempt until it has run them."""
        data = json.dumps({"op": "notify", **msg}).encode()
        if len(data) > MAX_MESSAGE:
            raise OSError(f"its notification is too large ({len(data)} bytes)")
        while True:
            idle = self.idle.get(owner)
            fresh = not idle
            slot = idle.pop() if idle else self._new(owner)
            try:
                if not fresh:
                    self._confine(slot, [])  # (the owner's own commands: no GPU of theirs)
                slot.chan.send(data)
                if fresh:
                    self._start(slot, [])
                break
            except OSError as e:
                self._close(slot)
                if fresh or isinstance(e, Unconfined):
                    raise
        slot.job = None

    def order(self, slot: Slot, job: int, attempt: int, op: str, sig: int = 0) -> None:
        """``term`` or ``signal`` the attempt ``job``.``attempt`` that ``slot`` runs."""
        if slot.job != job or slot.attempt != attempt:
            return  # it has ended; its result is on its way
        body = {"op": op, "job": job, "attempt": attempt, "sig": sig}
        try:
            slot.chan.send(json.dumps(body).encode(), socket.MSG_DONTWAIT)
        except OSError as e:  # a dead one is noticed by its end of file
            log.warning("job %d: cannot reach its supervisor: %s", job, e)

    def _new(self, owner: Owner) -> Slot:
        """A slot whose supervisor is not forked yet (see :meth:`_start`)."""
        self._seq += 1
        ours, theirs = pair()
        slot = Slot(self._seq, owner, ours)
        slot.theirs = theirs
        self.slots[slot.id] = slot
        self.loop.add_reader(ours.fileno(), self._on_readable, slot)
        return slot

    def _confine(self, slot: Slot, gpus: list[int]) -> None:
        """With :attr:`devices`: the slot's cgroup lets its processes open the device files
        of ``gpus`` and no other GPU's (Unconfined if it cannot: the attempt does not run)."""
        if self.devices is None:
            return
        if slot.cgroup is None:
            raise Unconfined("cannot confine it to its GPUs' devices: its supervisor has no cgroup")
        try:
            self.devices.apply(slot.cgroup, gpus)
        except OSError as e:
            raise Unconfined(f"cannot confine it to its GPUs' devices: {e.strerror or e}") from None

    def _start(self, slot: Slot, gpus: list[int]) -> None:
        """Have the slot's supervisor forked: by the fork server, or by the daemon itself;
        its cgroup confined to the devices of ``gpus`` first (see :meth:`_confine`)."""
        theirs, slot.theirs = slot.theirs, None
        assert theirs is not None
        uid, gid, user = slot.owner
        if self.cgroups is not None:
            slot.cgroup = self.cgroups.make(slot.id)
        spec = {"uid": uid, "gid": gid, "user": user, "cgroup": slot.cgroup}
        try:
            if self.devices is not None:
                spec["confined"] = True  # (it may not go on outside its cgroup)
                if slot.cgroup is not None:  # (v1: the devices hierarchy's cgroup too)
                    spec["devices"] = self.devices.make(slot.cgroup)
            self._confine(slot, gpus)
            if self.spawner is not None and self.spawner.alive:
                self.spawner.request(slot.id, spec, theirs.fileno())
            else:
                slot.pid = serve.start(theirs.fileno(), spec)
                slot.forked = True
                slot.pidfd = os.pidfd_open(slot.pid)  # (our child, not reaped: its pid)
        finally:
            theirs.close()

    # -- receiving ----------------------------------------------------------------------------

    def on_spawner_reply(self) -> None:
        """The fork server answered: note pids; a failed fork ends its slot."""
        spawner = self.spawner
        assert spawner is not None
        for msg, pidfd in spawner.replies():
            slot = self.slots.get(int(msg.get("slot", -1)))
            if slot is None or slot.pidfd is not None or "pid" not in msg:
                if pidfd is not None:
                    os.close(pidfd)  # (the channel's end of file tells us of its death)
            else:
                slot.pidfd = pidfd  # (kept to signal it; its death is its channel's EOF)
            if slot is None:
                continue
            if "pid" in msg:
                slot.pid = int(msg["pid"])
            else:
                self._gone(slot, str(msg.get("error")), started=False)
        if not spawner.alive:
            log.error("the supervisor fork server exited; forking supervisors directly")
            self.loop.remove_reader(spawner.sock.fileno())
            # A request it took with it closed that supervisor's channel: its end of file
            # settles the attempt.

    def _on_readable(self, slot: Slot) -> None:
        while True:
            try:
                data = slot.chan.recv(_REPLY_MAX, socket.MSG_DONTWAIT)
            except BlockingIOError:
                return
            except ConnectionResetError:
                continue  # it closed with our message unread; what it sent comes next, then EOF
            except OSError:
                data = b""
            if not data:
                self._gone(slot, slot.fatal or SUPERVISOR_DIED, started=True)
                return
            try:
                msg = json.loads(data)
                if msg.get("op") == "fatal":
                    slot.fatal = f"its supervisor could not start: {msg.get('error')}"
                    log.error("supervisor %s: %s", slot.pid, slot.fatal)
                    continue
                if msg.get("op") == "notified":  # free again
                    if slot.job is None and slot not in self.idle.get(slot.owner, ()):
                        self._idle(slot, self.loop.time())
                    continue
                job, attempt, result = int(msg["job"]), int(msg["attempt"]), msg["result"]
            except (ValueError, KeyError, TypeError):
                log.error("supervisor %s sent a malformed message: %r", slot.pid, data[:200])
                continue
            if msg.get("op") != "done" or not isinstance(result, dict):
                continue
            if slot.job == job and slot.attempt == attempt:
                slot.job = None
                if own_limit(result.get("exhausted")):
                    self._close(slot)  # (it met its own limit: a fresh one takes the next)
                else:
                    self._idle(slot, self.loop.time())
            self.on_done(job, attempt, result)

    def forget_cgroup(self, path: str) -> None:
        """Remove the cgroup ``path`` once it is empty (tried at each sweep, a while)."""
        self._emptying[path] = CGROUP_TRIES

    def _idle(self, slot: Slot, now: float) -> None:
        slot.idle_since = now
        self.idle.setdefault(slot.owner, []).append(slot)

    def _gone(self, slot: Slot, why: str, started: bool) -> None:
        job, attempt = slot.job, slot.attempt
        self._close(slot)
        if job is not None:
            verdict = self.verdicts.pop((job, attempt), None)
            if verdict is not None:
                self.on_done(job, attempt, verdict)
            else:
                self.on_gone(job, attempt, why, started)

    def _close(self, slot: Slot) -> None:
        if self.slots.pop(slot.id, None) is None:
            return
        self.loop.remove_reader(slot.chan.fileno())
        slot.chan.close()
        if slot.theirs is not None:
            slot.theirs.close()
            slot.theirs = None
        idle = self.idle.get(slot.owner)
        if idle and slot in idle:
            idle.remove(slot)
        if slot.forked and slot.pid is not None:
            self._zombies.append(slot.pid)
        if slot.pidfd is not None:
            os.close(slot.pidfd)
            slot.pidfd = None
        if slot.cgroup is not None:  # removed once it is empty (its supervisor has exited)
            self._emptying[slot.cgroup] = CGROUP_TRIES
        slot.job = None

    # -- upkeep -------------------------------------------------------------------------------

    def sweep(self, now: float) -> None:
        """End supervisors idle for :data:`IDLE_SECONDS`; reap those the daemon forked."""
        for idle in list(self.idle.values()):
            for slot in [s for s in idle if now - s.idle_since >= IDLE_SECONDS]:
                self._close(slot)  # end of file: it exits
        self.idle = {k: v for k, v in self.idle.items() if v}
        left = []
        for pid in self._zombies:
            try:
                if os.waitpid(pid, os.WNOHANG)[0] == 0:
                    left.append(pid)
            except ChildProcessError:
                pass
        self._zombies = left
        if self.cgroups is not None:
            for path, tries in list(self._emptying.items()):
                if self.cgroups.remove(path) or tries <= 1:
                    del self._emptying[path]  # (or left to the sweep at the next start)
                    if self.devices is not None:
                        self.devices.remove(path)
                else:
                    self._emptying[path] = tries - 1

    def close(self) -> None:
        """The daemon stops: idle supervisors exit, busy ones finish their attempt first."""
        idle = [s.cgroup for s in self.slots.values() if s.job is None and s.cgroup]
        for slot in list(self.slots.values()):
            self._close(slot)
        if self.cgroups is not None:
            self.cgroups.close(idle)
        if self.devices is not None:
            self.devices.sweep()
