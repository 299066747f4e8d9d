"""A screen that refreshes in place on a terminal, as top and nvitop do (``status --watch``).

On a terminal: the alternate screen (the shell's screen and scrollback come back untouched
on exit), each frame cut to the window (lines past its height summed up in a last line, none
wider than it), drawn over the last one from the top with no clearing in between (no
flicker, nothing scrolled into the scrollback), redrawn at once when the window is resized,
and ``q`` (or Ctrl-C) quits. Elsewhere (a pipe, a file) each frame is written whole after
``ESC [H ESC [2J``, as before.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

ENTER = "\x1b[?1049h\x1b[?25l"  # alternate screen, cursor hidden
LEAVE = "\x1b[?25h\x1b[?1049l"
QUIT_KEYS = (b"q", b"Q", b"\x03", b"\x04")  # q, Ctrl-C, Ctrl-D (in cbreak mode: bytes)


def fit(text: str, columns: int, rows: int) -> list[str]:
    """``text``'s lines cut to ``columns`` and to ``rows`` lines; what does not fit is said
    in the last line."""
    lines = [ln if len(ln) <= columns else ln[: max(columns - 1, 0)] + "~" for ln in
             text.rstrip("\n").split("\n")]  # fmt: skip
    if len(lines) > rows:
        hidden = len(lines) - rows + 1
        more = f"... {hidden} more line{'s' if hidden != 1 else ''}: a taller window shows them"
        lines = [*lines[: rows - 1], more[:columns]]
    return lines


def run(frame: Callable[[int | None, int | None], str], title: str, interval: float) -> int:
    """Show ``frame(columns, rows)`` every ``interval`` seconds until quit; the exit code.
    ``rows`` is the window's height less the header line and the blank line under it (both
    None off a terminal). ``title`` ends the header line ("Ctrl-C to stop")."""
    out = sys.stdout
    if not (out.isatty() and sys.stdin.isatty()):
        return _plain(frame, title, interval)
    import termios  # rare: a terminal
    import tty  # rare: a terminal

    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    old = signal.signal(signal.SIGWINCH, lambda *_: _poke(wake_w))
    try:
        tty.setcbreak(fd)
        out.write(ENTER)
        while True:
            size = os.get_terminal_size(out.fileno())
            head = f"{time.strftime('%H:%M:%S')}  every {interval:g}s, q or {title}"
            body = frame(size.columns, max(size.lines - 2, 1))
            lines = fit(f"{head[: size.columns]}\n\n{body}", size.columns, size.lines)
            out.write("\x1b[H" + "\x1b[K\n".join(lines) + "\x1b[K\x1b[J")
            out.flush()
            if _wait(fd, wake_r, interval):
                return 0
    except KeyboardInterrupt:
        return 0
    finally:
        out.write(LEAVE)
        out.flush()
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)
        signal.signal(signal.SIGWINCH, old)
        os.close(wake_r)
        os.close(wake_w)


def _poke(fd: int) -> None:
    try:
        os.write(fd, b"!")
    except OSError:  # (full: a redraw is already due)
        pass


def _wait(fd: int, wake: int, interval: float) -> bool:
    """Wait for the next frame: True when a quit key was pressed; False at the interval or
    on a resize (redraw now)."""
    deadline = time.monotonic() + interval
    while (left := deadline - time.monotonic()) > 0:
        try:
            ready, _, _ = select.select([fd, wake], [], [], left)
        except InterruptedError:  # (a signal: SIGWINCH's handler has poked the pipe)
            continue
        if wake in ready:
            os.read(wake, 64)
            return False
        if fd in ready:
            keys = os.read(fd, 64)
            if any(k in keys for k in QUIT_KEYS):
                return True
    return False


def _plain(frame: Callable[[int | None, int | None], str], title: str, interval: float) -> int:
    try:
        while True:
            body = frame(None, None)
            stamp = time.strftime("%H:%M:%S")
            sys.stdout.write(f"\x1b[H\x1b[2J{stamp}  every {interval:g}s, {title}\n\n{body}")
            sys.stdout.flush()
            time.sleep(interval)
    except KeyboardInterrupt:
        sys.stdout.write("\n")
        return 0
