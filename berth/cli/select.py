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

gpuselect's option names work too: --util/-u, --mem_util/-m, --processes/-p, --devices/-d,
-c/--count (--max-util, --max-mem-util, --max-procs, --only, -n); -q/--quiet is --silent.
gpuselect's -n NAME is --name NAME here (-n is the count). scheduler.py's --forced_gpu/-fg
and --prefered_gpu/-pg are --only and --prefer.

Sizes take G/GiB/M/MiB (binary units; a bare number is MiB). Percentages are 0-100.
"""

from __future__ import annotations

import sys

from berth import config
from berth.api import choose, read, visible_note
from berth.cli import filters
from berth.devices import config_notes
from berth.errors import EXIT_OK, EXIT_UNSATISFIED

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse


FAST_EXIT = True  # read-only: main() may skip interpreter teardown


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-n", "-c", "--count", default="1", metavar="N", help="how many GPUs (default 1)"
    )
    filters.add_arguments(
        p,
        order_help="random (default), free (most free memory), util (least used), "
        "packed (busiest that qualifies), index",
    )
    p.add_argument("--uuid", action="store_true", help="print UUIDs instead of indices")
    p.add_argument("--explain", action="store_true", help="say why each GPU was excluded")
    p.add_argument(
        "--silent", "-q", "--quiet", action="store_true",
        help="print nothing; exit 1 on shortfall",
    )  # fmt: skip


def run(args: argparse.Namespace) -> int:
    asked = filters.from_args(args, filters.count_text(args.count, "-n/--count"))
    # only ids are printed: read what the filters need, start fast
    sel = choose(asked, all=args.all, telemetry=False)
    if not args.silent:
        sys.stderr.write("".join(f"berth select: {note}\n" for note in config_notes(config.get())))
    if args.explain and not args.silent:
        sys.stderr.write("".join(line + "\n" for line in sel.explain()))
    if not sel.ok:
        if not args.silent:  # (and which GPUs CUDA_VISIBLE_DEVICES hid, as berth.select says)
            note = "" if args.all else visible_note(read(config.get(), all=True), sel.gpus)
            sys.stderr.write(f"berth select: {sel.explain_shortfall()}{note}\n")
        return EXIT_UNSATISFIED
    if not args.silent:
        chosen = sel.uuids if args.uuid else [str(i) for i in sel.ids]
        sys.stdout.write(",".join(chosen) + "\n")
    return EXIT_OK
