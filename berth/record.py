"""Frozen records, declared as dataclasses are, without importing :mod:`dataclasses`.

``dataclasses`` imports ``inspect`` (~7 ms), which every ``berth select`` would pay. A record
names each field once, as an annotated class attribute::

    @record
    class Claimed(Record):
        share: float = field(default=0.0, check=_share)
        mem: int = 0

:func:`record` makes the fields slots and gives the class a constructor (positional in field
order, except ``kw_only`` fields; an unknown keyword is a TypeError naming it), equality, a
hash, a ``repr`` and :meth:`Record.replace`. A field's ``check`` gets the value given (or the
default) and the field's ``label`` (how people name it in messages: ``--min-free``) and returns
what to store, or raises; it must accept what it returns (``replace`` checks again).
``__post_init__`` runs once every field is set, for rules across fields (it may set fields with
:meth:`Record._set`). ``meta`` is free for the class's own use (``berth.selection.filters``: CLI options).
Type checkers read a record as a frozen dataclass (PEP 681 ``dataclass_transform``).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from typing import Any, ClassVar, Self, TypeVar, dataclass_transform

    T = TypeVar("T")
    Check = Callable[[Any, str], Any]  # (value given, label) -> value to store
else:

    def dataclass_transform(**_options):  # typing's, for type checkers only
        return lambda decorator: decorator


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


class Field:
    """How one field of a record is made: its default, check, label, and whether it may be
    given by position."""

    __slots__ = ("check", "default", "kw_only", "label", "meta", "name")

    def __init__(
        self, default: object, check: Check | None, label: str | None, kw_only: bool, meta: object
    ) -> None:
        self.name = ""
        self.default, self.check, self.label, self.kw_only = default, check, label, kw_only
        self.meta = meta


def field(
    *,
    default: Any = MISSING,
    check: Check | None = None,
    label: str | None = None,
    kw_only: bool = False,
    meta: object = None,
) -> Any:
    """A field with more than a default (see the module docstring)."""
    return Field(default, check, label, kw_only, meta)


class Record:
    """The base of every record: what :func:`record` gives, on the fields it found."""

    __slots__ = ()
    __fields__: ClassVar[dict[str, Field]] = {}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        cls = type(self)
        fields = cls.__fields__
        places = [n for n, f in fields.items() if not f.kw_only]
        if len(args) > len(places):
            raise TypeError(
                f"{cls.__name__}() takes {len(places)} positional arguments, {len(args)} given"
            )
        values = dict(zip(places, args, strict=False))
        for key, value in kwargs.items():
            if key not in fields:
                raise unexpected(f"{cls.__name__}()", key, fields)
            if key in values:
                raise TypeError(f"{cls.__name__}() got multiple values for argument {key!r}")
            values[key] = value
        for name, f in fields.items():
            value = values.get(name, f.default)
            if value is MISSING:
                raise TypeError(f"{cls.__name__}() missing required argument {name!r}")
            if f.check is not None:
                value = f.check(value, f.label or name)
            object.__setattr__(self, name, value)
        self.__post_init__()

    def __post_init__(self) -> None:
        """Rules across fields (none by default)."""

    def _set(self, name: str, value: object) -> None:
        """Set a field from ``__post_init__`` (the record is frozen for everyone else)."""
        object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen: cannot set {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen: cannot delete {name!r}")

    def _values(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in type(self).__fields__)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, Record)
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        shown = ", ".join(f"{n}={getattr(self, n)!r}" for n in type(self).__fields__)
        return f"{type(self).__name__}({shown})"

    def replace(self, **changes: Any) -> Self:
        """A copy with some fields changed (as ``dataclasses.replace``: checks run again)."""
        values = {name: getattr(self, name) for name in type(self).__fields__}
        values.update(changes)
        return type(self)(**values)


def unexpected(caller: str, key: str, known: Iterable[str]) -> TypeError:
    """``caller got an unexpected keyword argument 'key'``, with the nearest known name."""
    import difflib  # rare: an error

    close = difflib.get_close_matches(key, list(known), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return TypeError(f"{caller} got an unexpected keyword argument {key!r}{hint}")


@dataclass_transform(frozen_default=True, field_specifiers=(field, Field))
def record(cls: type[T]) -> type[T]:
    """Make ``cls`` (a subclass of :class:`Record`) a record of its annotated attributes."""
    own: dict[str, object] = getattr(cls, "__annotations__", {})  # its own (3.10+)
    fields: dict[str, Field] = {}
    for name, annotation in own.items():
        if str(annotation).startswith(("ClassVar", "typing.ClassVar")):
            continue
        value = cls.__dict__.get(name, MISSING)
        f = value if isinstance(value, Field) else Field(value, None, None, False, None)
        f.name = name
        fields[name] = f
    space = {k: v for k, v in cls.__dict__.items() if k not in fields}
    space.pop("__dict__", None)
    space.pop("__weakref__", None)
    space["__slots__"] = tuple(fields)
    space["__fields__"] = fields
    meta: Any = type(cls)
    made: type[T] = meta(cls.__name__, cls.__bases__, space)
    return made
