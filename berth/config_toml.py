"""The plain TOML a berth config file holds, read without :mod:`tomllib` (whose import and
regular expressions cost every CLI command that finds a config file ~3 ms, more than the rest
of ``berth submit``'s own work).

:func:`loads` reads a file made only of ``[section]`` headers and ``key = value`` lines, whose
values are strings without escapes, decimal integers and floats, ``true`` and ``false``, with
comments and blank lines; it reads them exactly as TOML does. Anything else (an array, an
escape, a dotted key, a key given twice, a date...) gives None: the caller reads that file with
:mod:`tomllib`, which also says what is wrong with a malformed one.
"""

from __future__ import annotations

import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_LINE = re.compile(
    r"[ \t]*(?:"
    r"\[[ \t]*([A-Za-z0-9_-]+)[ \t]*\]"  # [section]
    r"|([A-Za-z0-9_-]+)[ \t]*=[ \t]*("  # key = value
    r'"[^"\\\x00-\x08\x0a-\x1f\x7f]*"'  # a basic string without escapes
    r"|'[^'\x00-\x08\x0a-\x1f\x7f]*'"  # a literal string
    r"|true|false"
    r"|[+-]?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?"  # a decimal number
    r"))?[ \t]*(?:#[^\x00-\x08\x0a-\x1f\x7f]*)?"
)


def loads(text: str) -> dict[str, Any] | None:
    """The document, or None if it is not of the plain kind this reads (see the module)."""
    if "\r" in text:
        return None
    doc: dict[str, Any] = {}
    table = doc
    for line in text.split("\n"):
        m = _LINE.fullmatch(line)
        if m is None:
            return None
        section, key, value = m.groups()
        if section is not None:
            if section in doc:
                return None
            table = doc[section] = {}
        elif key is not None:
            if key in table:
                return None
            table[key] = _value(value)
    return doc


def _value(text: str) -> Any:
    if text[0] in "\"'":
        return text[1:-1]
    if text in ("true", "false"):
        return text == "true"
    if "." in text or "e" in text or "E" in text:
        return float(text)
    return int(text)
