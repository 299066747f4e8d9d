"""Where the daemon lives: its socket and its state directory (tiny; imported by the client).

Socket (first that applies): ``$BERTH_SOCKET``; inside a Slurm allocation whose
``berth daemon --inside-slurm`` runs, that daemon's (:func:`allocation_dir`); ``[daemon]
socket`` in the config (the caller passes it); ``$XDG_RUNTIME_DIR/berth/daemon.sock``;
``/tmp/berth-<uid>/daemon.sock``.
State: ``$BERTH_STATE_DIR``; ``[daemon] state_dir``; ``$XDG_STATE_HOME/berth``;
``~/.local/state/berth``.
"""

from __future__ import annotations

import os


def allocation_dir() -> str | None:
    """Inside a Slurm job: the node-local directory of its own daemon (``berth daemon
    --inside-slurm``), ``$TMPDIR/berth-<uid>/slurm-<job id>``; else None. (Not named by the
    cluster too: srun's steps do not get SLURM_CLUSTER_NAME.)"""
    job = os.environ.get("SLURM_JOB_ID")
    if not job:
        return None
    base = os.environ.get("TMPDIR") or "/tmp"
    return os.path.join(base, f"berth-{os.getuid()}", f"slurm-{job}")


def socket_path(configured: str | None = None) -> str:
    env = os.environ.get("BERTH_SOCKET")
    if env:
        return env
    alloc = allocation_dir()
    if alloc and os.path.exists(os.path.join(alloc, "daemon.sock")):
        return os.path.join(alloc, "daemon.sock")
    if configured:
        return configured
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isdir(runtime):
        return os.path.join(runtime, "berth", "daemon.sock")
    return os.path.join("/tmp", f"berth-{os.getuid()}", "daemon.sock")


def state_dir(configured: str | None = None) -> str:
    env = os.environ.get("BERTH_STATE_DIR")
    if env:
        return env
    if configured:
        return configured
    xdg = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state"
    )
    return os.path.join(xdg, "berth")
