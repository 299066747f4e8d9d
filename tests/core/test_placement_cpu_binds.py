"""Where CPU binds, the packer counts the CPU-only demand in what a free GPU needs kept
(issue 32.4, openb ``cpu250``: its CPU-only pods took the cores of GPU nodes, by the tightest
fit, while the GPU jobs' own cores per GPU said those nodes had cores to spare)."""

from __future__ import annotations

from berth.core import profile as demand_profile
from berth.core.capacity import Capacity
from berth.core.inventory import Gpu, Node
from berth.core.job import Request
from berth.core.placement import Profile, place


def two_nodes() -> Capacity:
    """Node 0: 2 GPUs, 28 cores; node 1: 2 GPUs, 24 cores (52 cores for 4 GPUs)."""
    inv = [Gpu(i, f"GPU-{i}", "G", None, True, f"n{i // 2}") for i in range(4)]
    return Capacity(inv, {"n0": Node("n0", cpu=28.0), "n1": Node("n1", cpu=24.0)})


# one-GPU jobs with 8, 12 and 12 cores, and a CPU-only job of 16 cores: 48 cores asked,
# 16 of them per GPU asked, more than the cluster's 13 cores per GPU: CPU binds
WORK = [
    Request(gpus=1, cpu=8.0),
    Request(gpus=1, cpu=12.0),
    Request(gpus=0, cpu=16.0),
    Request(gpus=1, cpu=12.0),
]


def fill(work: list[Request]) -> list[int | None]:
    """Place ``work`` in order with the packer (the whole list as its demand)."""
    cap, demand = two_nodes(), Profile.of(work)
    out: list[int | None] = []
    for req in work:
        pl = place(cap, req, "packer", demand)
        out.append(None if pl is None else pl.node)
        if pl is not None:
            cap.take(pl.positions, req.share, pl.mem, pl.node, req.cpu, req.ram)
    return out


def test_the_cpu_only_demand_counts_where_cpu_binds() -> None:
    demand = Profile.of(WORK)
    assert demand.cpu_per_gpu == 32.0 / 3 and demand.cpu_only_per_gpu == 16.0 / 3
    # 52 cores for 4 free GPUs (13 a GPU) < 16 asked per GPU: the CPU-only cores count
    assert demand.per_gpu(two_nodes()) == (16.0, 0.0)
    # a host whose CPU is not known (the daemon's, with no node list): never binds
    inv = [Gpu(i, f"GPU-{i}", "G", None, True, "host") for i in range(4)]
    assert demand.per_gpu(Capacity(inv)) == (32.0 / 3, 0.0)


def test_every_gpu_job_fits_when_the_cpu_only_job_is_counted() -> None:
    # counted: the first job goes to n1 (24 cores, the node shorter of cores for 2 GPUs),
    # the CPU-only job to n0 after its one-GPU job, and the last one-GPU job fits on n1
    assert fill(WORK) == [1, 0, 0, 1]


def test_uncounted_the_cpu_only_job_strands_two_gpus() -> None:
    # the packer before: 10.7 cores per GPU asked, so n0 (28 cores) took both first jobs,
    # the CPU-only job took 16 of n1's 24 cores, and no one-GPU job of 12 cores fit there
    demand_profile.CPU_BINDS = False
    try:
        assert fill(WORK) == [0, 0, 1, None]
    finally:
        demand_profile.CPU_BINDS = True
