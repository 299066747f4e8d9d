"""The packer keeps a capability few nodes have for the demand that needs it (issue 32.4).

Four "std" nodes (8 GPUs, 96 cores: 12 a GPU, as openb's G2) and one "big" node (8 GPUs, 128
cores, 768 GiB: openb's G3, the only home of the 8-GPU 120-core pods). CPU-heavy pods look
harmless on the roomy big node (its cores feed its GPUs with some to spare), so the packer
before put them there, and the next 8-GPU 120-core pod found no node.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from berth.core import scarcity
from berth.core.capacity import Capacity
from berth.core.inventory import Gpu, Node
from berth.core.job import Request
from berth.core.placement import Profile, place

GIB = 1 << 30
# mostly one-GPU pods with 12 cores; an 8-GPU pod any node can host, and one only "big" can
DEMAND_ROWS = [(1.0, 12.0, 40.0 * GIB)] * 90 + [(8.0, 64.0, 256 * GIB), (8.0, 120.0, 700 * GIB)]
DEMAND = Profile(DEMAND_ROWS)
BIG_POD = Request(gpus=8, cpu=120.0, ram=700 * GIB)
CPU_HEAVY = [Request(gpus=0.5, cpu=20.0, ram=40 * GIB), Request(gpus=0, cpu=32.0)]


def cluster(std: int = 4) -> Capacity:
    inv: list[Gpu] = []
    nodes: dict[str, Node] = {}
    for n, (cpu, ram) in enumerate([(96.0, 384 * GIB)] * std + [(128.0, 768 * GIB)]):
        name = "big" if n == std else f"std{n}"
        inv += [Gpu(8 * n + i, f"GPU-{8 * n + i}", "G", None, True, name) for i in range(8)]
        nodes[name] = Node(name, cpu=cpu, ram=ram)
    return Capacity(inv, nodes)


def run(cap: Capacity, reqs: list[Request]) -> list[str]:
    """Place each request with the packer and charge it; the node names chosen."""
    out = []
    for r in reqs:
        pl = place(cap, r, "packer", DEMAND)
        assert pl is not None, r
        cap.take(pl.positions, r.share, pl.mem, pl.node, r.cpu, r.ram)
        out.append(cap.node_names[pl.node])
    return out


@pytest.fixture
def unweighted() -> Iterator[None]:
    scarcity.WEIGHTED = False
    yield
    scarcity.WEIGHTED = True


def test_cpu_heavy_pods_leave_the_only_big_node_to_the_pod_that_needs_it() -> None:
    cap = cluster()
    assert "big" not in run(cap, CPU_HEAVY)
    pl = place(cap, BIG_POD, "packer", DEMAND)
    assert pl is not None and cap.node_names[pl.node] == "big"


def test_without_the_weight_the_big_node_is_spent_and_the_big_pod_fails(unweighted: None) -> None:
    """What the packer did before (the term off): the test above fails on that code."""
    cap = cluster()
    assert run(cap, CPU_HEAVY) == ["big", "big"]
    assert place(cap, BIG_POD, "packer", DEMAND) is None


def test_a_capability_every_node_has_weighs_nothing() -> None:
    """Every node big: breaking one costs nothing more (N / N_t - 1 = 0), so the choices are
    the packer's usual ones; a single node (the daemon's host) is the same case."""
    inv = [Gpu(i, f"GPU-{i}", "G", None, True, f"n{i // 8}") for i in range(16)]
    nodes = {f"n{k}": Node(f"n{k}", cpu=128.0, ram=768 * GIB) for k in range(2)}
    weighted = [place(Capacity(inv, nodes), r, "packer", DEMAND) for r in CPU_HEAVY]
    scarcity.WEIGHTED = False
    try:
        plain = [place(Capacity(inv, nodes), r, "packer", DEMAND) for r in CPU_HEAVY]
    finally:
        scarcity.WEIGHTED = True
    assert weighted == plain
    cap = Capacity(inv[:8], {"n0": nodes["n0"]})
    assert DEMAND.scarce.delta(cap, 0, 1, 20.0, 0.0, 1.0) == 0.0


def test_the_weight_grows_as_hosts_are_lost() -> None:
    """Breaking the last big node of five costs more than breaking one of two of four."""
    last = cluster()
    spare = cluster(std=3)
    spare.node_cpu[0], spare.node_ram[0] = 128.0, 768 * GIB  # std0 is as big as "big" now
    costs = [
        Profile(DEMAND_ROWS).scarce.delta(cap, cap.node_names.index("big"), 1, 20.0, 0.0, 0.5)
        for cap in (last, spare)
    ]
    assert 0.0 < costs[1] < costs[0]


def test_demand_restricted_to_some_gpus_leaves_scarcity_to_the_noaccess_term() -> None:
    """With model-restricted demand the supply-weighted NoAccess term keeps scarce GPUs; the
    shapes' weight is off then (together they lost 1-2 points on openb's gpuspec lists)."""
    assert DEMAND.scarce
    restricted = Profile([*DEMAND_ROWS, (1.0, 12.0, 40.0 * GIB, (frozenset({0}), None))])
    assert not restricted.scarce
    cap = cluster()
    assert restricted.scarce.delta(cap, cap.node_names.index("big"), 1, 20.0, 0.0, 0.5) == 0.0


def test_hosts_count_by_the_free_gpus_on_them_not_as_nodes() -> None:
    """One 8-GPU big node among eight 1-GPU nodes: by nodes it would be one host of nine (a
    weight of 8x the shape's share); by free GPUs it holds half of them (1x). Small nodes
    that no multi-GPU shape can use do not make a big node's capability look rarer."""
    inv = [Gpu(i, f"GPU-{i}", "G", None, True, "big") for i in range(8)]
    inv += [Gpu(8 + i, f"GPU-{8 + i}", "G", None, True, f"t{i}") for i in range(8)]
    nodes = {"big": Node("big", cpu=128.0, ram=768 * GIB)}
    nodes.update({f"t{i}": Node(f"t{i}", cpu=16.0, ram=64 * GIB) for i in range(8)})
    rows = [(1.0, 8.0, 8.0 * GIB)] * 8 + [(8.0, 120.0, 700 * GIB)]  # the shape: half the GPUs
    share = 8.0 / 16.0
    lost = Profile(rows).scarce.delta(Capacity(inv, nodes), 0, 1, 8.0, 8.0 * GIB, 1.0)
    assert lost == pytest.approx(share * (16.0 / 8.0 - 1.0) * 7.0)  # x the 7 GPUs left there
    scarcity.BY_GPUS = False
    try:
        by_nodes = Profile(rows).scarce.delta(Capacity(inv, nodes), 0, 1, 8.0, 8.0 * GIB, 1.0)
    finally:
        scarcity.BY_GPUS = True
    assert by_nodes == pytest.approx(share * (9.0 - 1.0) * 7.0)
