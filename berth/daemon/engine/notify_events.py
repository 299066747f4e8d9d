"""What the admin's notifications tell (issue 36.3), as it becomes true: the events of
:mod:`berth.config.notify`, handed to the :class:`~berth.daemon.engine.notify_out.Outbox`.

- **jobs** (``job_begin``, ``job_requeue``, ``job_end`` with ``job_fail`` or
  ``job_timeout``): the :class:`Announcer` is chained to ``Journal.on_committed`` (as the
  dashboard's observer is), so it tells only what is durable, once per attempt. A job's own
  ``--mail-type BEGIN``/``REQUEUE`` mail to its ``--mail-user`` goes the same way as its end's
  (:mod:`berth.daemon.engine.notify`: a supervisor of its owner runs ``sendmail``);
- **the machine** (``gpu_lost``: a GPU unhealthy or gone from NVML's list;
  ``reservation_start``/``reservation_end``; ``disk_full``: starts wait for room), seen after
  each poll of the GPUs (:meth:`Announcer.polled`), so within ``poll_interval``.

A message is a JSON object: ``event`` (the most precise), ``host``, ``time``, ``job``/
``reservation``/``gpu`` facts, and ``text``: one line for Slack's or Mattermost's incoming
webhooks, where a user-chosen field (a job's name) is data: its ``&``, ``<`` and ``>`` are
escaped, so no name becomes a link or a mention. A failure here is logged, never raised into
the journal.
"""

from __future__ import annotations

import logging
import os

from berth.core.states import FINISHED, State
from berth.daemon.engine import notify
from berth.daemon.engine.notify_out import Outbox

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from berth.core.job import Attempt, Job
    from berth.daemon.engine.engine import Engine

log = logging.getLogger("berth.daemon")

FAILED = (State.FAILED, State.LOST)


def mrkdwn(text: str) -> str:
    """``text`` as data in Slack's mrkdwn (and Mattermost's): ``&``, ``<``, ``>`` escaped."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def start(engine: Engine, audit_path: str) -> Announcer:
    """The config's receivers served from now on (failures to ``audit_path``)."""
    announcer = Announcer(engine, Outbox(engine.res.cfg.notify.sinks(), audit_path))
    announcer.attach()
    return announcer


class Announcer:
    def __init__(self, engine: Engine, outbox: Outbox) -> None:
        self.engine = engine
        self.outbox = outbox
        self.host = os.uname().nodename
        self._started: dict[int, int] = {}  # job id -> highest attempt told begun
        self._ended: dict[int, int] = {}  # job id -> highest attempt told ended
        self._live: set[int] = set()  # unfinished jobs known (an end is told once)
        for job in engine.unfinished():  # (what happened before this daemon is not told)
            self._live.add(job.id)
            if job.attempts:
                last = job.attempts[-1]
                self._started[job.id] = last.number
                if last.end is not None:
                    self._ended[job.id] = last.number
        self._healthy = {s.uuid: s.index for s in engine.res.snapshots if s.healthy}
        now = engine.clock.time()
        self._begun = {r for r, e in engine.reservations.entries.items() if e["start"] <= now}
        self._full = False

    def attach(self) -> None:
        """Follow the engine's commits from now on."""
        journal = self.engine.journal
        before = journal.on_committed

        def chained(inserted: list[Job], saved: list[Job], ok: bool) -> None:
            before(inserted, saved, ok)
            if ok:
                try:
                    self._live.update(job.id for job in inserted)
                    self.committed(saved)
                except Exception:
                    log.exception("notify: telling a commit failed")

        journal.on_committed = chained

    # -- jobs ---------------------------------------------------------------------------------

    def committed(self, saved: list[Job]) -> None:
        for job in saved:
            if job.state in FINISHED and job.id not in self._live:
                continue  # (told already, or ended before this daemon: saved again)
            for a in job.attempts:
                if a.number > self._started.get(job.id, 0):
                    self._started[job.id] = a.number
                    self._job(job, a, "job_begin")
                if a.end is not None and a.number > self._ended.get(job.id, 0):
                    self._ended[job.id] = a.number
                    if job.state not in FINISHED:
                        self._job(job, a, "job_requeue")
            if job.state not in FINISHED:
                self._live.add(job.id)
            elif job.id in self._live:
                self._live.discard(job.id)
                self._started.pop(job.id, None)
                self._ended.pop(job.id, None)
                events: tuple[str, ...] = ("job_end",)
                if job.state in FAILED:
                    events += ("job_fail",)
                elif job.state is State.TIMEOUT:
                    events += ("job_timeout",)
                self._job(job, job.attempt, events[-1], events)

    def _job(self, job: Job, a: Attempt | None, event: str, events: tuple[str, ...] = ()) -> None:
        if event in ("job_begin", "job_requeue") and job.extra.get("notify"):
            notify.mail(self.engine.store, self.engine.procs, job, event)  # (--mail-type)
        if not self.outbox.sinks:
            return
        state = job.state.value
        gpus = list(a.gpus) if a is not None else []
        facts: dict[str, Any] = {
            "id": job.id, "name": job.name, "user": job.user, "project": job.project or None,
            "state": state, "exit_code": job.exit_code,
            "reason": a.reason if a is not None else "", "gpus": gpus,
        }  # fmt: skip
        verb = {"job_begin": f"started on GPU(s) {','.join(map(str, gpus))}",
                "job_requeue": "was requeued"}.get(event, f"ended {state}")  # fmt: skip
        if event not in ("job_begin", "job_requeue") and job.exit_code is not None:
            verb += f" (exit code {job.exit_code})"
        if facts["reason"] and event != "job_begin" and f"({facts['reason']})" not in verb:
            verb += f": {facts['reason']}"
        array = job.extra.get("array")  # (an array's task is 9_1, as everywhere)
        shown = f"{array[0]}_{array[1]}" if array else str(job.id)
        facts["array"] = shown if array else None
        head = f"berth on {self.host}: job {shown} ({job.name}) of {job.user} {verb}"
        self.outbox.post({
            "event": event, "events": events or (event,), "host": self.host,
            "time": self.engine.clock.time(), "user": job.user, "project": job.project or None,
            "job": facts, "text": mrkdwn(head),
            "subject": f"berth job {shown} ({job.name}) {verb.split(':')[0]}",
            "mail_text": head + "\n",
        })  # fmt: skip

    # -- the machine --------------------------------------------------------------------------

    def polled(self) -> None:
        """After a poll of the GPUs: GPUs lost, reservations begun or over, the disk full."""
        if not self.outbox.sinks:
            return
        try:
            self._machine()
        except Exception:
            log.exception("notify: telling the machine's events failed")

    def _machine(self) -> None:
        engine = self.engine
        now = engine.clock.time()
        res = engine.res
        if res.error is None:
            healthy = {s.uuid: s.index for s in res.snapshots if s.healthy}
            for uuid in sorted(set(self._healthy) - set(healthy)):
                s = res.by_uuid.get(uuid)
                why = (s.error or "unhealthy") if s is not None else "gone from NVML's list"
                index = self._healthy[uuid]
                self._machine_event("gpu_lost", f"GPU {index} ({uuid}) lost: {why}",
                                    gpu={"uuid": uuid, "index": index, "reason": why})  # fmt: skip
            self._healthy = healthy
        reservations = engine.reservations
        for rid, e in list(reservations.entries.items()):
            if rid not in self._begun and e["start"] <= now < e["end"]:
                self._begun.add(rid)
                self._reservation("reservation_start", "began", e)
        for rid in sorted(self._begun):
            over = reservations.entries.get(rid)
            if over is None or over["end"] <= now:
                self._begun.discard(rid)
                self._reservation("reservation_end", "ended", over or {"id": rid})
        full = engine.diskfull.disk_full
        if full and not self._full:
            self._machine_event("disk_full", "the state disk is full: "
                                + engine.diskfull.reason())  # fmt: skip
        self._full = full

    def _reservation(self, event: str, verb: str, e: dict[str, Any]) -> None:
        users = e.get("users") or []
        text = f"reservation {e['id']} {verb}"
        if "uuids" in e:
            text += f" ({self.engine.reservations.describe(e)})"
        facts = {k: e.get(k) for k in ("id", "start", "end", "users", "groups", "projects")}
        # (users: the filter passes a reservation that names one of a sink's users, or none)
        self._machine_event(event, text, reservation=facts,
                            user=users[0] if len(users) == 1 else None)  # fmt: skip

    def _machine_event(self, event: str, what: str, user: str | None = None, **facts: Any) -> None:
        text = f"berth on {self.host}: {what}"
        self.outbox.post({"event": event, "events": (event,), "host": self.host,
                          "time": self.engine.clock.time(), "user": user, "project": None,
                          **facts, "text": mrkdwn(text), "subject": text[:200],
                          "mail_text": text + "\n"})  # fmt: skip
