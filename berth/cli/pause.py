"""Examples:

  berth pause 0 3         # drain GPUs 0 and 3: nothing new starts there; running jobs go on
  berth pause 4-7         # drain GPUs 4, 5, 6 and 7
  berth resume 0          # use GPU 0 again
  berth resume --all      # every GPU, and the queue after --paused-after-crash

Paused GPUs stay paused across daemon restarts. GPUs are named by index or UUID (prefix).
"""

from __future__ import annotations

import argparse
import json
import sys

from berth.client import call
from berth.errors import UsageError
from berth.units import parse_gpu_words


def add_arguments(p: argparse.ArgumentParser) -> None:
    resume = p.prog.endswith("resume")
    p.add_argument("gpus", nargs="*", help="GPU indices (0 3, 0-3), or UUIDs")
    p.add_argument(
        "--all",
        action="store_true",
        # pause refuses --all (a typo would drain every GPU); its help does not offer it
        help="every paused GPU, and the queue after --paused-after-crash"
        if resume
        else argparse.SUPPRESS,
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")


def run(args: argparse.Namespace) -> int:
    resuming = getattr(args, "command", "pause") == "resume"
    if resuming:
        if not args.gpus and not args.all:
            raise UsageError("name the GPUs to resume, or use --all")
        reply = call("resume", gpus=parse_gpu_words(args.gpus, what="GPU"), all=args.all)
    else:
        if args.all:
            raise UsageError("`berth pause` takes GPU ids; --all is for `berth resume`")
        if not args.gpus:
            raise UsageError("name the GPUs to pause, e.g. `berth pause 0 3`")
        reply = call("pause", gpus=parse_gpu_words(args.gpus, what="GPU"))
    if args.json:
        sys.stdout.write(json.dumps(reply) + "\n")
    else:
        paused = ", ".join(str(i) for i in reply["paused"]) or "none"
        sys.stdout.write(f"paused GPUs: {paused}\n")
        if reply.get("queue_paused"):
            sys.stdout.write("the queue is paused (after a crash): `berth resume --all`\n")
    return 0
