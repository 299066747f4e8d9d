"""The config's projects (issue 24.5; Slurm's accounts): one ``[projects.NAME]`` table each,
written by the admin (docs/admin.md "Projects")::

    [projects.vision]
    max_gpus = 8                 # GPUs the project's jobs may hold at once (ProjectGpuLimit)
    max_queued = 100             # its jobs queued or running; more are refused at submit
    shares = 2                   # its weight in fair share between projects (default 1)
    users = ["alice", "bob"]     # who may charge it (default: everyone) ...
    groups = ["vision-lab"]      # ... or members of these Unix groups

``[scheduling] require_project = true`` refuses a job that names no project (unless
``default_project`` gives one). Membership is read from the user database (pwd/grp) by the
daemon, never taken from the client. A table's keys are checked like every other key: an
unknown key, a wrong type or a bad value is refused naming the file, the key and the value.
"""

from __future__ import annotations

from berth.errors import ConfigError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from berth.config.key import At, SoFar

KEYS = {
    "max_gpus": "GPUs the project's jobs may hold at once (more wait: ProjectGpuLimit)",
    "max_queued": "the project's jobs queued or running (more are refused at submit)",
    "shares": "its weight in fair share between projects (default 1)",
    "users": "the users who may charge it (default: everyone, unless groups is given)",
    "groups": "... or the members of these Unix groups",
}
EXAMPLE = """\
    [projects.vision]             # one table per project (Slurm's account): --project vision
    max_gpus = 8                  # GPUs its jobs may hold at once (more wait: ProjectGpuLimit)
    max_queued = 100              # its jobs queued or running (more are refused)
    shares = 2                    # its weight in fair share between projects (default 1)
    users = ["alice", "bob"]      # who may charge it (default: everyone) ...
    groups = ["vision-lab"]       # ... or members of these Unix groups
"""


class Project:
    """One project as the admin configured it."""

    __slots__ = ("groups", "max_gpus", "max_queued", "name", "shares", "users")

    def __init__(
        self, name: str, max_gpus: float | None = None, max_queued: int | None = None,
        shares: float = 1.0, users: tuple[str, ...] = (), groups: tuple[str, ...] = (),
    ) -> None:  # fmt: skip
        self.name, self.max_gpus, self.max_queued = name, max_gpus, max_queued
        self.shares, self.users, self.groups = shares, users, groups

    @property
    def open(self) -> bool:
        """Everyone may charge it (no users or groups named)."""
        return not self.users and not self.groups


def read(path: str, raw: Any) -> dict[str, Project]:
    """The ``[projects]`` tables of one config file, checked."""
    if type(raw) is not dict:
        raise ConfigError(f"config file {path!r}: [projects] must hold [projects.NAME] tables")
    return {name: _project(path, name, table) for name, table in raw.items()}


def _project(path: str, name: str, table: Any) -> Project:
    from berth.wire.fieldkinds import PROJECT_RULE  # rare: projects configured
    from berth.wire.jobspec import check_field  # rare: projects configured
    from berth.wire.protocol import ProtocolError  # rare: projects configured

    where = f"config file {path!r}: [projects.{name}]"
    try:
        check_field("project", name)
    except ProtocolError:
        raise ConfigError(f"{where}: {name!r} is not {PROJECT_RULE}") from None
    if type(table) is not dict:
        raise ConfigError(f"{where} must be a table (max_gpus, max_queued, shares, users, groups)")
    for key in table:
        if key not in KEYS:
            raise ConfigError(f"{where}: unknown key {key!r}; known: {', '.join(KEYS)}")
    out = Project(name)
    gpus = table.get("max_gpus")
    if gpus is not None:
        if type(gpus) not in (int, float) or not 0 < gpus <= 1024:
            raise ConfigError(f"{where} max_gpus = {gpus!r} must be a number in (0, 1024]")
        out.max_gpus = float(gpus)
    queued = table.get("max_queued")
    if queued is not None:
        if type(queued) is not int or queued < 1:
            raise ConfigError(f"{where} max_queued = {queued!r} must be an integer >= 1")
        out.max_queued = queued
    shares = table.get("shares", 1.0)
    if type(shares) not in (int, float) or not 0 < shares <= 1e6:
        raise ConfigError(f"{where} shares = {shares!r} must be a number in (0, 1000000]")
    out.shares = float(shares)
    out.users, out.groups = _names(where, "users", table), _names(where, "groups", table)
    return out


def _names(where: str, key: str, table: dict[str, Any]) -> tuple[str, ...]:
    value = table.get(key, [])
    if type(value) is not list or not all(type(v) is str and v for v in value):
        raise ConfigError(f"{where} {key} = {value!r} must be a list of names")
    return tuple(value)


def default_project(value: str, at: At, cfg: SoFar) -> str | None:
    """``[scheduling] default_project``'s check (a late key: the projects are read)."""
    if value not in cfg.projects:
        known = ", ".join(sorted(cfg.projects)) or "none"
        raise at.fail(
            f"[scheduling] default_project = {value!r} is not a configured project "
            f"(projects: {known}); add a [projects.{value}] table or name another"
        )
    return value


def member(project: Project, user: str) -> bool:
    """Whether ``user`` may charge ``project``: named in ``users``, or a member of one of
    ``groups`` in the user database (a secondary member, or the group is their primary one
    in pwd: not the group the client's process happens to run as)."""
    if project.open or user in project.users:
        return True
    import grp  # rare: a project with groups
    import pwd  # rare: a project with groups

    try:
        gid = pwd.getpwnam(user).pw_gid
    except KeyError:
        gid = -1

    for name in project.groups:
        try:
            g = grp.getgrnam(name)
        except KeyError:
            continue  # (a group that does not exist has no members)
        if user in g.gr_mem or g.gr_gid == gid:
            return True
    return False
