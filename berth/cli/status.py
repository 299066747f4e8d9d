"""Show the GPUs, what runs on them, and who holds them: one screen, read at a glance.

Per GPU: index, name, memory used/total, utilisation, memory-bandwidth utilisation, power
draw/limit ("n/a" where the driver cannot say), temperature, and health; under it, each
process with pid, user, GPU memory and command. GPUs banned or not managed in the config
are marked; GPUs of a declared inventory say "(declared, no telemetry)".

examples:
  berth status                  the GPUs this shell may use (CUDA_VISIBLE_DEVICES) or all
  berth status --all            every GPU, whatever CUDA_VISIBLE_DEVICES says
  berth status --watch          refresh every 2 s in place, fitted to the window; q to stop
                                (a short window: every GPU one line, its processes folded in)
  berth status --watch 0.5      refresh twice a second
  berth status --json | jq '.gpus[] | {index, memory_free, utilization}'

--json prints one object: "source" ("nvml" or "declared") and "gpus", a list with every
field of a GPU snapshot (bytes, watts, percent; null where unsupported) plus "banned".
"""

from __future__ import annotations

import json
import os
import sys

from berth import config
from berth.api import banned_reasons, read
from berth.cli import status_claims, status_queue
from berth.cli.escape import shown
from berth.cli.status_section import Section
from berth.devices import config_notes
from berth.errors import UsageError
from berth.units import format_size, parse_duration

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Mapping, Sequence
    from typing import Any

    from berth.config import Config
    from berth.devices.model import GpuSnapshot


FAST_EXIT = True  # read-only: main() may skip interpreter teardown


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument(
        "--watch",
        nargs="?",
        const="2",
        metavar="SECONDS",
        help="refresh in place every SECONDS (default 2) until Ctrl-C",
    )
    p.add_argument("--all", action="store_true", help="ignore CUDA_VISIBLE_DEVICES")


def sections(gpus: Sequence[GpuSnapshot], cfg: Config) -> list[Section]:
    """The sections under the GPU table: the claims (:mod:`berth.cli.status_claims`), then the
    daemon's queue (:mod:`berth.cli.status_queue`); each returns a Section or None (nothing to
    say). The daemon is asked first: a claim it made for a job is shown as that job's."""
    queue = status_queue.status_section(gpus, cfg)
    reply = queue.data if queue is not None and isinstance(queue.data, dict) else None
    claims = status_claims.status_section(gpus, cfg, reply)
    return [s for s in (claims, queue) if s is not None]


def _pct(v: int | None) -> str:
    return "n/a" if v is None else f"{v}%"


def _power(g: GpuSnapshot) -> str:
    if g.power_draw is None:
        return "n/a"
    if g.power_limit is None:
        return f"{g.power_draw:.0f}W"
    return f"{g.power_draw:.0f}W/{g.power_limit:.0f}W"


def _memory(g: GpuSnapshot) -> str:
    if g.memory_used is None and g.memory_total is None:
        return "n/a"
    if g.memory_used is None:  # (a declared GPU with `memory = "80G"`: no telemetry)
        return f"{format_size(g.memory_total)} total"
    return f"{format_size(g.memory_used)} / {format_size(g.memory_total)}"


def _state(g: GpuSnapshot, banned: str | None) -> str:
    parts = []
    if not g.healthy:
        parts.append(f"UNHEALTHY: {g.error or 'unknown error'}")
    elif g.logical:
        parts.append("(declared, no telemetry)")
    elif g.processes:
        parts.append("busy")
    else:
        parts.append("idle")
    if banned:
        parts.append(f"[not managed: {banned}]")
    return " ".join(parts)


def render(
    gpus: Sequence[GpuSnapshot],
    banned: Mapping[int, str],
    extra: Sequence[Section] = (),
    width: int | None = None,
    height: int | None = None,
) -> str:
    """The status screen as text. ``extra`` sections add notes under GPUs and blocks below.
    ``height``: the lines a window has for it (``--watch``); where the screen is taller, it
    is compact: every GPU keeps one line, its processes and notes folded into it."""
    if not gpus:
        return "no GPUs (check CUDA_VISIBLE_DEVICES, or `berth status --all`)\n"
    head = ("GPU", "NAME", "MEMORY", "UTIL", "MEM", "POWER", "TEMP", "STATE")
    rows = [_row(g, banned.get(g.index)) for g in gpus]
    widths = [max(len(r[k]) for r in [head, *rows]) for k in range(len(head) - 1)]
    right = {0, 2, 3, 4, 5, 6}

    def line(cells: Sequence[str]) -> str:
        out = [
            c.rjust(w) if k in right else c.ljust(w)
            for k, (c, w) in enumerate(zip(cells, widths, strict=False))
        ]
        return "  ".join([*out, cells[-1]]).rstrip()

    notes: dict[int, list[str]] = {}
    for section in extra:
        for index, lines in section.notes.items():
            notes.setdefault(index, []).extend(lines)
    indent = " " * (widths[0] + 2)
    text = [line(head)]
    for g, row in zip(gpus, rows, strict=True):
        text.append(line(row))
        text.extend(f"{indent}{detail}" for detail in _details(g, notes.get(g.index, [])))
    below: list[str] = []
    for section in extra:
        if section.lines:
            below.append("")
            if section.title:
                below.append(section.title)
            below.extend(section.lines)
    if height is not None and len(text) + len(below) > height and len(text) > len(gpus) + 1:
        tall = len(text) + len(below) + 2
        rows = [_short(g, row, notes.get(g.index, [])) for g, row in zip(gpus, rows, strict=True)]
        widths = [max(len(r[k]) for r in [head, *rows]) for k in range(len(head) - 1)]
        text = [line(head), *(line(row) for row in rows)]
        text.append(f"(a GPU a line; a window {tall} lines tall shows each process)")
    text = [shown(t) for t in [*text, *below]]  # names, commands, notes: what users typed
    if width:
        text = [t if len(t) <= width else t[: width - 1] + "~" for t in text]
    return "\n".join(text) + "\n"


def _row(g: GpuSnapshot, banned: str | None) -> tuple[str, ...]:
    if g.logical:
        memory = "" if g.memory_total is None else _memory(g)
        return (str(g.index), g.name, memory, "", "", "", "", _state(g, banned))
    temp = "n/a" if g.temperature is None else f"{g.temperature}C"
    return (str(g.index), g.name, _memory(g), _pct(g.utilization), _pct(g.memory_utilization),
            _power(g), temp, _state(g, banned))  # fmt: skip


def _details(g: GpuSnapshot, notes: Sequence[str]) -> list[str]:
    """The lines under a GPU's: its notes (who holds it), then each process."""
    out = list(notes)
    if g.processes is None and g.healthy and not g.logical:
        out.append("processes: n/a")
    for p in g.processes or ():
        user = p.user or "?"
        cmd = p.command or "?"
        out.append(f"{p.pid:>7}  {user:<10} {format_size(p.used_memory):>7}  {cmd}")
    return out


def _short(g: GpuSnapshot, row: Sequence[str], notes: Sequence[str]) -> tuple[str, ...]:
    """A GPU's row on a compact screen: narrower cells (the name without "NVIDIA ", the
    memory without spaces, the power drawn without its limit) and its details folded into
    its state: how many processes and whose, the first note and how many more."""
    index, name, memory, util, mem, power, temp, state = row
    folded = []
    if g.processes:
        n = len(g.processes)
        users = ",".join(sorted({p.user or "?" for p in g.processes}))
        folded.append(f"{n} proc{'s' if n != 1 else ''} ({users})")
    if notes:
        folded.append(notes[0] + (f" (+{len(notes) - 1})" if len(notes) > 1 else ""))
    if folded:
        state = f"{state}: {'; '.join(folded)}"
    if not g.healthy and g.error:  # ("nvmlDeviceGetHandleByIndex: GPU is lost": the end)
        state = state.replace(g.error, g.error.rsplit(": ", 1)[-1])
    name = name.removeprefix("NVIDIA ")
    power = power.split("W/")[0] + "W" if "W/" in power else power
    return (index, name, memory.replace(" / ", "/"), util, mem, power, temp, state)


def _source(cfg: Config, gpus: Sequence[GpuSnapshot]) -> str:
    if cfg.inventory.declared is not None or (gpus and all(g.logical for g in gpus)):
        return "declared"
    return "nvml"


_JSON_FIRST = ("index", "uuid", "name", "pci_bus_id", "healthy", "error", "logical", "banned")


def to_json(
    gpus: Sequence[GpuSnapshot], cfg: Config, banned: Mapping[int, str], extra: Sequence[Section]
) -> dict[str, Any]:
    out: dict[str, Any] = {"source": _source(cfg, gpus), "gpus": []}
    for g in gpus:
        d = g.to_dict()
        d["banned"] = banned.get(g.index)
        first = {k: d.pop(k) for k in _JSON_FIRST if k in d}
        out["gpus"].append({**first, **d})
    for section in extra:
        if section.data is not None:
            out[section.key] = section.data
    return out


def _width() -> int | None:
    if not sys.stdout.isatty():
        return None
    try:
        return os.get_terminal_size(sys.stdout.fileno()).columns
    except OSError:
        return None


def snapshot_text(
    args: argparse.Namespace, width: int | None = None, height: int | None = None
) -> str:
    """One full read and render (text or JSON), lines cut to ``width`` (default: the
    terminal's, when stdout is one), compact if taller than ``height`` (:func:`render`)."""
    cfg = config.get()
    gpus = read(cfg, all=args.all, process_details=True, extras=args.json)  # (what it shows)
    banned = banned_reasons(cfg, gpus)
    extra = sections(gpus, cfg)
    if args.json:
        return json.dumps(to_json(gpus, cfg, banned, extra), indent=2) + "\n"
    return render(gpus, banned, extra, width=width or _width(), height=height)


def run(args: argparse.Namespace) -> int:
    for note in config_notes(config.get()):
        sys.stderr.write(f"berth: {note}\n")
    if args.watch is None:
        sys.stdout.write(snapshot_text(args))
        return 0
    interval = parse_duration(args.watch, what="--watch")
    if not 0 < interval < float("inf"):
        raise UsageError(f"--watch {args.watch!r}: expected a number of seconds above 0")
    from berth.cli import screen  # rare: --watch

    return screen.run(lambda columns, rows: snapshot_text(args, columns, rows), "Ctrl-C to stop",
                      interval)  # fmt: skip
