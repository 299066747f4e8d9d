"""Where the daemon lives: its socket and its state directory (tiny; imported by the client).

Socket (first that applies): ``$BERTH_SOCKET``; ``[daemon] socket`` in the config (the caller
passes it); ``$XDG_RUNTIME_DIR/berth/daemon.sock``; ``/tmp/berth-<uid>/daemon.sock``.
State: ``$BERTH_STATE_DIR``; ``[daemon] state_dir``; ``$XDG_STATE_HOME/berth``;
``~/.local/state/berth``.
"""

from __future__ import annotations

import os


def socket_path(configured: str | None = None) -> str:
    env = os.environ.get("BERTH_SOCKET")
    if env:
        return env
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
