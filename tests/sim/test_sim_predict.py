"""Issue 33.4 in the simulator: ``simulate(predict=True)`` backfills by run times learned
from the jobs ended so far where a job gives no limit, and changes nothing where every job
gives one."""

from __future__ import annotations

from berth.sim.engine import simulate
from berth.sim.traces import SimJob
from berth.sim.workload import inventory


def _jobs(limits: bool) -> list[SimJob]:
    """2 GPUs. Two runs each of "long" (300 s) and "short" (10 s) teach; then "long" runs on
    one GPU, a 2-GPU job waits for it, and a "short" job could run on the other GPU."""
    t = None if not limits else 1000.0
    return [
        SimJob(1, 0.0, 300.0, 1, name="long", time_limit=t),
        SimJob(2, 0.0, 300.0, 1, name="long", time_limit=t),
        SimJob(3, 300.0, 10.0, 1, name="short", time_limit=t),
        SimJob(4, 300.0, 10.0, 1, name="short", time_limit=t),
        SimJob(5, 400.0, 300.0, 1, name="long", time_limit=t),
        SimJob(6, 401.0, 5.0, 2, name="both", time_limit=100.0),
        SimJob(7, 402.0, 10.0, 1, name="short", time_limit=t),
    ]


def test_a_short_job_backfills_by_its_learned_run_time() -> None:
    inv = inventory("2")
    plain = simulate(_jobs(False), inv, policy="fifo-backfill")
    learned = simulate(_jobs(False), inv, policy="fifo-backfill", predict=True)
    assert plain.start[6] == 705.0  # (after the 2-GPU job: nobody knew the long one's end)
    assert learned.start[6] == 402.0  # (ends by 412, long before the long job's 700)
    assert learned.start[5] == plain.start[5] == 700.0  # (the head is not delayed)


def test_with_every_limit_given_predict_changes_nothing() -> None:
    inv = inventory("2")
    a = simulate(_jobs(True), inv, policy="balanced")
    b = simulate(_jobs(True), inv, policy="balanced", predict=True)
    assert (a.start, a.end) == (b.start, b.end)
