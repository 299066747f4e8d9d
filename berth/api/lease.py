"""``berth.acquire``: claim GPUs for this process, waiting for them if need be.

>>> import berth
>>> with berth.acquire(gpus=2, min_free="20G") as lease:
...     print(lease.ids, lease.uuids, lease.devices)   # [1, 3] [...] ['cuda:0', 'cuda:1']
...     model.to(lease.devices[0])

The claim is held in the host's ledger (see docs/claims.md): every other berth user, script
and daemon on the host sees it, and it ends with ``release()``, the ``with`` block, or this
process's death (even ``kill -9``). Waiting is fair (older waiters first) and wakes at once
when another holder lets go; ``poll`` only bounds how long a change made outside berth (a
process that frees GPU memory) can go unnoticed.

If CUDA is not initialised in this process yet, ``CUDA_VISIBLE_DEVICES`` (the claimed GPUs'
indices) and ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` are set, so ``cuda:0`` is the first claimed GPU;
they are restored on release. If torch has already initialised CUDA, the visible devices
cannot change any more: ``torch.cuda.set_device`` is called with the first claimed GPU's CUDA
index and ``lease.devices`` names the claimed GPUs as this process sees them (a warning says
so, once).
"""

from __future__ import annotations

import os
import sys

from berth import config
from berth.api import banned_reasons, not_mine, read, visible_note
from berth.claims.ledger import Ledger
from berth.claims.waiting import wait_claim
from berth.devices.visible import cuda_env, cuda_index, restrict_to_visible
from berth.errors import BerthError, NotEnoughGpus, UsageError
from berth.selection.choose import select
from berth.selection.filters import Filters, for_python
from berth.selection.outside import OutsideRule
from berth.units import gpu_count

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from types import TracebackType
    from typing import Unpack

    from berth.claims.ledger import Claim
    from berth.claims.waiting import OnWait
    from berth.devices.model import GpuSnapshot
    from berth.selection.filters import FilterArgs

__all__ = ["Lease", "acquire"]

_ENV = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")
_warned = False
_active: list[Lease] = []  # leases of this process that set CUDA_VISIBLE_DEVICES
_original: dict[str, str | None] = {}  # the environment before the first of them


def user_visible() -> str | None:
    """CUDA_VISIBLE_DEVICES as it was before this process's leases changed it."""
    if _active:
        return _original.get("CUDA_VISIBLE_DEVICES")
    return os.environ.get("CUDA_VISIBLE_DEVICES")


def cuda_initialized() -> bool:
    """Has torch (if imported) initialised CUDA in this process?"""
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    try:
        return bool(torch.cuda.is_initialized())
    except Exception:  # a torch without CUDA support, or a partial import
        return False


class Lease:
    """GPUs claimed by this process. ``ids`` (NVML indices), ``uuids``, ``devices`` (as this
    process sees them: ``cuda:0``...), ``share``, ``mem``; ``fds`` hold the claim."""

    def __init__(self, claim: Claim, gpus: Sequence[GpuSnapshot], *, set_env: bool = True) -> None:
        self.claim = claim
        self.uuids: list[str] = list(claim.uuids)
        by_uuid = {g.uuid: g for g in gpus}
        self.ids: list[int] = [by_uuid[u].index for u in self.uuids]
        self.share = claim.share
        self.mem = claim.mem
        self.devices: list[str] = []
        if set_env:
            self._apply(gpus)

    @property
    def lease_id(self) -> str:
        return self.claim.lease_id

    @property
    def fds(self) -> list[int]:
        return self.claim.fds

    @property
    def active(self) -> bool:
        return self.claim.active

    def _apply(self, gpus: Sequence[GpuSnapshot]) -> None:
        global _warned
        if not cuda_initialized():
            if not _active:
                _original.clear()
                _original.update({k: os.environ.get(k) for k in _ENV})
            # Other leases of this process are active: keep their GPUs visible too, first.
            current = os.environ.get("CUDA_VISIBLE_DEVICES") or ""
            ids = [x for x in current.split(",") if x] if _active else []
            ids += [str(i) for i in self.ids if str(i) not in ids]
            os.environ.update(cuda_env(ids))
            self.devices = [f"cuda:{ids.index(str(i))}" for i in self.ids]
            _active.append(self)
            return
        torch = sys.modules["torch"]  # already imported: cuda_initialized() saw it

        indices = [cuda_index(u, gpus, os.environ) for u in self.uuids]
        if indices[0] is None:
            self.release()
            raise UsageError(
                f"GPU {self.ids[0]} was claimed but CUDA_VISIBLE_DEVICES="
                f"{os.environ.get('CUDA_VISIBLE_DEVICES')!r} hides it from this process, "
                "whose CUDA is already initialised: call berth.acquire() before using CUDA"
            )
        self.devices = [f"cuda:{i}" if i is not None else "hidden" for i in indices]
        torch.cuda.set_device(indices[0])
        if not _warned:
            _warned = True
            import warnings  # rare: CUDA initialised before

            warnings.warn(
                "berth.acquire: CUDA was already initialised, so CUDA_VISIBLE_DEVICES could not "
                f"be set; made {self.devices[0]} the default device instead. Use "
                "lease.devices (not cuda:0), or acquire before touching CUDA.",
                RuntimeWarning,
                stacklevel=3,
            )

    def release(self) -> None:
        """End the claim (idempotent) and restore CUDA_VISIBLE_DEVICES/CUDA_DEVICE_ORDER."""
        self.claim.release()
        if self in _active:
            _active.remove(self)
            if not _active:  # the last one: restore what was there before berth
                for key, value in _original.items():
                    if value is None:
                        os.environ.pop(key, None)
                    else:
                        os.environ[key] = value
            # else: leave the variable alone, so other leases' devices keep their numbers

    def __enter__(self) -> Lease:
        return self

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()

    def __repr__(self) -> str:
        state = "" if self.active else ", released"
        return f"berth.Lease(ids={self.ids}, devices={self.devices}, share={self.share:g}{state})"


def build_request(gpus: float = 1, **filters: Unpack[FilterArgs]) -> Filters:
    """What acquire() asks for, from its parameters (``gpus``: a count, or a share < 1)."""
    gpus = gpu_count(gpus, "gpus")  # (the one rule of a GPU count, and its message)
    if gpus < 1:
        return Filters.of(1, gpus, "acquire", **filters)
    return Filters.of(int(gpus), 1.0, "acquire", **filters)


def claim(
    filters: Filters,
    *,
    timeout: float | None = None,
    poll: float = 5.0,
    all: bool = False,
    label: str | None = None,
    command: str | None = None,
    on_wait: OnWait | None = None,
    banned: Mapping[int, str] | None = None,
) -> tuple[Claim, list[GpuSnapshot]]:
    """Claim what ``filters`` ask for (waiting up to ``timeout``); the claim and the last
    snapshots of all GPUs (whatever CUDA_VISIBLE_DEVICES says). ``banned`` adds reasons to
    keep off GPUs (by index) to the config's. The layer under :func:`acquire`, ``berth run``
    and GPUScheduler."""
    if timeout is not None and (isinstance(timeout, bool) or not timeout >= 0):
        raise UsageError(f"timeout={timeout!r}: expected seconds (0 or more) or None")
    if isinstance(poll, bool) or not poll > 0:
        raise UsageError(f"poll={poll!r}: expected seconds above 0")
    cfg = config.get()
    ledger = Ledger(cfg=cfg)
    last: list[GpuSnapshot] = []

    def fresh() -> list[GpuSnapshot]:
        snaps = not_mine(read(cfg, all=True, process_details=False))
        last[:] = snaps
        visible = None if all else user_visible()
        if visible is not None:
            snaps = restrict_to_visible(snaps, visible)
        return snaps

    def bans(snaps: Sequence[GpuSnapshot]) -> dict[int, str]:
        return {**banned_reasons(cfg, snaps), **(banned or {})}

    first = [fresh()]  # (read once: the check below and the first attempt share it)
    note = "" if all else visible_note(last, first[0])  # (CUDA_VISIBLE_DEVICES hides some)
    try:
        never = never_fits(filters, first[0], bans(first[0]))
    except UsageError as e:  # (--only naming a GPU not here, or not shown)
        raise UsageError(f"{e}{note}") from None
    if never is not None:
        where = "the GPUs shown here" if note else "this machine"
        raise NotEnoughGpus(
            f"{where} can never give {filters.describe()}, so berth will not "
            f"wait for it: {never}{note}"
        )

    def snapshots() -> list[GpuSnapshot]:
        return first.pop() if first else fresh()

    held = wait_claim(
        ledger, snapshots, filters, bans=bans, timeout=timeout, poll=poll, label=label,
        command=command, on_wait=on_wait, outside=OutsideRule.of(cfg),
    )  # fmt: skip
    return held, last


def never_fits(
    filters: Filters, gpus: Sequence[GpuSnapshot], banned: Mapping[int, str]
) -> str | None:
    """Why no state of these GPUs could satisfy ``filters`` (too many GPUs asked, a name no
    GPU has, more memory than a GPU has, every fitting GPU banned), as ``select --explain``
    words it; None when waiting may help. What changes (use, processes, claims, power) is
    taken at its best: every GPU idle and free. A custom predicate cannot be judged: None."""
    if filters.predicate is not None:
        return None
    static = filters.replace(max_util=None, max_mem_util=None, max_power=None, max_procs=None)
    idle = [
        g.replace(
            utilization=0, memory_utilization=0, processes=(), power_draw=None, healthy=True,
            error=None, memory_used=None if g.memory_total is None else 0,
            memory_free=g.memory_total,
        )
        for g in gpus
    ]  # fmt: skip
    sel = select(idle, static, None, banned)
    return None if sel.ok else sel.explain_shortfall()


def acquire(
    gpus: float = 1,
    *,
    timeout: float | None = None,
    poll: float = 5.0,
    all: bool = False,
    label: str | None = None,
    **filters: Unpack[FilterArgs],
) -> Lease:
    """Claim ``gpus`` GPUs (an integer, or a share below 1 of one GPU) that pass the filters
    of :func:`berth.select` (the same keyword arguments), waiting up to ``timeout`` seconds
    (None: for ever; ``poll``: seconds between GPU reads while waiting; claims ending wake a
    waiter at once). Only the GPUs of CUDA_VISIBLE_DEVICES unless ``all``; ``label`` is shown
    by ``berth status``.

    ``mem`` (bytes or "12G") is declared per GPU: shares on a GPU never declare more than its
    memory. ``order`` defaults to random among equals for whole GPUs and to ``packed`` for
    shares (half-GPU jobs pair up and leave whole GPUs free). Raises
    :class:`berth.errors.WaitTimeout` (saying what was missing) when the timeout passes,
    UsageError on a bad value, TypeError on an unknown keyword. Use as a context manager, or
    call ``lease.release()``."""
    try:
        asked = build_request(gpus, **filters)
        held, snaps = claim(asked, timeout=timeout, poll=poll, all=all, label=label)
    except BerthError as e:  # (in a Python caller's words: its arguments, not options)
        e.args = (for_python(str(e.args[0])), *e.args[1:]) if e.args else e.args
        raise
    return Lease(held, snaps)
