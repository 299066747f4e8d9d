"""A job submit checked (:mod:`berth.daemon.engine.admission.admit`), ready to be queued, or answered
by a dry run (:mod:`berth.daemon.engine.admission.dryrun`)."""

from __future__ import annotations

from berth.claims.procs import user_name
from berth.core.request import Request
from berth.daemon.engine.admission import arrays

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, Protocol

    from berth.core.job import Job
    from berth.dependency import Dependency
    from berth.wire.jobspec import JobSpec

    class Caller(Protocol):
        """Who asks, as the socket vouches for them (the requests' ``Peer``): the engine
        takes the uid, gid, user name and whether they are an admin, nothing the message
        says."""

        @property
        def uid(self) -> int: ...
        @property
        def gid(self) -> int: ...
        @property
        def user(self) -> str: ...
        @property
        def admin(self) -> bool: ...

    # What the caller's rules say of acting on a job: raises if they may not (requests'
    # authority.owned), asked of each job before any is changed.
    Allow = Callable[[Job], object]


class Owner:
    """A job's owner as the engine acts for them (`berth resubmit` of another's job by an
    admin): the job's own uid and gid, its user's name from the user database."""

    __slots__ = ("admin", "gid", "uid", "user")

    def __init__(self, uid: int, gid: int, admin: bool) -> None:
        self.uid = uid
        self.gid = gid
        self.admin = admin
        self.user = user_name(uid)


class Prepared:
    """A checked job, ready to be inserted (``dup``: the reply for a duplicate instead).
    ``spec`` is what the store keeps of each task (an array's ``array`` and ``array_argvs``
    are taken out of it, into ``array`` and ``argvs``)."""

    __slots__ = (
        "any_of", "argvs", "array", "count", "deps", "dup", "err", "ident", "learned", "out", "request",
        "requeue", "spec", "stored",
    )  # fmt: skip

    def __init__(self, spec: JobSpec) -> None:
        self.spec = spec
        self.dup: dict[str, Any] | None = None
        self.array = spec.array
        self.argvs = spec.array_argvs  # (`berth sweep`: each task its own command)
        self.count = len(arrays.indices(spec.array)[0]) if spec.array else 1  # jobs it adds
        self.deps: tuple[Dependency, ...] = ()
        self.any_of = False  # (sbatch's '?')
        self.request = Request()
        self.out = self.err = ""
        self.requeue: tuple[bool, int | None] = (False, None)  # at the time limit; how often
        self.ident = ""  # the job's identity (unique.key)
        self.stored = 0  # bytes it keeps in the store (berth.wire.jobsize), all its tasks
        self.learned: dict[str, Any] | None = None  # what its share was sized from (learned.py)
