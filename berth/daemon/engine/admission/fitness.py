"""What a submitted job is checked against here, beyond its own fields: this machine's GPUs
(a request none could ever satisfy is refused: it would wait for ever; ``--mem`` without
``-g`` sized as a share of each GPU) and this daemon's time limits (``--max-job-time``,
``--on-time-limit``). Used by submit (:mod:`berth.daemon.engine.admission.admit`) and `berth update`
(:mod:`berth.daemon.engine.admission.update`) alike."""

from __future__ import annotations

import math

from berth.units import format_duration, format_size
from berth.wire import protocol
from berth.wire.protocol import ProtocolError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from berth.core.inventory import Gpu
    from berth.core.request import Request
    from berth.daemon.options import Options
    from berth.wire.jobspec import JobSpec


def memory_share(inventory: list[Gpu], spec: JobSpec) -> float:
    """``--mem X`` without ``-g`` (mgpu_srun's habit: GPUs placed by memory): the share of
    each of its GPUs, ``X / its memory``, as ``-g`` with a share would ask of one GPU, so jobs
    whose memory fits share GPUs (``--gpu-ids 0,1 --mem 8000``: 8000 MiB of each of GPUs 0 and
    1, as mgpu_srun started a job only with that much free on each). Sized by the smallest GPU
    the job may get (never more memory than declared fits on it); whole GPUs (1.0) where ``X``
    is most of one. Refused, with the fix, where not every such GPU's memory is known (a
    declared inventory without ``memory``): it would silently take whole GPUs."""
    assert spec.mem is not None  # (JobSpec's rule: by_memory goes with mem)
    gpus = [g for g in inventory if spec.gpu_ids is None or g.index in spec.gpu_ids]
    known = [g.memory_total for g in gpus if g.memory_total]
    if not known or len(known) < len(gpus):
        if not gpus:
            return 1.0  # (no GPU to size it by: check_fits says so)
        unknown = ", ".join(str(g.index) for g in gpus if not g.memory_total)
        size = f"{spec.mem >> 30}G" if spec.mem % (1 << 30) == 0 else f"{-(-spec.mem >> 20)}M"
        raise ProtocolError(
            protocol.BAD_REQUEST,
            f"--mem {size} without -g asks for a share of each GPU sized by its memory, but "
            f"the memory of GPU {unknown} is not known here (a declared [inventory] without "
            f'memory): declare it (memory = "80G" under [inventory] in the config file), or '
            f"say what you need: -g 0.5 --mem {size} (a share) or -g 1 --mem {size} (a whole "
            "GPU); nothing was queued",
        )
    share = math.ceil(spec.mem / min(known) * 1000) / 1000  # (to 0.1 %, rounded up)
    return share if share < 1 else 1.0


def check_fits(inventory: list[Gpu], request: Request) -> None:
    """Refuse, before anything is stored, a request no GPU set here could ever satisfy (more
    GPUs than there are, more memory than any card has): it would wait for ever."""
    if not inventory:
        return
    gpus = [g for g in inventory if request.gpu_ids is None or g.index in request.gpu_ids]
    if request.name:
        gpus = [g for g in gpus if request.name.lower() in g.name.lower()]
    if request.mem is not None:
        known = [g.memory_total for g in gpus if g.memory_total is not None]
        if known and max(known) < request.mem:
            raise ProtocolError(
                protocol.BAD_REQUEST,
                f"--mem {format_size(request.mem)}: no GPU here has that much memory "
                f"(largest {format_size(max(known))})",
            )
    if request.count > len(gpus):
        which = " matching --gpu-ids/--gpu-name" if len(gpus) < len(inventory) else ""
        raise ProtocolError(
            protocol.BAD_REQUEST,
            f"-g {request.count}: this machine has {len(gpus)} GPU(s){which}; ask for fewer",
        )


def requeue(spec: JobSpec, opts: Options) -> tuple[bool, int | None]:
    """Whether the time limit requeues the job, and at most how many times: as it asked
    (--requeue, --no-requeue, --max-requeues), else as the daemon says (--on-time-limit)."""
    requeue = spec.requeue if spec.requeue is not None else opts.on_time_limit == "requeue"
    most = spec.max_requeues if spec.max_requeues is not None else opts.max_requeues
    return requeue, most if requeue else None


def check_limit(limit: float | None, most: float | None) -> None:
    """Refuse a time limit the daemon would never let the job reach (``--max-job-time``)."""
    if limit is not None and not limit > 0:
        raise ProtocolError(protocol.BAD_REQUEST, f"time limit {limit!r}: must be positive")
    if limit is not None and most is not None and limit > most:
        cap = _duration(most)
        raise ProtocolError(
            protocol.BAD_REQUEST,
            f"-t {_duration(limit)} is more than this daemon allows: every job stops at "
            f"{cap} (berth daemon --max-job-time, or [daemon] max_job_time in the config); "
            f"ask for -t {cap} or less, or leave -t out to get {cap}",
        )


def limit_in_force(own: float | None, cap: float | None) -> dict[str, Any]:
    """What stops the job: its own limit or the daemon's ``max_job_time`` (submit's reply
    says which, so the user learns it at once)."""
    if own is not None and (cap is None or own <= cap):
        return {"limit_in_force": own, "limit_from": "job"}
    return {"limit_in_force": cap, "limit_from": "daemon" if cap is not None else None}


def _duration(seconds: float) -> str:
    return format_duration(seconds) if seconds >= 60 or seconds == int(seconds) else f"{seconds:g}s"
