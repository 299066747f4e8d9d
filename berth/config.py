"""berth's configuration: one TOML file, and four environment variables.

Where the file is read from (the first that applies):

1. ``$BERTH_CONFIG`` if set: that file only (an empty value reads no file at all);
2. otherwise ``/etc/berth/config.toml`` (the admin's), then ``~/.config/berth/config.toml``
   (``$XDG_CONFIG_HOME`` honoured); keys in the user's file override the admin's, per section.

Environment variables (they override the file):

- ``BERTH_CONFIG``: the config file to read
- ``BERTH_CLAIMS_DIR``: the claim ledger directory shared by all users of the host
- ``BERTH_STATE_DIR``: the daemon's state directory (database, job logs)
- ``BERTH_SOCKET``: the daemon's UNIX socket

Example::

    [inventory]
    # Declare logical GPUs instead of reading NVML (machines without a driver, tests, demos):
    gpus = 5              # GPUs 0..4
    unavailable = [3, 4]  # as seed 004's `--init 5 3 4`
    memory = "80G"        # memory of each logical GPU, so `--mem` shares can be checked
    # With NVML: manage only some GPUs, and ban others (by index or UUID) or by name.
    manage = [0, 1, 2, 3]
    ban = ["GPU-8e4c..."]
    ban_names = ["K80"]

    [claims]
    dir = "/run/berth"
    admin_group = "gpuadmin"   # members may `berth release` others' claims (root always may)

    [daemon]
    socket = "/home/me/berth.sock"       # a user's own daemon (default $XDG_RUNTIME_DIR/berth)
    state_dir = "/home/me/.berth"        # ... and its state (default ~/.local/state/berth)
    system_socket = "/run/berth/berth.sock"  # the system daemon's (berth daemon --system)
    system_state_dir = "/var/lib/berth"      # ... and its state (docs/admin.md)
    private = false            # true: others' commands and paths are hidden (but from admins)
    poll_interval = 5          # seconds between NVML polls (only to see what others do)
    keep_finished = "30d"      # records of finished jobs, then purged ("inf": keep all)
    max_job_time = "24h"       # every job stops there; a longer -t is refused at submit
    kill_after = "30s"         # grace between SIGTERM and SIGKILL at a time limit or cancel
    policy = "balanced"        # scheduling policy (berth help daemon lists them)
    http = "127.0.0.1:8765"    # serve the web dashboard and /metrics there (default: off)
    http_anonymous = true      # viewers without a token may read (false: sign in to view)
    http_allow_remote = false  # allow a non-loopback http address (plain HTTP: use a TLS proxy)

    [scheduling]
    fairshare = true           # order users by their decayed GPU usage (docs/scheduling.md)
    fairshare_half_life = "7d" # a GPU-hour counts half as much a half-life later ("inf": never)

    [limits]                   # for every user; `berth admin limits` sets them at runtime
    max_gpus = 4               # GPUs a user may hold at once (more wait: UserGpuLimit)
    max_jobs = 200             # jobs a user may have queued or running (more are refused)
    max_time = "2d"            # the longest -t a user may ask (a job without -t gets it)
    # What one request may cost (docs/admin.md, "Limits per user"); these are the defaults:
    # max_jobs = 50000         # (without a max_jobs above: queued or running, per user)
    max_env_size = "256K"      # a job's environment (--export) and setup text, in bytes
    max_array_tasks = 10000    # tasks of one --array (10000 at most)
    max_request_jobs = 10000   # jobs one submit may queue (a jobs file, arrays' tasks)

    [queue]
    backend = "slurm"          # submit/queue/show/cancel/logs go to Slurm (default "local")
    requirements = "~/llm_config.json"  # GPUs per --llm model for `berth submit` (seed 002)

    [slurm]
    partition = "gpu"          # sbatch -p (default: the cluster's default partition)
    log_dir = "/shared/me/berth"  # logs and batch scripts (default <state dir>/slurm)

The flags of `berth daemon` (--max-job-time, --kill-after, --poll-interval, --keep-finished,
--policy, --http) override these keys for one run; the keys hold across restarts.
"""

from __future__ import annotations

import os
import sys

from berth.errors import ConfigError, UsageError
from berth.units import parse_duration, parse_size

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

SYSTEM_CONFIG = "/etc/berth/config.toml"
ENV_CONFIG = "BERTH_CONFIG"
ENV_CLAIMS_DIR = "BERTH_CLAIMS_DIR"
ENV_STATE_DIR = "BERTH_STATE_DIR"
ENV_SOCKET = "BERTH_SOCKET"

_SECTIONS: dict[str, dict[str, tuple[type, ...]]] = {
    "inventory": {
        "gpus": (int,),
        "unavailable": (list,),
        "memory": (str, int),
        "name": (str,),
        "manage": (list,),
        "ban": (list,),
        "ban_names": (list,),
    },
    "claims": {"dir": (str,), "admin_group": (str,)},
    "daemon": {
        "socket": (str,),
        "state_dir": (str,),
        "system_socket": (str,),
        "system_state_dir": (str,),
        "private": (bool,),
        "poll_interval": (int, float),
        "policy": (str,),
        "max_job_time": (str, int, float),
        "kill_after": (str, int, float),
        "keep_finished": (str, int, float),
        "http": (str,),
        "http_anonymous": (bool,),
        "http_allow_remote": (bool,),
    },
    "scheduling": {"fairshare": (bool,), "fairshare_half_life": (str, int, float)},
    "limits": {
        "max_gpus": (int, float),
        "max_jobs": (int,),
        "max_time": (str, int, float),
        "max_env_size": (str, int),
        "max_array_tasks": (int,),
        "max_request_jobs": (int,),
    },
    "queue": {"backend": (str,), "requirements": (str,)},
    "slurm": {"partition": (str,), "log_dir": (str,)},
}


class Inventory:
    """What GPUs berth manages: declared logical GPUs, or NVML's restricted by manage/ban."""

    __slots__ = ("ban", "ban_names", "declared", "manage", "memory", "name", "unavailable")

    def __init__(
        self,
        declared: int | None = None,
        unavailable: tuple[int, ...] = (),
        memory: int | None = None,
        name: str = "logical GPU",
        manage: tuple[str, ...] | None = None,
        ban: tuple[str, ...] = (),
        ban_names: tuple[str, ...] = (),
    ) -> None:
        self.declared = declared  # number of logical GPUs, or None to read NVML
        self.unavailable = unavailable
        self.memory = memory
        self.name = name
        self.manage = manage  # ids/UUIDs; None = all
        self.ban = ban
        self.ban_names = ban_names

    def is_banned(self, index: int, uuid: str, name: str) -> str | None:
        """Why this GPU is not managed by berth (a short reason), or None."""
        if self.manage is not None and str(index) not in self.manage and uuid not in self.manage:
            return "not in inventory.manage"
        if str(index) in self.ban or uuid in self.ban:
            return "banned in config (inventory.ban)"
        if self.declared is not None and index in self.unavailable:
            return "declared unavailable (inventory.unavailable)"
        for banned in self.ban_names:
            if banned.lower() in name.lower():
                return f"name matches banned {banned!r} (inventory.ban_names)"
        return None


class Config:
    """The merged configuration. Build with :func:`load`."""

    __slots__ = (
        "admin_group",
        "backend",
        "claims_dir",
        "fairshare",
        "fairshare_half_life",
        "files",
        "http",
        "http_allow_remote",
        "http_anonymous",
        "inventory",
        "keep_finished",
        "kill_after",
        "limit_max_array_tasks",
        "limit_max_env_size",
        "limit_max_gpus",
        "limit_max_jobs",
        "limit_max_request_jobs",
        "limit_max_time",
        "max_job_time",
        "policy",
        "poll_interval",
        "private",
        "requirements",
        "slurm_log_dir",
        "slurm_partition",
        "socket",
        "state_dir",
        "system_socket",
        "system_state_dir",
    )

    def __init__(self) -> None:
        self.files: tuple[str, ...] = ()
        self.inventory = Inventory()
        self.claims_dir: str | None = None
        self.admin_group: str | None = None
        self.socket: str | None = None
        self.state_dir: str | None = None
        self.system_socket: str | None = None  # the system daemon's (berth.wire.paths)
        self.system_state_dir: str | None = None
        self.private = False  # the daemon hides others' commands and paths from non-admins
        self.poll_interval: float = 5.0
        self.policy: str | None = None
        self.max_job_time: float | None = None
        self.kill_after: float = 30.0
        self.keep_finished: float = 30 * 86400.0  # finished jobs' records, then purged
        self.http: str | None = None  # the dashboard's address (berth.web), None: off
        self.http_anonymous = True
        self.http_allow_remote = False
        self.fairshare = True  # order users by decayed GPU usage ([scheduling])
        self.fairshare_half_life: float = 7 * 86400.0
        self.limit_max_gpus: float | None = None  # [limits]: defaults for every user
        self.limit_max_jobs: int | None = DEFAULT_MAX_JOBS
        self.limit_max_time: float | None = None
        self.limit_max_env_size = 256 * 1024  # bytes of a job's environment and setup text
        self.limit_max_array_tasks = 10_000  # tasks of one --array
        self.limit_max_request_jobs = 10_000  # jobs one submit request may queue
        self.backend: str = "local"  # where queue commands go: "local" or "slurm"
        self.requirements: str | None = None  # a requirement table (berth.jobsfile)
        self.slurm_partition: str | None = None
        self.slurm_log_dir: str | None = None


def config_files() -> list[str]:
    """The files that :func:`load` reads, in order (existing or not)."""
    explicit = os.environ.get(ENV_CONFIG)
    if explicit is not None:
        return [explicit] if explicit else []
    xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return [SYSTEM_CONFIG, os.path.join(xdg, "berth", "config.toml")]


def _read_toml(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        if os.environ.get(ENV_CONFIG) == path:
            raise ConfigError(
                f"config file {path!r} (from ${ENV_CONFIG}) does not exist: "
                f"create it or unset {ENV_CONFIG}"
            ) from None
        return {}
    except OSError as e:
        raise ConfigError(f"cannot read config file {path!r}: {e.strerror}") from None
    if sys.version_info >= (3, 11):
        import tomllib  # rare: a config file exists
    else:
        import tomli as tomllib  # rare: a config file exists (Python 3.10)
    try:
        result: dict[str, Any] = tomllib.loads(data.decode("utf-8"))
        return result
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"malformed config file {path!r}: {e}; fix or remove it") from None


def _check(path: str, raw: dict[str, Any]) -> None:
    for section, values in raw.items():
        keys = _SECTIONS.get(section)
        if keys is None or not isinstance(values, dict):
            known = ", ".join(f"[{s}]" for s in _SECTIONS)
            raise ConfigError(
                f"config file {path!r}: unknown section [{section}]; known sections: {known}"
            )
        for key, value in values.items():
            types = keys.get(key)
            if types is None:
                raise ConfigError(
                    f"config file {path!r}: unknown key {key!r} in [{section}]; "
                    f"known: {', '.join(keys)}"
                )
            if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
                names = {
                    int: "an integer", float: "a number", str: "a string", list: "a list",
                    bool: "true or false",
                }  # fmt: skip
                want = " or ".join(names[t] for t in types)
                raise ConfigError(
                    f"config file {path!r}: [{section}] {key} = {value!r} must be {want}"
                )


def _ids(path: str, key: str, values: list[Any]) -> tuple[str, ...]:
    out = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, str)) or (isinstance(v, int) and v < 0):
            raise ConfigError(
                f"config file {path!r}: [inventory] {key} has {v!r}; "
                "use GPU indices (0, 1) or UUIDs ('GPU-...')"
            )
        out.append(str(v).strip())
    return tuple(out)


def load() -> Config:
    """Read the config file(s) and the BERTH_* environment. Raises ConfigError on bad input."""
    cfg = Config()
    merged: dict[str, dict[str, Any]] = {}
    read: list[str] = []
    for path in config_files():
        raw = _read_toml(path)
        if not raw and not os.path.exists(path):
            continue
        _check(path, raw)
        read.append(path)
        for section, values in raw.items():
            merged.setdefault(section, {}).update({k: (path, v) for k, v in values.items()})
    cfg.files = tuple(read)

    def get(section: str, key: str) -> tuple[str, Any] | None:
        return merged.get(section, {}).get(key)

    inv = cfg.inventory
    if (item := get("inventory", "gpus")) is not None:
        path, n = item
        if not 1 <= n <= 1024:
            raise ConfigError(f"config file {path!r}: [inventory] gpus = {n} must be 1 to 1024")
        inv.declared = n
    if (item := get("inventory", "unavailable")) is not None:
        path, values = item
        ids = _ids(path, "unavailable", values)
        if not all(i.isdigit() for i in ids):
            raise ConfigError(f"config file {path!r}: [inventory] unavailable takes indices")
        inv.unavailable = tuple(int(i) for i in ids)
    if (item := get("inventory", "memory")) is not None:
        path, value = item
        try:
            inv.memory = parse_size(value if isinstance(value, str) else str(value))
        except ValueError as e:
            raise ConfigError(f"config file {path!r}: [inventory] memory: {e}") from None
    if (item := get("inventory", "name")) is not None:
        inv.name = item[1]
    if (item := get("inventory", "manage")) is not None:
        inv.manage = _ids(item[0], "manage", item[1])
    if (item := get("inventory", "ban")) is not None:
        inv.ban = _ids(item[0], "ban", item[1])
    if (item := get("inventory", "ban_names")) is not None:
        inv.ban_names = tuple(str(v) for v in item[1])

    for key, attr in (("dir", "claims_dir"), ("admin_group", "admin_group")):
        if (item := get("claims", key)) is not None:
            setattr(cfg, attr, item[1])
    for key in ("socket", "state_dir", "policy", "system_socket", "system_state_dir"):
        if (item := get("daemon", key)) is not None:
            if key.startswith("system_") and not os.path.isabs(item[1]):
                raise ConfigError(
                    f"config file {item[0]!r}: [daemon] {key} = {item[1]!r} must be an "
                    "absolute path"
                )
            setattr(cfg, key, item[1])
    if (item := get("daemon", "poll_interval")) is not None:
        path, value = item
        if not 0 < value <= 3600:
            raise ConfigError(
                f"config file {path!r}: [daemon] poll_interval = {value} must be in (0, 3600]"
            )
        cfg.poll_interval = float(value)
    for key in ("http_anonymous", "http_allow_remote", "private"):
        if (item := get("daemon", key)) is not None:
            setattr(cfg, key, item[1])
    if (item := get("daemon", "http")) is not None:
        from berth.web.bind import parse_bind  # rare: [daemon] http

        path, value = item
        try:
            parse_bind(value, cfg.http_allow_remote)
        except UsageError as e:
            raise ConfigError(f"config file {path!r}: [daemon] {e}") from None
        cfg.http = value
    for key in ("max_job_time", "kill_after", "keep_finished"):
        if (item := get("daemon", key)) is not None:
            path, value = item
            try:
                setattr(cfg, key, parse_duration(value, what=f"[daemon] {key}"))
            except ValueError as e:
                raise ConfigError(f"config file {path!r}: {e}") from None

    _scheduling(cfg, get)

    if (item := get("queue", "backend")) is not None:
        path, value = item
        if value not in ("local", "slurm"):
            raise ConfigError(
                f'config file {path!r}: [queue] backend = {value!r} must be "local" or "slurm"'
            )
        cfg.backend = value
    if (item := get("queue", "requirements")) is not None:
        path, value = item
        value = os.path.expanduser(value)
        if not os.path.isabs(value):  # relative to the config file that names it
            value = os.path.join(os.path.dirname(os.path.abspath(path)), value)
        cfg.requirements = value
    for key in ("partition", "log_dir"):
        if (item := get("slurm", key)) is not None:
            setattr(cfg, f"slurm_{key}", item[1])

    env = os.environ
    cfg.claims_dir = env.get(ENV_CLAIMS_DIR) or cfg.claims_dir
    cfg.state_dir = env.get(ENV_STATE_DIR) or cfg.state_dir
    cfg.socket = env.get(ENV_SOCKET) or cfg.socket
    return cfg


def _scheduling(cfg: Config, get: Callable[[str, str], tuple[str, Any] | None]) -> None:
    """[scheduling] and [limits]."""
    if (item := get("scheduling", "fairshare")) is not None:
        cfg.fairshare = item[1]
    for section, key, attr in (
        ("scheduling", "fairshare_half_life", "fairshare_half_life"),
        ("limits", "max_time", "limit_max_time"),
    ):
        if (item := get(section, key)) is not None:
            path, value = item
            try:
                seconds = parse_duration(value, what=f"[{section}] {key}")
            except ValueError as e:
                raise ConfigError(f"config file {path!r}: {e}") from None
            if not seconds > 0:
                raise ConfigError(f"config file {path!r}: [{section}] {key} must be positive")
            setattr(cfg, attr, None if attr == "limit_max_time" and seconds == INF else seconds)
    if (item := get("limits", "max_gpus")) is not None:
        path, value = item
        if not 0 < value <= 1024:
            raise ConfigError(
                f"config file {path!r}: [limits] max_gpus = {value} must be in (0, 1024]"
            )
        cfg.limit_max_gpus = float(value)
    if (item := get("limits", "max_jobs")) is not None:
        path, value = item
        if not value > 0:
            raise ConfigError(f"config file {path!r}: [limits] max_jobs = {value} must be >= 1")
        cfg.limit_max_jobs = value
    _request_limits(cfg, get)


def _request_limits(cfg: Config, get: Callable[[str, str], tuple[str, Any] | None]) -> None:
    """[limits] max_env_size, max_array_tasks, max_request_jobs: what one request may cost."""
    if (item := get("limits", "max_env_size")) is not None:
        path, value = item
        try:
            size = parse_size(str(value))
        except ValueError as e:
            raise ConfigError(f"config file {path!r}: [limits] max_env_size: {e}") from None
        if not 0 < size <= MAX_REQUEST_SIZE:
            raise ConfigError(
                f"config file {path!r}: [limits] max_env_size = {value!r} must be in (0, 8M]"
            )
        cfg.limit_max_env_size = size
    for key, most in (("max_array_tasks", 10_000), ("max_request_jobs", 1_000_000)):
        if (item := get("limits", key)) is not None:
            path, value = item
            if not 1 <= value <= most:
                raise ConfigError(
                    f"config file {path!r}: [limits] {key} = {value} must be 1 to {most}"
                )
            setattr(cfg, f"limit_{key}", value)


DEFAULT_MAX_JOBS = 50_000  # [limits] max_jobs when the config gives none
MAX_REQUEST_SIZE = 8 * 1024 * 1024  # (a request frame's most: berth.wire.protocol)
INF = float("inf")
_cached: Config | None = None


def get() -> Config:
    """The configuration of this process, loaded once."""
    global _cached
    if _cached is None:
        _cached = load()
    return _cached


def reset() -> None:
    """Forget the cached configuration (tests change BERTH_* variables)."""
    global _cached
    _cached = None
