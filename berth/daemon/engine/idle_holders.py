"""Idle holders (issue 25.3), a part of :class:`berth.daemon.engine.enforcer.Enforcer`: a claim
or running job whose GPUs all showed no utilisation for ``idle_after`` is flagged; the
``[enforce] idle`` policy says what follows: ``notify`` (its user's terminals, a job's own
--notify/--mail-user), then, ``idle_grace`` after the notice, ``release`` (a job is
cancelled, a claim's holders get SIGTERM) or ``requeue`` (a job goes back to the end of the
queue, as a time limit does with --requeue: :meth:`Lifecycle.requeue
<berth.daemon.engine.control.Control.requeue>`; a claim, which cannot wait in the queue, is
released).

What was flagged, since when, and when it was told are kept in the store (``meta``
``enforce_idle``), written when that changes, so a restarted daemon goes on where the last
one was: the same ``since``, the grace not started over, no second notice. A holder the last
daemon had not flagged counts as active when this one starts (never released early).
"""

from __future__ import annotations

import json
import logging
import signal
import sqlite3

from berth.daemon.engine.enforce_io import GONE, signal_if
from berth.wire.protocol import ProtocolError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from berth.config.enforce import Enforce
    from berth.core.enforce import Finding, Holder, Idle
    from berth.daemon.engine.host import Host

log = logging.getLogger("berth.daemon")

META_KEY = "enforce_idle"


class IdleHolders:
    """The idle half of the enforcer (its state lives there)."""

    engine: Host
    cfg: Enforce
    holders: dict[str, Holder]
    idle: list[Idle]
    _active: dict[str, float]
    _idle_noticed: dict[str, float]
    _released: set[str]
    _claim_pids: dict[str, list[tuple[int, int]]]
    _idle_saved: dict[str, list[float | None]] | None

    if TYPE_CHECKING:

        def exempt(self, user: str) -> bool: ...

        def audit_idle(self, action: str, holder: Holder, **more: Any) -> None: ...

        def _tell_holder(self, holder: Holder, text: str, told_uid: int = -1) -> int: ...

        def _cancel(self, holder: Holder, why: str, f: Finding | None = None) -> None: ...

    # -- kept across a restart ----------------------------------------------------------------

    def _seed_idle(self, holders: list[Holder], now: float) -> None:
        """At the first check: what the last daemon had flagged (its ``since`` and notice),
        and every other holder active now."""
        if self._idle_saved is not None:
            return
        self._idle_saved = {}
        try:
            saved = json.loads(self.engine.store.meta(META_KEY) or "{}")
            for key, (since, noticed) in dict(saved).items():
                self._active[str(key)] = float(since)
                if noticed is not None:
                    self._idle_noticed[str(key)] = float(noticed)
                self._idle_saved[str(key)] = [float(since), noticed]
        except (ValueError, TypeError) as e:
            log.warning("the idle holders kept by the last daemon do not read: %s", e)
        for h in holders:
            self._active.setdefault(h.key, now)

    def _save_idle(self) -> None:
        """Keep what is flagged now and when it was told, if that changed."""
        now: dict[str, list[float | None]] = {
            i.holder: [i.since, self._idle_noticed.get(i.holder)] for i in self.idle
        }
        if now == self._idle_saved:
            return
        store = self.engine.store
        try:
            with store.tx():
                store.set_meta(META_KEY, json.dumps(now))
            self._idle_saved = now
        except (sqlite3.Error, OSError) as e:  # (tried again at the next poll)
            log.warning("cannot keep the idle holders in the store: %s", e)

    # -- the policy ---------------------------------------------------------------------------

    def _act_idle(self, i: Idle, now: float) -> None:
        holder = self.holders.get(i.holder)
        policy = self.cfg.idle
        if holder is None or policy == "observe" or self.exempt(holder.user):
            return
        noticed = self._idle_noticed.get(i.holder)
        hours = (now - i.since) / 3600
        kept = holder.kind == "job" and self.cfg.idle_opt_out and self._keeps_idle(holder)
        acts = policy in ("release", "requeue") and not kept
        if noticed is None:
            self._idle_noticed[i.holder] = now
            what = "requeued" if policy == "requeue" and holder.kind == "job" else "released"
            then = (
                f" It will be {what} in {self.cfg.idle_grace:.0f} s unless its GPUs work."
                if acts
                else ""
            )
            told = self._tell_holder(
                holder,
                f"berth: your {i.holder} has held GPU(s) "
                f"{','.join(map(str, sorted(holder.gpus)))} idle for {hours:.1f} h.{then}",
            )
            self.audit_idle("notify", holder, terminals=told, idle_since=i.since)
            return
        if policy not in ("release", "requeue") or now < noticed + self.cfg.idle_grace:
            return
        if i.holder in self._released:
            return
        self._released.add(i.holder)
        why = f"idle for {hours:.1f} h"
        if holder.kind == "job":
            if kept:
                self.audit_idle("skip", holder, reason="--keep-idle (idle_opt_out = true)")
            elif policy == "requeue":
                self._requeue(holder, why)
            else:
                self._cancel(holder, why)
            return
        self._release_claim(holder, why)

    def _requeue(self, holder: Holder, why: str) -> None:
        job = self.engine.jobs.get(int(holder.key.split()[1]))
        if job is None:
            return
        result = self.engine.control.requeue(job, why)
        self.engine.flush()
        self.audit_idle("requeue", holder, job=job.id, reason=why, result=result)

    def _keeps_idle(self, holder: Holder) -> bool:
        try:
            return bool(self.engine.store.spec(int(holder.key.split()[1])).keep_idle)
        except (OSError, ValueError, TypeError, ProtocolError):
            return False

    def _release_claim(self, holder: Holder, why: str) -> None:
        """SIGTERM to a claim's proven holders (a `berth run` ends its command and releases:
        :mod:`.enforce_proof`, never the pids its body names) whose uid is the claim's
        owner's and whose start time is what it was when proven."""
        for pid, start in self._claim_pids.get(holder.key, []):
            skip = signal_if(pid, holder.uid, start, signal.SIGTERM)  # (through a pidfd)
            if skip is not None:
                gone = skip == GONE
                self.audit_idle(
                    "skip", holder, pid=pid, reason="not the claim's holder" if gone else skip
                )
                continue
            self.audit_idle("release", holder, pid=pid, signal="SIGTERM", reason=why)
