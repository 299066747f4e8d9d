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

import sys

from berth.errors import ConfigError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_BARE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_DIGITS = frozenset("0123456789")


def parse(path: str, data: bytes) -> dict[str, Any]:
    """The document in ``data`` (the bytes of the config file ``path``): with :func:`loads`
    when it is plain, else with :mod:`tomllib`; ConfigError when it is malformed."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(f"malformed config file {path!r}: {e}; fix or remove it") from None
    plain = loads(text)  # most config files: without tomllib's cost
    if plain is not None:
        return plain
    if sys.version_info >= (3, 11):
        import tomllib  # rare: a config file exists
    else:
        import tomli as tomllib  # rare: a config file exists (Python 3.10)
    try:
        result: dict[str, Any] = tomllib.loads(text)
        return result
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"malformed config file {path!r}: {e}; fix or remove it") from None


def loads(text: str) -> dict[str, Any] | None:
    """The document, or None if it is not of the plain kind this reads (see the module).
    (String methods, not a regular expression: compiling one would cost ~1 ms a start.)"""
    if "\r" in text or any((c < " " and c not in "\t\n") or c == "\x7f" for c in text):
        return None
    doc: dict[str, Any] = {}
    table = doc
    for raw in text.split("\n"):
        line = raw.strip(" \t")
        if not line or line[0] == "#":
            continue
        if line[0] == "[":
            end = line.find("]")
            name = line[1:end].strip(" \t")
            rest = line[end + 1 :].lstrip(" \t")
            if end < 0 or not _bare(name) or (rest and rest[0] != "#") or name in doc:
                return None
            table = doc[name] = {}
            continue
        key, eq, value = line.partition("=")
        key = key.rstrip(" \t")
        if not eq or not _bare(key) or key in table:
            return None
        parsed = _value(value.lstrip(" \t"))
        if parsed is None:
            return None
        table[key] = parsed[0]
    return doc


def _bare(key: str) -> bool:
    return bool(key) and _BARE.issuperset(key)


def _value(text: str) -> tuple[Any] | None:
    """(the value,) of ``text`` (a value, then maybe a comment), or None."""
    if text[:1] in ('"', "'"):
        q = text[0]
        end = text.find(q, 1)
        if end < 0 or (q == '"' and "\\" in text[1:end]):
            return None
        value: Any = text[1:end]
        rest = text[end + 1 :]
    else:
        word, _, comment = text.partition("#")
        rest = "#" + comment if _ else ""
        word = word.rstrip(" \t")
        value = _scalar(word)
        if value is None:
            return None
    rest = rest.lstrip(" \t")
    if rest and rest[0] != "#":
        return None
    return (value,)


def _scalar(word: str) -> Any:
    """true, false, or a decimal integer or float as TOML writes them; else None."""
    if word in ("true", "false"):
        return word == "true"
    body = word[1:] if word[:1] in ("+", "-") else word
    mantissa, e, exponent = body.replace("E", "e").partition("e")
    whole, dot, frac = mantissa.partition(".")
    if not _int(whole) or (dot and not _digits(frac)):
        return None
    if e:
        sign = exponent[:1] in ("+", "-")
        if not _digits(exponent[1:] if sign else exponent):
            return None
    if dot or e:
        return float(word)
    return int(word)


def _digits(s: str) -> bool:
    return bool(s) and _DIGITS.issuperset(s)


def _int(s: str) -> bool:
    return _digits(s) and (s == "0" or s[0] != "0")
