"""berth.gpus() and berth.select() in-process, against fake GPUs."""

from __future__ import annotations

import pytest

import berth
from berth.errors import NotEnoughGpus, UsageError


def test_gpus_returns_snapshots_and_respects_cuda_visible_devices(fake_gpus, monkeypatch):
    fake_gpus.setup(n=4)
    assert [g.index for g in berth.gpus()] == [0, 1, 2, 3]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,3")
    assert [g.index for g in berth.gpus()] == [1, 3]
    assert [g.index for g in berth.gpus(all=True)] == [0, 1, 2, 3]


def test_select_same_parameters_as_the_cli(fake_gpus):
    fake_gpus.setup(n=4)
    fake_gpus.spawn_workload(visible="1", mem="10G", util=50)
    chosen = berth.select(2, min_free="20G", order="index")
    assert [g.index for g in chosen] == [0, 2]
    chosen = berth.select(1, max_procs=1, order="packed")
    assert [g.index for g in chosen] == [1]
    chosen = berth.select(3, predicate=lambda g: g.index != 0, max_procs=None, order="index")
    assert [g.index for g in chosen] == [1, 2, 3]
    with pytest.raises(NotEnoughGpus) as info:
        berth.select(4)
    assert "only 3 of 4 GPUs qualify" in str(info.value)
    assert info.value.reasons[1] == ["utilisation 50% > 0%", "1 process > 0"]
    with pytest.raises(UsageError, match="only=9"):  # (its own argument's name: issue 40.5)
        berth.select(only=[9])
    with pytest.raises(UsageError, match="min_free='lots'"):
        berth.select(min_free="lots")


def test_banned_names(fake_gpus):
    fake_gpus.setup(n=2)
    fake_gpus.update(0, name="Quadro RTX 6000")
    assert [g.index for g in berth.select(1, banned_names=["Quadro"])] == [1]
    with pytest.raises(NotEnoughGpus, match="name matches banned 'Quadro'"):
        berth.select(2, banned_names=["Quadro"])
