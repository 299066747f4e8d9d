"""The selection options that `berth select` and `berth run` share, made from the fields of
:class:`berth.selection.filters.Filters` that have one, and the one place that builds a Filters from them.

So ``--min-free 20G --max-procs 1 --order packed`` means the same in both commands and in
``berth.select(min_free="20G", max_procs=1, order="packed")``, with the same error for a bad
value. GPU lists (``--only 0-3,6``) are parsed by :func:`berth.units.parse_gpu_list`, as every
GPU list berth takes.
"""

from __future__ import annotations

from berth.errors import UsageError
from berth.selection.filters import Filters
from berth.units import parse_gpu_list

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import Any


# The earlier tools' spellings of the same filters, accepted as aliases: gpuselect's (its CLI,
# long and short, and its keyword arguments) and scheduler.py's --forced_gpu/-fg and
# --prefered_gpu/-pg. gpuselect's -n NAME is the one that clashes (-n is berth's count):
# refused by name_hint()'s message. The README has the whole table.
GPUSELECT_ALIASES: dict[str, tuple[str, ...]] = {
    "max_util": ("--util", "-u"),
    "max_mem_util": ("--mem_util", "--mem-util", "-m"),
    "max_procs": ("--processes", "-p"),
    "only": ("--devices", "-d", "--forced_gpu", "-fg"),
    "prefer": ("--prefered_gpu", "-pg"),
}


def add_arguments(p: argparse.ArgumentParser, *, order_help: str) -> None:
    """Add --min-free, --max-util, --max-mem-util, --max-power, --max-procs, --name, --only,
    --exclude, --prefer, --order (with ``order_help``) and --all; and the earlier tools' names
    for five of them (:data:`GPUSELECT_ALIASES`)."""
    for f in Filters.__fields__.values():
        if isinstance(f.meta, tuple):
            metavar, help, _ = f.meta
            flags = (f.label or f.name, *GPUSELECT_ALIASES.get(f.name, ()))
            help = order_help if f.name == "order" else help
            p.add_argument(*flags, dest=f.name, metavar=metavar, help=help)
    p.add_argument("--all", action="store_true", help="ignore CUDA_VISIBLE_DEVICES")


def count_text(text: str, flag: str) -> str:
    """``text`` as given to a count option, refused with the fix when it is no number: most
    likely gpuselect's ``-n NAME`` (a GPU name), which is berth's count."""
    try:
        float(text)
    except ValueError:
        raise UsageError(
            f"{flag} {text!r}: {flag} is berth's GPU count, a number; gpuselect's -n (a GPU "
            f"name) is --name here: --name {text}"
        ) from None
    return text


def gpu_list(text: str | None, option: str) -> tuple[str, ...] | None:
    """A GPU list option (indices, ranges such as 0-3, UUIDs), or None when not given."""
    return None if text is None else parse_gpu_list(text, what=option, uuids=True)


def from_args(
    args: argparse.Namespace, count: object = 1, share: float = 1.0, *, mem: str | None = None
) -> Filters:
    """The Filters the options ask for (an option not given keeps the field's default)."""
    values: dict[str, Any] = {"count": count, "share": share, "mem": mem}
    for f in Filters.__fields__.values():
        if isinstance(f.meta, tuple) and (typed := getattr(args, f.name)) is not None:
            if typed == "":  # (a script's unset variable: --name "" matched every GPU)
                flag = f.label or f"--{f.name.replace('_', '-')}"
                raise UsageError(f"{flag} '': empty; give a value, or leave {flag} out")
            read = f.meta[2]
            values[f.name] = typed if read is None else read(typed, f.label)
    return Filters(**values)
