"""Examples:

  berth submit --pty -- python train.py   # progress bars and colours, as in a terminal
  berth attach 12                         # its screen as it is now, then live; type into
                                          # it; Ctrl-] detaches
  berth queue --pty                       # which jobs have a terminal (the GPU Job Scheduler's `screens`)

Only jobs started with --pty have a terminal to attach to; for others, `berth logs -f ID`.
Attaching shows the job's recent output first (its last 64 KiB, from a line's start), so what
is on its screen, a prompt waiting for input included, is on yours, as with `screen -r`.
Only the job's owner and root may attach (its terminal's socket is its owner's, mode 0600).
Detaching (Ctrl-], or closing the terminal) leaves the job running. Resizing your terminal
resizes the job's (it gets SIGWINCH, as under ssh). Several people may attach to the same job
at once: each sees everything, all typing reaches the job, and the last window size sent
(by attaching or resizing) is the job's.
"""

from __future__ import annotations

import os
import select
import signal
import socket
import sys
import termios
import time
import tty

from berth.cli.job_ids import job_ref
from berth.client import call
from berth.errors import BerthError, Refused
from berth.wire.ptyframes import WINSIZE, encode_input, encode_resize

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse

DETACH = b"\x1d"  # Ctrl-]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("job_id", type=job_ref, help="the job (12), or an array's task (12_3)")


def run(args: argparse.Namespace) -> int:
    job = call("attach", job_id=args.job_id)["job"]  # its owner's or an admin's
    if not job.get("pty"):
        raise BerthError(
            f"job {args.job_id} was not started with --pty, so it has no terminal; "
            f"follow its output with `berth logs -f {args.job_id}`"
        )
    if not job.get("attach"):
        raise BerthError(f"job {args.job_id} is {job['state']}, not running: nothing to attach to")
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    deadline = time.monotonic() + 3  # a job that has just started may not have it yet
    while True:
        try:
            conn.connect(job["attach"])
            break
        except PermissionError:
            raise Refused(
                f"cannot attach to job {args.job_id}: its terminal is {job.get('user')}'s "
                f"(mode 0600); only they or root may attach: `sudo berth attach {args.job_id}`"
            ) from None
        except OSError as e:
            if time.monotonic() > deadline:
                raise BerthError(f"cannot attach to job {args.job_id}: {e.strerror}") from None
            time.sleep(0.05)
    # SIGWINCH wakes the loop through a pipe (a handler that sent the size itself could run in
    # the middle of a sendall). Set up before the first size is read, so no change is missed.
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    old_handler = signal.signal(signal.SIGWINCH, _ignore)
    old_wakeup = signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    interactive = os.isatty(0)
    saved = None
    try:
        size = window_size()
        conn.sendall(WINSIZE.pack(*size))
        if interactive:
            saved = termios.tcgetattr(0)
            tty.setraw(0)
            sys.stderr.write(f"[attached to job {args.job_id}; Ctrl-] detaches]\r\n")
        _relay(conn, wake_r, size, interactive)
    finally:
        if saved is not None:
            termios.tcsetattr(0, termios.TCSADRAIN, saved)
        signal.set_wakeup_fd(old_wakeup)
        signal.signal(signal.SIGWINCH, old_handler)
        os.close(wake_r)
        os.close(wake_w)
        conn.close()
    sys.stderr.write(f"\n[detached from job {args.job_id}]\n" if interactive else "")
    return 0


def _relay(conn: socket.socket, wake: int, size: tuple[int, int], interactive: bool) -> None:
    """Copy the job's output to stdout, stdin to the job, and new window sizes to the relay
    (``wake`` becomes readable on SIGWINCH), until the job ends or the user detaches."""
    fds = [conn.fileno(), 0, wake]
    try:
        while True:
            ready, _, _ = select.select(fds, [], [])
            if wake in ready:
                try:
                    while os.read(wake, 512):
                        pass
                except BlockingIOError:
                    pass
                new = window_size()
                if new != size:
                    size = new
                    conn.sendall(encode_resize(*size))
            if conn.fileno() in ready:
                data = conn.recv(65536)
                if not data:
                    return  # the job ended
                os.write(1, data)
            if 0 in ready:
                data = os.read(0, 4096)
                if not data:
                    fds.remove(0)  # stdin closed: keep watching
                    continue
                if interactive and DETACH in data:
                    conn.sendall(encode_input(data[: data.index(DETACH)]))
                    return
                conn.sendall(encode_input(data))
    except ConnectionError:  # the relay dropped us, or went away with the job
        return


def _ignore(signum: int, frame: object) -> None:
    """SIGWINCH: the wakeup fd does the work."""


def window_size() -> tuple[int, int]:
    """(rows, cols) of our terminal now; $LINES x $COLUMNS or 24 x 80 without one."""
    for fd in (1, 0, 2):
        try:
            cols, rows = os.get_terminal_size(fd)
            if rows and cols:
                return rows, cols
        except OSError:
            continue
    try:
        rows, cols = int(os.environ["LINES"]), int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        return 24, 80
    return min(max(rows, 1), 0xFFFF), min(max(cols, 1), 0xFFFF)
