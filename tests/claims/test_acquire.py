"""berth.acquire: the lease, the environment it sets (or torch's device), shares, errors."""

from __future__ import annotations

import os
import sys
import types
import warnings
from collections.abc import Iterator
from typing import Any

import pytest

import berth
import berth.api.lease
from berth.claims.ledger import Ledger
from berth.errors import UsageError, WaitTimeout


class FakeCuda:
    def __init__(self, initialized: bool) -> None:
        self.initialized = initialized
        self.device: int | None = None

    def is_initialized(self) -> bool:
        return self.initialized

    def is_available(self) -> bool:
        return True

    def set_device(self, index: int) -> None:
        self.device = index


@pytest.fixture
def fake_torch(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A stand-in `torch` module (torch is not installed here)."""

    def make(initialized: bool) -> Any:
        torch = types.ModuleType("torch")
        torch.cuda = FakeCuda(initialized)  # type: ignore[attr-defined]
        monkeypatch.setitem(sys.modules, "torch", torch)
        monkeypatch.setattr(berth.api.lease, "_warned", False)
        return torch

    yield make


def test_acquire_sets_and_restores_the_environment(fake_gpus: Any) -> None:
    fake_gpus.setup(n=4)
    os.environ["CUDA_DEVICE_ORDER"] = "FASTEST_FIRST"
    with berth.acquire(2, order="index") as lease:
        assert lease.ids == [0, 1] and lease.uuids == fake_gpus.uuids[:2]
        assert lease.devices == ["cuda:0", "cuda:1"]
        assert os.environ["CUDA_VISIBLE_DEVICES"] == "0,1"
        assert os.environ["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
        assert {c.uuid for c in Ledger().scan().claims} == set(lease.uuids)
    assert "CUDA_VISIBLE_DEVICES" not in os.environ
    assert os.environ["CUDA_DEVICE_ORDER"] == "FASTEST_FIRST"
    assert Ledger().scan().claims == []
    del os.environ["CUDA_DEVICE_ORDER"]


def test_plain_acquire_and_release(fake_gpus: Any) -> None:
    fake_gpus.setup(n=1)
    lease = berth.acquire()
    with pytest.raises(WaitTimeout):
        berth.acquire(timeout=0)
    lease.release()
    lease.release()  # idempotent
    berth.acquire(timeout=0).release()


def test_two_leases_in_one_process(fake_gpus: Any) -> None:
    fake_gpus.setup(n=3)
    a = berth.acquire(order="index")
    b = berth.acquire(order="index")  # not limited to a's CUDA_VISIBLE_DEVICES
    assert a.ids == [0] and b.ids == [1]
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "0,1" and b.devices == ["cuda:1"]
    a.release()  # not in the order acquired: b's devices keep their numbers
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "0,1"
    b.release()
    assert "CUDA_VISIBLE_DEVICES" not in os.environ


def test_acquire_respects_a_preset_visible_list(
    fake_gpus: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_gpus.setup(n=4)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    with berth.acquire(2) as lease:
        assert sorted(lease.ids) == [2, 3]
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "2,3"


def test_shares_and_memory(fake_gpus: Any) -> None:
    fake_gpus.setup(n=1, memory="80G")
    a = berth.acquire(0.5, mem="30G")
    b = berth.acquire(0.5, mem="30G", timeout=0)
    assert a.share == b.share == 0.5 and a.ids == b.ids == [0]
    with pytest.raises(WaitTimeout, match=r"a 0\.25 share of a GPU"):
        berth.acquire(0.25, timeout=0)
    a.release()
    with pytest.raises(WaitTimeout):
        berth.acquire(0.5, mem="60G", timeout=0)  # 30G + 60G > 80G
    berth.acquire(0.5, mem="50G", timeout=0).release()
    b.release()
    assert "CUDA_VISIBLE_DEVICES" not in os.environ


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_bad_gpus_is_a_usage_error(fake_gpus: Any, bad: Any) -> None:
    fake_gpus.setup(n=1)
    with pytest.raises(UsageError, match="gpus = "):
        berth.acquire(bad)
    assert Ledger().scan().claims == []


def test_torch_imported_but_cuda_not_initialised_gets_the_environment(
    fake_gpus: Any, fake_torch: Any
) -> None:
    fake_gpus.setup(n=4)
    torch = fake_torch(initialized=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with berth.acquire(only="3") as lease:
            assert os.environ["CUDA_VISIBLE_DEVICES"] == "3" and lease.devices == ["cuda:0"]
    assert torch.cuda.device is None


def test_cuda_already_initialised_sets_the_device_and_warns_once(
    fake_gpus: Any, fake_torch: Any
) -> None:
    fake_gpus.setup(n=4)
    torch = fake_torch(initialized=True)
    with pytest.warns(RuntimeWarning, match="already initialised"):
        with berth.acquire(only="2") as lease:
            assert lease.devices == ["cuda:2"] and torch.cuda.device == 2
            assert "CUDA_VISIBLE_DEVICES" not in os.environ
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # only once
        with berth.acquire(only="1") as lease:
            assert torch.cuda.device == 1


def test_a_program_that_ran_kernels_is_not_kept_waiting_by_its_own_utilisation(
    fake_gpus: Any,
) -> None:
    """On a real H200 (issue 37) `acquire()` after torch had run one kernel waited ~5 s with the
    default filters: NVML's utilisation was the caller's own. Where the caller is the only
    process on the GPU its utilisation counts as idle; beside another process it counts."""
    fake_gpus.setup(n=1)
    me = {"pid": os.getpid(), "used_memory": 1 << 30, "type": "compute"}
    fake_gpus.update(0, util=35, mem_util=12, processes=[me])
    with berth.acquire(timeout=0) as lease:
        assert lease.ids == [0]
    other = {"pid": 999999, "used_memory": 1 << 30, "type": "compute"}
    fake_gpus.update(0, processes=[me, other])
    with pytest.raises(WaitTimeout, match="utilisation 35% > 10%"):
        berth.acquire(max_procs=1, max_util=10, timeout=0)
    fake_gpus.update(0, util=5)
    berth.acquire(max_procs=1, max_util=10, timeout=0).release()


def test_cuda_initialised_with_a_visible_list_maps_to_cuda_order(
    fake_gpus: Any, fake_torch: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_gpus.setup(n=4)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,1")
    torch = fake_torch(initialized=True)
    with pytest.warns(RuntimeWarning):
        with berth.acquire(only="1") as lease:
            assert lease.ids == [1] and lease.devices == ["cuda:1"] and torch.cuda.device == 1
