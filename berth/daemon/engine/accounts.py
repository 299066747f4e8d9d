"""Fair share and per-user limits, the daemon's side (the I/O around
:mod:`berth.core.fairshare` and :mod:`berth.core.limits`).

- Usage: each ended attempt adds its decayed GPU-seconds to its tenant's row of the store's
  ``usage`` table, in the same commit as the attempt's end (:meth:`Accounts.ended`); a pass
  gets every tenant's usage now, running jobs included (:meth:`Accounts.fair`).
- Limits: ``[limits]`` in the config gives the defaults; ``berth admin limits`` overrides them
  at runtime, for everyone (the row ``*``) or per user, in the store's ``limits`` table (a
  NULL column: not set here, the next level applies; -1: no limit). ``max_gpus`` is the
  scheduler's (``UserGpuLimit``); ``max_jobs`` and ``max_time`` are checked at submit
  (:meth:`Accounts.check_submit`); ``shares`` weighs a user's fair share (default 1).
- Claims outside the queue (`berth run`) count like jobs, in both (:attr:`Accounts.outside`,
  :mod:`berth.daemon.engine.claimers`; :meth:`Accounts.claims_seen` after each ledger scan).
  A share counts whole in both (issue 41.3, :mod:`berth.core.limits`): a user's GPUs are the
  GPUs they hold any part of, and a share is charged as its GPU.
- What one request may cost (:meth:`Accounts.check_request`: ``[limits]`` max_env_size,
  max_array_tasks, max_request_jobs; the config's only), so that no user's request costs the
  daemon unbounded memory, disk or time (docs/admin.md, "Limits per user"); a job's bytes
  (``max_job_bytes``, :mod:`berth.wire.jobsize`) and each user's in the store
  (:meth:`Accounts.check_bytes`, ``max_user_bytes``).
- :meth:`Accounts.summary`: each user's line under `berth queue`.
- Projects (Slurm's accounts): :attr:`Accounts.projects` (:mod:`berth.daemon.engine.projects`):
  their checks at submit, their usage (the upper level of fair share) and quotas.
"""

from __future__ import annotations

from berth.core.fairshare import Book, FairShare, charged_gpus, factors, usage_at
from berth.core.limits import UserLimits
from berth.daemon.engine.claimers import Claimers
from berth.daemon.engine.projects import PREFIX, Projects, empty_row, tally
from berth.units import format_duration, format_size
from berth.wire import protocol
from berth.wire.protocol import ProtocolError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Collection, Iterable, Mapping
    from typing import Any

    from berth.claims.state import ClaimInfo
    from berth.config import Config
    from berth.core.job import Job
    from berth.core.request import Request
    from berth.daemon.store.store import Store

KEYS = ("max_gpus", "max_jobs", "max_time", "shares")
EVERYONE = "*"  # the row of the defaults set at runtime
UNLIMITED = -1.0  # stored: "no limit" (NULL means "not set at this level")
WHAT = {
    "max_gpus": "GPUs held at once",
    "max_jobs": "jobs queued or running",
    "max_time": "time limit",
    "shares": "fair-share weight",
}


class Accounts:
    """The usage book, the limits, and the checks that use them."""

    def __init__(self, store: Store, cfg: Config) -> None:
        self.enabled = cfg.fairshare
        usage = store.usage()
        self.book = Book(cfg.fairshare_half_life, {
            k: v for k, v in usage.items() if not k.startswith(PREFIX)
        })  # fmt: skip
        self.projects = Projects(cfg, usage)
        self.outside = Claimers()  # claims made outside the queue, charged like jobs
        self.claims_ended: list[tuple[str, float, float]] = []  # of them, gone at the last scan
        self.config: dict[str, float | None] = {
            "max_gpus": cfg.limit_max_gpus,
            "max_jobs": None if cfg.limit_max_jobs is None else float(cfg.limit_max_jobs),
            "max_time": cfg.limit_max_time,
            "shares": None,
        }
        self.rows: dict[str, dict[str, float | None]] = store.limits()
        self.max_env_size = cfg.limit_max_env_size
        self.max_array_tasks = cfg.limit_max_array_tasks
        self.max_request_jobs = cfg.limit_max_request_jobs
        self.max_job_bytes = cfg.limit_max_job_bytes  # (berth.wire.jobsize)
        self.max_user_bytes = cfg.limit_max_user_bytes

    # -- limits -------------------------------------------------------------------------------

    def limit(self, user: str, key: str) -> float | None:
        """``user``'s limit in force (None: no limit; shares: the weight, 1 by default)."""
        value = self._level(user, key)
        if key == "shares":
            return 1.0 if value is None or value == UNLIMITED else value
        return None if value is None or value == UNLIMITED else value

    def _level(self, user: str, key: str) -> float | None:
        for row in (self.rows.get(user), self.rows.get(EVERYONE)):
            if row is not None and row.get(key) is not None:
                return row[key]
        return self.config[key]

    def user_limits(self) -> UserLimits | None:
        """The GPU limits for ``schedule(...)``, users' and projects' (None: none has one)."""
        per_user = {
            u: self.limit(u, "max_gpus")
            for u, row in self.rows.items()
            if u != EVERYONE and row.get("max_gpus") is not None
        }
        default = self.limit(EVERYONE, "max_gpus")
        projects = self.projects.limits()
        if default is None and all(v is None for v in per_user.values()) and not projects:
            return None
        return UserLimits(per_user, default, self.outside.held(), projects)

    def check_request(self, env_size: int, tasks: int, total: int) -> None:
        """Refuse a job whose environment and setup text take ``env_size`` bytes, of
        ``tasks`` tasks (an array's; 1), that brings its request's jobs to ``total``."""
        for value, most, key, what in (
            (env_size, self.max_env_size, "max_env_size", "the job's environment and setup"),
            (tasks, self.max_array_tasks, "max_array_tasks", "--array: the array's tasks"),
            (total, self.max_request_jobs, "max_request_jobs", "jobs in one request"),
        ):
            if value > most:
                shown = format_size(value) if key == "max_env_size" else str(value)
                cap = format_size(most) if key == "max_env_size" else str(most)
                raise ProtocolError(
                    protocol.BAD_REQUEST,
                    f"{what}: {shown}, more than this daemon takes ({cap}, [limits] {key} in "
                    "its config); nothing was queued: "
                    + ("export less (--export NAMES)" if key == "max_env_size"
                       else "split it into several submits"),
                )  # fmt: skip

    def check_submit(
        self, user: str, request: Request, time_limit: float | None, held: int, count: int = 1,
    ) -> float | None:  # fmt: skip
        """Refuse ``count`` jobs (an array's tasks) their user's limits forbid, before
        anything is stored; the time limit they get (``max_time`` for jobs without one).
        ``held``: the user's unfinished jobs (the engine's ``JobTable.count_of``)."""
        most = self.limit(user, "max_time")
        if most is not None:
            if time_limit is not None and time_limit > most:
                raise ProtocolError(
                    protocol.BAD_REQUEST,
                    f"-t {_duration(time_limit)} is more than {user} may ask: the most is "
                    f"{_duration(most)} (`berth admin limits {user}`); ask for -t "
                    f"{_duration(most)} or less, or leave -t out to get it",
                )
            time_limit = most if time_limit is None else time_limit
        gpus = self.limit(user, "max_gpus")
        if gpus is not None and request.count > gpus + 1e-9:
            whole = "" if request.whole else " (a share counts as its whole GPU)"
            raise ProtocolError(
                protocol.BAD_REQUEST,
                f"-g {request.gpus:g}: {user} may hold at most {gpus:g} GPUs at once{whole} "
                f"(`berth admin limits {user}`): ask for fewer, or ask an admin",
            )
        self.check_count(user, held, count)
        return time_limit

    def check_count(self, user: str, held: int, count: int) -> None:
        """Refuse ``count`` more jobs past ``user``'s ``max_jobs`` (``held``: as above)."""
        cap = self.limit(user, "max_jobs")
        if cap is None:
            return
        if held + count > cap:
            more = f" and this would add {count}" if count > 1 else ""
            raise ProtocolError(
                protocol.INVALID_STATE,
                f"{user} has {held} jobs queued or running{more}; the most allowed is "
                f"{cap:g} (`berth admin limits {user}`): wait for some to end, or cancel "
                "some",
            )

    def check_bytes(self, user: str, held: int, adds: int) -> None:
        """Refuse ``adds`` more bytes in the store past ``user``'s ``max_user_bytes``
        (``held``: what their unfinished jobs keep there: ``JobTable.bytes_of``)."""
        most = self.max_user_bytes
        if held + adds > most:
            raise ProtocolError(
                protocol.INVALID_STATE,
                f"{user}'s unfinished jobs keep {format_size(held)} in this daemon's store and "
                f"this would add {format_size(adds)}: the most is {format_size(most)} ([limits] "
                "max_user_bytes in its config); nothing was queued: wait for some to end, "
                "cancel some, or make the jobs smaller (long arguments in a file)",
            )

    def table(self, user: str | None = None) -> dict[str, Any]:
        """What `berth admin limits` shows: the defaults (config, runtime) and each user's
        own settings and the limits in force."""
        users = sorted(u for u in self.rows if u != EVERYONE)
        if user is not None:
            users = [user]
        return {
            "config": dict(self.config),
            "defaults": {k: self.limit(EVERYONE, k) for k in KEYS},
            "set_defaults": dict(self.rows.get(EVERYONE) or {}),
            "users": {
                u: {"set": dict(self.rows.get(u) or {}), "in_force": self.in_force(u)}
                for u in users
            },
        }

    def in_force(self, user: str) -> dict[str, float | None]:
        return {k: self.limit(user, k) for k in KEYS}

    def set(self, store: Store, user: str, changes: Mapping[str, float | str]) -> None:
        """Apply ``changes`` (key -> a value, ``UNLIMITED``, or "default": not set at this
        level) to ``user``'s row (``*``: the defaults) and persist it."""
        row = dict(self.rows.get(user) or dict.fromkeys(KEYS))
        for key, value in changes.items():
            row[key] = None if value == "default" else float(value)
        with store.tx():
            store.set_limits(user, row)
        if all(row.get(k) is None for k in KEYS):
            self.rows.pop(user, None)
        else:
            self.rows[user] = row

    # -- fair share ---------------------------------------------------------------------------

    def ended(self, job: Job, now: float) -> list[tuple[str, float, float]]:
        """Add the attempt ``job`` just ended to its tenant's usage, and its project's; the
        store rows."""
        a = job.attempt
        if a is None or a.end is None:
            return []
        value = self.book.add(job.tenant, charged_gpus(job.request), a.start, a.end, now)
        project = self.projects.ended(job, now)
        return [(job.tenant, value, now), *([project] if project else [])]

    def fair(self, running: Iterable[Job], now: float) -> FairShare | None:
        """What a pass needs (None when fair share is off)."""
        if not self.enabled:
            return None
        shares = {u: self.limit(u, "shares") or 1.0 for u in self.rows if u != EVERYONE}
        usage = usage_at(self.book, running, now)
        for user, used in self.outside.usage(now, self.book.half_life).items():
            usage[user] = usage.get(user, 0.0) + used
        return self.projects.fair(FairShare(usage, shares), running, now)

    def claims_seen(
        self, claims: Iterable[ClaimInfo], own: Collection[str], now: float,
        index: Mapping[str, int] | None = None,
    ) -> list[tuple[str, float, float]]:  # fmt: skip
        """Take in a ledger scan (``own``: our jobs' leases; ``index``: GPU UUID -> index):
        the claims outside the queue that ended since the last add what they used to their
        users' usage; the store rows."""
        rows = []
        self.claims_ended = self.outside.seen(claims, own, now, index)  # (`berth report`: too)
        for user, gpus, since in self.claims_ended:
            rows.append((user, self.book.add(user, gpus, since, now, now), now))
        return rows

    def summary(self, jobs: Iterable[Job], now: float) -> list[dict[str, Any]]:
        """One row per user with jobs, or usage: running jobs and GPUs, pending jobs, decayed
        usage (GPU-hours), shares, the share of all usage, Slurm's fair-share factor."""
        per: dict[str, dict[str, Any]] = {}
        running = tally(per, jobs, lambda j: j.tenant, "user")
        usage = usage_at(self.book, running, now)
        for user, used in self.outside.usage(now, self.book.half_life).items():
            usage[user] = usage.get(user, 0.0) + used
        claims = self.outside.held()  # (`simulate --what-if` counts them against limits)
        held = {u: set(g) for u, g in claims.items()}  # each user's GPUs: jobs and claims
        for job in running:
            if job.attempt is not None and job.tenant == job.user:
                held.setdefault(job.user, set()).update(job.attempt.gpus)
        for tenant, used in usage.items():
            if used >= 1.0 or tenant in per:  # (a GPU-second or more)
                per.setdefault(tenant, empty_row(tenant, "user"))
        for user in held:
            per.setdefault(user, empty_row(user, "user"))
        shares = {t: self.limit(t, "shares") or 1.0 for t in per}
        fair = FairShare(usage, shares)
        factor = factors(fair, per)
        total = sum(usage.get(t, 0.0) for t in per)
        out = []
        for t, row in sorted(per.items(), key=lambda kv: (fair.key(kv[0]), kv[0])):
            row["usage_gpu_hours"] = usage.get(t, 0.0) / 3600.0
            row["usage_fraction"] = usage.get(t, 0.0) / total if total > 0 else 0.0
            row["shares"] = shares[t]
            row["factor"] = factor[t]
            row["max_gpus"] = self.limit(t, "max_gpus")
            if t in held:  # (what counts against max_gpus: each GPU held part of, whole)
                row["gpus"] = float(len(held[t]))
            if t in claims:  # (the GPUs of its claims outside the queue)
                row["outside_gpus"] = sorted(claims[t])
            out.append(row)
        return out


def _duration(seconds: float) -> str:
    return format_duration(seconds) if seconds >= 60 else f"{seconds:g}s"


__all__ = ["EVERYONE", "KEYS", "UNLIMITED", "WHAT", "Accounts"]
