"""Acting on Slurm jobs: ``berth cancel`` (scancel) and ``berth hold`` / ``release-job``
(scontrol uhold / release), every id checked by one squeue first.

A cancel that Slurm refuses (another user's job: ``Access/permission denied``) is an error
(:class:`~berth.errors.Refused`, exit 4, as on the local queue) with scancel's reason; a job
that ended between the check and scancel is said to be so, and is no error.
"""

from __future__ import annotations

from berth.backends import slurm_query as q
from berth.backends.base import aggregate, cancel_listed, named
from berth.errors import Refused, UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    import subprocess
    from collections.abc import Mapping, Sequence
    from typing import Protocol

    from berth.backends.base import Backend, JobInfo

    class Slurm(Protocol):  # (berth.backends.slurm.Slurm: what these use of it)
        def status(self, ids: Sequence[str]) -> dict[str, JobInfo]: ...

        def _run(
            self, argv: Sequence[str], env: Mapping[str, str] | None = None,
            check: bool = True, input: str | None = None,
        ) -> subprocess.CompletedProcess[str]: ...  # fmt: skip


# scancel's words for a job that ended meanwhile (not a refusal)
ENDED = ("already completing or completed", "Invalid job id specified")


def cancel(slurm: Slurm, ids: Sequence[str], signal: int | None = None) -> dict[str, str]:
    found = slurm.status(ids)  # every id checked before anything is cancelled
    out: dict[str, str] = {}
    live = []
    for i in ids:
        jobs = [j for j in found.values() if named(j, i)]
        if not jobs:
            raise UsageError(f"no job {i}: see `berth queue --all --backend slurm`")
        if all(j.finished for j in jobs):
            out[i] = f"already {aggregate(i, jobs).state}"
        else:
            live.append(i)
            out[i] = "cancelled" if signal is None else f"sent signal {signal}"
    if not live:
        return out
    # --full: a batch job's command runs in no step; without it scancel -s signals only the
    # job's steps (none), and the job never gets the signal.
    sig = ["--full", "-s", str(signal)] if signal is not None else []
    done = slurm._run(["scancel", *sig, *live], check=False)
    refused: list[str] = []
    for line in q.errors(done.stderr):
        for i in live:
            if f"job id {i}:" in line or f"job id {i} " in line:
                why = line.rsplit(": ", 1)[-1]
                if any(e in line for e in ENDED):
                    out[i] = f"not {out[i]}: {why}"
                else:
                    refused.append(_refused(i, why, found))
    if refused:
        rest = [f"job {i}: {out[i]}" for i in live if not any(f"job {i} " in r for r in refused)]
        also = f" ({'; '.join(rest)})" if rest else ""
        raise Refused("; ".join(refused) + also)
    return out


def cancel_mine(slurm: Backend, states: Sequence[str], signal: int | None) -> dict[str, str]:
    """`berth cancel --all-mine`: listed, then cancelled by id (:func:`cancel_listed`)."""
    return cancel_listed(slurm, q.user(), states, signal)


def _refused(job_id: str, why: str, found: dict[str, JobInfo]) -> str:
    owner = next((j.user for j in found.values() if named(j, job_id)), "")
    who = f"its owner ({owner})" if owner else "its owner"
    return (
        f"job {job_id} not cancelled: scancel says {why!r}: a Slurm job may be cancelled by "
        f"{who} and the cluster's operators and admins"
    )


def hold(slurm: Slurm, ids: Sequence[str], release: bool = False) -> Sequence[str]:
    """``scontrol uhold`` (a hold its owner may lift, even when root set it) / ``scontrol
    release`` of pending jobs, all checked first."""
    found = slurm.status(ids)
    for i in ids:
        jobs = [j for j in found.values() if named(j, i)]
        if not jobs:
            raise UsageError(f"no job {i}: see `berth queue --all --backend slurm`")
        late = [j for j in jobs if j.state != "PENDING"]
        if late:
            raise UsageError(
                f"job {i} is {late[0].state}: only a pending job can be "
                + ("released" if release else "held")
            )
    slurm._run(["scontrol", "release" if release else "uhold", ",".join(ids)])
    return tuple(ids)
