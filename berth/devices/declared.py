"""Declared logical GPUs: the GPUs a config file's ``[inventory]`` states instead of NVML.

``[inventory] gpus = 5`` gives GPUs 0..4 with uuids ``LOGICAL-0``..``LOGICAL-4``, the
configured ``name`` and ``memory``, and no telemetry (every reading None). They are selected
on claims alone. ``unavailable`` / ``ban`` are applied by selection (which gives the reason),
not here: every declared GPU is returned.
"""

from __future__ import annotations

from berth.devices.model import GpuSnapshot

TYPE_CHECKING = False
if TYPE_CHECKING:
    from berth.config import Inventory

LOGICAL_PREFIX = "LOGICAL-"


def declared_gpus(inventory: Inventory) -> list[GpuSnapshot]:
    """One logical snapshot per declared GPU (``inventory.declared`` must be set)."""
    n = inventory.declared or 0
    return [
        GpuSnapshot(
            index=i,
            uuid=f"{LOGICAL_PREFIX}{i}",
            name=inventory.name,
            memory_total=inventory.memory,
            processes=None,
            logical=True,
        )
        for i in range(n)
    ]
