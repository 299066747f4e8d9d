"""Projects in the pure core (issue 24.5): two-level fair share (Slurm's fair tree: projects
by their usage per share first, then users within a project) and a project's GPU quota
(``ProjectGpuLimit``), on constructed scenarios."""

from __future__ import annotations

from collections.abc import Callable

from berth.core import Inputs, Job, Reason, State, schedule, transition
from berth.core.fairshare import FairShare, factors, interleave
from berth.core.limits import UserLimits

from .conftest import gpus

MakeJob = Callable[..., Job]
HOUR = 3600.0


def test_projects_are_compared_first_then_users_within_one(make_job: MakeJob) -> None:
    # alice (project vision) used little, but her project used a lot (bob); carol (nlp) used
    # more than alice alone, but nlp used less than vision: nlp's carol goes first, then
    # within vision alice before bob.
    usage = {"alice": 1 * HOUR, "bob": 20 * HOUR, "carol": 5 * HOUR}
    fair = FairShare(usage, {}, {"vision": 21 * HOUR, "nlp": 5 * HOUR})
    jobs = [
        make_job(1, user="bob", project="vision"),
        make_job(1, user="alice", project="vision"),
        make_job(1, user="carol", project="nlp"),
    ]
    got = [j.user for j in interleave(jobs, fair, {})]
    assert got == ["carol", "alice", "bob"]
    # one level only (no projects): users by their own usage, alice first
    flat = [make_job(1, user=u) for u in ("bob", "alice", "carol")]
    assert [j.user for j in interleave(flat, FairShare(usage), {})] == ["alice", "carol", "bob"]


def test_a_project_with_many_users_does_not_get_more_than_its_share(make_job: MakeJob) -> None:
    # vision has four users, nlp one; equal shares, nothing used: 8 GPUs go 4 and 4.
    jobs = [make_job(1, user=f"v{k}", project="vision", t=float(k)) for k in range(4)
            for _ in range(3)]  # fmt: skip
    jobs += [make_job(1, user="n0", project="nlp") for _ in range(8)]
    fair = FairShare({}, {}, {}, {})
    d = schedule(Inputs(jobs, [], gpus(8), now=10.0, fair=fair))
    by_id = {j.id: j for j in jobs}
    started = [by_id[s.job_id].project for s in d.starts]
    assert started.count("vision") == 4 and started.count("nlp") == 4
    # within vision, its four users got one each
    assert sorted(by_id[s.job_id].user for s in d.starts if by_id[s.job_id].project == "vision") \
        == ["v0", "v1", "v2", "v3"]  # fmt: skip


def test_project_shares_weigh_the_upper_level(make_job: MakeJob) -> None:
    jobs = [make_job(1, user="a", project="big") for _ in range(8)]
    jobs += [make_job(1, user="b", project="small") for _ in range(8)]
    fair = FairShare({}, {}, {}, {"big": 3.0, "small": 1.0})
    d = schedule(Inputs(jobs, [], gpus(8), now=10.0, fair=fair))
    by_id = {j.id: j for j in jobs}
    started = [by_id[s.job_id].project for s in d.starts]
    assert started.count("big") == 6 and started.count("small") == 2


def test_a_project_at_its_quota_waits_with_a_plain_reason(make_job: MakeJob) -> None:
    held = [make_job(1, user="alice", project="vision") for _ in range(2)]
    for k, job in enumerate(held):
        transition(job, State.RUNNING, now=0.0, gpus=(k,))
    more = make_job(1, user="bob", project="vision", priority=10)
    other = make_job(1, user="carol", project="nlp")
    free = make_job(1, user="dave")  # no project: no quota
    d = schedule(Inputs([more, other, free], held, gpus(8),
                        limits=UserLimits(projects={"vision": 2.0, "nlp": 1.0})))  # fmt: skip
    assert sorted(s.job_id for s in d.starts) == sorted([other.id, free.id])
    p = d.pending[more.id]
    assert p.reason is Reason.PROJECT_GPU_LIMIT
    assert str(p) == "(ProjectGpuLimit) project vision holds 2 of 2 GPUs allowed at once"
    assert more.id not in d.expected  # no reservation: its project's quota holds it


def test_the_quota_counts_jobs_started_in_the_same_pass(make_job: MakeJob) -> None:
    jobs = [make_job(1, user=u, project="vision") for u in ("a", "b", "a", "b")]
    jobs.append(make_job(2, user="c", project="vision"))
    d = schedule(Inputs(jobs, [], gpus(8), limits=UserLimits(projects={"vision": 3.0})))
    assert len(d.starts) == 3
    assert d.pending[jobs[4].id].detail == "project vision holds 3 of 3 GPUs allowed at once"
    # too big for the quota at all: says so
    big = make_job(4, user="a", project="vision")
    d = schedule(Inputs([big], [], gpus(8), limits=UserLimits(projects={"vision": 3.0})))
    assert d.pending[big.id].detail == "needs 4 GPUs, more than project vision may hold at once (3)"


def test_without_explanations_a_full_project_gives_no_more_jobs(make_job: MakeJob) -> None:
    jobs = [make_job(1, user="a", project="vision") for _ in range(50)]
    jobs += [make_job(1, user="b", project="nlp") for _ in range(2)]
    fair = FairShare({}, {}, {"nlp": 100 * HOUR})  # vision's turn first, every time
    d = schedule(Inputs(jobs, [], gpus(8), fair=fair, explain=False,
                        limits=UserLimits(projects={"vision": 2.0})))  # fmt: skip
    by_id = {j.id: j for j in jobs}
    started = [by_id[s.job_id].project for s in d.starts]
    assert started.count("vision") == 2 and started.count("nlp") == 2


def test_project_factors_are_the_upper_levels_classic_factor() -> None:
    fair = FairShare({}, {}, {"vision": 300.0, "nlp": 100.0}, {"vision": 1.0, "nlp": 1.0})
    f = factors(fair.projects(), ["vision", "nlp"])
    assert f["nlp"] > 0.5 > f["vision"]


def test_jobs_keep_their_project_through_the_store_shape(make_job: MakeJob) -> None:
    job = make_job(1, user="alice", project="vision")
    assert Job.from_dict(job.to_dict()).project == "vision"
    assert Job.from_dict({**job.to_dict(), "project": None}).project == ""


def test_projects_of_equal_usage_go_in_the_policys_order_not_by_name(make_job: MakeJob) -> None:
    """As between users (tests/core/test_fairshare.py): two projects that used nothing are a
    tie, and the job queued first goes first, not the project whose name sorts first."""
    nlp = make_job(1, user="carol", project="nlp", t=0.0)
    audio = make_job(1, user="alice", project="audio", t=10.0)
    for policy in ("fifo", "guarded"):
        d = schedule(Inputs([audio, nlp], [], gpus(1), now=50.0, policy=policy,
                            fair=FairShare({}, {}, {}, {})))  # fmt: skip
        assert [s.job_id for s in d.starts] == [nlp.id], policy
    order = [j.id for j in interleave([nlp, audio], FairShare({}), {})]
    assert order == [nlp.id, audio.id]
    used = FairShare({}, {}, {"nlp": 5.0})  # a lower usage still goes first
    assert [j.id for j in interleave([nlp, audio], used, {})] == [audio.id, nlp.id]
