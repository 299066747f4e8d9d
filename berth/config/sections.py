"""The config's keys but those of ``[inventory]`` (:mod:`berth.config.inventory`) and
``[enforce]`` (:mod:`berth.config.enforce`): ``[claims]``, ``[daemon]``, ``[scheduling]``,
``[limits]``, ``[queue]`` and ``[slurm]``, each declared once as an attribute of
:class:`Config` (:class:`berth.config.key.Key`), with its check. :class:`Config` also holds
the sections of their own (inventory, enforce, projects, notify); :mod:`berth.config` reads
the files into it.
"""

from __future__ import annotations

import os

from berth.config import notify as config_notify
from berth.config import projects as config_projects
from berth.config.enforce import Enforce, isolate_mode
from berth.config.inventory import Inventory
from berth.config.key import Key, bounded, set_defaults, sized
from berth.errors import UsageError
from berth.units import KILL_AFTER, MAX_TIME_LIMIT, parse_bind, parse_duration

TYPE_CHECKING = False
if TYPE_CHECKING:
    from berth.config.key import At, SoFar

_DURATION = (str, int, float)
INF = float("inf")


DEFAULT_MAX_JOBS = 50_000  # [limits] max_jobs when the config gives none
MAX_REQUEST_SIZE = 8 * 1024 * 1024  # (a request frame's most: berth.wire.protocol)


_env_size = sized(1, MAX_REQUEST_SIZE, "(0, 8M]")  # (at most a request frame: wire.protocol)


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
        raise at.fail(f"[{at.section}] {at.key} = {value!r} must be positive")
    return seconds


def _limit_time(value: str | float, at: At, cfg: SoFar) -> float | None:
    """A job's longest time: positive, at most what a job may ask; "inf": none (None)."""
    seconds = _positive(value, at, cfg)
    if seconds != INF and seconds > MAX_TIME_LIMIT:
        raise at.fail(
            f"[{at.section}] {at.key} = {value!r} must be at most "
            f'{MAX_TIME_LIMIT / 86400:.0f} days (a job\'s longest -t); "inf" for no limit'
        )
    return None if seconds == INF else seconds


def _grace(value: str | float, at: At, cfg: SoFar) -> float:
    """kill_after: above 0 (0 was taken as the default) and finite (a job that ignores SIGTERM
    would keep its GPUs for ever)."""
    seconds = _positive(value, at, cfg)
    if seconds == INF:
        raise at.fail(
            f"[{at.section}] {at.key} = {value!r} must be finite: a job that ignores SIGTERM "
            "would keep its GPUs for ever"
        )
    return seconds


def _path(value: str, at: At, cfg: SoFar) -> str | None:
    """A path each process reads alike: absolute, or from ``~`` (expanded here)."""
    if not value.strip():
        raise at.fail(
            f"[{at.section}] {at.key} = '' names no path: give one, or leave the key out for "
            "the default"
        )
    path = os.path.expanduser(value)
    if not os.path.isabs(path):
        raise at.fail(
            f"[{at.section}] {at.key} = {value!r} must be an absolute path (or start with ~/): "
            "a relative one is another place from each directory"
        )
    return path


def _word(value: str, at: At, cfg: SoFar) -> str | None:
    """A name that is not empty (an empty one would silently mean the default)."""
    if not value.strip():
        raise at.fail(f"[{at.section}] {at.key} = '' is empty: give one, or leave the key out")
    return value


def _backend(value: str, at: At, cfg: SoFar) -> str:
    if value not in ("local", "slurm"):
        raise at.fail(f'[queue] backend = {value!r} must be "local" or "slurm"')
    return value


def _beside(value: str, at: At, cfg: SoFar) -> str | None:
    if not value.strip():  # (it named the config file's directory)
        raise at.fail(f"[{at.section}] {at.key} = '' names no file: give one, or leave it out")
    value = os.path.expanduser(value)
    if not os.path.isabs(value):  # relative to the config file that names it
        value = os.path.join(os.path.dirname(os.path.abspath(at.path)), value)
    return value


class Config:
    """The merged configuration. Build with :func:`load`."""

    # fmt: off
    claims_dir = Key[str | None]("claims", (str,), None, _path, '"/run/berth"',
        "the claim ledger, shared by every user of the host", name="dir")
    admin_group = Key[str | None]("claims", (str,), None, _word, '"gpuadmin"',
        "members may `berth release` others' claims (root always may)")
    socket = Key[str | None]("daemon", (str,), None, _path, '"/home/me/berth.sock"',
        "a user's own daemon (default $XDG_RUNTIME_DIR/berth)")
    state_dir = Key[str | None]("daemon", (str,), None, _path, '"/home/me/.berth"',
        "... and its state (default ~/.local/state/berth)")
    system_socket = Key[str | None]("daemon", (str,), None, _absolute, '"/run/berth/berth.sock"',
        "the system daemon's (berth daemon --system)")
    system_state_dir = Key[str | None]("daemon", (str,), None, _absolute, '"/var/lib/berth"',
        "... and its state (docs/admin.md)")
    private = Key("daemon", (bool,), False, None, "false",
        "true: others' commands and paths are hidden (but from admins)")
    poll_interval = Key("daemon", (int, float), 5.0, bounded(lambda s: 0 < s <= 3600, "in (0, 3600]", float), "5",
        "seconds between NVML polls (only to see what others do)")
    policy = Key[str | None]("daemon", (str,), None, _word, '"guarded"',
        "scheduling policy (berth help daemon lists them)")
    max_job_time = Key[float | None]("daemon", _DURATION, None, _limit_time, '"24h"',
        "every job stops there; a longer -t is refused at submit")
    on_time_limit = Key("daemon", (str,), "end", _on_time_limit, '"requeue"',
        'what a time limit does to a job that gave no --requeue/--no-requeue: "end" it (TIMEOUT), or "requeue" it at the end of the queue (mgpu_srun\'s context switch)')
    max_requeues = Key[int | None]("daemon", (int,), None, bounded(lambda n: n >= 0, ">= 0", int), "3",
        "how many times a time limit requeues a job at most (default: no end)")
    isolate_devices = Key[bool | str]("daemon", (bool, str), False, isolate_mode, "true",
        'a job may open only its own GPUs\' /dev/nvidiaN (Slurm\'s ConstrainDevices; "required": refuse to start where it cannot be enforced; docs/admin.md)')
    kill_after = Key("daemon", _DURATION, KILL_AFTER, _grace, '"30s"',
        "grace between SIGTERM and SIGKILL at a time limit or cancel")
    keep_finished = Key("daemon", _DURATION, 30 * 86400.0, _positive, '"30d"',
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
    outside_max_memory = Key[float | None]("scheduling", (int, float), None, bounded(lambda v: 0 <= v <= 1, "a fraction in [0, 1]", float), "0.25",
        "outside use (processes outside berth) up to this fraction of a GPU's memory leaves it to berth's jobs (default: any outside process makes the GPU busy; the GPU Job Scheduler's --mem-threshold)")
    outside_max_util = Key[float | None]("scheduling", (int, float), None, bounded(lambda v: 0 <= v <= 100, "a percentage in [0, 100]", float), "20",
        "... and up to this utilisation % (both must hold; the GPU Job Scheduler's --load-threshold)")
    limit_max_gpus = Key[float | None]("limits", (int, float), None, bounded(lambda n: 0 < n <= 1024, "in (0, 1024]", float), "4",
        "GPUs a user may hold at once (more wait: UserGpuLimit)", name="max_gpus")
    limit_cpu_slots = Key[int | None]("limits", (int,), None, bounded(lambda n: 0 < n <= 1_000_000, ">= 1", int), "8",
        "CPU-only jobs (-g 0) running at once (more wait: Resources; default: the host's cores)", name="cpu_slots")
    limit_max_jobs = Key[int | None]("limits", (int,), DEFAULT_MAX_JOBS, bounded(lambda n: n > 0, ">= 1", int), "200",
        "jobs a user may have queued or running (more are refused; default 50000)", name="max_jobs")
    limit_max_env_size = Key("limits", (str, int), 256 * 1024, _env_size, '"256K"',
        "a job's environment (--export) and setup text, in bytes", name="max_env_size")
    limit_max_job_bytes = Key("limits", (str, int), 256 * 1024, _env_size, '"256K"', "a job's whole size: command, environment, setup, options (at most 8M)", name="max_job_bytes")
    limit_max_user_bytes = Key("limits", (str, int), 256 * 1024 * 1024, sized(MAX_REQUEST_SIZE, 1 << 40, "[8M, 1T]"), '"256M"', "what one user's unfinished jobs may keep in the daemon's store", name="max_user_bytes")
    limit_max_array_tasks = Key("limits", (int,), 10_000, bounded(lambda n: 1 <= n <= 10_000, "1 to 10000", int), "10000",
        "tasks of one --array (10000 at most)", name="max_array_tasks")
    limit_max_request_jobs = Key("limits", (int,), 10_000, bounded(lambda n: 1 <= n <= 1_000_000, "1 to 1000000", int), "10000",
        "jobs one submit may queue (a jobs file, arrays' tasks)", name="max_request_jobs")
    limit_max_time = Key[float | None]("limits", _DURATION, None, _limit_time, '"2d"',
        "the longest -t a user may ask (a job without -t gets it)", name="max_time")
    backend = Key("queue", (str,), "local", _backend, '"slurm"',
        'submit/queue/show/cancel/logs go to Slurm (default "local")')
    requirements = Key[str | None]("queue", (str,), None, _beside, '"~/llm_config.json"',
        "GPUs per --llm model for `berth submit`")
    slurm_partition = Key[str | None]("slurm", (str,), None, _word, '"gpu"',
        "sbatch -p (default: the cluster's default partition)", name="partition")
    slurm_log_dir = Key[str | None]("slurm", (str,), None, _path, '"/shared/me/berth"',
        "logs and batch scripts (default <state dir>/slurm)", name="log_dir")
    # fmt: on

    def __init__(self) -> None:
        set_defaults(self, {})
        self.files: tuple[str, ...] = ()
        self.inventory = Inventory()
        self.enforce = Enforce()  # [enforce] (berth.config.enforce)
        self.projects: dict[str, config_projects.Project] = {}  # [projects.NAME] tables
        self.notify = config_notify.Notify()  # [[notify.webhooks]], [notify.mail]
