"""Requirement tables: the GPU Job Scheduler's ``llm_config.json``, GPUs per model, chosen by an argument
of the command (``--llm qwen2.5-3b-inst`` -> half a GPU).

The GPU Job Scheduler's format, as it is::

    {"default_requirement": 1.0,
     "models": {"qwen2.5-3b-inst": 0.5, "qwen2.5-7b-inst": 1.0}}

berth also takes, in the same file: a model's value as ``{"gpus": 0.5, "mem": "12G"}`` (GPU
memory per GPU, as ``--mem``), and ``"argument": "--model"`` to look at another argument than
``--llm``. Any other key is an error (a typo would otherwise be ignored).

Which request a job gets, in order: ``-g`` (and ``--mem``) given on its command line win; else,
if its command has the argument (``--llm NAME`` or ``--llm=NAME``), the model's entry, or
``default_requirement`` for a model the table does not list ("unknown models", as the GPU Job Scheduler
said); a command without the argument keeps berth's default (1 GPU). ``berth show`` says where
the request came from.
"""

from __future__ import annotations

import json
import os

from berth.errors import UsageError
from berth.units import format_size, parse_size

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

DEFAULT_ARGUMENT = "--llm"
KEYS = ("default_requirement", "models", "argument")


class Choice:
    """What the table asks for a command: ``gpus`` (int or fraction), ``mem`` (bytes or
    None), and ``source`` (the sentence `berth show` prints)."""

    __slots__ = ("gpus", "mem", "source")

    def __init__(self, gpus: float, mem: int | None, source: str) -> None:
        self.gpus = gpus
        self.mem = mem
        self.source = source


class Table:
    __slots__ = ("argument", "default", "models", "path")

    def __init__(
        self,
        path: str,
        default: tuple[float, int | None] | None,
        models: dict[str, tuple[float, int | None]],
        argument: str = DEFAULT_ARGUMENT,
    ) -> None:
        self.path = path
        self.default = default
        self.models = models
        self.argument = argument

    def value(self, argv: Sequence[str]) -> str | None:
        """The argument's value in ``argv`` (the last one given, as argparse keeps), or None."""
        found = None
        flag = self.argument
        for i, word in enumerate(argv):
            if word == flag and i + 1 < len(argv):
                found = argv[i + 1]
            elif word.startswith(flag + "="):
                found = word[len(flag) + 1 :]
        return found

    def choose(self, argv: Sequence[str]) -> Choice | None:
        """The request for a command ``argv``, or None if the table says nothing of it."""
        name = self.value(argv)
        if name is None:
            return None
        where = os.path.basename(self.path)
        if name in self.models:
            gpus, mem = self.models[name]
            how = f"{where}: {self.argument} {name}"
        elif self.default is not None:
            gpus, mem = self.default
            how = f"{where}: {self.argument} {name} is not listed, default_requirement"
        else:
            return None
        return Choice(gpus, mem, f"{how} -> {_what(gpus, mem)}")


_tables: dict[str, Table] = {}


def cached(path: str) -> Table:
    """:func:`load`, once per path and process (a jobs file's lines share it)."""
    path = os.path.expanduser(path)
    table = _tables.get(path)
    if table is None:
        table = _tables[path] = load(path)
    return table


def _what(gpus: float, mem: int | None) -> str:
    text = f"{gpus:g} GPU" + ("s" if gpus > 1 else "")
    return text + (f", {format_size(mem)} each" if mem is not None else "")


def load(path: str) -> Table:
    """Read a requirement table; UsageError names the file, the key and what to write."""
    try:
        with open(path, encoding="utf-8") as f:
            raw = json.load(f)
    except OSError as e:
        raise UsageError(f"cannot read requirement table {path!r}: {e.strerror}") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise UsageError(f"requirement table {path!r} is not JSON: {e}") from None
    if not isinstance(raw, dict):
        raise UsageError(f"requirement table {path!r}: expected an object with {KEYS[:2]}")
    for key in raw:
        if key not in KEYS:
            raise UsageError(
                f"requirement table {path!r}: unknown key {key!r} (known: {', '.join(KEYS)})"
            )
    models = raw.get("models", {})
    if not isinstance(models, dict):
        raise UsageError(f'requirement table {path!r}: "models" must be an object, name -> GPUs')
    argument = raw.get("argument", DEFAULT_ARGUMENT)
    if not isinstance(argument, str) or not argument.startswith("-") or "=" in argument:
        raise UsageError(
            f'requirement table {path!r}: "argument" = {argument!r} must be an option such '
            'as "--llm"'
        )
    default = None
    if "default_requirement" in raw:
        default = _entry(path, "default_requirement", raw["default_requirement"])
    table = {str(k): _entry(path, f"models.{k}", v) for k, v in models.items()}
    return Table(os.path.abspath(path), default, table, argument)


def _entry(path: str, key: str, value: Any) -> tuple[float, int | None]:
    def bad(why: str) -> UsageError:
        return UsageError(f"requirement table {path!r}: {key} = {value!r}: {why}")

    mem = None
    if isinstance(value, dict):
        unknown = set(value) - {"gpus", "mem"}
        if unknown or "gpus" not in value:
            raise bad('expected a number of GPUs, or {"gpus": 0.5, "mem": "12G"}')
        if value.get("mem") is not None:
            m = value["mem"]
            if isinstance(m, bool) or not isinstance(m, (str, int)):
                raise bad('"mem" must be a size such as "12G" (or MiB as an integer)')
            try:
                mem = parse_size(str(m), what=f"{key}.mem")  # an integer: MiB, as --mem
            except ValueError as e:
                raise bad(str(e)) from None
        value = value["gpus"]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise bad("the GPUs must be a number (1, 2, or a fraction such as 0.5)")
    g = float(value)
    if not g > 0 or (g > 1 and g != int(g)) or g > 1024:
        raise bad("the GPUs must be a whole number, or a fraction below 1 (0.5)")
    return (int(g) if g >= 1 else g), mem
