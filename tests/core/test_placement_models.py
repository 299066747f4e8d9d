"""The packer knows which GPUs the demand to come may use (GPU models, FGD's NoAccess)."""

from __future__ import annotations

import pytest

from berth.core import profile as profile_mod
from berth.core.capacity import Capacity
from berth.core.inventory import Gpu, Node
from berth.core.job import Request
from berth.core.placement import Profile, place


def two_models() -> Capacity:
    """Node "a": 2 GPUs of model A (indices 0, 1); node "b": 2 of model B (2, 3); the same
    CPU, so that only the models tell them apart (and node "a" comes first)."""
    inv = [Gpu(i, f"GPU-{i}", "A", None, True, "a") for i in range(2)]
    inv += [Gpu(2 + i, f"GPU-{2 + i}", "B", None, True, "b") for i in range(2)]
    return Capacity(inv, {"a": Node("a", cpu=64.0), "b": Node("b", cpu=64.0)})


A_ONLY = Request(gpus=1, cpu=8.0, gpu_ids=(0, 1))  # a job that may only use model A
ANY = Request(gpus=1, cpu=8.0)


def test_unconstrained_job_leaves_the_a_node_to_the_demand_that_needs_it() -> None:
    demand = Profile.of([A_ONLY] * 3 + [ANY] * 7)
    assert demand.constrained
    cap = two_models()
    # without a profile that knows models, the tie goes to the first node: the A node
    assert place(cap, ANY, "best-fit").node == 0  # type: ignore[union-attr]
    assert place(cap, ANY, "packer", Profile([(1.0, 8.0, 0.0)] * 10)).node == 0  # type: ignore[union-attr]
    # the model-aware packer keeps model A free for the A-only demand: the B node fits too
    pl = place(cap, ANY, "packer", demand)
    assert pl is not None and pl.node == 1 and pl.positions[0] in (2, 3)
    # a share, likewise
    pl = place(cap, Request(gpus=0.5, cpu=4.0), "packer", demand)
    assert pl is not None and pl.node == 1
    # the A-only job itself still goes to A, and once B is full, so does an unconstrained job
    pl = place(cap, A_ONLY, "packer", demand)
    assert pl is not None and pl.node == 0
    cap.take((2, 3), 1.0, None, 1, 16.0)
    pl = place(cap, ANY, "packer", demand)
    assert pl is not None and pl.node == 0


def test_a_gpu_name_filter_counts_as_a_model_constraint() -> None:
    demand = Profile.of([Request(gpus=1, name="a")] * 3 + [ANY] * 7)
    pl = place(two_models(), ANY, "packer", demand)
    assert pl is not None and pl.node == 1


def test_shares_of_the_demand_that_may_use_each_node() -> None:
    demand = Profile.of([A_ONLY] * 3 + [ANY] * 7)
    cap = two_models()
    a, b = demand.on_node(cap, 0), demand.on_node(cap, 1)
    # 30% of the GPU demand may not use model B: FGD's NoAccess share
    assert abs(b.no_access - 0.3) < 1e-9
    assert abs(b.p_size_above(0.5) - 0.7) < 1e-9 and b.cpu_per_gpu == 8.0
    # every job may use model A, and the A-only 30% has only half the GPUs to go to: per GPU
    # of A, 0.7 + 0.3 / 0.5 of the demand wants it, more than there is (no_access < 0)
    assert abs(a.no_access + 0.3) < 1e-9
    assert abs(a.p_size_above(0.5) - 1.0) < 1e-9
    assert demand.at(cap, 3) is b and demand.at(cap, 0) is a


def test_fgd_plain_no_access_is_kept_for_comparison(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(profile_mod, "SUPPLY_WEIGHTED", False)
    demand = Profile.of([A_ONLY] * 3 + [ANY] * 7)
    cap = two_models()
    assert demand.on_node(cap, 0).no_access == 0.0
    assert abs(demand.on_node(cap, 1).no_access - 0.3) < 1e-9
    pl = place(cap, ANY, "packer", demand)
    assert pl is not None and pl.node == 1


def test_unconstrained_demand_changes_nothing() -> None:
    """Every job may use every GPU: the profile is its own view of every node (decisions are
    those of the model-blind packer, by construction)."""
    demand = Profile.of([ANY] * 5 + [Request(gpus=0.5)] * 5)
    cap = two_models()
    assert not demand.constrained and demand.no_access == 0.0
    assert demand.at(cap, 2) is demand and demand.on_node(cap, 1) is demand
    pl = place(cap, ANY, "packer", demand)
    assert pl is not None and pl.node == 0


def test_a_restriction_that_allows_every_gpu_changes_nothing() -> None:
    inv = [Gpu(i, f"GPU-{i}", "A", None, True, "h") for i in range(4)]
    cap = Capacity(inv)
    demand = Profile.of([Request(gpus=1, name="a"), Request(gpus=1, gpu_ids=(0, 1, 2, 3)), ANY])
    assert demand.constrained
    assert all(demand.at(cap, p) is demand for p in range(4)) and demand.on_node(cap, 0) is demand


def test_within_a_mixed_node_the_gpus_few_jobs_may_use_go_first() -> None:
    inv = [Gpu(0, "GPU-0", "A", None, True, "h"), Gpu(1, "GPU-1", "B", None, True, "h")]
    cap = Capacity(inv)
    demand = Profile.of([Request(gpus=1, name="a")] * 3 + [ANY] * 7)
    pl = place(cap, Request(gpus=1), "packer", demand)
    assert pl is not None and pl.positions == (1,)
    assert place(cap, Request(gpus=1), "packer", Profile.of([ANY])).positions == (0,)  # type: ignore[union-attr]
