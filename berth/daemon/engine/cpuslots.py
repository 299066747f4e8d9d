"""CPU-only jobs (``-g 0``) on the local queue: each takes one CPU slot, and at most
``[limits] cpu_slots`` of them run at once (default: the host's cores), so a chain of
preprocessing steps does not swamp the machine the GPU jobs run on.

The core schedules them as it schedules the simulator's CPU pods: a request of no GPU and
:data:`CPU_SLOT` millicores of node CPU, placed on the one node ``""`` whose CPU is the slots
(:func:`nodes`; GPU jobs ask no CPU, so the slots bound CPU-only jobs only). The daemon passes
the count; the core reads no clock and no host.
"""

from __future__ import annotations

import functools
import os

from berth.core.inventory import Node

CPU_SLOT = 1000.0  # millicores (core.inventory.Node.cpu): one slot, one core


@functools.cache
def cores() -> int:
    """The host's cores, read once (three system calls each time, every pass otherwise)."""
    return os.cpu_count() or 1


def slots(configured: int | None) -> int:
    """How many CPU-only jobs may run at once: ``[limits] cpu_slots``, else the cores."""
    return configured if configured is not None else cores()


def nodes(configured: int | None) -> dict[str, Node]:
    """The host as the core's one node, its CPU the slots."""
    return {"": Node("", cpu=slots(configured) * CPU_SLOT)}
