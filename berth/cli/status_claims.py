"""The claims section of ``berth status``: who holds which GPU, and who waits.

Under each GPU: one line per claim (``claimed by alice pid 4242 share 0.5 mem 30.0G since
10:02:11: python train.py``); below the table, the waiters in arrival order (one that stopped
answering, e.g. stopped with Ctrl-Z, is shown so: it reserves nothing). In ``--json``:
``"claims"`` (every field of every living claim) and ``"waiters"``. A claim whose file body
is corrupt is shown rebuilt from what the kernel knows (owner, holders' pids), marked
"(rebuilt)", and its body is rewritten when its owner (or root) looks. A ledger directory
that cannot be used (refused, unreadable) is said so under the table; the GPUs still show.
"""

from __future__ import annotations

import time

from berth.claims.ledger import Ledger, user_name
from berth.claims.paths import claims_dir
from berth.cli.status_section import Section
from berth.errors import BerthError
from berth.units import format_size

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from berth.config import Config
    from berth.devices.model import GpuSnapshot


def status_section(
    gpus: Sequence[GpuSnapshot], cfg: Config, daemon: dict[str, Any] | None = None
) -> Section | None:
    """``daemon``: its ``status`` reply, whose jobs' claims are shown as theirs."""
    try:
        ledger = Ledger(claims_dir(cfg, create=False))
        state = ledger.scan()
    except BerthError as e:  # (a directory refused as untrustworthy): the GPUs still show
        return Section(
            "claims", title="claims:", lines=[f"  {e}"], data={"claims": [], "error": str(e)}
        )
    if any(c.corrupt for c in state.claims):
        ledger.repair(state)
    index = {g.uuid: g.index for g in gpus}
    jobs, owner = _daemon_jobs(daemon)
    notes: dict[int, list[str]] = {}
    claims = []
    for c in state.claims:
        since = time.strftime("%H:%M:%S", time.localtime(c.since)) if c.since else "?"
        pids = ",".join(str(p) for p in c.pids) or "?"
        what = "exclusive" if c.share >= 1 else f"share {c.share:g}"
        if c.memory:
            what += f" mem {format_size(c.memory)}"
        rebuilt = " (rebuilt)" if c.corrupt else ""
        job = jobs.get(c.lease) if c.uid == owner else None
        who = f"{job['user']} (berth job {job['label']})" if job else c.user
        line = f"claimed by {who} pid {pids} {what} since {since}: {c.command or '?'}{rebuilt}"
        if c.uuid in index:
            notes.setdefault(index[c.uuid], []).append(line)
        d = c.to_dict()
        d["index"] = index.get(c.uuid, c.index)
        if job:
            d["job"], d["job_user"] = job["label"], job["user"]
        claims.append(d)
    lines = []
    waiters = []
    for k, w in enumerate(state.waiters, 1):
        reserve = ",".join(str(index.get(u, u)) for u, _, _ in w.reserve) or "none"
        what = (
            f"{w.lapsed or 'stopped'}: reserves nothing" if w.stale else f"reserves GPU {reserve}"
        )
        lines.append(f"  {k}. {user_name(w.uid)} pid {w.pid or '?'} wants {w.want or '?'} ({what})")
        waiters.append(
            {
                "user": user_name(w.uid), "pid": w.pid, "want": w.want, "reserve": reserve,
                "stale": w.stale, "idle_seconds": round(w.age, 1),
            }
        )  # fmt: skip
    return Section(
        "claims",
        title="waiting for GPUs (oldest first):" if lines else "",
        lines=lines,
        notes=notes,
        data={"claims": claims, "waiters": waiters, "dir": ledger.path},
    )


def _daemon_jobs(daemon: dict[str, Any] | None) -> tuple[dict[str, dict[str, Any]], int | None]:
    """lease -> the daemon's job holding it (``user``, ``label``), and the uid that owns its
    claim files: a claim file the daemon's user owns, of a running job's lease, is the job's
    (the file's owner is the daemon, the job's user its holder)."""
    if not daemon:
        return {}, None
    jobs = {}
    for entry in (daemon.get("gpus") or {}).values():
        for job in entry.get("jobs", []):
            if job.get("lease"):
                jobs[str(job["lease"])] = {
                    "user": str(job["user"]), "label": str(job.get("label") or job["id"])
                }  # fmt: skip
    uid = daemon.get("uid")
    return jobs, uid if isinstance(uid, int) else None
