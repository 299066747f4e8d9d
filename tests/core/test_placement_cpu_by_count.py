"""The packer's CPU and RAM asks counted by job, as its sizes are (issue 32.4, openb's
``multigpu*`` lists): weighted by GPUs asked, the few 8-GPU jobs made every core below their
ask look wanted by half the demand, so a one-GPU job broke a whole 8-GPU node rather than
take cores an 8-GPU job might have wanted, and the next 8-GPU job found no node. A shape
that few nodes can host keeps its GPUs' weight (test_placement_scarcity.py)."""

from __future__ import annotations

import pytest

from berth.core import asks, scarcity
from berth.core.capacity import Capacity
from berth.core.inventory import Gpu, Node
from berth.core.job import Request
from berth.core.placement import Profile, place

# two alike 8-GPU 104-core nodes (either can host every shape) and a one-GPU node
NODES = [("a", 8, 104.0), ("b", 8, 104.0), ("c", 1, 8.0)]
WORK = [
    Request(gpus=1, cpu=4.0),
    Request(gpus=2, cpu=16.0),
    Request(gpus=1, cpu=12.0),
    Request(gpus=4, cpu=32.0),
    Request(gpus=0, cpu=12.0),
    Request(gpus=8, cpu=88.0),
    Request(gpus=2, cpu=16.0),
]


def cluster() -> Capacity:
    inv: list[Gpu] = []
    for name, gpus, _ in NODES:
        inv += [Gpu(len(inv), f"GPU-{len(inv)}", "G", None, True, name) for _ in range(gpus)]
    return Capacity(inv, {name: Node(name, cpu=cpu) for name, _, cpu in NODES})


def fill() -> tuple[float, list[str | None]]:
    """GPUs placed, and each job's node, with the packer (the whole list as its demand)."""
    cap, demand = cluster(), Profile.of(WORK)
    placed, where = 0.0, []
    for req in WORK:
        pl = place(cap, req, "packer", demand)
        where.append(None if pl is None else cap.node_names[pl.node])
        if pl is not None:
            cap.take(pl.positions, req.share, pl.mem, pl.node, req.cpu, req.ram)
            placed += req.gpus
    return placed, where


def test_cpu_asks_count_by_jobs() -> None:
    demand = Profile.of(WORK)
    cap = cluster()
    # of the 7 jobs, the 8-GPU one asks more than 76 cores: 1/7 (by GPUs asked: 8/18)
    assert demand.p_stranded(cap, 76.0, float("inf")) == pytest.approx(1 / 7)
    assert demand.p_stranded(cap, 14.0, float("inf")) == pytest.approx(4 / 7)  # 16 16 32 88


def test_a_one_gpu_job_takes_cores_before_a_whole_8_gpu_node() -> None:
    # after the 2-GPU job on a, the 12-core one-GPU job goes to a as well (76 cores left
    # there: short only for the 8-GPU job), b stays whole for the 8-GPU 88-core job; every
    # job is placed
    # job is placed but the last, for which no two GPUs are left (17 GPUs, 18 asked)
    assert fill() == (16.0, ["c", "a", "a", "a", "a", "b", None])


def test_weighted_by_gpus_the_8_gpu_job_found_no_node() -> None:
    # the packer before: the one-GPU job broke b (a's cores below 88 looked wanted by 8 of
    # the 18 GPUs asked), and the 8-GPU job failed
    asks.TAILS_BY_COUNT = False
    try:
        assert fill() == (10.0, ["c", "a", "b", "a", "a", None, "a"])
    finally:
        asks.TAILS_BY_COUNT = True


GIB = 1 << 30
# test_placement_scarcity.py's demand: one-GPU pods, an 8-GPU pod any 8-GPU node can host
# and an 8-GPU 120-core 700 GiB one that only "big" can
RARE_ROWS = [(1.0, 12.0, 40.0 * GIB)] * 90 + [(8.0, 64.0, 256 * GIB), (8.0, 120.0, 700 * GIB)]
BIG_POD = Request(gpus=8, cpu=120.0, ram=700 * GIB)


def roomy_cluster() -> Capacity:
    """Cores to spare (the demand brings 11.9 cores a GPU, the nodes have 16, RAM 43 GiB of
    64): the asks count by job, but for the shape only "big" hosts (8 of the 20 GPUs)."""
    inv: list[Gpu] = []
    nodes: dict[str, Node] = {}
    shapes = [("std", 8, 96.0, 384), ("four", 4, 96.0, 256), ("big", 8, 128.0, 768)]
    for name, gpus, cpu, ram in shapes:
        inv += [Gpu(len(inv), f"GPU-{len(inv)}", "G", None, True, name) for _ in range(gpus)]
        nodes[name] = Node(name, cpu=cpu, ram=ram * GIB)
    return Capacity(inv, nodes)


def cpu_only_pods(rare: float) -> tuple[list[str], bool]:
    """Two 32-core CPU-only pods placed by the packer (shapes rare below 1/``rare`` of the
    free GPUs); their nodes, and whether the 120-core pod still finds one."""
    cap, demand = roomy_cluster(), Profile(RARE_ROWS)
    saved, scarcity.RARE = scarcity.RARE, rare
    try:
        where = []
        for req in [Request(gpus=0, cpu=32.0)] * 2:
            pl = place(cap, req, "packer", demand)
            assert pl is not None
            cap.take(pl.positions, req.share, pl.mem, pl.node, req.cpu, req.ram)
            where.append(cap.node_names[pl.node])
        return where, place(cap, BIG_POD, "packer", demand) is not None
    finally:
        scarcity.RARE = saved


def test_a_rare_shape_keeps_its_gpus_weight_where_cores_are_roomy() -> None:
    demand, cap = Profile(RARE_ROWS), roomy_cluster()
    # by job, 1 of 92 jobs asks more than 96 cores; the rare 120-core shape weighs its 8 of
    # the 106 GPUs asked
    assert demand.p_stranded(cap, 96.0, float("inf")) == pytest.approx(8 / 106)
    assert cpu_only_pods(scarcity.RARE) == (["four", "four"], True)


def test_without_the_exception_a_cpu_only_pod_takes_the_big_nodes_cores() -> None:
    # every shape counted by job: the second pod takes 32 of big's 128 cores, and the
    # 120-core pod finds no node
    assert cpu_only_pods(0.0) == (["four", "big"], False)
