"""The fill experiment's demand profile, and its speed-up that changes no decision (issue 32.4).

One "big" node (8 GPUs, 128 cores, 768 GiB: openb's G3, the only home of an 8-GPU 120-core
pod) listed first, four "std" nodes (8 GPUs, 96 cores). The pod list: 23 one-GPU pods with 16
cores each and one 8-GPU 120-core pod. Learned from the arrivals so far, the packer knows of
the big pod only once it came: the one-GPU pods, as CPU-hungry as they are, look best on the
roomy big node, and the big pod fails early (openb's ``cpu100``: its first failure at 38.5%
of the GPUs allocated, seed 42, every G3 GPU taken by small pods before the first 8-GPU
120-core pod came). From the whole pod list, as FGD's typical pods are, the big node is kept.
"""

from __future__ import annotations

import pytest

from berth.core import GIB
from berth.core.inventory import Gpu, Node
from berth.sim.fill import fill
from berth.sim.traces import SimJob
from berth.sim.workload import Inventory


def cluster() -> Inventory:
    names = ["big"] + [f"std{i}" for i in range(4)]
    nodes = {name: Node(name, 96000.0, 384 * GIB) for name in names}
    nodes["big"] = Node("big", 128000.0, 768 * GIB)
    gpus = [
        Gpu(8 * n + i, f"G{8 * n + i}", "G", None, True, name)
        for n, name in enumerate(names)
        for i in range(8)
    ]
    return gpus, nodes


PODS = [SimJob(i, 0, 1, 1.0, cpu=16000.0, ram=40 * GIB) for i in range(23)]
PODS.append(SimJob(99, 0, 1, 8.0, cpu=120000.0, ram=700 * GIB))


@pytest.mark.parametrize("seed", [42, 43, 47])
def test_a_rare_big_pod_finds_its_node_when_the_profile_is_the_pod_list(seed: int) -> None:
    r = fill(PODS, cluster(), "packer", seed, until=100, marks=(100,))
    assert r.first_fail is not None and r.first_fail >= 75.0  # CPU runs out, at the end
    before = fill(PODS, cluster(), "packer", seed, until=100, marks=(100,), profile="recent")
    assert before.first_fail is not None and before.first_fail <= 50.0  # the big pod failed


def test_the_profile_is_checked() -> None:
    with pytest.raises(ValueError, match="profile 'queue'"):
        fill(PODS, cluster(), "packer", 42, profile="queue")


@pytest.mark.parametrize("how", ["first-fit", "best-fit", "packer"])
def test_classes_of_alike_nodes_change_no_placement(how: str) -> None:
    """The same digest of every placement with and without ``NodeClasses``."""
    pods = [*PODS, SimJob(100, 0, 1, 0.5, cpu=4000.0, ram=GIB), SimJob(101, 0, 1, 0.0, cpu=8e3)]
    runs = [
        fill(pods, cluster(), how, 42, until=130, marks=(100, 130), classes=c)
        for c in (False, True)
    ]
    assert runs[0].digest == runs[1].digest and runs[0].placed > 20
    assert runs[0].window == runs[1].window
