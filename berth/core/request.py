"""What a job needs, per attempt: GPUs (whole, a share, or a share of each of several),
memory, named or preferred GPUs, host resources. JSON-ready; re-exported by
:mod:`berth.core.job`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from berth.errors import UsageError
from berth.units import gpu_count


def _tuple_or_none(value: Any) -> tuple[int, ...] | None:
    return None if value is None else tuple(int(v) for v in value)


@dataclass(slots=True)
class Request:
    """What a job needs, per attempt.

    - ``gpus``: an integer >= 1 (whole, exclusive GPUs) or a fraction in (0, 1) (a share of one
      GPU, shared with other fractional holders); 0 means no GPU (simulated CPU-only pods).
      The one rule of a GPU count, :func:`berth.units.gpu_count`.
    - ``each``: with an integer ``gpus`` >= 2, the share in (0, 1] the job takes of *each* of
      its GPUs (mgpu_srun's ``--gpu-ids 0,1 --mem 8000``: 8000 MiB of each of 2 GPUs, sized as
      a share): ``gpus=2, each=0.1`` holds 0.1 of two GPUs, on one node. 1.0 (the default):
      whole GPUs. ``gpus=1, each=s`` is the share ``gpus=s``, and is stored so.
    - ``mem``: GPU memory per GPU in bytes, or None. A fractional job without ``mem`` is charged
      ``gpus x memory_total`` of its GPU, so shares never overcommit memory.
    - ``gpu_ids``: the only GPUs allowed (NVML indices), or None for any.
    - ``prefer``: GPUs to take first when several qualify.
    - ``name``: case-insensitive substring the GPU's name must contain (``"A100"``).
    - ``cpu`` / ``ram``: node resources (millicores, bytes); only the simulator's multi-node
      inventories declare node capacity, so on a plain host these are not checked.
    """

    gpus: float = 1
    mem: int | None = None
    gpu_ids: tuple[int, ...] | None = None
    prefer: tuple[int, ...] = ()
    name: str | None = None
    cpu: float | None = None
    ram: int | None = None
    each: float = 1.0

    def __post_init__(self) -> None:
        self.gpus = gpu_count(self.gpus, "gpus", none=True)
        if self.each != 1.0 or isinstance(self.each, bool):
            each = self.each
            if isinstance(each, bool) or not isinstance(each, (int, float)) or not 0 < each <= 1:
                raise UsageError(
                    f"each = {each!r}: the share of each GPU must be a number in (0, 1]"
                )
            if self.gpus < 1:
                raise UsageError(
                    f"each = {each!r} with gpus = {self.gpus!r}: a share of each GPU goes with "
                    "a whole number of GPUs (gpus >= 1)"
                )
            if self.gpus == 1 and each < 1:  # one GPU: the plain share
                self.gpus, each = float(each), 1.0
            self.each = float(each)
        if self.mem is not None and self.mem < 0:
            raise UsageError(f"invalid GPU memory {self.mem!r}: must not be negative")
        if self.gpu_ids is not None:
            self.gpu_ids = tuple(sorted(set(self.gpu_ids)))
            if self.gpus >= 1 and len(self.gpu_ids) < self.gpus:
                raise UsageError(
                    f"asked for {self.gpus} GPUs but allowed only {list(self.gpu_ids)}: "
                    "allow more GPUs or ask for fewer"
                )
        self.prefer = tuple(self.prefer)

    @property
    def whole(self) -> bool:
        """True for whole, exclusive GPUs (gpus >= 1, all of each)."""
        return self.gpus >= 1 and self.each >= 1.0

    @property
    def shares(self) -> bool:
        """True for a share of each of several GPUs (``each`` < 1)."""
        return self.each < 1.0

    @property
    def count(self) -> int:
        """How many GPUs the job holds: gpus for whole GPUs (or shares of each), 1 for a
        share of one, 0 for none."""
        return int(self.gpus) if self.gpus >= 1 else (1 if self.gpus > 0 else 0)

    @property
    def share(self) -> float:
        """Share of each held GPU: 1.0 for whole GPUs, the fraction otherwise."""
        return self.each if self.gpus >= 1 else float(self.gpus)

    @property
    def size(self) -> float:
        """What one GPU must have free for the job, as the pass's quick tests count it: the
        number of whole GPUs, or the share (of one GPU, or of each GPU for ``each`` < 1)."""
        return self.gpus if self.each >= 1.0 else self.each

    @property
    def gpu_amount(self) -> float:
        """GPUs in use, counting fractions: 2 for two GPUs, 0.5 for half of one, 0.2 for 0.1
        of each of two."""
        return float(self.gpus) * self.each

    def to_dict(self) -> dict[str, Any]:
        return {
            "gpus": self.gpus,
            "mem": self.mem,
            "gpu_ids": None if self.gpu_ids is None else list(self.gpu_ids),
            "prefer": list(self.prefer),
            "name": self.name,
            "cpu": self.cpu,
            "ram": self.ram,
            **({"each": self.each} if self.each < 1.0 else {}),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Request:
        return cls(
            gpus=d.get("gpus", 1),
            mem=d.get("mem"),
            gpu_ids=_tuple_or_none(d.get("gpu_ids")),
            prefer=tuple(int(v) for v in d.get("prefer") or ()),
            name=d.get("name"),
            cpu=d.get("cpu"),
            ram=d.get("ram"),
            each=d.get("each", 1.0),
        )
