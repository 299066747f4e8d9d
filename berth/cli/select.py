"""Print the ids of GPUs that qualify, comma-separated, for a shell to use.

By default a GPU qualifies when it is idle (utilisation 0%, memory utilisation 0%, no
processes), healthy, not banned in the config and not held by berth claims; among those, one
is picked at random (as gpuselect does). When fewer than asked qualify, the reasons go to
stderr and the exit code is 1. Only CUDA_VISIBLE_DEVICES's GPUs are considered when it is set
(unless --all); the ids printed are NVML ids (PCI bus order): use them with
CUDA_DEVICE_ORDER=PCI_BUS_ID.

examples:
  berth select                              one idle GPU, e.g. "2"
  berth select -n 2 --min-free 20G          two GPUs with 20 GiB free each: "0,2"
  berth select -n 2 --max-procs 1 --order packed
                                            fill GPUs that already run one process
  berth select --name A100 --order free     the A100 with the most free memory
  berth select --only 0,1 --prefer 1        GPU 1 if it qualifies, else GPU 0
  berth select -n 3 --explain               why each GPU was (not) chosen, on stderr
  berth select --uuid                       UUIDs instead of indices
  CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=$(berth select -n 2) python train.py
  docker run --gpus "device=$(berth select -n 2)" ...
  if ids=$(berth select --silent); then ...; fi
                                            nothing printed on failure, exit 1

Sizes take G/GiB/M/MiB (binary units; a bare number is MiB). Percentages are 0-100.
"""

from __future__ import annotations

import sys

from berth.errors import EXIT_OK, EXIT_UNSATISFIED, UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import Literal

HELP = "pick idle GPUs and print their ids (for CUDA_VISIBLE_DEVICES)"

FAST_EXIT = True  # read-only: main() may skip interpreter teardown


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("-n", "--count", default="1", metavar="N", help="how many GPUs (default 1)")
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
    p.add_argument("--max-procs", default="0", metavar="N", help="max processes on the GPU (0)")
    p.add_argument("--name", help="GPU name contains this (case-insensitive), e.g. A100")
    p.add_argument("--only", metavar="IDS", help="consider only these indices/UUIDs, e.g. 0,2")
    p.add_argument("--exclude", metavar="IDS", help="never these indices/UUIDs")
    p.add_argument("--prefer", metavar="IDS", help="these first when they qualify")
    p.add_argument(
        "--order",
        default="random",
        metavar="ORDER",
        help="random (default), free (most free memory), util (least used), "
        "packed (busiest that qualifies), index",
    )
    p.add_argument("--uuid", action="store_true", help="print UUIDs instead of indices")
    p.add_argument("--explain", action="store_true", help="say why each GPU was excluded")
    p.add_argument("--silent", action="store_true", help="print nothing; exit 1 on shortfall")
    p.add_argument("--all", action="store_true", help="ignore CUDA_VISIBLE_DEVICES")


def _int(text: str, option: str, *, low: int) -> int:
    try:
        value = int(text)
    except ValueError:
        value = low - 1
    if value < low:
        raise UsageError(f"{option} {text!r}: expected a whole number, {low} or more")
    return value


def _percent(text: str, option: str) -> float | Literal["auto"]:
    return "auto" if text == "auto" else _float(text, option, top=100)  # type: ignore[return-value]


def _float(text: str | None, option: str, *, top: float | None = None) -> float | None:
    if text is None:
        return None
    try:
        value = float(text.rstrip("%Ww"))
    except ValueError:
        value = -1.0
    if not value >= 0 or (top is not None and value > top):
        bound = f"0 to {top:g}" if top is not None else "0 or more"
        raise UsageError(f"{option} {text!r}: expected a number, {bound}")
    return value


def run(args: argparse.Namespace) -> int:
    from berth.select import ORDERS

    count = _int(args.count, "-n/--count", low=1)
    if args.order not in ORDERS:
        raise UsageError(f"--order {args.order!r}: expected one of {', '.join(ORDERS)}")
    from berth.api import selection

    sel = selection(
        count,
        min_free=args.min_free,
        max_util=_percent(args.max_util, "--max-util"),
        max_mem_util=_percent(args.max_mem_util, "--max-mem-util"),
        max_power=_float(args.max_power, "--max-power"),
        max_procs=_int(args.max_procs, "--max-procs", low=0),
        name=args.name,
        only=args.only,
        exclude=args.exclude,
        order=args.order,
        prefer=args.prefer,
        all=args.all,
        telemetry=False,  # only ids are printed: read what the filters need, start fast
    )
    if args.explain and not args.silent:
        sys.stderr.write("".join(line + "\n" for line in sel.explain()))
    if not sel.ok:
        if not args.silent:
            sys.stderr.write(f"berth select: {sel.explain_shortfall()}\n")
        return EXIT_UNSATISFIED
    if not args.silent:
        chosen = sel.uuids if args.uuid else [str(i) for i in sel.ids]
        sys.stdout.write(",".join(chosen) + "\n")
    return EXIT_OK
