"""Shares pack: half-GPU claims pair up on one GPU and leave whole GPUs free."""

from __future__ import annotations

from typing import Any

import berth


def test_two_half_shares_pair_on_one_gpu(fake_gpus: Any) -> None:
    fake_gpus.setup(n=4, memory="80G")
    with berth.acquire(gpus=0.5, mem="30G", timeout=5) as a:
        with berth.acquire(gpus=0.5, mem="30G", timeout=5) as b:
            assert a.ids == b.ids
            # the three other GPUs stay whole: a 3-GPU claim still fits at once
            with berth.acquire(gpus=3, timeout=5) as c:
                assert set(c.ids).isdisjoint(a.ids)


def test_whole_gpu_order_stays_random_among_equals(fake_gpus: Any) -> None:
    fake_gpus.setup(n=4, memory="80G")
    seen = set()
    for _ in range(40):
        with berth.acquire(gpus=1, timeout=5) as lease:
            seen.add(lease.ids[0])
        if len(seen) > 1:
            break
    assert len(seen) > 1
