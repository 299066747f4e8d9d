"""A key of berth's config file (:mod:`berth.config`), declared once: a :class:`Key` is the
attribute of the class that holds its value (``Config.poll_interval``) and says where the key
is in the file (``[section] name``), the TOML types it takes, its default, its check (which
converts the value, or refuses it with a ConfigError naming file, key and value), and its line
in the example `berth help config` prints.

At run time an instance's own value hides the Key (a non-data descriptor), so reading a
setting is a plain attribute read; for the type checker a ``Key[T]`` reads as a ``T``.
The checks several sections share are here too (:func:`bounded`, :func:`sized`).
"""

from __future__ import annotations

from berth.errors import ConfigError
from berth.units import parse_size

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, Generic, Protocol, TypeVar, overload

    class SoFar(Protocol):
        """The config read so far, as a key's check sees it (a ``Config``: named so, the
        checks would import the module that imports them)."""

        @property
        def projects(self) -> dict[str, Any]: ...

        @property
        def http_allow_remote(self) -> bool: ...

    T = TypeVar("T")
    Check = Callable[[Any, "At", SoFar], T]  # (value, where, the config so far) -> value

    class _Typed(Generic[T]):
        pass
else:
    T = None

    class _Typed:
        def __class_getitem__(cls, item: object) -> type:
            return cls


class At:
    """Where a value was read: its file, [section] and key (for messages)."""

    __slots__ = ("key", "path", "section")

    def __init__(self, path: str, section: str, key: str) -> None:
        self.path, self.section, self.key = path, section, key

    def fail(self, message: str) -> ConfigError:
        return ConfigError(f"config file {self.path!r}: {message}")


class Key(_Typed[T]):
    """One key of the config file, as an attribute of the class that holds its value: where
    it is (``[section] name``; the name defaults to the attribute's), the TOML types it takes,
    its default, ``convert`` (value, where, the config so far -> the attribute's value, or a
    ConfigError naming the value), and its line in the example: ``example`` (TOML text) and
    ``help``; ``before``: a comment line above it; ``late``: checked after the other keys
    (its check reads them)."""

    __slots__ = ("attr", "before", "convert", "default", "example", "help", "late", "name", "section", "types")

    def __init__(
        self,
        section: str,
        types: tuple[type, ...],
        default: T,
        convert: Check[T] | None,
        example: str,
        help: str = "",
        *,
        name: str = "",
        before: str = "",
        late: bool = False,
    ) -> None:
        self.section, self.types, self.default, self.convert = section, types, default, convert
        self.example, self.help, self.name, self.before = example, help, name, before
        self.attr, self.late = name, late

    def __set_name__(self, owner: type, attr: str) -> None:
        self.attr = attr
        self.name = self.name or attr

    if TYPE_CHECKING:  # (at run time an instance's own value hides the Key: a plain read)

        @overload
        def __get__(self, obj: None, owner: type) -> Key[T]: ...
        @overload
        def __get__(self, obj: object, owner: type) -> T: ...
        def __get__(self, obj: object, owner: type) -> Key[T] | T: ...
        def __set__(self, obj: object, value: T) -> None: ...


def bounded(ok: Callable[[float], bool], says: str, kind: Callable[[Any], T]) -> Check[T]:
    """A number's check: ``ok`` or "[section] key = value must be ``says``"."""

    def check(value: float, at: At, cfg: SoFar) -> T:
        if not ok(value):
            raise at.fail(f"[{at.section}] {at.key} = {value} must be {says}")
        return kind(value)

    return check


def sized(lo: int, hi: int, words: str) -> Check[int]:
    """The check of a size ("256K", or bytes) from ``lo`` to ``hi`` (``words``: the range)."""

    def check(value: str | int, at: At, cfg: SoFar) -> int:
        try:
            size = parse_size(value if isinstance(value, str) else str(value))
        except ValueError as e:
            raise at.fail(f"[{at.section}] {at.key}: {e}") from None
        if not lo <= size <= hi:
            raise at.fail(f"[{at.section}] {at.key} = {value!r} must be in {words}")
        return size

    return check


def keys_of(cls: type) -> list[Key[Any]]:
    """The Keys of a class, in the order declared."""
    return [v for v in vars(cls).values() if isinstance(v, Key)]


def set_defaults(obj: object, values: dict[str, Any]) -> None:
    """Give each Key of ``obj``'s class its value in ``values``, else its default."""
    keys = {k.attr: k for k in keys_of(type(obj))}
    if unknown := set(values) - set(keys):
        raise TypeError(f"{type(obj).__name__} has no setting {', '.join(sorted(unknown))}")
    obj.__dict__.update({attr: values.get(attr, key.default) for attr, key in keys.items()})


_SECTION_NOTES = {"limits": "for every user; `berth admin limits` sets them at runtime"}


def example(sections: dict[str, dict[str, Key[Any]]], tables: str = "") -> str:
    """The example of the config module's docstring (`berth help config`), from the keys
    (``tables``: the example of the sections of named tables, ``[projects.NAME]``)."""
    lines = ["Example::"]
    for section, keys in sections.items():
        note = _SECTION_NOTES.get(section)
        lines += ["", f"    [{section}]" + (f"{' ' * 19}# {note}" if note else "")]
        for key in keys.values():
            if key.before:
                lines.append(f"    # {key.before}")
            text = f"{key.name} = {key.example}"
            lines.append(f"    {text.ljust(25)}  # {key.help}" if key.help else f"    {text}")
    if tables:
        lines += ["", *tables.rstrip("\n").split("\n")]
    lines += ["", "The flags of `berth daemon` (--max-job-time, --kill-after, --poll-interval,",
              "--keep-finished, --policy, --http) override these keys for one run; the keys",
              "hold across restarts."]  # fmt: skip
    return "\n".join(lines) + "\n"
