"""The selection options that `berth select` and `berth run` share, made from the fields of
:class:`berth.selection.filters.Filters` that have one, and the one place that builds a Filters from them.

So ``--min-free 20G --max-procs 1 --order packed`` means the same in both commands and in
``berth.select(min_free="20G", max_procs=1, order="packed")``, with the same error for a bad
value. GPU lists (``--only 0-3,6``) are parsed by :func:`berth.units.parse_gpu_list`, as every
GPU list berth takes.
"""

from __future__ import annotations

from berth.selection.filters import Filters
from berth.units import parse_gpu_list

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import Any


# gpuselect's spellings of the same filters (its CLI and its keyword arguments), accepted as
# aliases; its short flags are not (-n is berth's count, gpuselect's name). The README has the
# whole table.
GPUSELECT_ALIASES: dict[str, tuple[str, ...]] = {
    "max_util": ("--util",),
    "max_mem_util": ("--mem_util", "--mem-util"),
    "max_procs": ("--processes",),
    "only": ("--devices",),
}


def add_arguments(p: argparse.ArgumentParser, *, order_help: str) -> None:
    """Add --min-free, --max-util, --max-mem-util, --max-power, --max-procs, --name, --only,
    --exclude, --prefer, --order (with ``order_help``) and --all; and gpuselect's names for
    four of them (:data:`GPUSELECT_ALIASES`)."""
    for f in Filters.__fields__.values():
        if isinstance(f.meta, tuple):
            metavar, help, _ = f.meta
            flags = (f.label or f.name, *GPUSELECT_ALIASES.get(f.name, ()))
            help = order_help if f.name == "order" else help
            p.add_argument(*flags, dest=f.name, metavar=metavar, help=help)
    p.add_argument("--all", action="store_true", help="ignore CUDA_VISIBLE_DEVICES")


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
            read = f.meta[2]
            values[f.name] = typed if read is None else read(typed, f.label)
    return Filters(**values)
