"""Run a command on claimed GPUs, holding the claim for exactly as long as the command runs.

The command inherits the claim's descriptors (``pass_fds``), so the claim outlives this
process if it is killed (even ``kill -9``) and ends with the command. It runs (argv, no
shell) in its own process group; SIGINT, SIGTERM and SIGHUP are passed on to that group. On
a terminal the command's group is made the foreground group, so it can read the terminal and
Ctrl-C reaches it directly.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time

from berth.devices.visible import cuda_env
from berth.errors import BerthError
from berth.units import format_duration

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from types import FrameType
    from typing import IO

    from berth.claims.ledger import Claim
    from berth.devices.model import GpuSnapshot

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class CommandNotRun(BerthError):
    """The command could not be started (not found: 127; not executable: 126)."""


def job_env(claim: Claim, snaps: Sequence[GpuSnapshot], *, gpu_var: bool = False) -> dict[str, str]:
    """The environment of a command run on ``claim``'s GPUs."""
    by_uuid = {g.uuid: g.index for g in snaps}
    ids = [str(by_uuid.get(u, i)) for u, i in zip(claim.uuids, claim.indices, strict=True)]
    env = dict(os.environ)
    env.update(cuda_env(ids))
    env["BERTH_GPUS"] = ",".join(ids)
    env["BERTH_GPU_UUIDS"] = ",".join(claim.uuids)
    env["BERTH_LEASE"] = claim.lease_id
    if gpu_var:
        env["GPU"] = "cuda:0"  # scheduler.py's variable: the command sees its first GPU as cuda:0
    return env


def run_command(
    claim: Claim,
    snaps: Sequence[GpuSnapshot],
    cmd: Sequence[str],
    *,
    out: IO[bytes] | None = None,
    err: IO[bytes] | None = None,
    verbose: bool = False,
    gpu_var: bool = False,
) -> int:
    """Run ``cmd`` holding ``claim``; release it when the command ends. Returns the exit
    code (128+N when signal N killed the command)."""
    env = job_env(claim, snaps, gpu_var=gpu_var)
    pgid: list[int] = []
    pending: list[int] = []

    def forward(sig: int, frame: FrameType | None) -> None:
        if not pgid:
            pending.append(sig)
            return
        try:
            os.killpg(pgid[0], sig)
        except ProcessLookupError:
            pass

    saved = {s: signal.signal(s, forward) for s in FORWARDED}
    tty = _foreground_tty()
    started, t0 = time.time(), time.monotonic()
    try:
        kwargs: dict[str, object] = (
            {"process_group": 0} if sys.version_info >= (3, 11) else {"preexec_fn": os.setpgrp}
        )
        try:
            proc = subprocess.Popen(
                list(cmd),
                env=env,
                stdout=out,
                stderr=err,
                pass_fds=claim.fds,
                **kwargs,  # type: ignore[call-overload]
            )
        except FileNotFoundError:
            e = CommandNotRun(f"command not found: {cmd[0]!r}")
            e.exit_code = 127
            raise e from None
        except PermissionError:
            e = CommandNotRun(f"command not executable: {cmd[0]!r}")
            e.exit_code = 126
            raise e from None
        pgid.append(proc.pid)
        if tty:
            _give_terminal(proc.pid)
        for sig in pending:
            forward(sig, None)
        try:
            claim.set_pids([proc.pid], shlex.join(cmd))
        except BerthError:
            pass  # only what `berth status` shows; the claim itself is fine
        rc = _wait(proc, tty)
    finally:
        if tty and pgid:
            _give_terminal(os.getpgrp())
        for s, h in saved.items():
            signal.signal(s, h)
        claim.release()
        for f in (out, err):
            if f is not None:
                f.close()
    code = rc if rc >= 0 else 128 - rc
    if verbose:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started))
        how = f"exit status {rc}" if rc >= 0 else f"killed by signal {-rc} (exit {code})"
        ids = ",".join(str(i) for i in env["BERTH_GPUS"].split(","))
        sys.stderr.write(
            f"berth run: pid {proc.pid} on GPU {ids} ({env['BERTH_GPU_UUIDS']}); "
            f"started {when}; ran {format_duration(time.monotonic() - t0)}; {how}\n"
        )
    return code


def _wait(proc: subprocess.Popen[bytes], tty: bool) -> int:
    """Wait for the command; its exit code (negative: killed by that signal). On a terminal,
    a command stopped by Ctrl-Z stops berth run too (so the shell gets its prompt back), and
    ``fg`` resumes both."""
    if not tty:
        return proc.wait()
    while True:
        _, status = os.waitpid(proc.pid, os.WUNTRACED)
        if not os.WIFSTOPPED(status):
            proc.returncode = os.waitstatus_to_exitcode(status)
            return proc.returncode
        _give_terminal(os.getpgrp())
        os.kill(os.getpid(), signal.SIGSTOP)  # until the shell continues us
        _give_terminal(proc.pid)
        try:
            os.killpg(proc.pid, signal.SIGCONT)
        except ProcessLookupError:
            pass


def _foreground_tty() -> bool:
    try:
        return os.isatty(0) and os.tcgetpgrp(0) == os.getpgrp()
    except OSError:
        return False


def _give_terminal(pgid: int) -> None:
    old = signal.signal(signal.SIGTTOU, signal.SIG_IGN)
    try:
        os.tcsetpgrp(0, pgid)
        if pgid != os.getpgrp():
            os.killpg(pgid, signal.SIGCONT)  # in case it read the terminal before it had it
    except OSError:
        pass
    finally:
        signal.signal(signal.SIGTTOU, old)
