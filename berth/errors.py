"""Every error a user can meet, with the exit code the CLI gives it.

Each message names the offending value and says what to do. Exit codes are distinct per kind,
so scripts can tell "you typed it wrong" from "no driver" from "no daemon":

==  ==========================================================
0   success
1   the request was valid but could not be satisfied (e.g. fewer GPUs qualify than asked)
2   usage error: bad option, value or config file; nothing was changed
3   NVIDIA driver / NVML library not available
4   refused: not allowed (another user's claim or job, not admin)
5   the daemon is not reachable
6   waited for GPUs and the timeout expired
==  ==========================================================
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_UNSATISFIED = 1
EXIT_USAGE = 2
EXIT_NO_DRIVER = 3
EXIT_REFUSED = 4
EXIT_NO_DAEMON = 5
EXIT_TIMEOUT = 6


class BerthError(Exception):
    """Base class of every error berth raises on purpose."""

    exit_code = EXIT_UNSATISFIED


class UsageError(BerthError, ValueError):
    """Bad input: an option, a value, a config file. Nothing was changed."""

    exit_code = EXIT_USAGE


class ConfigError(UsageError):
    """The configuration file (or a BERTH_* variable) is malformed."""


class NvmlUnavailable(BerthError):
    """NVML cannot be used: no driver, no library, or the driver refused to initialise."""

    exit_code = EXIT_NO_DRIVER


class NotEnoughGpus(BerthError):
    """Fewer GPUs qualify than were asked for. ``reasons`` says why the others did not."""

    exit_code = EXIT_UNSATISFIED

    def __init__(self, message: str, reasons: dict[int, list[str]] | None = None) -> None:
        super().__init__(message)
        self.reasons: dict[int, list[str]] = reasons or {}  # GPU index -> why it did not qualify


class Refused(BerthError, PermissionError):
    """The caller may not do this (another user's claim or job; admin only)."""

    exit_code = EXIT_REFUSED


class DaemonUnreachable(BerthError, ConnectionError):
    """No berth daemon answers on the socket."""

    exit_code = EXIT_NO_DAEMON


class DaemonSilent(DaemonUnreachable):
    """A daemon accepted the connection but did not answer in time (berth/client_wait.py)."""

    def __init__(self, message: str, path: str = "") -> None:
        super().__init__(message)
        self.path = path


class WaitTimeout(BerthError, TimeoutError):
    """Waited for GPUs until the timeout; the message says what was missing."""

    exit_code = EXIT_TIMEOUT
