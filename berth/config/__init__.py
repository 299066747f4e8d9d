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
- ``BERTH_PTS_DIR``: where the daemon finds users' terminals (default /dev/pts)
"""

# Each key is declared once, as a Key (berth.config.key) on its class (Inventory, Config): its [section], name, TOML types, default, check and line in `berth help config`'s example.

from __future__ import annotations

import os

from berth.config import notify as config_notify
from berth.config import projects as config_projects
from berth.config.enforce import Enforce, isolate_mode
from berth.config.key import At, Key, example, keys_of, set_defaults, sized
from berth.errors import ConfigError, UsageError
from berth.units import KILL_AFTER, parse_bind, parse_duration, parse_size

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TypeVar

    from berth.config.key import Check, SoFar

    T = TypeVar("T")

SYSTEM_CONFIG = "/etc/berth/config.toml"
ENV_CONFIG = "BERTH_CONFIG"
ENV_CLAIMS_DIR = "BERTH_CLAIMS_DIR"
ENV_STATE_DIR = "BERTH_STATE_DIR"
ENV_SOCKET = "BERTH_SOCKET"

_TYPE_NAMES = {int: "an integer", float: "a number", str: "a string", list: "a list", bool: "true or false"}  # fmt: skip
_DURATION = (str, int, float)
INF = float("inf")


# -- checks, each with its message --------------------------------------------------------------


def _bounded(ok: Callable[[float], bool], says: str, kind: Callable[[Any], T]) -> Check[T]:
    """A number's check: ``ok`` or "[section] key = value must be ``says``"."""

    def check(value: float, at: At, cfg: SoFar) -> T:
        if not ok(value):
            raise at.fail(f"[{at.section}] {at.key} = {value} must be {says}")
        return kind(value)

    return check


def _ids(value: list[Any], at: At, cfg: SoFar) -> tuple[str, ...]:
    out = []
    for v in value:
        if isinstance(v, bool) or not isinstance(v, (int, str)) or (isinstance(v, int) and v < 0):
            raise at.fail(
                f"[inventory] {at.key} has {v!r}; use GPU indices (0, 1) or UUIDs ('GPU-...')"
            )
        out.append(str(v).strip())
    return tuple(out)


def _indices(value: list[Any], at: At, cfg: SoFar) -> tuple[int, ...]:
    ids = _ids(value, at, cfg)
    if not all(i.isdigit() for i in ids):
        raise at.fail(f"[inventory] {at.key} takes indices")
    return tuple(int(i) for i in ids)


DEFAULT_MAX_JOBS = 50_000  # [limits] max_jobs when the config gives none
MAX_REQUEST_SIZE = 8 * 1024 * 1024  # (a request frame's most: berth.wire.protocol)


_env_size = sized(1, MAX_REQUEST_SIZE, "(0, 8M]")  # (at most a request frame: wire.protocol)


def _size(value: str | int, at: At, cfg: SoFar) -> int | None:
    try:
        return parse_size(value if isinstance(value, str) else str(value))
    except ValueError as e:
        raise at.fail(f"[inventory] {at.key}: {e}") from None


def _absolute(value: str, at: At, cfg: SoFar) -> str | None:
    if not os.path.isabs(value):
        raise at.fail(f"[{at.section}] {at.key} = {value!r} must be an absolute path")
    return value


def _bind(value: str, at: At, cfg: SoFar) -> str | None:
    try:  # (a late key: http_allow_remote is read already)
        parse_bind(value, cfg.http_allow_remote)
    except UsageError as e:
        raise at.fail(f"[daemon] {e}") from None
    return value


ON_TIME_LIMIT = ("end", "requeue")


def _on_time_limit(value: str, at: At, cfg: SoFar) -> str:
    if value not in ON_TIME_LIMIT:
        raise at.fail(f'[{at.section}] {at.key} = {value!r} must be "end" or "requeue"')
    return value


def _duration(value: str | float, at: At, cfg: SoFar) -> float:
    try:
        return parse_duration(value, what=f"[{at.section}] {at.key}")
    except ValueError as e:
        raise at.fail(str(e)) from None


def _positive(value: str | float, at: At, cfg: SoFar) -> float:
    seconds = _duration(value, at, cfg)
    if not seconds > 0:
        raise at.fail(f"[{at.section}] {at.key} must be positive")
    return seconds


def _limit_time(value: str | float, at: At, cfg: SoFar) -> float | None:
    seconds = _positive(value, at, cfg)
    return None if seconds == INF else seconds


def _backend(value: str, at: At, cfg: SoFar) -> str:
    if value not in ("local", "slurm"):
        raise at.fail(f'[queue] backend = {value!r} must be "local" or "slurm"')
    return value


def _beside(value: str, at: At, cfg: SoFar) -> str | None:
    value = os.path.expanduser(value)
    if not os.path.isabs(value):  # relative to the config file that names it
        value = os.path.join(os.path.dirname(os.path.abspath(at.path)), value)
    return value


def _names(value: list[Any], at: At, cfg: SoFar) -> tuple[str, ...]:
    return tuple(str(v) for v in value)


# -- the keys -----------------------------------------------------------------------------------


class Inventory:
    """What GPUs berth manages: declared logical GPUs, or NVML's restricted by manage/ban."""

    # fmt: off
    declared = Key[int | None]("inventory", (int,), None, _bounded(lambda n: 1 <= n <= 1024, "1 to 1024", int), "5", "GPUs 0..4", name="gpus",
        before="Declare logical GPUs instead of reading NVML (machines without a driver, tests, "
        "demos):")
    unavailable = Key[tuple[int, ...]]("inventory", (list,), (), _indices, "[3, 4]", "as scheduler.py's `--init 5 3 4`")
    memory = Key[int | None]("inventory", (str, int), None, _size, '"80G"',
        "memory of each logical GPU, so `--mem` shares can be checked")
    name = Key("inventory", (str,), "logical GPU", None, '"A100"',
        'what the declared GPUs are called (default "logical GPU")')
    manage = Key[tuple[str, ...] | None]("inventory", (list,), None, _ids, "[0, 1, 2, 3]",
        "only these (default: all)",
        before="With NVML: manage only some GPUs, and ban others (by index or UUID) or by name.")
    ban = Key[tuple[str, ...]]("inventory", (list,), (), _ids, '["GPU-8e4c..."]', "never these")
    ban_names = Key[tuple[str, ...]]("inventory", (list,), (), _names, '["K80"]', "never GPUs so named")
    # fmt: on

    def __init__(self, **values: Any) -> None:
        set_defaults(self, values)

    def is_banned(self, index: int, uuid: str, name: str) -> str | None:
        """Why this GPU is not managed by berth (a short reason), or None."""
        if self.manage is not None and str(index) not in self.manage and uuid not in self.manage:
            return "not in inventory.manage"
        if str(index) in self.ban or uuid in self.ban:
            return "banned in config (inventory.ban)"
        if index in self.unavailable:  # (by index, declared GPUs or NVML's alike)
            if self.declared is not None:
                return "declared unavailable (inventory.unavailable)"
            return "unavailable in config (inventory.unavailable)"
        for banned in self.ban_names:
            if banned.lower() in name.lower():
                return f"name matches banned {banned!r} (inventory.ban_names)"
        return None


class Config:
    """The merged configuration. Build with :func:`load`."""

    # fmt: off
    claims_dir = Key[str | None]("claims", (str,), None, None, '"/run/berth"',
        "the claim ledger, shared by every user of the host", name="dir")
    admin_group = Key[str | None]("claims", (str,), None, None, '"gpuadmin"',
        "members may `berth release` others' claims (root always may)")
    socket = Key[str | None]("daemon", (str,), None, None, '"/home/me/berth.sock"',
        "a user's own daemon (default $XDG_RUNTIME_DIR/berth)")
    state_dir = Key[str | None]("daemon", (str,), None, None, '"/home/me/.berth"',
        "... and its state (default ~/.local/state/berth)")
    system_socket = Key[str | None]("daemon", (str,), None, _absolute, '"/run/berth/berth.sock"',
        "the system daemon's (berth daemon --system)")
    system_state_dir = Key[str | None]("daemon", (str,), None, _absolute, '"/var/lib/berth"',
        "... and its state (docs/admin.md)")
    private = Key("daemon", (bool,), False, None, "false",
        "true: others' commands and paths are hidden (but from admins)")
    poll_interval = Key("daemon", (int, float), 5.0, _bounded(lambda s: 0 < s <= 3600, "in (0, 3600]", float), "5",
        "seconds between NVML polls (only to see what others do)")
    policy = Key[str | None]("daemon", (str,), None, None, '"guarded"',
        "scheduling policy (berth help daemon lists them)")
    max_job_time = Key[float | None]("daemon", _DURATION, None, _duration, '"24h"',
        "every job stops there; a longer -t is refused at submit")
    on_time_limit = Key("daemon", (str,), "end", _on_time_limit, '"requeue"',
        'what a time limit does to a job that gave no --requeue/--no-requeue: "end" it (TIMEOUT), or "requeue" it at the end of the queue (mgpu_srun\'s context switch)')
    max_requeues = Key[int | None]("daemon", (int,), None, _bounded(lambda n: n >= 0, ">= 0", int), "3",
        "how many times a time limit requeues a job at most (default: no end)")
    isolate_devices = Key[bool | str]("daemon", (bool, str), False, isolate_mode, "true",
        'a job may open only its own GPUs\' /dev/nvidiaN (Slurm\'s ConstrainDevices; "required": refuse to start where it cannot be enforced; docs/admin.md)')
    kill_after = Key("daemon", _DURATION, KILL_AFTER, _duration, '"30s"',
        "grace between SIGTERM and SIGKILL at a time limit or cancel")
    keep_finished = Key("daemon", _DURATION, 30 * 86400.0, _duration, '"30d"',
        'records of finished jobs, then purged ("inf": keep all)')
    http = Key[str | None]("daemon", (str,), None, _bind, '"127.0.0.1:8765"',
        "serve the web dashboard and /metrics there (default: off)", late=True)
    web_token_ttl = Key("daemon", _DURATION, 12 * 3600.0, _positive, '"12h"', "a dashboard token (berth web-token) expires this long after it was made")
    http_anonymous = Key("daemon", (bool,), True, None, "true", "viewers without a token may read (false: sign in to view)")
    http_allow_remote = Key("daemon", (bool,), False, None, "false", "allow a non-loopback http address (plain HTTP: use a TLS proxy)")
    usage_flush = Key("daemon", _DURATION, 60.0, _positive, '"1m"', "how often the dashboard stores what it sampled for `berth report` (a crash loses at most this much)")
    supervisor_grace = Key("daemon", _DURATION, 5.0, _positive, '"5s"', "how late a job's supervisor (stopped by its user) may be with a time limit or a cancel before the daemon continues it (SIGCONT) and orders the end again")
    supervisor_last_chance = Key("daemon", _DURATION, 3.0, _positive, '"3s"', "... and then how long before the daemon kills it and every process of the job")
    handshake_timeout = Key("daemon", _DURATION, 10.0, _positive, '"10s"', "a connection to the daemon's socket that has not said hello by then is closed")
    fairshare = Key("scheduling", (bool,), True, None, "true",
        "order users by their decayed GPU usage (docs/scheduling.md)")
    predict = Key("scheduling", (bool,), False, None, "true", "backfill by run times learned from finished jobs where a job gives no time limit (docs/scheduling.md)")
    fairshare_half_life = Key("scheduling", _DURATION, 7 * 86400.0, _positive, '"7d"',
        'a GPU-hour counts half as much a half-life later ("inf": never)')
    require_project = Key("scheduling", (bool,), False, None, "false",
        "true: a job must name a project (--project; docs/admin.md \"Projects\")")
    default_project = Key[str | None]("scheduling", (str,), None, config_projects.default_project, '"general"',
        "the project of a job that names none", late=True)
    outside_max_memory = Key[float | None]("scheduling", (int, float), None, _bounded(lambda v: 0 <= v <= 1, "a fraction in [0, 1]", float), "0.25",
        "outside use (processes outside berth) up to this fraction of a GPU's memory leaves it to berth's jobs (default: any outside process makes the GPU busy; the GPU Job Scheduler's --mem-threshold)")
    outside_max_util = Key[float | None]("scheduling", (int, float), None, _bounded(lambda v: 0 <= v <= 100, "a percentage in [0, 100]", float), "20",
        "... and up to this utilisation % (both must hold; the GPU Job Scheduler's --load-threshold)")
    limit_max_gpus = Key[float | None]("limits", (int, float), None, _bounded(lambda n: 0 < n <= 1024, "in (0, 1024]", float), "4",
        "GPUs a user may hold at once (more wait: UserGpuLimit)", name="max_gpus")
    limit_cpu_slots = Key[int | None]("limits", (int,), None, _bounded(lambda n: 0 < n <= 1_000_000, ">= 1", int), "8",
        "CPU-only jobs (-g 0) running at once (more wait: Resources; default: the host's cores)", name="cpu_slots")
    limit_max_jobs = Key[int | None]("limits", (int,), DEFAULT_MAX_JOBS, _bounded(lambda n: n > 0, ">= 1", int), "200",
        "jobs a user may have queued or running (more are refused; default 50000)", name="max_jobs")
    limit_max_env_size = Key("limits", (str, int), 256 * 1024, _env_size, '"256K"',
        "a job's environment (--export) and setup text, in bytes", name="max_env_size")
    limit_max_job_bytes = Key("limits", (str, int), 256 * 1024, _env_size, '"256K"', "a job's whole size: command, environment, setup, options (at most 8M)", name="max_job_bytes")
    limit_max_user_bytes = Key("limits", (str, int), 256 * 1024 * 1024, sized(MAX_REQUEST_SIZE, 1 << 40, "[8M, 1T]"), '"256M"', "what one user's unfinished jobs may keep in the daemon's store", name="max_user_bytes")
    limit_max_array_tasks = Key("limits", (int,), 10_000, _bounded(lambda n: 1 <= n <= 10_000, "1 to 10000", int), "10000",
        "tasks of one --array (10000 at most)", name="max_array_tasks")
    limit_max_request_jobs = Key("limits", (int,), 10_000, _bounded(lambda n: 1 <= n <= 1_000_000, "1 to 1000000", int), "10000",
        "jobs one submit may queue (a jobs file, arrays' tasks)", name="max_request_jobs")
    limit_max_time = Key[float | None]("limits", _DURATION, None, _limit_time, '"2d"',
        "the longest -t a user may ask (a job without -t gets it)", name="max_time")
    backend = Key("queue", (str,), "local", _backend, '"slurm"',
        'submit/queue/show/cancel/logs go to Slurm (default "local")')
    requirements = Key[str | None]("queue", (str,), None, _beside, '"~/llm_config.json"',
        "GPUs per --llm model for `berth submit`")
    slurm_partition = Key[str | None]("slurm", (str,), None, None, '"gpu"',
        "sbatch -p (default: the cluster's default partition)", name="partition")
    slurm_log_dir = Key[str | None]("slurm", (str,), None, None, '"/shared/me/berth"',
        "logs and batch scripts (default <state dir>/slurm)", name="log_dir")
    # fmt: on

    def __init__(self) -> None:
        set_defaults(self, {})
        self.files: tuple[str, ...] = ()
        self.inventory = Inventory()
        self.enforce = Enforce()  # [enforce] (berth.config.enforce)
        self.projects: dict[str, config_projects.Project] = {}  # [projects.NAME] tables
        self.notify = config_notify.Notify()  # [[notify.webhooks]], [notify.mail]


KEYS: list[Key[Any]] = [*keys_of(Inventory), *keys_of(Config), *keys_of(Enforce)]
SECTIONS: dict[str, dict[str, Key[Any]]] = {}
for _key in KEYS:
    SECTIONS.setdefault(_key.section, {})[_key.name] = _key
__doc__ = f"{__doc__}\n{example(SECTIONS, config_projects.EXAMPLE + config_notify.EXAMPLE)}"


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
    from berth.config import toml as config_toml  # rare: a config file exists

    return config_toml.parse(path, data)


def _check(path: str, raw: dict[str, Any]) -> None:
    """Every section and key known, every value of a type its key takes."""
    for section, values in raw.items():
        if section == "projects":  # (its own tables: berth.config.projects)
            config_projects.read(path, values)
            continue
        if section == "notify":  # (its own tables: berth.config.notify)
            config_notify.read(path, values)
            continue
        keys = SECTIONS.get(section)
        if keys is None or not isinstance(values, dict):
            known = ", ".join(f"[{s}]" for s in [*SECTIONS, "projects", "notify"])
            raise ConfigError(
                f"config file {path!r}: unknown section [{section}]; known sections: {known}"
            )
        for name, value in values.items():
            key = keys.get(name)
            if key is None:
                raise ConfigError(
                    f"config file {path!r}: unknown key {name!r} in [{section}]; "
                    f"known: {', '.join(keys)}"
                )
            types = key.types
            if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
                want = " or ".join(_TYPE_NAMES[t] for t in types)
                raise ConfigError(
                    f"config file {path!r}: [{section}] {name} = {value!r} must be {want}"
                )


def load() -> Config:
    """Read the config file(s) and the BERTH_* environment. Raises ConfigError on bad input."""
    cfg = Config()
    merged: dict[tuple[str, str], tuple[str, Any]] = {}  # (section, key) -> (file, value)
    read: list[str] = []
    for path in config_files():
        raw = _read_toml(path)
        if not raw and not os.path.exists(path):
            continue
        _check(path, raw)
        read.append(path)
        for section, values in raw.items():
            if section == "projects":  # (a later file's table replaces an earlier one's)
                cfg.projects.update(config_projects.read(path, values))
                continue
            if section == "notify":  # (a later file's [notify] replaces an earlier one's)
                cfg.notify = config_notify.read(path, values)
                continue
            merged.update({(section, k): (path, v) for k, v in values.items()})
    cfg.files = tuple(read)
    for key in sorted(KEYS, key=lambda k: k.late):  # (a late key's check reads the others)
        if (item := merged.get((key.section, key.name))) is not None:
            path, value = item
            if key.convert is not None:
                value = key.convert(value, At(path, key.section, key.name), cfg)
            held = {"inventory": cfg.inventory, "enforce": cfg.enforce}.get(key.section, cfg)
            setattr(held, key.attr, value)
    env = os.environ
    cfg.claims_dir = env.get(ENV_CLAIMS_DIR) or cfg.claims_dir
    cfg.state_dir = env.get(ENV_STATE_DIR) or cfg.state_dir
    cfg.socket = env.get(ENV_SOCKET) or cfg.socket
    return cfg


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
