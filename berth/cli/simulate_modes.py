"""`berth simulate`'s modes and the options each uses (issue 32.3): an option given to a mode
that cannot use it is refused by name, never ignored (a replay that printed its table without
the reservation asked for would answer another question than the one asked).

A mode's options are its ``argparse`` destinations; an option counts as given when its value
differs from the parser's default.
"""

from __future__ import annotations

from berth.errors import UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable

_WORKLOAD = (
    "trace", "format", "inventory", "load", "scale", "start_day", "days", "max_duration",
    "time_limits", "poisson", "seed",
)  # fmt: skip
_RESERVE = (
    "reserve_gpus", "reserve_gpu_ids", "reserve_start", "reserve_duration", "reserve_user",
)  # fmt: skip

#: mode -> (how it is asked for, the options it uses)
MODES: dict[str, tuple[str, frozenset[str]]] = {
    "replay": ("a replay (berth simulate TRACE)", frozenset((
        *_WORKLOAD, *_RESERVE, "reserve_every", "policy", "placement", "fairshare",
        "half_life", "predict", "tenants", "plot", "json",
    ))),
    "fill": ("--fill", frozenset(("trace", "format", "inventory", "placement", "seeds", "fill",
                                  "json"))),
    "idle": ("--idle-reclaim", frozenset((
        *_WORKLOAD, "policy", "idle_reclaim", "idle_share", "idle_tail", "json",
    ))),
    "what-if": ("--what-if", frozenset((
        "what_if", "gpus", "mem", "time", "priority", "gpu_ids", "assume", "policy", "json",
        *_RESERVE,
    ))),
}  # fmt: skip


def mode_of(args: argparse.Namespace) -> str:
    if args.what_if:
        return "what-if"
    if args.fill:
        return "fill"
    if args.idle_reclaim:
        return "idle"
    return "replay"


def check(args: argparse.Namespace, add_arguments: Callable[[argparse.ArgumentParser], None]
          ) -> str:  # fmt: skip
    """The mode ``args`` asks for; UsageError naming the first option it cannot use."""
    import argparse  # rare: only to read the defaults

    parser = argparse.ArgumentParser(add_help=False)
    add_arguments(parser)
    flags = {a.dest: (a.option_strings[-1] if a.option_strings else a.dest)
             for a in parser._actions}  # fmt: skip
    defaults = vars(parser.parse_args([]))
    mode = mode_of(args)
    what, uses = MODES[mode]
    for dest, default in defaults.items():
        if dest in uses or getattr(args, dest, default) == default:
            continue
        flag = flags.get(dest, dest)
        used_by = [MODES[m][0] for m in MODES if dest in MODES[m][1]]
        raise UsageError(
            f"{flag} is not an option of {what}: it would be ignored (it is one of "
            f"{' and '.join(used_by)}); leave it out"
        )
    return mode
