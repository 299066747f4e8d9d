"""The config's ``[enforce]`` section (issue 25): what the system daemon does about GPU use
berth did not grant (docs/admin.md "Enforcement"). Every class is only shown by default
(``observe``); nothing is signalled unless the admin says ``kill`` (or ``release`` for idle
holders). Declared as :mod:`berth.config`'s keys are (:class:`berth.config.key.Key`).
"""

from __future__ import annotations

from berth.config.key import Key, set_defaults
from berth.units import parse_duration

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from berth.config.key import At, Check, SoFar

POLICIES = ("observe", "notify", "kill")
IDLE_POLICIES = ("observe", "notify", "release", "requeue")


def _one_of(words: tuple[str, ...]) -> Check[str]:
    def check(value: str, at: At, cfg: SoFar) -> str:
        if value not in words:
            raise at.fail(f"[{at.section}] {at.key} = {value!r} must be one of {', '.join(words)}")
        return value

    return check


def _seconds(value: str | float, at: At, cfg: SoFar) -> float:
    try:
        seconds = parse_duration(value, what=f"[{at.section}] {at.key}")
    except ValueError as e:
        raise at.fail(str(e)) from None
    if not seconds >= 0:
        raise at.fail(f"[{at.section}] {at.key} must not be negative")
    return seconds


def _fraction(value: float, at: At, cfg: SoFar) -> float:
    if not 0 <= value <= 10:
        raise at.fail(f"[{at.section}] {at.key} = {value} must be in [0, 10] (0.1: 10%)")
    return float(value)


def isolate_mode(value: bool | str, at: At, cfg: SoFar) -> bool | str:
    """[daemon] isolate_devices: false, true (where the host allows it), or "required"."""
    if value not in (True, False, "required"):
        raise at.fail(f'[{at.section}] {at.key} = {value!r} must be true, false or "required"')
    return value


def _names(value: list[Any], at: At, cfg: SoFar) -> tuple[str, ...]:
    """User or group names as the user database has them (a uid, 1000, matches no name)."""
    for v in value:
        if not isinstance(v, str) or not v.strip():
            raise at.fail(
                f"[{at.section}] {at.key} has {v!r}; give names (\"alice\", as `id` shows "
                "them), not numbers or empty ones"
            )
    return tuple(value)


class Enforce:
    """[enforce]: a policy per class of GPU process (core/enforce.py) and for idle holders."""

    # fmt: off
    outside = Key("enforce", (str,), "observe", _one_of(POLICIES), '"observe"',
        "processes of no berth holder on unclaimed GPUs: observe, notify or kill",
        before="What the daemon does about GPU use berth did not grant (docs/admin.md); all default to observe:")
    intrusion = Key("enforce", (str,), "observe", _one_of(POLICIES), '"notify"',
        "processes on a GPU claimed by someone else")
    overrun = Key("enforce", (str,), "observe", _one_of(POLICIES), '"kill"',
        "a job's or claim's processes over its declared memory (only its own are killed)")
    grace = Key("enforce", (str, int, float), 600.0, _seconds, '"10m"',
        "how long a process may go on before `kill` sends SIGTERM (then SIGKILL)")
    tolerance = Key("enforce", (int, float), 0.1, _fraction, "0.1",
        "an overrun is more than declared memory x (1 + tolerance)")
    exempt_users = Key[tuple[str, ...]]("enforce", (list,), (), _names, '["alice"]',
        "never notified or killed (still shown)")
    exempt_groups = Key[tuple[str, ...]]("enforce", (list,), (), _names, '["gpuadmin"]',
        "members never notified or killed")
    idle_after = Key("enforce", (str, int, float), 7200.0, _seconds, '"2h"',
        "a holder whose GPUs show no utilisation this long is idle")
    idle = Key("enforce", (str,), "observe", _one_of(IDLE_POLICIES), '"notify"',
        "idle holders: observe, notify, release (a job cancelled) or requeue (a job back to the queue) after idle_grace")
    idle_grace = Key("enforce", (str, int, float), 1800.0, _seconds, '"30m"',
        "from the notice to the release (or requeue) of an idle holder")
    idle_opt_out = Key("enforce", (bool,), False, None, "false",
        "true: jobs submitted with --keep-idle are flagged, never released")
    # fmt: on

    def __init__(self, **values: Any) -> None:
        set_defaults(self, values)
