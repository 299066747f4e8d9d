"""What each GPU process is, judged against what berth granted (issue 25), and which holders
sit idle: pure functions of data the daemon gathers (``daemon/engine/enforcer.py`` reads NVML
and /proc and acts on the answers).

Classes of a GPU process:

- ``own``: a process of a berth job or claim, on a GPU that holder was granted;
- ``outside``: a process of no berth holder on a GPU nobody claimed;
- ``intrusion``: a process on a GPU claimed by someone else: an outsider's, or a berth
  holder's on a GPU it was not granted (its ``victim`` is the GPU's claimant, if any);
- ``overrun``: the processes of a holder on one of its GPUs that together use more memory
  than it declared, with a tolerance (a share without ``--mem`` declared its share of the
  card). Only the overrunning holder's processes are so classed, never its neighbours'.

A finding's ``since`` comes from :func:`track`: the time it was first seen, carried over as
long as the same process (pid and start time) stays in the same class on the same GPU.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

OWN = "own"
OUTSIDE = "outside"
INTRUSION = "intrusion"
OVERRUN = "overrun"
CLASSES = (OUTSIDE, INTRUSION, OVERRUN)  # the classes a policy applies to


@dataclass(frozen=True, slots=True)
class Holder:
    """A berth job or claim, what it was granted: ``key`` ("job 12", "claim <lease>")."""

    key: str
    kind: str  # "job" or "claim"
    user: str
    uid: int
    gpus: frozenset[int]
    share: float = 1.0
    mem: int | None = None  # declared memory per GPU (bytes)
    start: float = 0.0  # when it took its GPUs


@dataclass(frozen=True, slots=True)
class Proc:
    """A GPU process on one GPU, with whose it is (``holder``: a Holder's key, or None)."""

    gpu: int
    pid: int
    start: int  # start time in clock ticks since boot (/proc/PID/stat), its identity with pid
    uid: int
    user: str
    memory: int  # bytes used on this GPU
    holder: str | None = None
    proof: str = ""  # why it is its holder's, or no holder's (the audit log's words)


@dataclass(frozen=True, slots=True)
class Finding:
    kind: str
    gpu: int
    pid: int
    start: int
    uid: int
    user: str
    memory: int
    holder: str | None  # the process's own holder
    victim: str | None = None  # intrusion: the GPU's claimant; overrun: its GPU's neighbours
    since: float = 0.0
    declared: int | None = None  # overrun: what its holder declared on this GPU
    proof: str = ""  # why the process is its holder's (or nobody's), as the daemon proved it

    @property
    def ident(self) -> tuple[str, int, int, int]:
        return (self.kind, self.gpu, self.pid, self.start)

    def to_dict(self) -> dict[str, object]:
        return {
            "class": self.kind, "gpu": self.gpu, "pid": self.pid, "uid": self.uid,
            "user": self.user, "memory": self.memory, "holder": self.holder,
            "victim": self.victim, "since": self.since, "declared": self.declared,
            "proof": self.proof,
        }  # fmt: skip


def declared(h: Holder, total: int | None) -> int | None:
    """The memory a holder may use on each of its GPUs: its ``--mem``, or for a share without
    one its share of the card; None: no limit (a whole GPU)."""
    if h.mem:
        return h.mem
    if h.share < 1.0 and total:
        return int(h.share * total)
    return None


def classify(
    procs: list[Proc],
    holders: list[Holder],
    totals: dict[int, int | None],
    tolerance: float = 0.1,
) -> list[Finding]:
    """Every process's class (``totals``: each GPU's memory, for shares without ``--mem``;
    ``tolerance``: the fraction of its declared memory a holder may use beyond it)."""
    by_key = {h.key: h for h in holders}
    claimants: dict[int, list[str]] = {}
    for holder in holders:
        for g in holder.gpus:
            claimants.setdefault(g, []).append(holder.key)
    used: dict[tuple[str, int], int] = {}
    for p in procs:
        if p.holder in by_key and p.gpu in by_key[p.holder].gpus:
            used[(p.holder, p.gpu)] = used.get((p.holder, p.gpu), 0) + p.memory
    out: list[Finding] = []
    for p in procs:
        h = by_key.get(p.holder) if p.holder is not None else None
        base = Finding(
            OWN, p.gpu, p.pid, p.start, p.uid, p.user, p.memory, p.holder, proof=p.proof
        )
        if h is not None and p.gpu in h.gpus:
            limit = declared(h, totals.get(p.gpu))
            if limit is not None and used[(h.key, p.gpu)] > limit * (1.0 + tolerance):
                others = [k for k in claimants.get(p.gpu, []) if k != h.key]
                victim = ", ".join(others) or None
                out.append(replace(base, kind=OVERRUN, victim=victim, declared=limit))
            else:
                out.append(base)
            continue
        others = [k for k in claimants.get(p.gpu, []) if k != p.holder]
        if others:
            out.append(replace(base, kind=INTRUSION, victim=", ".join(others)))
        elif h is not None:  # a berth holder on a GPU nobody holds: still not its own
            out.append(replace(base, kind=INTRUSION))
        else:
            out.append(replace(base, kind=OUTSIDE))
    return out


def track(
    findings: list[Finding], seen: dict[tuple[str, int, int, int], float], now: float
) -> tuple[list[Finding], dict[tuple[str, int, int, int], float]]:
    """Give each finding its ``since`` (first seen; ``seen``: the last pass's), and the map
    for the next pass (what is no longer seen is forgotten)."""
    out: list[Finding] = []
    nxt: dict[tuple[str, int, int, int], float] = {}
    for f in findings:
        since = seen.get(f.ident, now)
        nxt[f.ident] = since
        out.append(replace(f, since=since))
    return out, nxt


@dataclass(frozen=True, slots=True)
class Idle:
    """A holder whose GPUs all showed no utilisation since ``since``."""

    holder: str
    since: float

    def to_dict(self, now: float) -> dict[str, object]:
        return {"holder": self.holder, "since": self.since, "idle_seconds": now - self.since}


def idle(
    holders: list[Holder],
    utilization: dict[int, int | None],
    active: dict[str, float],
    now: float,
    idle_after: float,
    threshold: int = 0,
) -> tuple[list[Idle], dict[str, float]]:
    """The holders idle for at least ``idle_after`` seconds, and when each holder was last
    seen active (``active``: the last pass's; a new holder counts as active when it took its
    GPUs). A GPU whose utilisation is unknown counts as active: berth never calls idle what
    it cannot see. A GPU shared by several holders is active for all of them."""
    nxt: dict[str, float] = {}
    out: list[Idle] = []
    for h in holders:
        last = active.get(h.key, h.start or now)
        busy = any((u := utilization.get(g)) is None or u > threshold for g in h.gpus)
        if busy or not h.gpus:
            last = now
        nxt[h.key] = last
        if now - last >= idle_after:
            out.append(Idle(h.key, last))
    return out, nxt
