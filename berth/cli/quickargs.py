"""A command's common form read without argparse (issue 21: argparse, its gettext messages and
the ``re`` they need are most of what `berth submit` costs to start).

:func:`read` takes the command's options as the parser is built from them (``(flags,
add_argument's keywords)``, e.g. :func:`berth.cli.submit_options.declared`: one declaration,
not two lists) and the words after the command's name, and gives the namespace argparse would
give, or None for anything it does not fully understand: then the caller builds the parser
and argparse reads the words as before (``--help``, every error and its message, abbreviated
options, a value that starts with ``-``, ...). So a command line reads the same either way.

Understood: options by their exact names; ``--long VALUE``, ``--long=VALUE``, ``-s VALUE``,
``-sVALUE`` (``-g2``); flags (``store_true``/``store_false``); ``append``; ``type=int``;
repeated options (the last wins, as in argparse); then the command: the rest of the words
from ``--`` or the first word that is not an option (argparse's ``nargs="..."``, which keeps
the ``--``). Not understood, so argparse's: an option word it does not know (``-h``, an
abbreviation, a cluster of short flags ``-iv``), a value that starts with ``-`` (argparse's
own rules decide whether that is a value), an empty ``--long=`` or ``--long=--``, a flag
given a value, a missing value, an int that does not parse, a lone ``-``, a word of the
command (with no ``--`` before it) that abbreviates several options (argparse refuses it
even there), and any declaration with keywords other than those above.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from argparse import Namespace
    from collections.abc import Sequence

    from berth.cli.submit_options import Option
else:

    class Namespace:
        """argparse.Namespace's behaviour as the commands use it: attributes, ``==``."""

        def __init__(self, **kwargs: object) -> None:
            self.__dict__.update(kwargs)

        def __eq__(self, other: object) -> bool:
            return vars(self) == vars(other) if hasattr(other, "__dict__") else NotImplemented

        def __contains__(self, key: str) -> bool:
            return key in self.__dict__

        def __repr__(self) -> str:
            return f"Namespace({', '.join(f'{k}={v!r}' for k, v in vars(self).items())})"


_KEYWORDS = {"dest", "type", "default", "metavar", "help", "action", "nargs"}
_DEFAULTS = {"store": None, "store_true": False, "store_false": True, "append": None}
_VALUE = ("store", "append")  # the actions that take a value


class _Opt:
    __slots__ = ("action", "dest", "type")

    def __init__(self, action: str, dest: str, type_: object) -> None:
        self.action, self.dest, self.type = action, dest, type_


def _table(options: Sequence[Option]) -> tuple[dict[str, _Opt], dict[str, object], str] | None:
    """(option string -> how to read it, each destination's default, the command's
    destination), or None if a declaration is not one :func:`read` understands."""
    table: dict[str, _Opt] = {}
    defaults: dict[str, object] = {}
    command = ""
    for flags, kw in options:
        action = kw.get("action", "store")
        if not set(kw) <= _KEYWORDS or action not in _DEFAULTS:
            return None
        if not flags[0].startswith("-"):  # the positional: the command, argparse's "..."
            if command or kw.get("nargs") != "..." or len(flags) != 1 or action != "store":
                return None
            command = str(kw.get("dest", flags[0]))
            defaults.setdefault(command, kw.get("default"))
            continue
        longs = [f for f in flags if f.startswith("--")]
        dest = str(
            kw.get("dest") or (longs[0] if longs else flags[0]).lstrip("-").replace("-", "_")
        )
        type_ = kw.get("type")
        if "nargs" in kw or type_ not in (None, int) or any(f in table for f in flags):
            return None
        default = kw.get("default", _DEFAULTS[str(action)])
        if isinstance(default, str) and type_ is not None:  # (argparse would convert it)
            return None
        defaults.setdefault(dest, default)  # (the first declaration of a dest gives its default)
        for f in flags:
            if len(f) < 2 or (not f.startswith("--") and len(f) != 2):
                return None
            table[f] = _Opt(str(action), dest, type_)
    return (table, defaults, command) if command else None


def read(options: Sequence[Option], words: Sequence[str]) -> Namespace | None:
    """The namespace argparse would give for ``words``, or None: let argparse read them."""
    known = _table(options)
    if known is None:
        return None
    table, values, command = known
    values = dict(values)
    i, n = 0, len(words)
    while i < n:
        word = words[i]
        if word == "--" or not word.startswith("-"):
            break
        value: str | None = None
        if word.startswith("--"):
            name, eq, given = word.partition("=")
            opt = table.get(name)
            if eq:
                if not given or given == "--":  # (argparse drops a `--` given with `=`)
                    return None
                value = given
        else:
            opt = table.get(word[:2])
            if len(word) > 2:
                value = word[2:]
                if value[0] in "=-":
                    return None
        if opt is None:
            return None
        i += 1
        if opt.action not in _VALUE:
            if value is not None:
                return None
            values[opt.dest] = opt.action == "store_true"
            continue
        if value is None:
            if i == n or words[i].startswith("-"):
                return None
            value = words[i]
            i += 1
        stored: object = value
        if opt.type is int:
            try:
                stored = int(value)
            except ValueError:
                return None
        if opt.action == "append":
            before = values[opt.dest]
            stored = [*(before if isinstance(before, list) else ()), stored]
        values[opt.dest] = stored
    if i < n and words[i] != "--" and _ambiguous(table, words[i + 1 :]):
        return None
    values[command] = list(words[i:])
    return Namespace(**values)


def _ambiguous(table: dict[str, _Opt], words: Sequence[str]) -> bool:
    """Whether argparse refuses one of ``words`` (the command's, not after a ``--``) as an
    abbreviation of several options: it reads every word's kind before it reads the command
    (``berth submit python train.py --gpu 1``: "ambiguous option")."""
    for word in words:
        if word == "--":
            return False
        name = word.partition("=")[0]
        if word.startswith("--") and name not in table:  # (argparse's --help counts too)
            if sum(option.startswith(name) for option in (*table, "--help")) > 1:
                return True
    return False
