"""Wait for GPUs, claim them, run a command on them, release them when it ends.

The command runs (argv, never through a shell) in its own process group with
CUDA_VISIBLE_DEVICES set to its GPUs and CUDA_DEVICE_ORDER=PCI_BUS_ID (so cuda:0 is its
first GPU), plus BERTH_GPUS (indices) and BERTH_GPU_UUIDS. SIGINT, SIGTERM and SIGHUP are
passed on to its process group; berth run exits with its exit code (128+N when signal N
killed it). The claim lives exactly as long as the command: it is held by descriptors the
command inherits, so even `kill -9` of berth run leaves it held until the command ends.
While waiting, a status line on the terminal says for what, why, and how many wait ahead.
Waiters are served fairly: older first (see `docs/claims.md`).

examples:
  berth run -- python train.py --lr 3e-4          one idle GPU
  berth run -g 2 --min-free 20G -- python train.py
  berth run -g 0.5 --mem 12G -- python eval.py    half a GPU, 12 GiB declared
  berth run --only 2 -v -- python train.py foo    wait for GPU 2; print a summary at the end
  berth run --prefer 1 -o out.log -e err.log -- ./job.sh
  berth run --timeout 10m --name A100 -- python train.py
  berth run --only 0,1 -- torchrun --nproc_per_node=2 train.py
                                                  GPUs 0 and 1, both (-g 1 --only 0-3: one of them)
  berth run --wrap "python prep.py && python train.py"   a shell command string (/bin/sh -c)

--only without -g asks for all the GPUs it names; with -g N, N of them. GPU lists take ranges
(0-3, 0-3,6) and UUIDs. A command given as one quoted string ("python job.py --x 5") is refused
with the two ways to write it: the words apart after --, or --wrap "python job.py --x 5".

gpuselect's options work as in `berth select`: -c/--count (-g), -u, -m, -p, -d (--max-util,
--max-mem-util, --max-procs, --only); its -n NAME is --name NAME here (-n is the count).

scheduler.py's scheduler.py, translated (-gc/--gpu_count and gpuselect's --count are -g;
--forced_gpu/-fg is --only, --prefered_gpu/-pg is --prefer):
  scheduler.py "train.py foo --bar 5" --forced_gpu 2 --verbose
      -> berth run --only 2 -v -- python train.py foo --bar 5
      or berth run --only 2 -v --wrap "python train.py foo --bar 5"
  scheduler.py "task" -gc 2 -pg 1 -o out.txt -e err.txt
      -> berth run -gc 2 --prefer 1 -o out.txt -e err.txt -- task
  scheduler.py -s            -> berth status
  scheduler.py -rg 0 2       -> berth release 0 2   (admin)
  scheduler.py -i 5 3 4      -> [inventory] gpus = 5, unavailable = [3, 4] in the config
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time

from berth import config
from berth.api.lease import claim
from berth.cli import filters
from berth.cli.command import words
from berth.devices import config_notes
from berth.errors import UsageError
from berth.units import GPU_COUNT_RULE, format_duration, gpu_count, parse_duration

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import IO

    from berth.claims.ledger import LedgerScan
    from berth.selection.choose import Selection
    from berth.selection.filters import Filters


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-g",
        "--gpus",
        "--count",
        "-c",
        "-n",
        "-gc",
        "--gpu_count",
        dest="gpus",
        metavar="N",
        help="GPUs: 1, 2... or a share such as 0.5 (default 1, or every GPU of --only)",
    )
    p.add_argument("--mem", metavar="SIZE", help="GPU memory to declare per GPU, e.g. 12G")
    p.add_argument(
        "--timeout", metavar="TIME", help="give up after waiting this long (90, 15m, 2h)"
    )
    p.add_argument(
        "--poll",
        default="5",
        metavar="S",
        help="seconds between GPU reads while waiting (5); claims wake at once",
    )
    filters.add_arguments(
        p, order_help="random, free, util, packed or index (default: random; packed for shares)"
    )
    p.add_argument("-o", "--out", metavar="FILE", help="write the command's stdout to FILE")
    p.add_argument("-e", "--err", metavar="FILE", help="write the command's stderr to FILE")
    p.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="print pid, GPUs, start, duration, exit status at the end",
    )
    p.add_argument(
        "--gpu-var", action="store_true", help="also set GPU=cuda:0 (scheduler.py's variable)"
    )
    p.add_argument("--wrap", metavar="CMD", help="a shell command string, run by /bin/sh -c")
    p.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- CMD ARGS...", help="the command")


def request_from(args: argparse.Namespace) -> Filters:
    only = filters.gpu_list(args.only, "--only")
    given = args.gpus is not None
    text = filters.count_text(args.gpus, "-g/--gpus") if given else str(len(only) if only else 1)
    try:
        gpus = gpu_count(float(text), "-g/--gpus")  # the one rule (and message) of a GPU count
    except ValueError:
        raise UsageError(f"-g/--gpus = {text!r}: {GPU_COUNT_RULE}") from None
    if only and gpus > len(only):
        raise UsageError(
            f"-g {text} --only {args.only}: asks for more GPUs than --only names ({len(only)}); "
            "leave out -g to take all of them"
        )
    if gpus < 1:
        return filters.from_args(args, 1, gpus, mem=args.mem)
    return filters.from_args(args, int(gpus), mem=args.mem)


class StatusLine:
    """One line on the terminal that says what berth run waits for (stderr if a TTY)."""

    def __init__(self, want: str) -> None:
        self.tty = sys.stderr.isatty()
        self.want = want
        self.start = time.monotonic()
        self.shown = False

    def __call__(self, position: int, sel: Selection, state: LedgerScan) -> None:
        waited = format_duration(time.monotonic() - self.start)
        ahead = f"{position} waiting ahead" if position else "first in line"
        text = f"berth run: waiting {waited} for {self.want} ({ahead}); {sel.explain_shortfall()}"
        if self.tty:
            try:
                width = os.get_terminal_size(sys.stderr.fileno()).columns or 200
            except OSError:
                width = 200
            sys.stderr.write("\r\x1b[K" + text[: max(10, width - 1)])
            sys.stderr.flush()
        elif not self.shown:
            sys.stderr.write(text + "\n")
        self.shown = True

    def clear(self) -> None:
        if self.tty and self.shown:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()


def _open(path: str | None, option: str) -> IO[bytes] | None:
    if path is None:
        return None
    try:
        return open(path, "wb")
    except OSError as e:
        raise UsageError(f"{option} {path!r}: {e.strerror}") from None


def run(args: argparse.Namespace) -> int:
    cmd = words(args.argv, args.wrap, prog="berth run") or ["/bin/sh", "-c", args.wrap]
    request = request_from(args)
    timeout = None if args.timeout is None else parse_duration(args.timeout, what="--timeout")
    poll = parse_duration(args.poll, what="--poll")
    if not poll > 0:
        raise UsageError(f"--poll {args.poll!r}: must be above 0")
    out, err = _open(args.out, "-o/--out"), _open(args.err, "-e/--err")
    sys.stderr.write("".join(f"berth run: {note}\n" for note in config_notes(config.get())))
    status = StatusLine(request.describe())
    try:
        lease, snaps = claim(
            request, timeout=timeout, poll=poll, all=args.all, label="berth run",
            command=args.wrap or shlex.join(cmd), on_wait=status,
        )  # fmt: skip
    finally:
        status.clear()
    from berth.claims.launch import run_command  # heavy (subprocess): not for --help

    return run_command(
        lease, snaps, cmd, out=out, err=err, verbose=args.verbose, gpu_var=args.gpu_var
    )
