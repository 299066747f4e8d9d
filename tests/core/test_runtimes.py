"""Issue 33.1: run times learned from finished runs (berth.core.runtimes): the same user's
jobs of the same name first, then that user's jobs of the same shape, then the host's; the
median and the 90th percentile, capped by a time limit, saying what they rest on."""

from __future__ import annotations

import pytest

from berth.core.job import Job, Request
from berth.core.runtimes import KEEP, Run, RunTimes, run_of, script_of
from berth.core.states import State
from berth.core.transition import transition


def _job(user: str = "ann", name: str = "train.sh", gpus: float = 1, limit: float | None = None) -> Job:
    return Job(1, 0.0, Request(gpus=gpus), name=name, user=user, time_limit=limit)


def test_the_same_name_first_then_the_users_shape_then_the_hosts() -> None:
    rt = RunTimes()
    assert rt.predict(_job()) is None  # nothing learned: nothing said
    for s in (100.0, 200.0, 300.0):
        rt.add(Run("bob", "other", 1, 1.0, s))
    host = rt.predict(_job())
    assert host is not None and (host.typical, host.runs) == (200.0, 3)
    assert host.basis == "this host's 1-GPU jobs"
    for s in (10.0, 20.0, 30.0):
        rt.add(Run("ann", "eval", 1, 1.0, s))
    mine = rt.predict(_job())
    assert mine is not None and mine.typical == 20.0 and mine.basis == "ann's 1-GPU jobs"
    rt.add(Run("ann", "train.sh", 1, 1.0, 130.0))
    one = rt.predict(_job())  # (one run of a name is not enough)
    assert one is not None and one.basis == "ann's 1-GPU jobs" and one.runs == 4
    rt.add(Run("ann", "train.sh", 1, 1.0, 150.0))
    named = rt.predict(_job())
    assert named is not None and named.typical == 140.0 and named.p90 == 150.0
    assert named.text() == "typical 2:20, p90 2:30, from 2 runs of train.sh"
    assert rt.predict(_job(name="new", gpus=2)) is None  # (another shape: nothing learned)
    other = rt.predict(_job(user="cat"))  # (ann's train.sh is not cat's)
    assert other is not None and other.basis == "this host's 1-GPU jobs"


def test_the_limit_caps_and_a_long_run_is_re_predicted_never_below_what_it_ran() -> None:
    rt = RunTimes()
    for s in range(1, 11):
        rt.add(Run("ann", "train.sh", 1, 1.0, 100.0 * s))
    p = rt.predict(_job())
    assert p is not None and (p.typical, p.p90) == (550.0, 900.0)
    capped = rt.predict(_job(limit=600.0))
    assert capped is not None and (capped.typical, capped.p90) == (550.0, 600.0)
    assert p.remaining(100.0, None) == (550.0, 900.0)
    assert p.remaining(700.0, None) == (900.0, 900.0)
    assert p.remaining(1000.0, None) == (2000.0, 2000.0)
    assert p.remaining(1000.0, 1500.0) == (1500.0, 1500.0)


def test_only_the_newest_runs_count_and_only_completed_ones_teach() -> None:
    rt = RunTimes()
    for _ in range(KEEP):
        rt.add(Run("ann", "train.sh", 1, 1.0, 10.0))
    for _ in range(KEEP):
        rt.add(Run("ann", "train.sh", 1, 1.0, 500.0))
    p = rt.predict(_job())
    assert p is not None and p.typical == 500.0 and p.runs == KEEP
    job = _job()
    transition(job, State.RUNNING, now=5.0, gpus=(0,))
    transition(job, State.FAILED, now=50.0, exit_code=1)
    assert run_of(job) is None
    ok = _job(gpus=0.5)
    transition(ok, State.RUNNING, now=5.0, gpus=(0,), share=0.5)
    transition(ok, State.COMPLETED, now=50.0, exit_code=0)
    assert run_of(ok) == Run("ann", "train.sh", 1, 0.5, 45.0)


@pytest.mark.parametrize("n", [1, 2, 3, 9, 10, 11])
def test_the_p90_is_a_run_that_happened_and_not_below_the_median(n: int) -> None:
    rt = RunTimes()
    for s in range(1, n + 1):
        rt.add(Run("ann", "train.sh", 1, 1.0, float(s)))
    p = rt.predict(_job()) if n >= 2 else None
    if p is not None:
        assert p.p90 in {float(s) for s in range(1, n + 1)} and p.p90 >= p.typical
        assert p.p90 == float(-(-9 * n // 10))


@pytest.mark.parametrize(("argv", "script"), [
    (["python", "train.py", "--lr", "1"], "train.py"),
    (["/usr/bin/python3.11", "-u", "/home/a/exp/train.py"], "train.py"),
    (["python", "-m", "pkg.train", "--x"], "-m pkg.train"),
    (["torchrun", "--nproc_per_node=2", "fit.py"], "fit.py"),
    (["bash", "-c", "echo hi"], None),
    (["./train.sh", "a"], None),  # (its name, train.sh, says it)
    ([], None),
])  # fmt: skip
def test_the_script_an_interpreter_runs_is_what_is_learned(argv: list[str], script: str | None) -> None:
    assert script_of(argv) == script


def test_runs_of_one_script_teach_its_next_run_whatever_the_interpreter_is_named() -> None:
    rt = RunTimes()
    for s in (100.0, 120.0):
        job = _job(name="python")
        job.extra["script"] = "train.py"
        transition(job, State.RUNNING, now=0.0, gpus=(0,))
        transition(job, State.COMPLETED, now=s, exit_code=0)
        run = run_of(job)
        assert run is not None and run.name == "train.py"
        rt.add(run)
    rt.add(Run("ann", "python", 1, 1.0, 9999.0))  # (another script of the same interpreter)
    nxt = _job(name="python")
    nxt.extra["script"] = "train.py"
    p = rt.predict(nxt)
    assert p is not None and p.basis == "train.py" and p.typical == 110.0
