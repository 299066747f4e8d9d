"""Changing a pending job (`berth update`, Slurm's ``scontrol update``): its GPUs, time
limit, priority, name or dependencies. Each change is a line of the job's history,
``updated: gpus 1 -> 2 by alice`` (`berth show` prints it with its time), so nobody wonders
later why the job asked for what it ran with.

Only a PENDING job (held, or waiting for its begin time, included) can be changed: a running
one keeps what it started with. Who may change what (the owner; a priority above the
user's own highest is for admins) and whether the new request can ever be met are the
daemon's checks (:mod:`berth.daemon.engine.admission.update`); this module only applies a change
already checked, and words it.
"""

from __future__ import annotations

import dataclasses

from berth.core.job import Event, Job
from berth.core.states import State
from berth.core.transition import IllegalTransition
from berth.dependency import Dependency
from berth.units import format_duration

# What `berth update` may change, by the name the history and the wire use.
FIELDS = ("gpus", "time_limit", "priority", "name", "dependencies")


def _limit(t: float | None) -> str:
    if t is None:
        return "none"
    return f"{t:g}s" if t < 60 and t != int(t) else format_duration(t)


def _deps(deps: tuple[Dependency, ...], any_of: bool) -> str:
    return ("?" if any_of else ",").join(str(d) for d in deps) or "none"


def change(
    job: Job,
    *,
    now: float,
    by: str,
    gpus: float | None = None,
    time_limit: float | None = None,
    priority: int | None = None,
    name: str | None = None,
    dependencies: tuple[Dependency, ...] | None = None,
    any_of: bool = False,
) -> list[str]:
    """Apply the changes given (None: that field stays) to the pending ``job``, in place;
    each one that changes something appends ``updated: FIELD OLD -> NEW by BY`` to its
    history (``any_of``: the new ``dependencies`` are alternatives, sbatch's ``?``).
    Returns those lines (none: nothing changed). A request the job model refuses
    (``-g 4`` with only two ``--gpu-ids``) raises UsageError and changes nothing."""
    if job.state is not State.PENDING:
        raise IllegalTransition(
            f"job {job.id} is {job.state.value}: only a pending job can be updated"
        )
    request = job.request
    if gpus is not None and gpus != request.gpus:
        request = dataclasses.replace(request, gpus=gpus)  # (checked again: __post_init__)
    said: list[str] = []
    if request is not job.request:
        said.append(f"gpus {job.request.gpus:g} -> {request.gpus:g}")
        job.request = request
    if time_limit is not None and time_limit != job.time_limit:
        if not time_limit > 0:
            raise IllegalTransition(f"invalid time limit {time_limit!r}: must be positive")
        said.append(f"time limit {_limit(job.time_limit)} -> {_limit(time_limit)}")
        job.time_limit = time_limit
    if priority is not None and priority != job.priority:
        said.append(f"priority {job.priority} -> {priority}")
        job.priority = priority
    if name is not None and name != job.name:
        said.append(f"name {job.name} -> {name}")
        job.name = name
    if dependencies is not None and (dependencies, any_of) != (
        job.dependencies, job.dependency_any
    ):
        old, new = _deps(job.dependencies, job.dependency_any), _deps(dependencies, any_of)
        said.append(f"dependencies {old} -> {new}")
        job.dependencies, job.dependency_any = dependencies, any_of
    lines = [f"updated: {what} by {by}" for what in said]
    job.history = [*job.history, *(Event(now, State.PENDING, State.PENDING, x) for x in lines)]
    return lines
