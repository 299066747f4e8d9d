"""The packer's demand sizes by job count, as FGD's popularity (issue 32.4, openb's multigpu
lists: weighted by GPUs asked, the multi-GPU jobs weighed so much that a node's last two
whole GPUs looked less wasted broken by a one-GPU job than kept for a two-GPU one)."""

from __future__ import annotations

from berth.core import profile as demand_profile
from berth.core.capacity import Capacity
from berth.core.inventory import Gpu, Node
from berth.core.job import Request
from berth.core.placement import Profile, place

# two 8-GPU nodes with cores to spare; 16.5 GPUs asked in all, so one job must fail
WORK = [Request(gpus=g, cpu=4.0) for g in (4, 0.75, 2, 2, 1, 4, 2, 0.75)]


def fill() -> tuple[float, list[int | None]]:
    """GPUs placed, and each job's node, with the packer (the whole list as its demand)."""
    inv = [Gpu(i, f"GPU-{i}", "G", None, True, f"n{i // 8}") for i in range(16)]
    cap = Capacity(inv, {"n0": Node("n0", cpu=104.0), "n1": Node("n1", cpu=128.0)})
    demand, placed, nodes = Profile.of(WORK), 0.0, []
    for req in WORK:
        pl = place(cap, req, "packer", demand)
        nodes.append(None if pl is None else pl.node)
        if pl is not None:
            cap.take(pl.positions, req.share, pl.mem, pl.node, req.cpu, req.ram)
            placed += req.gpus
    return placed, nodes


def test_sizes_count_by_jobs() -> None:
    demand = Profile.of(WORK)
    assert demand.p_size_above(1.0) == 5 / 8  # 4, 2, 2, 4, 2 of the 8 jobs
    assert demand.p_size_above(2.0) == 2 / 8


def test_a_one_gpu_job_leaves_a_nodes_last_two_gpus_to_a_two_gpu_job() -> None:
    # after 4 + 2 GPUs on n0 and 0.75 + 2 on n1, the one-GPU job goes to n1 (5 whole free),
    # n0's last two stay whole for the third two-GPU job; only the last 0.75 finds no GPU
    assert fill() == (15.75, [0, 1, 1, 0, 1, 1, 0, None])


def test_weighted_by_gpus_the_two_gpu_job_found_no_node() -> None:
    # the packer before: the one-GPU job broke n0's pair, and the 2-GPU job failed
    demand_profile.BY_COUNT = False
    try:
        assert fill() == (14.5, [0, 1, 1, 0, 0, 1, None, 0])
    finally:
        demand_profile.BY_COUNT = True
