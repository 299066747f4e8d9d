"""Read the GPUs: frozen snapshots from NVML, or from a declared inventory.

>>> from berth.devices import read_gpus
>>> for g in read_gpus():
...     print(g.index, g.uuid, g.name, g.memory_free, g.utilization, g.processes)

Modules: :mod:`berth.devices.model` (the snapshot classes), :mod:`berth.devices.nvml` (the
NVML session and reads), :mod:`berth.devices.declared` (declared logical GPUs),
:mod:`berth.devices.visible` (``CUDA_VISIBLE_DEVICES`` as CUDA reads it),
:mod:`berth.devices.named` (what the config names that the GPUs here do not have).
"""

from __future__ import annotations

from berth import config
from berth.errors import BerthError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from berth.config import Config
    from berth.devices.model import GpuSnapshot

__all__ = ["config_notes", "hidden_by_declared", "read_gpus"]


def read_gpus(
    cfg: Config | None = None,
    *,
    process_details: bool = True,
    telemetry: bool = True,
    extras: bool = True,
) -> list[GpuSnapshot]:
    """Every GPU berth knows of, in index order (NVML order, i.e. PCI bus order).

    With ``[inventory] gpus = N`` in the config (``cfg``, default the process's config): N
    logical GPUs and NVML is not touched. Otherwise NVML: all GPUs, including banned ones
    (selection reports bans as reasons) and unhealthy ones (``healthy=False``, ``error``).

    ``process_details=True`` fills each process's user and command line (from /proc; None
    where not visible); ``False`` skips that for fast callers.
    ``telemetry=False`` reads only what selection needs (identity, memory, utilisation,
    processes, health) and leaves PCI bus id, power, temperature and performance state None:
    `berth select` without a power filter uses it to start fast. ``extras=False`` leaves
    None only what `berth status` shows in --json alone (PCI bus id, performance state, fan
    speed, clocks event reasons): its screen reads what it shows.

    Raises :class:`berth.errors.NvmlUnavailable` when NVML cannot be used.
    """
    if cfg is None:
        cfg = config.get()
    if cfg.inventory.declared is not None:
        from berth.devices.declared import declared_gpus  # rare: no NVML

        return declared_gpus(cfg.inventory)
    from berth.devices.nvml import read_all  # heavy: pynvml, ctypes

    return read_all(process_details=process_details, telemetry=telemetry, extras=extras)


def hidden_by_declared(cfg: Config) -> str | None:
    """With a declared inventory on a machine whose driver sees GPUs: a warning that berth
    manages the logical GPUs and not the real ones (scheduler.py's ``--init 5 3 4`` habit,
    ``gpus = 5``, on an 8-GPU server). None otherwise (no declaration, or no driver)."""
    if cfg.inventory.declared is None:
        return None
    from berth.devices.nvml import count  # heavy: pynvml, ctypes; only with a declaration

    try:
        real = count()
    except BerthError:
        return None  # (no driver: declaring GPUs is what such a machine needs)
    if real == 0:
        return None
    n = cfg.inventory.declared
    return (
        f"note: [inventory] gpus = {n} declares {n} logical GPU{'s' if n != 1 else ''}, so "
        f"berth does not manage the {real} NVIDIA GPU{'s' if real != 1 else ''} NVML sees "
        "here; remove `gpus` to manage them (`unavailable`, `manage` or `ban` leave some out)"
    )


def config_notes(cfg: Config) -> list[str]:
    """What the config's ``[inventory]`` says that the GPUs here contradict, one note each
    (:func:`hidden_by_declared`, :func:`berth.devices.named.unmatched`): `berth status`,
    `select` and `berth daemon` print them and go on. NVML is read again only where the
    config names GPUs (``unavailable``, ``manage``, ``ban``); [] where it cannot be read
    (the command's own read says why)."""
    notes = [note] if (note := hidden_by_declared(cfg)) is not None else []
    inv = cfg.inventory
    if inv.declared is not None or not (inv.unavailable or inv.ban or inv.manage is not None):
        return notes
    from berth.devices.named import seen, unmatched  # rare: [inventory] names GPUs

    try:
        ids = seen()
    except BerthError:
        return notes
    return notes + [f"note: {said}; {fix}" for said, fix in unmatched(inv, ids)]
