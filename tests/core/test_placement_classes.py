"""Scoring one node of each class of alike nodes (``NodeClasses``) places exactly as scoring
every node does (issue 32.4: the openb fill scores a few hundred classes, not 6,212 GPUs).

A small mixed cluster (two GPU models, three node sizes, CPU and RAM per node) fills with a
seeded mix of CPU-only pods, shares, whole GPUs, multi-GPU pods and model-restricted pods;
every placement, with and without the classes, must be the same, for every placement rule.
"""

from __future__ import annotations

import random

import pytest

from berth.core.capacity import Capacity
from berth.core.inventory import Gpu, Node
from berth.core.nodeclasses import NodeClasses
from berth.core.placement import PLACEMENTS, Placement, Profile, place
from berth.core.request import Request

GIB = 1 << 30


def cluster() -> Capacity:
    inv: list[Gpu] = []
    nodes: dict[str, Node] = {}
    kinds = [("A", 8, 96.0, 384)] * 6 + [("A", 8, 128.0, 768)] * 3 + [("T", 2, 64.0, 256)] * 5
    for n, (model, size, cpu, ram) in enumerate(kinds):
        name = f"n{n}"
        base = len(inv)
        inv += [Gpu(base + i, f"GPU-{base + i}", model, 16 * GIB, True, name) for i in range(size)]
        nodes[name] = Node(name, cpu=cpu, ram=ram * GIB)
    return Capacity(inv, nodes)


def pods(seed: int, n: int, t_ids: frozenset[int]) -> list[Request]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        gpus = rng.choice([0, 0.25, 0.5, 0.5, 0.81, 1, 1, 1, 2, 4, 8])
        cpu = rng.choice([4.0, 8.0, 12.0, 32.0, 120.0 if gpus == 8 else 16.0])
        ids = t_ids if gpus and gpus <= 1 and rng.random() < 0.2 else None
        out.append(Request(gpus=gpus, cpu=cpu, ram=rng.choice([8, 40, 200]) * GIB, gpu_ids=ids))
    return out


def fill(how: str, reqs: list[Request], classes: bool) -> list[Placement | None]:
    cap = cluster()
    alike = NodeClasses(cap) if classes else None
    out = []
    for i, r in enumerate(reqs):
        if alike is not None and r.gpu_ids is not None:
            alike.learn(frozenset(r.gpu_ids))
        profile = Profile.of(reqs[max(0, i - 40) : i + 1])
        pl = place(cap, r, how, profile, classes=alike)
        out.append(pl)
        if pl is not None:
            cap.take(pl.positions, r.share, pl.mem, pl.node, r.cpu, r.ram)
            if alike is not None:
                for n in {pl.node, *(cap.node_of[p] for p in pl.positions)}:
                    alike.moved(n)
    return out


@pytest.mark.parametrize("how", PLACEMENTS)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_classes_place_exactly_as_every_node(how: str, seed: int) -> None:
    cap = cluster()
    t_ids = frozenset(i for p, i in enumerate(cap.index) if cap.names[p] == "t")
    reqs = pods(seed, 160, t_ids)
    plain = fill(how, reqs, classes=False)
    assert fill(how, reqs, classes=True) == plain
    placed = sum(pl is not None for pl in plain)
    assert 40 < placed < len(reqs)  # the cluster filled up: choices were made, and refused


def test_alike_nodes_share_a_class_until_one_changes() -> None:
    cap = cluster()
    alike = NodeClasses(cap)
    assert alike.usable and len(alike) == 3 and alike.nodes() == [0, 6, 9]
    pl = place(cap, Request(gpus=0.5, cpu=4.0), "packer", Profile([(0.5, 4.0, 0.0)]),
               classes=alike)  # fmt: skip
    assert pl is not None
    cap.take(pl.positions, 0.5, pl.mem, pl.node, 4.0, None)
    alike.moved(pl.node)
    assert len(alike) == 4 and pl.node in alike.nodes()


def test_a_restriction_the_classes_do_not_know_scores_every_node() -> None:
    cap = cluster()
    alike = NodeClasses(cap)
    req = Request(gpus=1, gpu_ids=(13,))  # GPU 13 alone, on node n1: not a class's rep
    assert place(cap, req, "packer", Profile.of([req]), classes=alike) == Placement((13,), 1, None)
    alike.learn(frozenset({13}))
    assert 1 in alike.nodes()
    assert place(cap, req, "packer", Profile.of([req]), classes=alike) == Placement((13,), 1, None)


def test_a_node_whose_gpus_are_not_one_run_is_not_grouped() -> None:
    inv = [Gpu(i, f"GPU-{i}", "A", None, True, f"n{i % 2}") for i in range(4)]
    alike = NodeClasses(Capacity(inv))
    assert not alike.usable
    req = Request(gpus=1)
    assert place(Capacity(inv), req, "packer", Profile.of([req]), classes=alike) is not None
