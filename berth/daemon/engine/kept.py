"""What the running jobs hold, kept across the daemon's passes (issue 35: the CPU of one end
and the next start). A pass's core (:func:`berth.core.policy.schedule`) otherwise builds the
GPUs' free capacity from the inventory and charges every running job to it, every pass,
though one end and one start changed it. :class:`KeptCapacity` keeps an
:class:`~berth.core.occupancy.Occupancy` (the simulator's: bit for bit the fresh build) and
brings it up to date with the jobs running now: those gone are released, the new charged
last, in the order the pass lists them.

It is a function of its inputs, never of time: the inventory (read at each NVML poll), the
node's CPU slots, what holders other than our jobs use (each pass's, from the ledger and the
GPUs' processes) and the paused GPUs are compared with the last pass's, and any change
builds it again; so does a running job listed out of the order it was charged in (the fresh
build charges in the pass's order: fractional shares would round otherwise). An explaining
pass builds its own (holders named).
"""

from __future__ import annotations

from berth.core.occupancy import Occupancy

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Collection, Mapping, Sequence

    from berth.core.capacity import Capacity
    from berth.core.inventory import Gpu, Node, Usage
    from berth.core.job import Attempt, Job

    Key = tuple[list[Gpu], dict[str, Node], dict[int, Usage], frozenset[int]]


class KeptCapacity:
    """The daemon's kept capacity: :meth:`capacity` for each pass that does not explain."""

    __slots__ = ("_held", "_inventory", "_key", "_occ", "builds")

    def __init__(self) -> None:
        self._key: Key | None = None
        self._inventory: Sequence[Gpu] | None = None  # the list last compared equal
        self._occ: Occupancy | None = None
        # (job id, id of its attempt) -> the job and that attempt: charged, in the order
        # charged (the attempt kept here: its id is no other attempt's while it is here,
        # even once a withdrawn start has dropped it from its job)
        self._held: dict[tuple[int, int], tuple[Job, Attempt]] = {}
        self.builds = 0  # how many times it was built from nothing (tests, benchmarks)

    def capacity(
        self,
        inventory: Sequence[Gpu],
        nodes: Mapping[str, Node],
        others: Mapping[int, Usage],
        paused: Collection[int],
        running: Sequence[Job],
    ) -> Capacity:
        """A copy of the capacity ``running`` leaves (the pass changes it as it decides)."""
        key = self._key
        if (
            key is None
            or not (inventory is self._inventory or list(inventory) == key[0])
            or nodes != key[1] or others != key[2] or paused != key[3]
        ):  # fmt: skip
            key = (list(inventory), dict(nodes), dict(others), frozenset(paused))
            self._build(key)
        self._inventory = inventory  # (replaced at each poll, never changed in place)
        now = {(job.id, id(a)): (job, a) for job in running if (a := job.attempt) is not None}
        held = self._held
        if now.keys() != held.keys() or list(now) != list(held):
            kept = [k for k in held if k in now]
            if kept != list(now)[: len(kept)]:
                self._build(key)  # (listed in another order than charged)
                held, kept = self._held, []
            occ = self._occ
            assert occ is not None
            for k in [k for k in held if k not in now]:  # (ended, or another attempt runs)
                occ.end(held.pop(k)[0])
            for k in list(now)[len(kept) :]:
                occ.start(now[k][0])
                held[k] = now[k]
        assert self._occ is not None
        return self._occ.capacity()

    def _build(self, key: Key) -> None:
        self._key = key
        self._occ = Occupancy(key[0], key[1], key[2], key[3])
        self._held = {}
        self.builds += 1
