"""Dependencies (sbatch's ``--dependency``): satisfied, waiting, or never to be satisfied."""

from __future__ import annotations

from collections.abc import Mapping

from berth.core.job import Job
from berth.core.states import FINISHED, State

OK, WAIT, NEVER = "ok", "wait", "never"


def check(job: Job, states: Mapping[int, State], started: Mapping[int, bool]) -> tuple[str, str]:
    """(``OK`` | ``WAIT`` | ``NEVER``, detail) for ``job``'s dependencies.

    ``states`` maps job ids to their state (pending, running and finished jobs);
    ``started`` says whether a pending job already ran once (a requeued job counts as started
    for ``after``). A dependency on a job that ``states`` does not know is never satisfied.
    """
    waiting: list[str] = []
    for dep in job.dependencies:
        st = states.get(dep.job_id)
        if st is None:
            return NEVER, f"{dep}: job {dep.job_id} does not exist"
        done = st in FINISHED
        if dep.kind == "after":
            ok = st is not State.PENDING or started.get(dep.job_id, False)
            if not ok:
                waiting.append(str(dep))
        elif dep.kind == "afterany":
            if not done:
                waiting.append(str(dep))
        elif dep.kind == "afterok":
            if done and st is not State.COMPLETED:
                return NEVER, f"{dep}: job {dep.job_id} ended {st.value}"
            if not done:
                waiting.append(str(dep))
        elif dep.kind == "afternotok":
            if st is State.COMPLETED:
                return NEVER, f"{dep}: job {dep.job_id} COMPLETED"
            if not done:
                waiting.append(str(dep))
    if waiting:
        return WAIT, "waiting for " + ", ".join(waiting)
    return OK, ""
