"""Examples:

  berth daemon                      # start in the background; prints its pid and socket
  berth daemon --foreground         # stay attached, log to the terminal
  berth daemon --max-job-time 24h --kill-after 60   # or, for every start: [daemon] max_job_time
  berth daemon --paused-after-crash # after an unclean stop, start nothing until `berth resume --all`
  berth daemon --stop               # stop it; running jobs keep running and are adopted later
  berth daemon --exit-with $$       # stop it when this shell exits (a session's own queue)
  berth daemon --inside-slurm --exit-with $$   # a queue on the GPUs of this Slurm allocation
  berth daemon --http               # also serve the dashboard on http://127.0.0.1:8765/
                                    # (:865 for the system daemon)
  berth daemon --http 127.0.0.1:9000 --http-no-anonymous   # sign in (berth web-token) to view
  sudo berth daemon --system        # the machine's daemon, for every user (docs/admin.md)
  sudo berth daemon --system --stop

A user's own daemon: the socket is $BERTH_SOCKET, else [daemon] socket in the config, else
$XDG_RUNTIME_DIR/berth/daemon.sock (or /tmp/berth-UID/daemon.sock); state (database, job logs)
in $BERTH_STATE_DIR, else [daemon] state_dir, else $XDG_STATE_HOME/berth. It runs its user's
jobs only.

The system daemon (--system, as root; systemd unit in contrib/systemd): every local user may
submit to it, and each job runs as its submitter (their uid, gid, groups, umask, environment).
Socket [daemon] system_socket, else /run/berth/berth.sock (mode 0666: the kernel tells the
daemon who connects); state [daemon] system_state_dir, else /var/lib/berth, with each user's
default logs in /var/lib/berth/logs/USER (theirs, mode 0700). Clients use it when the user
runs no daemon of their own. --private hides others' commands and paths from non-admins.
"""

from __future__ import annotations

import json
import os
import sys

from berth import config
from berth.client import Client
from berth.daemon.options import Options
from berth.devices import config_notes
from berth.errors import BerthError, ConfigError, UsageError
from berth.units import MAX_TIME_LIMIT, NO_LIMIT, default_http_port, parse_bind, parse_duration
from berth.wire.paths import SYSTEM_STATE_DIR, socket_path, state_dir, system_socket

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse

    from berth.config import Config


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--socket", help="UNIX socket to serve on")
    p.add_argument("--state-dir", help="directory for the database and job logs")
    p.add_argument(
        "--policy",
        help="scheduling policy: guarded (default: priority, then the overdue job, then smallest"
        " GPU-area, backfill), balanced, priority, fifo, fifo-backfill, sjf, fairshare",
    )
    p.add_argument(
        "--max-job-time",
        help="time limit of every job, e.g. 24h or 1-00:00:00 (a longer -t is refused at submit;"
        " default [daemon] max_job_time in the config, else none)",
    )
    p.add_argument(
        "--on-time-limit",
        choices=("end", "requeue"),
        help="what a time limit does to a job that gave no --requeue/--no-requeue: end it "
        "(TIMEOUT, the default) or requeue it at the end of the queue (mgpu_srun's context "
        "switch); [daemon] on_time_limit",
    )
    p.add_argument(
        "--max-requeues",
        type=int,
        metavar="N",
        help="requeue a job at most N times at its time limit (default: no end); "
        "[daemon] max_requeues",
    )
    p.add_argument("--kill-after", help="grace between SIGTERM and SIGKILL (default 30s)")
    p.add_argument(
        "--keep-finished",
        metavar="T",
        help="keep records of finished jobs this long, e.g. 30d (default), 1y, inf",
    )
    p.add_argument("--poll-interval", help="seconds between NVML polls (default 5)")
    p.add_argument(
        "--paused-after-crash",
        action="store_true",
        help="after an unclean stop, start no queued job until `berth resume --all`",
    )
    p.add_argument("--foreground", action="store_true", help="do not detach; log to stderr")
    p.add_argument(
        "--exit-with", metavar="PID", type=int, help="stop when process PID exits (as --stop)"
    )
    p.add_argument(
        "--inside-slurm",
        action="store_true",
        help="manage only this Slurm allocation's GPUs (docs/slurm.md)",
    )
    p.add_argument(
        "--http",
        nargs="?",
        const="127.0.0.1",
        metavar="ADDR",
        help="serve the web dashboard and /metrics on ADDR (default 127.0.0.1:865 for the "
        "system daemon, 127.0.0.1:8765 for a user's; loopback only unless --http-allow-remote; "
        "[daemon] http)",
    )
    p.add_argument(
        "--http-no-anonymous",
        action="store_true",
        help="viewers need a token (berth web-token) to read the dashboard too",
    )
    p.add_argument(
        "--http-allow-remote",
        action="store_true",
        help="allow a non-loopback --http address (plain HTTP: put a TLS proxy in front)",
    )
    p.add_argument(
        "--system",
        action="store_true",
        help="the machine's daemon, for every local user (root only; docs/admin.md)",
    )
    p.add_argument(
        "--private",
        action="store_true",
        help="hide other users' commands and paths from non-admins ([daemon] private)",
    )
    p.add_argument("--stop", action="store_true", help="stop the running daemon")
    p.add_argument("--json", action="store_true", help="machine-readable output")


def _times(args: argparse.Namespace, cfg: Config) -> tuple[float | None, float, float]:
    """--max-job-time, --kill-after, --keep-finished, else the config's keys; a flag's value
    checked as its key is (0 meant none, the default 30s and keep for ever)."""
    max_job_time = cfg.max_job_time
    if args.max_job_time:
        max_job_time = parse_duration(args.max_job_time, what="--max-job-time")
        if not (
            0 < max_job_time <= MAX_TIME_LIMIT or args.max_job_time.strip().lower() in NO_LIMIT
        ):
            raise UsageError(
                f"invalid --max-job-time {args.max_job_time!r}: above 0 and at most 366 days "
                "(inf: none)"
            )
    kill_after = cfg.kill_after
    if args.kill_after:
        kill_after = parse_duration(args.kill_after, what="--kill-after")
        if not 0 < kill_after < float("inf"):
            raise UsageError(
                f"invalid --kill-after {args.kill_after!r}: give a finite time above 0"
            )
    keep = cfg.keep_finished
    if getattr(args, "keep_finished", None):
        keep = parse_duration(args.keep_finished, what="--keep-finished")
        if not keep > 0:
            raise UsageError(f"invalid --keep-finished {args.keep_finished!r}: give a time above 0")
    return max_job_time, kill_after, keep


def _options(args: argparse.Namespace) -> tuple[object, object]:
    cfg = config.get()
    system = bool(getattr(args, "system", False))
    if system:
        _check_system(args)
    max_job_time, kill_after, keep = _times(args, cfg)
    poll = cfg.poll_interval
    if args.poll_interval:
        poll = parse_duration(args.poll_interval, what="--poll-interval")
        if not 0 < poll <= 3600:
            raise UsageError(f"invalid --poll-interval {args.poll_interval!r}: use 0.1 to 3600")
    if getattr(args, "http_allow_remote", False):
        cfg.http_allow_remote = True
    if getattr(args, "http_no_anonymous", False):
        cfg.http_anonymous = False
    if getattr(args, "http", None):
        cfg.http = args.http
    if cfg.http:
        parse_bind(cfg.http, cfg.http_allow_remote)  # (a bad address fails here, clearly)
    policy = args.policy or cfg.policy
    if policy:
        from berth.core.policy import check_policy  # heavy (the scheduler); rare: --policy

        try:
            check_policy(str(policy))
        except UsageError as e:
            if args.policy:
                raise
            raise ConfigError(f"config {', '.join(cfg.files)}: [daemon] policy: {e}") from None
    exit_with = getattr(args, "exit_with", None)
    if exit_with is not None:
        try:
            os.close(os.pidfd_open(exit_with))
        except (OSError, ValueError, OverflowError):
            raise UsageError(
                f"invalid --exit-with {exit_with}: no such process; give the pid of a live one"
            ) from None
    if system:
        sock = args.socket or system_socket(cfg.system_socket)
        state = args.state_dir or cfg.system_state_dir or SYSTEM_STATE_DIR
    else:
        sock = args.socket or socket_path(cfg.socket)
        state = args.state_dir or state_dir(cfg.state_dir)
    if os.path.lexists(state) and not os.path.isdir(state):
        raise UsageError(
            f"the daemon's state directory {state!r} exists and is not a directory: remove or "
            "rename it, or give another (--state-dir, $BERTH_STATE_DIR, [daemon] state_dir)"
        )
    opts = Options(
        os.path.abspath(sock),
        os.path.abspath(state),
        policy=args.policy or cfg.policy,
        max_job_time=max_job_time if max_job_time and max_job_time != float("inf") else None,
        on_time_limit=args.on_time_limit or cfg.on_time_limit,
        max_requeues=_max_requeues(args.max_requeues, cfg.max_requeues),
        kill_after=kill_after,
        poll_interval=poll,
        paused_after_crash=args.paused_after_crash,
        foreground=args.foreground,
        exit_with=exit_with,
        keep_finished=keep,
        system=system,
        private=bool(getattr(args, "private", False)) or cfg.private,
        admin_group=cfg.admin_group,
        cpu_slots=cfg.limit_cpu_slots,
    )
    return opts, cfg


def _max_requeues(given: int | None, configured: int | None) -> int | None:
    if given is not None and given < 0:
        raise UsageError(f"invalid --max-requeues {given}: must be 0 or more")
    return configured if given is None else given


def _check_system(args: argparse.Namespace) -> None:
    if os.geteuid() != 0:
        raise UsageError(
            "berth daemon --system must run as root (it runs each job as its submitter): "
            "`sudo systemctl start berth` (docs/admin.md); or start your own with `berth daemon`"
        )
    if getattr(args, "inside_slurm", False):
        raise UsageError("--system and --inside-slurm exclude each other")


def run(args: argparse.Namespace) -> int:
    if args.stop:
        return _stop(args)
    if args.inside_slurm:
        from berth.cli.inside_slurm import apply  # rare: --inside-slurm

        apply(args, config.get())
    opts, cfg = _options(args)
    assert isinstance(opts, Options)
    opts.end_jobs_on_stop = bool(args.inside_slurm)  # the allocation's end ends its jobs
    for note in config_notes(cfg):  # type: ignore[arg-type]
        sys.stderr.write(f"berth daemon: {note}\n")
    if opts.foreground:
        from berth.daemon.main import serve  # heavy (asyncio, sqlite3): not for --stop, --help

        if (url := dashboard_url(cfg, opts.system)) is not None:
            sys.stderr.write(f"berth daemon: the dashboard will be on {url}\n")
        return serve(opts, cfg)  # type: ignore[arg-type]
    return _background(opts, cfg, args.json)


def _background(opts: object, cfg: object, as_json: bool) -> int:
    from berth.daemon.main import serve  # heavy (asyncio, sqlite3): not for --stop, --help

    assert isinstance(opts, Options)
    os.makedirs(opts.state_dir, mode=0o700, exist_ok=True)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        os.setsid()
        null = os.open(os.devnull, os.O_RDWR)
        logf = os.open(
            os.path.join(opts.state_dir, "daemon.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND,
            0o600,
        )  # fmt: skip
        os.dup2(null, 0)
        os.dup2(logf, 1)
        os.dup2(logf, 2)
        code = 1

        def ready() -> None:
            os.write(w, b"ok\n")
            os.close(w)

        try:
            code = serve(opts, cfg, ready)  # type: ignore[arg-type]
        except BaseException as e:  # report start-up errors to the waiting parent
            try:
                os.write(w, f"error {e}\n".encode())
            except OSError:
                pass
        os._exit(code)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        line = f.read().decode().strip()
    if line != "ok":
        raise BerthError(line[6:] if line.startswith("error ") else "the daemon failed to start")
    url = dashboard_url(cfg, opts.system)
    if as_json:
        said = {"pid": pid, "socket": opts.socket, "state_dir": opts.state_dir, "dashboard": url}
        print(json.dumps(said))
    else:
        sys.stdout.write(
            f"berth daemon started (pid {pid}); socket {opts.socket}, state {opts.state_dir}\n"
        )
        if url is not None:
            sys.stdout.write(f"dashboard: {url} (`berth web-token` signs a browser in)\n")
    return 0


def dashboard_url(cfg: object, system: bool = False) -> str | None:
    """The dashboard's address, with ``--http`` (or ``[daemon] http``), else None."""
    http = getattr(cfg, "http", None)
    if not http:
        return None
    allow = bool(getattr(cfg, "http_allow_remote", False))
    host, port = parse_bind(http, allow, default_http_port(system))
    shown = f"[{host}]" if ":" in host else (host or "127.0.0.1")
    return f"http://{shown}:{port}/"


def _stop(args: argparse.Namespace) -> int:
    path = args.socket
    if path is None and getattr(args, "system", False):
        path = system_socket(config.get().system_socket)
    with Client(path) as c:
        reply = c.call("shutdown")
    if args.json:
        print(json.dumps(reply))
    else:
        n = reply.get("running_jobs", 0)
        sys.stdout.write(f"berth daemon stopping; {n} running job(s) keep running\n")
    return 0
