"""An array's tasks' specs as one request's (issue 35: the daemon's memory): the spec every
task shares and a function of a task's id giving its own fields (its log paths, its
``array_task``, its command under `berth sweep`), so a 10,000-task array holds one spec until
its commit, not one each. A task's :class:`~berth.wire.jobspec.JobSpec` is made when it is
asked for (its row, as the commit writes it; its launch; `berth show`), and dropped after."""

from __future__ import annotations

from berth.wire.jobspec import JobSpec

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any


class Tasks:
    """The specs of one request's tasks: ``shared``, and ``own(job_id)`` the fields that are
    a task's own (:meth:`JobSpec.replace`'s changes)."""

    __slots__ = ("own", "shared")

    def __init__(self, shared: JobSpec, own: Callable[[int], dict[str, Any]]) -> None:
        self.shared = shared
        self.own = own

    def of(self, job_id: int) -> JobSpec:
        """Task ``job_id``'s spec, as a spec of its own would have been."""
        return self.shared.replace(**self.own(job_id))


def spec_of(job_id: int, spec: JobSpec | Tasks) -> JobSpec:
    """The spec of job ``job_id`` from what the journal holds of it."""
    return spec if type(spec) is JobSpec else spec.of(job_id)  # type: ignore[union-attr]
