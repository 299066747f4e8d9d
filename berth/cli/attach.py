"""Examples:

  berth submit --pty -- python train.py   # progress bars and colours, as in a terminal
  berth attach 12                         # see it live and type into it; Ctrl-] detaches

Only jobs started with --pty have a terminal to attach to; for others, `berth logs -f ID`.
Detaching (Ctrl-], or closing the terminal) leaves the job running. Several people may attach
to the same job at once (each sees everything; all typing reaches the job).
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse

HELP = "attach to the terminal of a job started with --pty (Ctrl-] detaches)"
DETACH = b"\x1d"  # Ctrl-]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("job_id", type=int, help="the job")


def run(args: argparse.Namespace) -> int:
    import select
    import shutil
    import socket
    import struct

    from berth.client import call
    from berth.errors import BerthError

    job = call("show", job_id=args.job_id)["job"]
    if not job.get("pty"):
        raise BerthError(
            f"job {args.job_id} was not started with --pty, so it has no terminal; "
            f"follow its output with `berth logs -f {args.job_id}`"
        )
    if not job.get("attach"):
        raise BerthError(f"job {args.job_id} is {job['state']}, not running: nothing to attach to")
    import time

    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    deadline = time.monotonic() + 3  # a job that has just started may not have it yet
    while True:
        try:
            conn.connect(job["attach"])
            break
        except OSError as e:
            if time.monotonic() > deadline:
                raise BerthError(f"cannot attach to job {args.job_id}: {e.strerror}") from None
            time.sleep(0.05)
    size = shutil.get_terminal_size()
    conn.sendall(struct.pack("HH", size.lines, size.columns))
    interactive = os.isatty(0)
    saved = None
    if interactive:
        import termios
        import tty

        saved = termios.tcgetattr(0)
        tty.setraw(0)
        sys.stderr.write(f"[attached to job {args.job_id}; Ctrl-] detaches]\r\n")
    try:
        fds = [conn.fileno(), 0]
        while True:
            ready, _, _ = select.select(fds, [], [])
            if conn.fileno() in ready:
                data = conn.recv(65536)
                if not data:
                    break  # the job ended
                os.write(1, data)
            if 0 in ready:
                data = os.read(0, 4096)
                if not data:
                    fds = [conn.fileno()]  # stdin closed: keep watching
                    continue
                if interactive and DETACH in data:
                    conn.sendall(data[: data.index(DETACH)])
                    break
                conn.sendall(data)
    finally:
        if saved is not None:
            import termios

            termios.tcsetattr(0, termios.TCSADRAIN, saved)
        conn.close()
    sys.stderr.write(f"\n[detached from job {args.job_id}]\n" if interactive else "")
    return 0
