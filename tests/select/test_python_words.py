"""An impossible request from Python (issue 40.5) says which GPUs CUDA_VISIBLE_DEVICES shows of
those the machine has, and names the caller's own arguments (``min_free=``, ``only=``,
``all=True``), not the CLI's options (``--min-free``, ``--only``, ``--all``); `berth run` keeps
its options' words."""

from __future__ import annotations

from typing import Any

import pytest

import berth
from berth.errors import NotEnoughGpus, UsageError


@pytest.fixture
def two_of_four(fake_gpus: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    fake_gpus.setup(n=4)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,3")
    return fake_gpus


NOTE = "CUDA_VISIBLE_DEVICES=1,3 shows 2 of the 4 GPUs here (GPUs shown, by NVML index: 1, 3)"


def test_acquire_too_many_says_what_cuda_visible_devices_shows(two_of_four: Any) -> None:
    with pytest.raises(NotEnoughGpus) as e:
        berth.acquire(3, timeout=0)
    said = str(e.value)
    assert NOTE in said and "all=True considers every GPU" in said, said
    assert "--" not in said, said


def test_select_too_many_says_what_cuda_visible_devices_shows(two_of_four: Any) -> None:
    with pytest.raises(NotEnoughGpus) as e:
        berth.select(3)
    assert NOTE in str(e.value) and "all=True" in str(e.value) and "--" not in str(e.value)
    assert len(berth.select(3, all=True)) == 3


def test_python_callers_hear_their_argument_names(two_of_four: Any) -> None:
    with pytest.raises(UsageError) as e:
        berth.acquire(only=[2], timeout=0)  # GPU 2 exists, but is not shown
    assert "only=2" in str(e.value) and NOTE in str(e.value) and "--" not in str(e.value)
    with pytest.raises(NotEnoughGpus) as e2:
        berth.acquire(mem="200G", timeout=0)
    assert "< mem=200" in str(e2.value) and "--mem" not in str(e2.value), str(e2.value)
    with pytest.raises(UsageError) as e3:
        berth.select(min_free="lots")
    assert "min_free='lots'" in str(e3.value) and "--" not in str(e3.value), str(e3.value)
    with pytest.raises(UsageError) as e4:
        berth.select(max_power=-1)
    assert "max_power=-1" in str(e4.value), str(e4.value)


def test_berth_run_keeps_its_options_words(two_of_four: Any) -> None:
    r = two_of_four.berth("run", "-g", "3", "--", "true",
                          env={"CUDA_VISIBLE_DEVICES": "1,3"})  # fmt: skip
    assert r.returncode == 1, r.stderr
    assert NOTE in r.stderr and "--all considers every GPU" in r.stderr, r.stderr
    r = two_of_four.berth("run", "--mem", "200G", "--", "true")
    assert "< --mem 200" in r.stderr, r.stderr
