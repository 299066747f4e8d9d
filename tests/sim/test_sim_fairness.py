"""Per-tenant fairness metrics of a simulated run (berth.sim.fairness): GPU-hours, mean wait,
normalized service while waiting against the max-min fair share, Jain's index over it."""

from __future__ import annotations

import pytest

from berth.sim.engine import RunResult
from berth.sim.fairness import _max_min, tenant_metrics
from berth.sim.traces import SimJob


def _run(rows: list[tuple[str, float, float, float, float]], capacity: int) -> RunResult:
    """(tenant, gpus, submit, start, end) -> a RunResult."""
    jobs = [SimJob(i + 1, sub, end - start, g, t) for i, (t, g, sub, start, end) in enumerate(rows)]
    return RunResult(
        "balanced", "packer", capacity, jobs, [r[3] for r in rows], [r[4] for r in rows]
    )


def test_max_min_division() -> None:
    assert _max_min(8.0, [1.0, 10.0, 10.0]) == [1.0, 3.5, 3.5]
    assert _max_min(8.0, [0.0, 2.0]) == [0.0, 2.0]


def test_a_tenant_kept_out_while_it_waits_gets_a_low_service() -> None:
    # 4 GPUs. a holds them all from 0 to 10 with a second job queued; b waits from 0 to 10
    # for 2 GPUs. While both wait (0-10), the fair division of 4 among demands a = 4 + 4,
    # b = 2 is a 2, b 2: a got 4 where 2 was due, b got 0 of 2 (its service: 0).
    res = _run([("a", 4, 0, 0, 10), ("a", 4, 0, 20, 30), ("b", 2, 0, 10, 20)], 4)
    m = tenant_metrics(res)
    a, b = m["tenants"]["a"], m["tenants"]["b"]
    assert a["gpu_hours"] == pytest.approx(80 / 3600)
    assert b["wait_mean"] == 10.0 and a["wait_mean"] == 10.0
    # a also waits from 10 to 20 holding nothing while b holds 2 (a's due: 2 = 4 - 2)
    assert a["service"] == pytest.approx((4 * 10 + 0 * 10) / (2 * 10 + 2 * 10))
    assert b["service"] == pytest.approx(0.0)
    assert m["jain_service"] == pytest.approx(0.5)


def test_equal_service_is_a_jain_index_of_one() -> None:
    res = _run(
        [("a", 2, 0, 0, 10), ("a", 2, 0, 10, 20), ("b", 2, 0, 0, 10), ("b", 2, 0, 10, 20)], 4
    )
    m = tenant_metrics(res)
    assert m["tenants"]["a"]["service"] == pytest.approx(1.0)
    assert m["jain_service"] == pytest.approx(1.0)
