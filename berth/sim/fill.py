"""The FGD packing experiment (ANCHORS.md A1): pods keep arriving, none leave, until the
arrived GPU demand reaches a share of capacity; what share of the GPUs got allocated?

Each pod is placed at once by the core's placement (``berth.core.placement.place``, the step
``schedule()`` uses to put a job on GPUs) or fails. Pods come from the pod list in a seeded
random order (the whole list, then the list again in another order; FGD uses seeds 42-51).
The packer's demand profile is, by default (``profile="list"``), the whole pod list, as
FGD's typical pods are its workload's pod shapes: a shape that few pods have (openb's 8-GPU
120-core pods, 5 of 7,853 in ``cpu100``) is known, and its few host nodes kept, before its
first pod comes (learned from the arrivals, the packer gave every G3 GPU to small pods first
and the first such pod failed at 38.5% allocated). ``profile="recent"``: the last
``PROFILE_WINDOW`` arrivals, what the cluster has been seeing. Either is rebuilt every
``PROFILE_EVERY`` arrivals (and at 1, 2, 4... before that), and the scarcity weights
(:mod:`berth.core.scarcity`) count the hosts left every ``RECOUNT_EVERY`` arrivals: counted
every 200, CPU-only pods of ``cpu250`` took the cores of many G3 nodes between two counts, at
a weight for the nodes left that was too low, and the first 120-core pod failed at 78.9% (seed
42; 91.4% with counts every 25). ``FillResult.first_fail`` is the GPU
allocated (%) when the first pod failed (not counting those whose GPU models no node has
enough of).

Placements score one node of each class of alike nodes (:class:`NodeClasses`), kept here as
pods are placed: the same choices as scoring every node (``classes=False``, and
``FillResult.digest``, a hash of every placement, to compare), 6-50 times sooner on openb.

GPU-model constraints (openb's ``gpu_spec``, :mod:`berth.sim.gpuspec`) are honoured as FGD's
simulator honours them: a constrained pod may only take GPUs of its models (the request's
``gpu_ids``). A pod whose models no node can host counts as arrived and failed, like any pod
that fits nowhere, and is also counted in ``FillResult.unsatisfiable``. ``gpu_spec=False``
ignores the constraints (the old, easier workload), for before/after comparisons.
"""

from __future__ import annotations

import hashlib
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from berth.core.capacity import Capacity
from berth.core.nodeclasses import NodeClasses
from berth.core.placement import Placement, Profile, place
from berth.core.request import Request
from berth.errors import UsageError
from berth.sim.gpuspec import ModelIndex, job_count
from berth.sim.traces import SimJob
from berth.sim.workload import Inventory

PROFILE_WINDOW = 8000
PROFILE_EVERY = 200
RECOUNT_EVERY = 25  # arrivals between two counts of a scarce shape's hosts
PROFILES = ("list", "recent")


@dataclass(slots=True)
class FillResult:
    placement: str
    seed: int
    capacity: int
    marks: dict[int, float] = field(default_factory=dict)  # arrived % -> allocated %
    # FGD's own reading: the mean allocated % after each pod whose arrived % rounds to the mark
    window: dict[int, float] = field(default_factory=dict)
    placed: int = 0
    failed: int = 0
    constrained: int = 0  # arrived pods with a GPU-model constraint
    unsatisfiable: int = 0  # ... of which no node can host (failed, never placed)
    first_fail: float | None = None  # GPU allocated % when the first satisfiable pod failed
    wall: float = 0.0
    digest: str = ""  # a hash of every pod's placement (positions, or none), in order


def fill(
    pods: list[SimJob],
    inv: Inventory,
    placement: str,
    seed: int,
    *,
    until: int = 130,
    marks: tuple[int, ...] = (90, 100, 110, 120, 130),
    gpu_spec: bool = True,
    classes: bool = True,
    profile: str = "list",
) -> FillResult:
    """Allocation ratio (%) at each arrived-demand mark (% of GPU capacity).

    ``classes``: score one node of each class of alike nodes (``NodeClasses``), not every
    node; the same placements (``FillResult.digest``), sooner. False: the plain scan.
    ``profile``: the packer's demand, ``list`` (the whole pod list, as FGD's typical pods)
    or ``recent`` (the last ``PROFILE_WINDOW`` arrivals)."""
    if profile not in PROFILES:
        raise UsageError(
            f"profile {profile!r}: the packer's demand is one of {', '.join(PROFILES)}"
        )
    gpus, nodes = inv
    if not pods:
        raise UsageError("no pods to fill the cluster with: give a pod list with rows")
    if not any(p.gpus > 0 for p in pods):
        raise UsageError("no pod asks for a GPU: the fill experiment measures GPU allocation")
    models = ModelIndex(gpus)
    cap = Capacity(gpus, nodes)
    alike = NodeClasses(cap) if classes else None
    trail = hashlib.blake2b(digest_size=16)
    total = float(len(gpus))
    rng = random.Random(seed)
    res = FillResult(placement, seed, len(gpus))
    arrived = allocated = 0.0
    demand = _Demand(pods if profile == "list" else None, models, gpu_spec, alike)
    todo = sorted(marks)
    win: dict[int, list[float]] = {m: [0.0, 0.0] for m in marks}
    wall0 = time.perf_counter()
    arrivals = _arrivals(pods, rng)
    while todo:
        pod = next(arrivals)
        req, spec, ok = _request(pod, models, gpu_spec)
        if alike is not None and req.gpu_ids is not None:
            alike.learn(frozenset(req.gpu_ids))
        if placement == "packer":
            demand.arrive(req)
        # the mark is crossed by the pod that arrives when the demand reaches it
        while todo and arrived + pod.gpus > todo[0] / 100.0 * total:
            res.marks[todo.pop(0)] = 100.0 * allocated / total
        if not todo or arrived / total * 100.0 >= until:
            break
        arrived += pod.gpus
        if spec:
            res.constrained += 1
            res.unsatisfiable += not ok
        pl = place(cap, req, placement, demand.profile, classes=alike) if ok else None
        trail.update(repr(None if pl is None else (pl.node, pl.positions)).encode())
        if pl is None:
            res.failed += 1
            if ok and res.first_fail is None:
                res.first_fail = 100.0 * allocated / total
        else:
            _take(cap, alike, req, pl)
            allocated += pod.gpus
            res.placed += 1
        w = win.get(round(100.0 * arrived / total))
        if w is not None:
            w[0] += 100.0 * allocated / total
            w[1] += 1.0
    res.window = {m: w[0] / w[1] for m, w in win.items() if w[1]}
    res.wall = time.perf_counter() - wall0
    res.digest = trail.hexdigest()
    return res


def _arrivals(pods: list[SimJob], rng: random.Random) -> Iterator[SimJob]:
    """The pod list in a seeded random order, again and again."""
    while True:
        order = list(pods)
        rng.shuffle(order)
        yield from order  # (first to last, as popping the reversed list did)


def _take(cap: Capacity, alike: NodeClasses | None, req: Request, pl: Placement) -> None:
    """Charge a placed pod, and keep the classes of alike nodes true."""
    cap.take(pl.positions, req.share, pl.mem, pl.node, req.cpu, req.ram)
    if alike is not None:
        for n in {pl.node, *(cap.node_of[p] for p in pl.positions)}:
            alike.moved(n)


def _request(
    pod: SimJob, models: ModelIndex, gpu_spec: bool
) -> tuple[Request, tuple[str, ...], bool]:
    """A pod's request, its GPU models (if honoured) and whether any node has enough of them
    (an unsatisfiable pod is never placed)."""
    spec = pod.gpu_models if gpu_spec and job_count(pod) else ()
    ok = not spec or models.satisfiable(spec, job_count(pod))
    ids = models.ids(spec) if spec and ok else None
    return Request(gpus=pod.gpus, cpu=pod.cpu, ram=pod.ram, gpu_ids=ids), spec, ok


class _Demand:
    """The packer's demand profile as pods arrive: of the whole pod list (``pods``) or, with
    ``pods`` None, of the last ``PROFILE_WINDOW`` arrivals; rebuilt every ``PROFILE_EVERY``
    arrivals (at 1, 2, 4... before that: one pod is no distribution), its scarce shapes'
    hosts counted again every ``RECOUNT_EVERY``."""

    def __init__(
        self, pods: list[SimJob] | None, models: ModelIndex, gpu_spec: bool,
        alike: NodeClasses | None,
    ) -> None:  # fmt: skip
        self.profile: Profile | None = None
        self._recent: list[Request] = []
        self._list = None if pods is None else [_request(q, models, gpu_spec)[0] for q in pods]
        for q in self._list or ():
            if alike is not None and q.gpu_ids is not None:
                alike.learn(frozenset(q.gpu_ids))

    def arrive(self, req: Request) -> None:
        recent = self._recent
        recent.append(req)
        m = len(recent)
        if m % PROFILE_EVERY == 0 or (m < PROFILE_EVERY and m & (m - 1) == 0):
            del recent[:-PROFILE_WINDOW]
            self.profile = Profile.of(recent if self._list is None else self._list)
        elif self.profile is not None and m % RECOUNT_EVERY == 0:
            self.profile.scarce.recount()
