"""`berth __complete jobs|gpus`: what a shell's completion offers for a job id or a GPU id
(the scripts of `berth completion` call it; :mod:`berth.cli.completion`). One word a line,
then a tab and what it is (``12\\ttrain-a (RUNNING, alice)``; ``3\\tNVIDIA A100 (idle)``), which
zsh and fish show beside it. Hidden (not in `berth help`) and quiet: with no daemon or no GPU
it prints nothing and exits 0, so a Tab never prints an error into the command line.
"""

from __future__ import annotations

import sys

from berth.errors import BerthError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from berth.devices.model import GpuSnapshot

JOBS_MOST = 500  # the queue's first lines: running, then pending in line, then recently ended


def answer(args: list[str]) -> int:
    kind = args[0] if args else ""
    if kind not in ("jobs", "gpus"):
        sys.stderr.write(f"berth __complete: {kind!r}: give `jobs` or `gpus`\n")
        return 2
    try:
        words = _jobs() if kind == "jobs" else _gpus()
    except (BerthError, OSError):  # (no daemon, no driver: nothing to offer)
        return 0
    sys.stdout.write("".join(f"{w}\t{what}\n" for w, what in words))
    return 0


def _jobs() -> list[tuple[str, str]]:
    from berth.backends.local import Local  # heavy (the client): jobs only

    rows = Local().lines(finished=True, limit=JOBS_MOST)
    return [(r.id, _plain(f"{r.name} ({r.state}, {r.user})")) for r in rows]


def _gpus() -> list[tuple[str, str]]:
    from berth import config  # rare: gpus
    from berth.api import read  # heavy (NVML): gpus only

    gpus = read(config.get(), all=True, process_details=False, telemetry=False)
    return [(str(g.index), _plain(f"{g.name} ({_state(g)})")) for g in gpus]


def _state(g: GpuSnapshot) -> str:
    if not g.healthy:
        return "unhealthy"
    return "busy" if g.processes else "idle"


def _plain(text: str) -> str:
    """What a user typed (a job's name), made safe for a completion menu: no tab, newline
    or other control character."""
    return "".join(c if c.isprintable() else "?" for c in text)
