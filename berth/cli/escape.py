"""What every screen prints of what a user typed: :func:`shown`, the one escaping function.

A job's name, command, directory or log path, a user's name, a drain note, another user's
process command line: each is whatever somebody typed, and each reaches other users'
terminals (`berth status`, `status --watch`, `queue`, `queue --start`, `show`, `admin`
listings). An escape sequence there would set a window title, write the clipboard (OSC 52)
or fake lines; a lone surrogate (``-J $'\\xff'`` arrives as one) cannot be written by a
strict UTF-8 stream and would crash the screen for everyone. So every screen passes such text
through :func:`shown`. Standard library only (imported on the CLI's start-up path).
"""

from __future__ import annotations


def shown(text: object) -> str:
    """``text`` safe to print on anyone's terminal: unprintable characters are shown escaped,
    ``\\xff`` for a byte that was not UTF-8 (surrogateescape), ``\\x1b``, ``\\n``, ``\\ud800``
    for any other lone surrogate; printable text is unchanged."""
    text = str(text)
    if text.isprintable():
        return text
    out = []
    for c in text:
        if c.isprintable():
            out.append(c)
        elif "\udc80" <= c <= "\udcff":  # a byte that was not UTF-8 (surrogateescape)
            out.append(f"\\x{ord(c) - 0xDC00:02x}")
        else:
            out.append(c.encode("unicode_escape").decode("ascii"))
    return "".join(out)
