"""The engine's explaining pass: why each pending job waits, for `berth queue`, `show`,
`status` and the dashboard (a pass that decides but starts nothing: what it would start reads
``None: starting``, and a real pass is kicked).

It considers the pending jobs in the order the dispatch passes keep
(:mod:`berth.daemon.engine.queue_order`: no sort of a long queue), and may stop early: a
caller that shows only the head of the queue (`berth queue` on a terminal) gives ``until``, a
factory of a predicate that says when it has seen enough (``Inputs.explain_stop``), so a
queue of 100,000 jobs costs it the jobs it shows. The reasons so found are kept until the
queue changes (:meth:`Engine.kick`); a later caller that needs more (or all: ``until`` None)
makes the pass run again, further.
"""

from __future__ import annotations

import time

from berth.core.policy import DEFAULT_POLICY, Inputs, schedule
from berth.core.states import State
from berth.daemon.engine import cpuslots

TYPE_CHECKING = False
if TYPE_CHECKING:

    from typing import Any

    from berth.daemon.engine.host import Host, Until


class Considered(dict[int, int]):
    """Pending job -> its place in the last explaining pass; ``heads``: the keys of the
    ``until`` it ran for (a screen's: ``queue_view.Head.key``), covered without a walk;
    ``lines``: the jobs of a screen's pending lines found in this order
    (``queue_view._pending``), so the same screen again walks none of the jobs ahead."""

    __slots__ = ("heads", "lines")

    def __init__(self, places: dict[int, int]) -> None:
        super().__init__(places)
        self.heads: set[object] = set()
        self.lines: dict[object, list[int]] = {}


def covered(engine: Host, until: Until | None) -> bool:
    """Whether the reasons in hand (still valid) are all ``until`` needs."""
    if engine.explained_all:
        return True
    if until is None:
        return False
    enough = until()
    key = getattr(enough, "key", None)
    if key is not None and key in getattr(engine.considered, "heads", ()):
        return True
    jobs = engine.jobs
    for job_id in engine.considered:
        job = jobs.get(job_id)
        if job is not None and enough(job):
            return True
    return False


def explain(engine: Host, until: Until | None = None) -> None:
    """Bring the pending reasons up to date (:meth:`Engine.explain`)."""
    t0 = time.perf_counter()
    now = engine.clock.time()
    if engine.pauses.queue:
        engine.reasons.clear()  # (in place: the engine's parts share it)
        engine.reasons.update((j.id, "QueuePaused") for j in engine.jobs.values()
                              if j.state is State.PENDING)  # fmt: skip
        engine.considered = {}
        engine.explained_all = True
        return
    policy = engine.opts.policy or DEFAULT_POLICY
    order = engine.order
    pending = order.pending(engine.jobs.values(), policy, now)
    running = [j for j in engine.jobs.values() if j.state in (State.RUNNING, State.COMPLETING)]
    stop = None if until is None else until()
    multi = order.tenants > 1 or engine.accounts.projects.any
    decisions = schedule(Inputs(
        pending, running, engine.res.inventory, engine.outside_usage(), engine.pauses.indexes(),
        now,
        policy=policy,
        nodes=cpuslots.nodes(engine.opts.cpu_slots),  # (-g 0 jobs: CPU slots)
        done=engine.finished_states,
        fair=engine.accounts.fair(running, now) if multi else None,
        limits=engine.accounts.user_limits(),
        explain=True,
        presorted=order.presorted,
        profile=order.profile,
        reservations=engine.reservations.windows(now),
        explain_stop=stop,
        arrivals=order.arrivals.any(),  # (guarded: berth.core.guard)
        predicted=engine.estimates.backfill(now),  # ([scheduling] predict)
    ))  # fmt: skip
    set_reasons(engine, decisions)
    key = getattr(stop, "key", None)
    if key is not None and isinstance(engine.considered, Considered):
        engine.considered.heads.add(key)
    for start in decisions.starts:
        engine.reasons[start.job_id] = "None: starting"
    engine.last_explain_seconds = time.perf_counter() - t0
    if decisions.starts or decisions.cancels:
        engine.kick()


def set_reasons(engine: Host, decisions: Any) -> None:
    """Keep what a pass that explained said of each pending job (its reason, its place)."""
    drained = engine.pauses.drained()
    said: dict[tuple[object, str], str] = {}  # (jobs that wait alike share one string)
    reasons = engine.reasons
    reasons.clear()  # (in place: the engine's parts share it)
    last, s = None, ""
    for i, p in decisions.pending.items():
        if p is not last:  # (a run of alike tasks shares one entry: its string made once)
            last = p
            s = said.get((p.reason, p.detail), "")
            if not s:
                s = p.reason.value + (f": {p.detail}" if p.detail else "")
                if drained and p.reason.value == "GpuPaused":
                    s += drained
                said[p.reason, p.detail] = s
        reasons[i] = s
    engine.considered = Considered({job_id: k for k, job_id in enumerate(decisions.order)})
    engine.explained_all = not decisions.partial
