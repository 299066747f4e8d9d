"""The daemon's settings (from `berth daemon` flags over the config file)."""

from __future__ import annotations

from berth.units import KILL_AFTER


class Options:
    __slots__ = (
        "admin_group",
        "cpu_slots",
        "end_jobs_on_stop",
        "exit_with",
        "foreground",
        "keep_finished",
        "kill_after",
        "max_job_time",
        "max_requeues",
        "on_time_limit",
        "paused_after_crash",
        "policy",
        "poll_interval",
        "private",
        "socket",
        "state_dir",
        "system",
    )

    def __init__(
        self,
        socket: str,
        state_dir: str,
        *,
        policy: str | None = None,
        max_job_time: float | None = None,
        on_time_limit: str = "end",
        max_requeues: int | None = None,
        kill_after: float = KILL_AFTER,
        poll_interval: float = 5.0,
        paused_after_crash: bool = False,
        foreground: bool = True,
        exit_with: int | None = None,
        keep_finished: float = 30 * 86400.0,
        system: bool = False,
        private: bool = False,
        admin_group: str | None = None,
        cpu_slots: int | None = None,
    ) -> None:
        self.socket = socket
        self.state_dir = state_dir
        self.policy = policy
        self.max_job_time = max_job_time
        self.on_time_limit = on_time_limit  # "end" or "requeue": for jobs that did not say
        self.max_requeues = max_requeues  # ... and how many times (None: no end)
        self.kill_after = kill_after
        self.poll_interval = poll_interval
        self.paused_after_crash = paused_after_crash
        self.foreground = foreground
        self.exit_with = exit_with  # stop when this process exits
        self.keep_finished = keep_finished  # seconds a finished job is kept (inf: for ever)
        self.system = system  # the machine's daemon (`--system`): every local user may connect
        self.private = private  # others' commands and paths are hidden from non-admins
        self.admin_group = admin_group  # besides root, its members are admins
        # CPU-only jobs (-g 0) running at once ([limits] cpu_slots; None: the host's cores)
        self.cpu_slots = cpu_slots
        self.end_jobs_on_stop = False  # --inside-slurm: stopping ends the jobs (not adopted)

    def admins(self) -> str:
        """Who the admins are, for messages: ``root`` or ``root, group 'gpuadmin'``."""
        return "root" + (f", group {self.admin_group!r}" if self.admin_group else "")
