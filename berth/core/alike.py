"""Pending jobs that a pass decides alike: an array's tasks one after another (issue 35).

A pass that explains walks every pending job; under a long array each task after the first
would be gated and placed again, only to wait for resources as the task before it did. A
task that :func:`waits_alike` the job considered just before it (which passed its gate, did
not fit, and waited for resources) is decided by that job's outcome without the work: the
same gate inputs, the same request, and nothing changed in between (no start, no admin
reservation window, no strict-FIFO block), so its gate passes and its placement fails again,
exactly; it waits for resources with the same detail, and the run is one entry: the first's
``Pending`` (its ``Pass.reserve``: one a run, not one a task) shared by the tasks after it.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from berth.core.job import Job


def waits_alike(job: Job, before: Job) -> bool:
    """Whether ``job`` meets every gate and placement ``before`` met: one request, no hold,
    no dependency (their wake-up times), one begin time, user, tenant, project and group."""
    return (
        job.request is before.request or job.request == before.request
    ) and not job.held and not job.dependencies and (
        job.not_before == before.not_before
        and job.user == before.user
        and job.tenant == before.tenant
        and job.project == before.project
        and job.group == before.group
        and job.group_limit == before.group_limit
    )  # fmt: skip
