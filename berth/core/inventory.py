"""What the scheduler schedules onto: GPUs (optionally grouped in nodes) and outside usage.

The daemon builds ``Gpu`` values from its NVML snapshots (``GpuSnapshot``: index, uuid, name,
memory_total, healthy), and ``Usage`` values from the claim ledger (claims NOT held by its own
jobs) and from NVML's process lists (processes NOT belonging to its own jobs). The simulator
builds them with :func:`uniform`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

GIB = 1024**3


@dataclass(frozen=True, slots=True)
class Gpu:
    """One schedulable GPU. ``index`` is unique in the inventory (NVML index on a host; a
    global number in a simulated cluster). ``node`` names its machine ("" on a single host)."""

    index: int
    uuid: str = ""
    name: str = ""
    memory_total: int | None = None  # bytes; None = unknown (memory is then not checked)
    healthy: bool = True
    node: str = ""


@dataclass(frozen=True, slots=True)
class Node:
    """A machine's own resources, for simulated clusters whose jobs also ask for CPU/RAM.
    None = not tracked."""

    name: str
    cpu: float | None = None  # millicores
    ram: int | None = None  # bytes


@dataclass(frozen=True, slots=True)
class Usage:
    """What holders other than this scheduler's own jobs use on one GPU.

    - ``share``: the sum of shares claimed by daemonless holders (``berth run``, ``acquire``);
      1.0 for a whole-GPU claim.
    - ``mem``: GPU memory they use, bytes: declared claim memory plus what NVML shows for
      processes outside berth.
    - ``busy``: processes outside berth run there; no whole-GPU job is placed on it, and a
      fractional job only if memory allows.
    - ``label``: who, for pending reasons (``"claim by alice"``, ``"2 outside processes"``).
    """

    share: float = 0.0
    mem: int = 0
    busy: bool = False
    label: str = ""


def uniform(
    gpus: int,
    memory: int | None = 80 * GIB,
    *,
    nodes: int = 1,
    name: str = "GPU",
    node_cpu: float | None = None,
    node_ram: int | None = None,
) -> tuple[list[Gpu], dict[str, Node]]:
    """``nodes`` nodes of ``gpus`` identical GPUs each: (GPUs, nodes by name).

    A single node is named "" (a plain host); several are ``node00``, ``node01``, ...
    """
    out: list[Gpu] = []
    node_map: dict[str, Node] = {}
    for n in range(nodes):
        node = "" if nodes == 1 else f"node{n:02d}"
        node_map[node] = Node(node, node_cpu, node_ram)
        for g in range(gpus):
            i = n * gpus + g
            out.append(Gpu(i, f"GPU-sim-{i:04d}", name, memory, True, node))
    return out, node_map


def describe(gpus: Sequence[Gpu], nodes: Mapping[str, Node] | None = None) -> str:
    """``"8 x A100 (80G)"`` or ``"8 nodes x 8 GPUs"``: a short human summary."""
    names = sorted({g.node for g in gpus})
    if len(names) <= 1:
        kinds = sorted({g.name for g in gpus})
        return f"{len(gpus)} GPUs" + (f" ({', '.join(kinds)})" if kinds and kinds[0] else "")
    sizes = sorted({sum(1 for g in gpus if g.node == n) for n in names})
    per = str(sizes[0]) if len(sizes) == 1 else f"{sizes[0]}-{sizes[-1]}"
    return f"{len(names)} nodes x {per} GPUs ({len(gpus)} GPUs)"
