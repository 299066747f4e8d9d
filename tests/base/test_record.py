"""berth/record.py against the library it stands in for (issue 38, step 6): for generated
classes, a ``@record`` and a ``@dataclass(frozen=True)`` of the same fields (defaults,
keyword-only fields) take and refuse the same calls, and the records they make have the same
``repr``, equality, hash, ``replace`` and refusal to change. Fixed seeds: a failure names its
case, and reruns the same."""

from __future__ import annotations

import dataclasses
import random
from typing import Any

import pytest

from berth.record import Record, field, record

VALUES: list[object] = [0, 1, -7, 2**70, 0.5, -0.0, "", "x", "é ✓", None, True, (1, "a"), ()]
NAMES = ["a", "b", "c", "d", "e"]


def _classes(rng: random.Random) -> tuple[type, type, list[tuple[str, bool, bool]]]:
    """A record class and its dataclass twin, and their fields: (name, has a default,
    keyword-only), in an order dataclasses accept (positional ones without a default first)."""
    specs: list[tuple[str, bool, bool]] = []
    defaulted = False
    for name in NAMES[: rng.randint(0, len(NAMES))]:
        kw_only = rng.random() < 0.3
        has_default = rng.random() < 0.5 or (defaulted and not kw_only)
        defaulted |= has_default and not kw_only
        specs.append((name, has_default, kw_only))
    defaults = {name: rng.choice(VALUES) for name, has, _ in specs if has}
    body: dict[str, Any] = {"__annotations__": {name: "object" for name, _, _ in specs}}
    twin: dict[str, Any] = {"__annotations__": dict(body["__annotations__"])}
    for name, has, kw_only in specs:
        if has:
            body[name] = field(default=defaults[name], kw_only=kw_only)
            twin[name] = dataclasses.field(default=defaults[name], kw_only=kw_only)
        elif kw_only:
            body[name] = field(kw_only=True)
            twin[name] = dataclasses.field(kw_only=True)
    mine = record(type("Made", (Record,), body))
    theirs = dataclasses.dataclass(frozen=True)(type("Made", (), twin))
    return mine, theirs, specs


def _call(
    rng: random.Random, specs: list[tuple[str, bool, bool]]
) -> tuple[list[object], dict[str, object]]:
    """Arguments for a constructor: mostly right, sometimes too many, missing, repeated or
    unknown."""
    places = [name for name, _, kw_only in specs if not kw_only]
    n = rng.randint(0, len(places) + (1 if rng.random() < 0.15 else 0))
    args = [rng.choice(VALUES) for _ in range(n)]
    kwargs: dict[str, object] = {}
    for name, has, _kw_only in specs:
        given = name in places[:n]
        if (not given and (not has or rng.random() < 0.5)) or (given and rng.random() < 0.05):
            if rng.random() < 0.93:
                kwargs[name] = rng.choice(VALUES)
    if rng.random() < 0.05:
        kwargs[rng.choice(["zz", "A", "a_"])] = 1
    return args, kwargs


def _outcome(make: Any, *args: object, **kwargs: object) -> tuple[str, object]:
    try:
        made = make(*args, **kwargs)
    except TypeError:
        return "TypeError", None
    return "ok", made


@pytest.mark.parametrize("seed", range(4))
def test_a_record_behaves_as_a_frozen_dataclass_of_its_fields(seed: int) -> None:
    rng = random.Random(seed)
    made = 0
    for case in range(150):
        mine, theirs, specs = _classes(rng)
        args, kwargs = _call(rng, specs)
        where = f"seed {seed} case {case}: fields {specs}, call {args} {kwargs}"
        (kind, a), (twin_kind, b) = (
            _outcome(mine, *args, **kwargs),
            _outcome(theirs, *args, **kwargs),
        )
        assert kind == twin_kind, where
        if kind != "ok":
            continue
        made += 1
        assert repr(a) == repr(b), where
        assert hash(a) == hash(b), where
        again, twin_again = mine(*args, **kwargs), theirs(*args, **kwargs)
        assert (a == again, a != again) == (b == twin_again, b != twin_again) == (True, False)
        other_args, other_kwargs = _call(rng, specs)
        other, twin_other = (
            _outcome(mine, *other_args, **other_kwargs),
            _outcome(theirs, *other_args, **other_kwargs),
        )
        if other[0] == "ok":
            assert (a == other[1]) == (b == twin_other[1]), where
        assert (a == b) is False and (a == (*(getattr(a, n) for n, _, _ in specs),)) is False
        changes = {name: rng.choice(VALUES) for name, _, _ in specs if rng.random() < 0.4}
        if rng.random() < 0.1:
            changes["zz"] = 1
        replaced = _outcome(a.replace, **changes)
        twin_replaced = _outcome(dataclasses.replace, b, **changes)
        assert replaced[0] == twin_replaced[0], where
        if replaced[0] == "ok":
            assert repr(replaced[1]) == repr(twin_replaced[1]), where
        for name in [*(n for n, _, _ in specs), "zz"]:
            with pytest.raises(AttributeError):
                setattr(a, name, 1)
            with pytest.raises(AttributeError):
                setattr(b, name, 1)
        if specs:
            with pytest.raises(AttributeError):
                delattr(a, specs[0][0])
            with pytest.raises(AttributeError):
                delattr(b, specs[0][0])
    assert made >= 60  # (most calls are right: the comparison is not of refusals only)
