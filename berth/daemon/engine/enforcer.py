"""Enforcement (issue 25): after every NVML poll, each GPU process is classed against what
berth granted (:mod:`berth.core.enforce`: own, outside, intrusion, overrun) and holders whose
GPUs stay idle are flagged; the config's ``[enforce]`` policy (:mod:`berth.config.enforce`)
says what follows: ``observe`` (shown in `berth status`, ``/metrics``, the dashboard),
``notify`` (the process's owner and the holder it intrudes on are told on their terminals),
``kill`` after ``grace`` (SIGTERM, then SIGKILL ``kill_after`` later; never a job for
outgrowing a share berth sized from its earlier runs: :mod:`.admission.learned`, whose peaks
each poll also measures: :mod:`.admission.peaks`). Idle holders:
``notify``, then ``release`` or ``requeue`` after ``idle_grace``
(:mod:`berth.daemon.engine.idle_holders`). Every action is a line of the audit log (``<state dir>/enforce.log``, JSON
lines), which `berth admin log` reads.

A pid is never an identity (DESIGN.md 7): a process is classed with the start time and uid
/proc gave right after the NVML read, and signalled only if /proc says the same right before
the signal. A berth job is never signalled by pid: it is cancelled through its supervisor,
which ends exactly the job's processes. Exempt users and groups are shown, never acted on.
A claim of the ledger is a holder only if it is granted (:mod:`.enforce_grant`: a claim file
made by hand on a GPU others fill is not); the processes of one that is not are nobody's.
"""

from __future__ import annotations

import grp
import json
import logging
import os
import pwd
import signal

from berth.core.enforce import OVERRUN, OWN, Holder, Proc, classify, idle, track
from berth.daemon.engine import notify
from berth.daemon.engine.admission import peaks
from berth.daemon.engine.audit import append_log
from berth.daemon.engine.claim_keys import keyed
from berth.daemon.engine.enforce_grant import Grants
from berth.daemon.engine.enforce_io import identity, signal_if, user_name, write_ttys
from berth.daemon.engine.enforce_proof import ClaimProofs
from berth.daemon.engine.idle_holders import IdleHolders
from berth.daemon.engine.resources import _stat
from berth.daemon.store.store import UnreadableSpec

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from berth.core.enforce import Finding, Idle
    from berth.daemon.engine.host import Host
    from berth.wire.jobspec import JobSpec

log = logging.getLogger("berth.daemon")
AUDIT_NAME = "enforce.log"


class Enforcer(IdleHolders):
    def __init__(
        self,
        engine: Host,
        audit_path: str,
        *,
        tell: Callable[[int, str], int] = write_ttys,
    ) -> None:
        self.engine = engine
        self.cfg = engine.res.cfg.enforce
        self.audit_path = audit_path
        self.tell = tell
        self.findings: list[Finding] = []
        self.idle: list[Idle] = []
        self.holders: dict[str, Holder] = {}
        self._seen: dict[tuple[str, int, int, int], float] = {}
        self._active: dict[str, float] = {}
        self._notified: set[object] = set()
        self._termed: dict[tuple[str, int, int, int], float] = {}
        self._killed: set[tuple[str, int, int, int]] = set()
        self._idle_noticed: dict[str, float] = {}
        self._idle_saved: dict[str, list[float | None]] | None = None  # (None: not read yet)
        self._released: set[str] = set()
        self._claim_pids: dict[str, list[tuple[int, int]]] = {}  # proven: (pid, start)
        self._named: dict[int, str] = {}  # pid -> the claim whose body names it (a hint)
        self._proofs = ClaimProofs()
        self._grants = Grants()
        self._refused_pids: dict[int, str] = {}  # pid -> why the claim it holds is not
        self._exempt: dict[str, bool] = {}
        self.actions: dict[str, int] = {}  # action -> how many since the start (metrics)
        self.devices = ""  # [daemon] isolate_devices: enforced, or why not ("": not asked)

    # -- each poll ----------------------------------------------------------------------------

    def check(self) -> None:
        """Class every GPU process, flag idle holders, apply the policies."""
        now = self.engine.clock.time()
        holders, owners = self._holders()
        self.holders = {h.key: h for h in holders}
        procs = self._procs(owners)
        res = self.engine.res
        totals = {s.index: s.memory_total for s in res.snapshots}
        found = classify(procs, holders, totals, self.cfg.tolerance)
        peaks.note(self.engine.jobs, found, self._spec)  # (each job's peak: sizes its next runs)
        self.findings, self._seen = track([f for f in found if f.kind != OWN], self._seen, now)
        util = {s.index: s.utilization for s in res.snapshots}
        self._seed_idle(holders, now)
        self.idle, self._active = idle(holders, util, self._active, now, self.cfg.idle_after)
        for f in self.findings:
            try:
                self._act(f, now)
            except Exception:
                log.exception("enforcement of %s failed", f)
        for i in self.idle:
            try:
                self._act_idle(i, now)
            except Exception:
                log.exception("idle release of %s failed", i.holder)
        flagged = {i.holder for i in self.idle}
        self._idle_noticed = {k: t for k, t in self._idle_noticed.items() if k in flagged}
        self._save_idle()
        current = {f.ident for f in self.findings}  # (what has gone is forgotten: bounded)
        self._notified &= current
        self._killed &= current
        self._termed = {k: t for k, t in self._termed.items() if k in current}
        self._released &= set(self.holders)

    def _holders(self) -> tuple[list[Holder], dict[int, tuple[list[str], str]]]:
        """The daemon's running jobs and the ledger's other claims; pid -> (holder keys, why)
        for the processes that make a process a holder's: a job's leader and supervisor (the
        daemon's own record), a claim's proven holders (:mod:`.enforce_proof`: never a pid
        its body names)."""
        engine = self.engine
        out: list[Holder] = []
        owners: dict[int, tuple[list[str], str]] = {}
        engine._own_pids()  # (reads the run files of jobs whose pids are not known yet)
        for job_id, run in engine.runs.items():
            job = engine.jobs.get(job_id)
            if job is None or not job.attempts:
                continue
            a = job.attempts[-1]
            key = f"job {job_id}"
            out.append(
                Holder(key, "job", job.user, job.uid, frozenset(a.gpus), a.share, a.mem, a.start)
            )
            for pid in (run.job_pid, run.sup_pid):
                if pid is not None:
                    owners[pid] = ([key], f"pid {pid} is {key}'s (its supervisor's record)")
        own = {r.lease_id: f"job {j}" for j, r in engine.runs.items() if r.lease_id}
        own.update({c.lease_id: f"job {j}" for j, c in engine.committing.items()})
        scanned = engine.res.ledger.scan(bodies=True).claims
        claims, by_file = keyed(scanned, own, os.geteuid())  # (a lease of one owner each)
        self._named = {}
        for key, files in claims.items():
            for c in files:
                for pid in c.pids[:64]:
                    self._named.setdefault(pid, key)
        gpu_pids = {p.pid for s in engine.res.snapshots for p in s.processes or ()}
        proven = self._proofs.prove(claims, gpu_pids)
        gpus = {s.uuid: (s.index, s.memory_total) for s in engine.res.snapshots}
        refused = self._grants.judge(scanned, by_file, set(own.values()), proven.values(), gpus)
        for entry in self._grants.news(refused, claims, engine.res.by_uuid):
            self._write(entry)
        for key, files in claims.items():
            if key in refused:
                continue  # (not granted: it holds nothing, its processes are nobody's)
            first = files[0]
            gpu_ids = frozenset(
                s.index for c in files if (s := engine.res.by_uuid.get(c.uuid)) is not None
            )
            mem = first.memory or None
            user = first.user or str(first.uid)
            since = min((c.since for c in files if c.since), default=0.0)
            out.append(Holder(key, "claim", user, first.uid, gpu_ids, first.share, mem, since))
        self._claim_pids = {}
        self._refused_pids = {}
        for pid, p in proven.items():
            keys = [k for k in p.keys if k not in refused]
            if not keys:
                self._refused_pids[pid] = refused[p.keys[0]]
                continue
            owners[pid] = (keys, p.proof)  # (a job's process that holds a claim: the claim's)
            for key in keys:
                self._claim_pids.setdefault(key, []).append((pid, p.start))
        return out, owners

    def _procs(self, owners: dict[int, tuple[list[str], str]]) -> list[Proc]:
        """The processes of the last NVML read that still live as the same process, each
        with its holder (itself, its session's leader or an ancestor: a job's, or proven to
        hold a claim of its own uid), uid, user and the proof."""
        res = self.engine.res
        out: list[Proc] = []
        cache: dict[int, tuple[int, int, list[str], str] | None] = {}
        for s in res.snapshots:
            for p in s.processes or ():
                if p.pid not in cache:
                    cache[p.pid] = self._whose(p.pid, owners)
                seen = cache[p.pid]
                if seen is None:
                    continue
                uid, start, keys, proof = seen
                on = [k for k in keys if (h := self.holders.get(k)) and s.index in h.gpus]
                holder = (on or keys)[0] if keys else None
                out.append(
                    Proc(s.index, p.pid, start, uid, user_name(uid), p.used_memory or 0,
                         holder, proof)
                )  # fmt: skip
        return out

    def _whose(
        self, pid: int, owners: dict[int, tuple[list[str], str]]
    ) -> tuple[int, int, list[str], str] | None:
        then = self.engine.res.seen.get(pid)
        ident = identity(pid)
        if ident is None or then is None or (then >= 0 and ident[1] != then):
            return None  # gone, invisible to us, or its pid is another process's now
        stat = _stat(pid)
        if stat is None:
            return None
        uid = ident[0]
        found = owners.get(pid) or owners.get(stat[2])  # itself, or its session's leader
        ppid = stat[1]
        for _ in range(64):
            if found is not None or ppid <= 1:
                break
            found = owners.get(ppid)
            parent = _stat(ppid)
            if parent is None:
                break
            ppid = parent[1]
        if found is not None:
            keys, why = found
            # A claim's process is of the claim file's owner (a job's may be anyone's:
            # the daemon itself started it, as its user).
            mine = [k for k in keys if not k.startswith("claim ") or self._uid(k) == uid]
            if mine:
                itself = why.startswith(f"pid {pid} ")
                return uid, ident[1], mine, why if itself else f"descends from {why}"
        named = self._named.get(pid)
        why = "no berth job's, no proven claim holder's: judged by NVML alone"
        refused = self._refused_pids.get(pid)
        if refused is not None:
            why = f"pid {pid} holds a claim not granted ({refused}): judged by NVML alone"
        elif named is not None:
            why += f" ({named}'s body names pid {pid}, but it does not hold the claim's file)"
        return uid, ident[1], [], why

    def _uid(self, key: str) -> int | None:
        holder = self.holders.get(key)
        return holder.uid if holder is not None else None

    # -- policies -----------------------------------------------------------------------------

    def exempt(self, user: str) -> bool:
        known = self._exempt.get(user)
        if known is None:
            known = user in self.cfg.exempt_users
            if not known and self.cfg.exempt_groups:
                try:
                    pw = pwd.getpwnam(user)
                    gids = os.getgrouplist(user, pw.pw_gid)
                    names = {grp.getgrgid(g).gr_name for g in gids}
                    known = bool(names & set(self.cfg.exempt_groups))
                except (KeyError, OSError):
                    known = False
            self._exempt[user] = known
        return known

    def _act(self, f: Finding, now: float) -> None:
        policy = getattr(self.cfg, f.kind)
        if policy == "observe" or self.exempt(f.user):
            return
        if f.ident not in self._notified:
            self._notified.add(f.ident)
            self._notify_finding(f)
        if policy != "kill" or now < f.since + self.cfg.grace:
            return
        holder = self.holders.get(f.holder or "")
        if holder is not None and holder.kind == "job":
            if f.kind == OVERRUN and self._learned(holder):  # (told, never killed)
                if f.ident not in self._termed:
                    self._termed[f.ident] = now  # (logged once)
                    self.audit("skip", f, reason="a size berth learned, not one the job "
                               "declared: never killed for outgrowing it")  # fmt: skip
                return
            if f.ident not in self._termed:
                self._termed[f.ident] = now
                self._cancel(holder, f"{f.kind} on GPU {f.gpu}", f)
            return
        if f.ident not in self._termed:
            if self._signal(f.pid, f.uid, f.start, signal.SIGTERM, f):
                self._termed[f.ident] = now
        elif f.ident not in self._killed and now >= self._termed[f.ident] + self._kill_after():
            self._killed.add(f.ident)
            self._signal(f.pid, f.uid, f.start, signal.SIGKILL, f)

    def _spec(self, job_id: int) -> JobSpec | None:
        try:
            return self.engine.store.spec(job_id)
        except UnreadableSpec:
            return None

    def _learned(self, holder: Holder) -> bool:
        """Whether the job's memory is a learned size (no -g, no --mem: learned.py)."""
        job = self.engine.jobs.get(int(holder.key.split()[1]))
        return job is not None and bool(job.extra.get("learned"))

    def _kill_after(self) -> float:
        return float(self.engine.opts.kill_after)

    def _notify_finding(self, f: Finding) -> None:
        mem = f"{f.memory / (1 << 30):.1f} GiB"
        if f.kind == "overrun":
            declared = (f.declared or 0) / (1 << 30)
            what = f"uses {mem} on GPU {f.gpu}, over the {declared:.1f} GiB {f.holder} declared"
        elif f.kind == "intrusion":
            what = f"uses GPU {f.gpu} ({mem}), which berth gave to {f.victim or 'someone else'}"
        else:
            what = f"uses GPU {f.gpu} ({mem}) without a berth claim"
        policy = getattr(self.cfg, f.kind)
        then = (
            f" It will be stopped in {self.cfg.grace:.0f} s (SIGTERM)." if policy == "kill" else ""
        )
        text = f"berth: your process {f.pid} {what}.{then}"
        told = self.tell(f.uid, text)
        for key in (f.victim or "").split(", "):
            victim = self.holders.get(key)
            if victim is not None:
                told += self._tell_holder(
                    victim, f"berth: process {f.pid} of {f.user} {what}.", f.uid
                )
        self.audit("notify", f, terminals=told)

    def _tell_holder(self, holder: Holder, text: str, told_uid: int = -1) -> int:
        """Tell a holder on its user's terminals (unless told already), and a job through
        its own --notify/--mail-user; returns how many terminals were written to."""
        told = self.tell(holder.uid, text) if holder.uid != told_uid else 0
        job = self.engine.jobs.get(int(holder.key.split()[1])) if holder.kind == "job" else None
        if job is not None and job.extra.get("notify"):
            notify.warn(self.engine.store, self.engine.procs, job, text)
        return told

    def _cancel(self, holder: Holder, why: str, f: Finding | None = None) -> None:
        job = self.engine.jobs.get(int(holder.key.split()[1]))
        if job is None:
            return
        result = self.engine.control.cancel(job, None)
        self.engine.flush()
        if f is not None:
            self.audit("cancel", f, job=job.id, reason=why, result=result)
        else:
            self.audit_idle("cancel", holder, reason=why, result=result)

    def _signal(self, pid: int, uid: int, start: int, sig: int, f: Finding | None) -> bool:
        """Signal ``pid`` only if /proc says it is still the process classed (uid, start),
        through a pidfd (enforce_io.signal_if)."""
        name = signal.Signals(sig).name
        why = signal_if(pid, uid, start, sig)
        if why is not None:
            if f is not None:
                self.audit("skip", f, signal=name, reason=why)
            return False
        if f is not None:
            self.audit("signal", f, signal=name)
        return True

    # -- audit and views ----------------------------------------------------------------------

    def audit(self, action: str, f: Finding, **more: Any) -> None:
        self._write({"action": action, **f.to_dict(), **more})

    def audit_idle(self, action: str, holder: Holder, **more: Any) -> None:
        entry = {"action": action, "class": "idle", "holder": holder.key, "user": holder.user}
        self._write({**entry, "gpus": sorted(holder.gpus), **more})

    def _write(self, entry: dict[str, Any]) -> None:
        entry = {"time": self.engine.clock.time(), **entry}
        self.actions[entry["action"]] = self.actions.get(entry["action"], 0) + 1
        log.info("enforce: %s", json.dumps(entry))
        append_log(self.audit_path, entry)

    def view(self) -> dict[str, Any]:
        """What `berth status`, ``/metrics`` and the dashboard show."""
        now = self.engine.clock.time()
        cfg = self.cfg
        policy = {k: getattr(cfg, k) for k in ("outside", "intrusion", "overrun", "idle")}
        return {
            "findings": [f.to_dict() for f in self.findings],
            "idle": [
                {**i.to_dict(now), "user": h.user, "gpus": sorted(h.gpus)}
                for i in self.idle
                if (h := self.holders.get(i.holder)) is not None
            ],
            "policy": {**policy, "grace": cfg.grace, "idle_after": cfg.idle_after},
            "actions": dict(self.actions),
            "devices": self.devices,
        }
