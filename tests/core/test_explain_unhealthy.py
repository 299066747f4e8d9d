"""A request that waits for a GPU the driver reports unhealthy (lost) says so: GpuUnhealthy,
not BadConstraints (issue 10, point 8). Pure core, no daemon."""

from __future__ import annotations

from collections.abc import Callable

from berth.core import Gpu, Inputs, Job, Reason, schedule

GIB = 1024**3


def _gpus(n: int, unhealthy: set[int]) -> list[Gpu]:
    return [Gpu(i, f"GPU-{i}", "A100", 80 * GIB, i not in unhealthy) for i in range(n)]


def test_a_lost_gpu_gives_gpu_unhealthy(make_job: Callable[..., Job]) -> None:
    both, there = make_job(2), make_job(1, gpu_ids=(1,))
    d = schedule(Inputs([both, there], [], _gpus(2, {1})))
    for job in (both, there):
        assert d.pending[job.id].reason is Reason.GPU_UNHEALTHY
        assert "GPU 1 unhealthy" in d.pending[job.id].detail


def test_more_than_the_machine_has_stays_bad_constraints(make_job: Callable[..., Job]) -> None:
    too_many = make_job(3)  # even with GPU 1 back it could not run
    d = schedule(Inputs([too_many], [], _gpus(2, {1})))
    assert d.pending[too_many.id].reason is Reason.BAD_CONSTRAINTS


def test_a_job_that_fits_on_the_healthy_gpus_runs(make_job: Callable[..., Job]) -> None:
    one = make_job(1)
    d = schedule(Inputs([one], [], _gpus(2, {1})))
    assert one.id not in d.pending
