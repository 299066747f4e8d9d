"""The ``queue`` handler: what the request asks for checked (:class:`Select`), the engine's queue
view (:mod:`berth.daemon.engine.queue_view`: running jobs, pending ones in the explaining pass's
order, ended ones; ``limit``, ``fold``, ``model``) in one answer or ``stream``ed in frames
(:class:`berth.daemon.requests.stream.Stream`), each job's command shown as the caller may see
it (``--private``)."""

from __future__ import annotations

from berth.core.states import FINISHED, State
from berth.daemon.requests import validate
from berth.daemon.requests.authority import may_see
from berth.daemon.requests.stream import Stream
from berth.wire import protocol
from berth.wire.protocol import ProtocolError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from berth.core.job import Job
    from berth.daemon.engine.front import Front
    from berth.daemon.requests.authority import Peer


class Select:
    """What a `queue` request asks for (checked), and which jobs it keeps."""

    def __init__(self, req: dict[str, Any]) -> None:
        self.uid = validate.uid(req.get("uid"))
        try:
            self.states = {State.parse(s) for s in validate.strings("states", req.get("states"))}
        except ValueError as e:
            raise ProtocolError(protocol.BAD_REQUEST, str(e)) from None
        project = req.get("project")
        if project is not None:
            validate.strings("project", [project])
        self.project: str | None = project
        limit = req.get("limit")
        if limit is not None and (isinstance(limit, bool) or limit < 0):
            raise ProtocolError(protocol.BAD_REQUEST,
                                f"limit = {limit!r}: give a number of lines, 0 or more")  # fmt: skip
        self.limit: int | None = limit
        self.fold = bool(req.get("fold"))
        self.model = bool(req.get("model"))
        self.finished = bool(req.get("all")) or bool(self.states & FINISHED)
        # which jobs it keeps, folded or not (an explaining pass run for it stays valid)
        self.key = (self.uid, self.project, frozenset(self.states), self.fold)

    def wants(self, job: Job) -> bool:
        return (
            (self.uid is None or job.uid == self.uid)
            and (self.project is None or job.project == self.project)
            and (not self.states or job.state in self.states)
        )


def queue(front: Front, peer: Peer, req: dict[str, Any]) -> dict[str, Any] | Stream:
    sel = Select(req)
    frames = front.queue(sel, lambda job: may_see(peer, job))
    if req.get("stream"):
        return Stream(frames)
    head = next(frames)
    jobs: list[dict[str, Any]] = []
    end: dict[str, Any] = {}
    for frame in frames:
        if "end" in frame:
            end = frame
        else:
            jobs += frame["jobs"]
    out = {"daemon": head["daemon"], "jobs": jobs, "dependency_states": end["dependency_states"]}
    out.update((k, head[k]) for k in ("users", "projects", "fairshare", "reservations",
                                      "estimates"))
    if sel.limit is not None:
        out["left"] = end["left"]
    return out
