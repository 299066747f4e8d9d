"""The packer's node-resource terms: a node's CPU/RAM must feed its free GPUs."""

from __future__ import annotations

import time

from berth.core.capacity import Capacity
from berth.core.inventory import Gpu, Node
from berth.core.job import Request
from berth.core.placement import Profile, place


def cluster() -> Capacity:
    """Node "tight": 8 GPUs, 96 cores (12 a GPU); node "roomy": 2 GPUs, 104 cores."""
    inv = [Gpu(i, f"GPU-{i}", "G2", None, True, "tight") for i in range(8)]
    inv += [Gpu(8 + i, f"GPU-{8 + i}", "T4", None, True, "roomy") for i in range(2)]
    nodes = {"tight": Node("tight", cpu=96.0), "roomy": Node("roomy", cpu=104.0)}
    return Capacity(inv, nodes)


# what keeps arriving: one-GPU pods with 12 cores, half-GPU pods with 6
DEMAND = Profile([(1.0, 12.0, 0.0)] * 50 + [(0.5, 6.0, 0.0)] * 50)


def test_profile_knows_the_cpu_that_comes_with_a_gpu() -> None:
    assert abs(DEMAND.cpu_per_gpu - 12.0) < 1e-9
    assert DEMAND.ram_per_gpu == 0.0
    assert Profile([]).cpu_per_gpu == 0.0


def test_cpu_only_pod_goes_where_it_strands_no_gpu() -> None:
    cap = cluster()
    req = Request(gpus=0, cpu=20.0)
    # best-fit takes the tightest CPU: the 8-GPU node, whose 96 cores its GPUs need
    assert place(cap, req, "best-fit").node == 0  # type: ignore[union-attr]
    # the packer sees 20 cores there strand 1.67 GPUs, and none on the roomy node
    assert place(cap, req, "packer", DEMAND).node == 1  # type: ignore[union-attr]


def test_cpu_heavy_gpu_pod_avoids_starving_a_gpu_rich_node() -> None:
    cap = cluster()
    req = Request(gpus=1, cpu=40.0)  # a GPU with 40 cores: 28 more than its share
    pl = place(cap, req, "packer", DEMAND)
    assert pl is not None and pl.node == 1
    # once the roomy node is full, the tight node is still used (it is only a preference)
    cap.take((8, 9), 1.0, None, 1, 100.0)
    pl = place(cap, req, "packer", DEMAND)
    assert pl is not None and pl.node == 0


def test_a_node_whose_gpus_are_all_used_is_the_right_home_for_cpu_work() -> None:
    cap = cluster()
    cap.take(range(8), 1.0, None, 0, 60.0)  # tight node: GPUs full, 36 cores idle
    pl = place(cap, Request(gpus=0, cpu=20.0), "packer", DEMAND)
    assert pl is not None and pl.node == 0


def test_packer_decision_on_an_8_gpu_node_is_sub_millisecond() -> None:
    inv = [Gpu(i, f"GPU-{i}", "A100", 80 << 30, True, "n") for i in range(8)]
    cap = Capacity(inv, {"n": Node("n", cpu=96.0, ram=768 << 30)})
    cap.take((0,), 0.5, None, 0, 6.0, 8 << 30)
    reqs = [Request(gpus=g, cpu=6.0 * g, ram=(8 << 30)) for g in (0.25, 0.5, 1, 2, 4)]
    t0 = time.perf_counter()
    n = 0
    for _ in range(200):
        for r in reqs:
            assert place(cap, r, "packer", DEMAND) is not None
            n += 1
    per = (time.perf_counter() - t0) / n
    assert per < 1e-3, f"{per * 1e6:.0f} us per placement"


def test_a_later_profile_is_built_only_when_a_placement_has_a_choice() -> None:
    """``Profile.later`` gives Profile.of's numbers to the bit, built at its first read; a
    whole-GPU job with one node and one GPU to take never reads it."""
    reqs = [Request(gpus=1, cpu=3.3), Request(gpus=0.3, cpu=1.1), Request(gpus=2, gpu_ids=(1, 2))]
    eager, lazy = Profile.of(reqs), Profile.later(list(reqs))
    for x in (0.0, 0.3, 0.5, 1.0, 2.0):
        assert lazy.p_size_above(x) == eager.p_size_above(x)
    assert (lazy.cpu_per_gpu, lazy.no_access, lazy.constrained) == (
        eager.cpu_per_gpu, eager.no_access, eager.constrained,
    )  # fmt: skip
    inv = [Gpu(i, f"GPU-{i}", "A100", 80 << 30, True, "n") for i in range(8)]
    cap = Capacity(inv, {"n": Node("n", cpu=96.0)})
    cap.take(range(7), 1.0, None, 0, 0.0)  # one GPU free
    built: list[int] = []

    class Watched(list):  # type: ignore[type-arg]
        def __iter__(self):  # type: ignore[no-untyped-def]
            built.append(1)
            return super().__iter__()

    demand = Profile.later(Watched([Request(gpus=1, gpu_ids=(7,))] * 3))
    pl = place(cap, Request(gpus=1), "packer", demand)
    assert pl is not None and pl.positions == (7,) and not built
    cap = Capacity(inv, {"n": Node("n", cpu=96.0)})
    cap.take(range(6), 1.0, None, 0, 0.0)  # two GPUs free: a choice; the profile is read
    pl = place(cap, Request(gpus=1), "packer", demand)
    assert pl is not None and built
