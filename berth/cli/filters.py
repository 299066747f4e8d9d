"""The selection options that `berth select` and `berth run` share, and their parsing.

One definition, so that ``--min-free 20G --max-procs 1 --order packed`` means the same in both
commands, with the same error for a bad value. GPU lists (``--only 0-3,6``) are parsed by
:func:`berth.units.parse_gpu_list`, as every GPU list berth takes.
"""

from __future__ import annotations

from berth.errors import UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import Any


def add_arguments(p: argparse.ArgumentParser, *, order_help: str) -> None:
    """Add --min-free, --max-util, --max-mem-util, --max-power, --max-procs, --name, --only,
    --exclude, --prefer, --order and --all."""
    p.add_argument("--min-free", metavar="SIZE", help="at least this much free memory, e.g. 20G")
    p.add_argument(
        "--max-util",
        default="auto",
        metavar="PCT",
        help="max utilisation %% (default: 0 if --max-procs is 0, else no limit)",
    )
    p.add_argument(
        "--max-mem-util",
        default="auto",
        metavar="PCT",
        help="max memory-bandwidth utilisation %% (default as --max-util)",
    )
    p.add_argument("--max-power", metavar="WATTS", help="max power draw in W")
    p.add_argument(
        "--max-procs", default="0", metavar="N", help="max processes outside berth on the GPU (0)"
    )
    p.add_argument("--name", help="GPU name contains this (case-insensitive), e.g. A100")
    p.add_argument("--only", metavar="IDS", help="only these indices/UUIDs, e.g. 2, 0,1 or 0-3")
    p.add_argument("--exclude", metavar="IDS", help="never these indices/UUIDs")
    p.add_argument("--prefer", metavar="IDS", help="these first when they qualify, else others")
    p.add_argument("--order", metavar="ORDER", help=order_help)
    p.add_argument("--all", action="store_true", help="ignore CUDA_VISIBLE_DEVICES")


def number(text: str, option: str, *, top: float | None = None) -> float:
    """A non-negative number (``80``, ``80%``, ``250W``), at most ``top``."""
    try:
        value = float(text.rstrip("%Ww"))
    except ValueError:
        value = -1.0
    if not value >= 0 or (top is not None and value > top):
        bound = f"0 to {top:g}" if top is not None else "0 or more"
        raise UsageError(f"{option} {text!r}: expected a number, {bound}")
    return value


def whole(text: str, option: str, *, low: int) -> int:
    """A whole number, ``low`` or more."""
    try:
        value = int(text)
    except ValueError:
        value = low - 1
    if value < low:
        raise UsageError(f"{option} {text!r}: expected a whole number, {low} or more")
    return value


def gpu_list(text: str | None, option: str) -> tuple[str, ...] | None:
    """A GPU list option (indices, ranges such as 0-3, UUIDs), or None when not given."""
    from berth.units import parse_gpu_list

    return None if text is None else parse_gpu_list(text, what=option, uuids=True)


def selection_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """The options as keyword arguments of ``berth.api.selection`` / ``berth.acquire``."""
    from berth.choose import ORDERS
    from berth.units import parse_size

    if args.order is not None and args.order not in ORDERS:
        raise UsageError(f"--order {args.order!r}: expected one of {', '.join(ORDERS)}")
    percent = {
        key: "auto" if getattr(args, key) == "auto" else number(getattr(args, key), opt, top=100)
        for key, opt in (("max_util", "--max-util"), ("max_mem_util", "--max-mem-util"))
    }
    return {
        "min_free": None if args.min_free is None else parse_size(args.min_free, what="--min-free"),
        "max_power": None if args.max_power is None else number(args.max_power, "--max-power"),
        "max_procs": whole(args.max_procs, "--max-procs", low=0),
        "name": args.name,
        "only": gpu_list(args.only, "--only"),
        "exclude": gpu_list(args.exclude, "--exclude"),
        "prefer": gpu_list(args.prefer, "--prefer"),
        "order": args.order,
        **percent,
    }
