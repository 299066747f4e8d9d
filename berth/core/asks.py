"""The demand's CPU and RAM asks as the packer weighs them: how likely the next job is to
ask more cores (RAM) than a node has left (:meth:`Asks.p_stranded`).

Counted **by job** (FGD's popularity, as :class:`berth.core.profile.Profile` counts sizes)
where cores and RAM are roomy: the demand brings less than ``ROOMY`` (90%) of the free cores
(RAM) per free GPU of the capacity table. Weighted by GPUs asked (before, ``TAILS_BY_COUNT =
False``), the few 8-GPU jobs of openb's ``multigpu*`` lists made every core below their ask
look wanted by a third of the demand: smaller jobs broke whole 8-GPU nodes rather than take
cores an 8-GPU job might have wanted (``multigpu40``: 0.05 point below FGD; by job 0.31
above; in small: tests/core/test_placement_cpu_by_count.py, where the next 8-GPU job found
no node).

Two exceptions keep the GPUs' weight:

- where cores (RAM) are tight (the demand brings ``ROOMY`` or more of the free cores per
  free GPU: openb's ``cpu200`` as it starts, ``cpu250``), every core next to a free GPU
  matters in aggregate; by job the CPU-only and CPU-heavy pods spent them (``cpu200`` -0.1
  to -0.45 point, seed 42's first failure an 8-GPU 120-core pod at 93.0% allocated);
- a *rare* multi-GPU shape, whose hosts hold under half of the free GPUs
  (:meth:`berth.core.scarcity.Scarcity.rare`: openb's 8-GPU 120-core pods, G3 nodes only):
  by job its one pod in 250 made a node's last cores for it look worth little, and a
  CPU-only pod took them (tests/core/test_placement_scarcity.py).

Both are measured when the profile is first used on a capacity table (and the rare shapes
again when the scarcity weights count their hosts again).
"""

from __future__ import annotations

from bisect import bisect_right

from berth.core.capacity import EPS, INF

TAILS_BY_COUNT = True  # False: weighted by GPUs asked (before issue 32.4's w8 pass)
ROOMY = 0.9  # by job while the demand's cores (RAM) per GPU are under this share of the free

Row = tuple[float, float, float]  # GPUs, cores, RAM of one job
Shape = tuple[int, float, float]  # whole GPUs, cores, RAM of a multi-GPU shape


class Asks:
    """The CPU and RAM asks of the jobs that ask for a GPU, with the share of the demand
    that asks more than x (``p_stranded``, by bisection)."""

    __slots__ = ("_by_gpus", "_cpu", "_cpu_tail", "_jobs", "_ram", "_ram_tail", "_rare", "_rows",
                 "_total")  # fmt: skip

    def __init__(self, rows: list[Row], total: float, by_count: bool) -> None:
        """``rows``: every job's (GPUs, cores, RAM); ``total``: the GPU demand a share is of;
        ``by_count``: whether the asks may count by job (not for demand restricted to some
        GPUs, whose sizes stay by GPUs asked too)."""
        self._cpu, self._cpu_tail = tails(sorted((c, s) for s, c, _ in rows if s > 0), total)
        self._ram, self._ram_tail = tails(sorted((r, s) for s, _, r in rows if s > 0), total)
        self._by_gpus = (self._cpu, self._cpu_tail, self._ram, self._ram_tail)
        self._rare: frozenset[Shape] | None = None  # what the tails are for; None: by GPUs
        self._jobs = len(rows) if by_count and TAILS_BY_COUNT else 0
        self._total = total
        self._rows: dict[Row, int] = {}  # the asks of the jobs with a GPU, and how many
        if self._jobs:
            for row in rows:
                if row[0] > 0:
                    self._rows[row] = self._rows.get(row, 0) + 1

    @property
    def by_job(self) -> bool:
        """Whether the asks may count by job (else always by GPUs asked)."""
        return self._jobs > 0

    def bind(self, roomy: bool, rare: frozenset[Shape]) -> None:
        """Count by job (but ``rare`` shapes) if ``roomy``, else by GPUs asked."""
        want = rare if roomy and self._jobs else None
        if want is self._rare or want == self._rare:
            return
        self._rare = want
        if want is None:
            self._cpu, self._cpu_tail, self._ram, self._ram_tail = self._by_gpus
            return
        total, jobs = self._total, self._jobs
        weights = [(row, _weight(row, k, want, total, jobs)) for row, k in self._rows.items()]
        self._cpu, self._cpu_tail = tails(sorted((r[1], w) for r, w in weights), 1.0)
        self._ram, self._ram_tail = tails(sorted((r[2], w) for r, w in weights), 1.0)

    def p_stranded(self, cpu: float, ram: float) -> float:
        """Share of the demand that a node with ``cpu``/``ram`` left could not take (treating
        CPU and RAM asks as independent)."""
        pc = self._cpu_tail[bisect_right(self._cpu, cpu + EPS)] if cpu < INF else 0.0
        pr = self._ram_tail[bisect_right(self._ram, ram + EPS)] if ram < INF else 0.0
        return 1.0 - (1.0 - pc) * (1.0 - pr)


def _weight(row: Row, k: int, rare: frozenset[Shape], total: float, jobs: int) -> float:
    """The share of the demand ``k`` jobs asking ``row`` are: by job, or by GPUs asked for a
    rare shape."""
    s, cpu, ram = row
    whole = round(s)
    if s >= 2.0 - EPS and abs(s - whole) < EPS and (whole, cpu, ram) in rare:
        return s * k / total
    return k / jobs


def roomy(gpus: float, cores: float, mem: float, cpu_per_gpu: float, ram_per_gpu: float) -> bool:
    """Whether ``gpus`` free GPUs with ``cores`` and ``mem`` free beside them have cores and
    RAM to spare for a demand that brings these per GPU (its GPU jobs' and CPU-only jobs'):
    under ``ROOMY`` of what there is per free GPU."""
    if gpus <= 0:
        return True
    return cpu_per_gpu < cores / gpus * ROOMY and ram_per_gpu < mem / gpus * ROOMY


def tails(pairs: list[tuple[float, float]], total: float) -> tuple[list[float], list[float]]:
    """Sorted (key, weight) -> the distinct keys, and the total weight (share) of the keys
    from each on. ``tail[bisect_right(keys, x)]`` is the share of keys above ``x``: with each
    key once (the tail at its first place) that is the same number, to the bit, as with every
    pair's (a long queue of alike jobs keeps a few keys, not one per job)."""
    tail = [0.0] * (len(pairs) + 1)
    for i in range(len(pairs) - 1, -1, -1):
        w = pairs[i][1]
        tail[i] = tail[i + 1] + w / total
    keys: list[float] = []
    shares: list[float] = []
    for i, (k, _) in enumerate(pairs):
        if not keys or k != keys[-1]:
            keys.append(k)
            shares.append(tail[i])
    shares.append(0.0)
    return keys, shares
