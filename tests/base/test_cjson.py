"""The wire's JSON (berth/wire/cjson.py: json's C accelerator, without importing json and re)
gives what ``json.dumps(obj, separators=(",", ":"))`` and ``json.loads`` give: the same bytes,
the same objects, the same refusals (type and message), and the frame decoder's verdicts are
unchanged."""

from __future__ import annotations

import json
import math
import random
import struct
import subprocess
import sys
from typing import Any

import pytest

from berth.wire import cjson, protocol

OBJECTS: list[object] = [
    {},
    {"type": "hello", "version": 1, "client": "berth"},
    {
        "job": {
            "argv": ["python", "train.py", "--lr", "1e-3"],
            "gpus": 0.5,
            "env": {"A": "1"},
            "hold": True,
            "name": None,
            "priority": -5,
            "mem": 8 << 30,
        }
    },
    {"unicode": "héllo ✓ 日本 \U0001f680", "ctl": 'a\x00b\x1f"\\/\n\t', "empty": ""},
    {"floats": [0.1, 1e308, -1e-308, 5e-324, 1.0, -0.0, 1e16, 123456789.125]},
    {"big": 10**40, "neg": -(10**30), "nested": [[[{"a": [1, [2, [3]]]}]]]},
    {1: "int key", 2.5: "float key", False: "bool key", None: "none key"},
    {"nan": math.nan, "inf": math.inf, "ninf": -math.inf},
    {"tuple": (1, 2), "list": [None, False, True]},
]


@pytest.mark.parametrize("obj", OBJECTS, ids=range(len(OBJECTS)))
def test_dumps_and_loads_are_jsons(obj: object) -> None:
    text = cjson.dumps(obj)
    assert text == json.dumps(obj, separators=(",", ":"))
    mine, theirs = cjson.loads(text.encode()), json.loads(text.encode())
    assert repr(mine) == repr(theirs)  # (repr: nan != nan)
    assert protocol.encode(obj) == len(text).to_bytes(4, "big") + text.encode()  # type: ignore[arg-type]


@pytest.mark.parametrize("obj", [{"s": {1}}, {"b": b"x"}, {"o": object()}, {(1, 2): 3}])
def test_dumps_refuses_as_json_does(obj: object) -> None:
    with pytest.raises(TypeError) as theirs:
        json.dumps(obj, separators=(",", ":"))
    with pytest.raises(TypeError) as mine:
        cjson.dumps(obj)
    assert str(mine.value) == str(theirs.value)


def test_a_circular_object_is_refused_as_json_does() -> None:
    loop: dict[str, object] = {}
    loop["me"] = loop
    with pytest.raises(ValueError, match="Circular reference detected"):
        cjson.dumps(loop)


PAYLOADS: list[bytes] = [
    b'{"a":1}',
    b' {"a":1} ',  # whitespace around: json's path
    b'{"a":1}x',
    b'{"a":1}{"b":2}',
    b'{"a":}',
    b"{'a':1}",
    b'{"a":1',
    b"{}",
    b"[1,2]",
    b'"str"',
    b"",
    b"\xff\xfe{\x00}\x00",  # UTF-16 with its BOM
    '{"a":"é"}'.encode("utf-16-le"),
    b'{"a":"\xed\xa0\x80"}',  # a lone surrogate in UTF-8 (json: surrogatepass)
    b'{"a":"\xff"}',
    b'{"a":"\x01"}',  # a control character inside a string (strict)
    b'{"a":NaN,"b":-Infinity,"c":Infinity}',
    b'{"a":1e400,"b":-0,"c":1.5E-3,"d":12345678901234567890}',
    b'{"a":{"b":[true,false,null]},"a":2}',
    b'{"\\u00e9\\ud83d\\ude80":"\\n"}',
    b'{"a":' + b"[" * 100_000 + b"]" * 100_000 + b"}",
]


def _outcome(f: object, data: bytes) -> tuple[str, str]:
    try:
        return "ok", repr(f(data))  # type: ignore[operator]
    except Exception as e:
        return type(e).__name__, str(e)


@pytest.mark.parametrize("data", PAYLOADS, ids=range(len(PAYLOADS)))
def test_loads_reads_and_refuses_as_json_does(data: bytes) -> None:
    assert _outcome(cjson.loads, data) == _outcome(json.loads, data)


@pytest.mark.parametrize("data", PAYLOADS, ids=range(len(PAYLOADS)))
def test_the_frame_decoder_gives_the_same_verdict(data: bytes) -> None:
    def before(payload: bytes) -> object:  # protocol.decode as it was, on json.loads
        try:
            msg = json.loads(payload)
        except (UnicodeDecodeError, ValueError) as e:
            raise protocol.ProtocolError(
                protocol.BAD_FRAME, f"frame is not UTF-8 JSON: {e}"
            ) from None
        except RecursionError:
            raise protocol.ProtocolError(
                protocol.BAD_FRAME, "frame holds JSON nested too deeply"
            ) from None
        if not isinstance(msg, dict):
            raise protocol.ProtocolError(
                protocol.BAD_FRAME, f"frame holds {type(msg).__name__}, expected an object"
            )
        return msg

    assert _outcome(protocol.decode, data) == _outcome(before, data)


def test_the_wire_imports_neither_json_nor_re() -> None:
    code = (
        "import sys; had = set(sys.modules); from berth.wire import protocol as p; "
        "p.decode(p.encode({'a': [1, 2.5, 'é', None]})[4:]); "
        "print(' '.join(m for m in ('json', 're', 'json.decoder') if m in set(sys.modules) - had))"
    )  # (had: what site loaded; an editable install's import hook loads re)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


# Generated values (issue 38, step 6): hundreds at fixed seeds, against json itself.
_CHARS = ["a", "Z", " ", '"', "\\", "/", "\n", "\t", "\x00", "\x1f", "\x7f", "é", "✓", "日",
          "\U0001f680", "\ud800", "\udfff", "\u2028", "\ufeff"]  # fmt: skip
_UNSERIALIZABLE: list[object] = [{1}, b"x", object(), 1j, frozenset()]


def _text(rng: random.Random) -> str:
    return "".join(rng.choice(_CHARS) for _ in range(rng.randint(0, 6)))


def _float(rng: random.Random) -> float:
    if rng.random() < 0.5:
        return struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0]  # any double
    return rng.choice([0.0, -0.0, 0.1, 1e16, 1e-7, 5e-324, 1.7976931348623157e308, math.inf,
                       -math.inf, math.nan, 123456789.125, rng.uniform(-1e6, 1e6)])  # fmt: skip


def _value(rng: random.Random, depth: int = 0, bad: float = 0.0) -> object:
    kind = rng.randrange(10 if depth < 4 else 7)
    if rng.random() < bad:
        return rng.choice(_UNSERIALIZABLE)
    if kind == 0:
        return rng.choice([None, True, False])
    if kind in (1, 2):
        return rng.choice([0, 1, -1, 2**63, -(2**64) - 1, 10**40, rng.randint(-1000, 1000)])
    if kind == 3:
        return _float(rng)
    if kind in (4, 5, 6):
        return _text(rng)
    if kind == 7:
        return [_value(rng, depth + 1, bad) for _ in range(rng.randint(0, 4))]
    if kind == 8:
        return tuple(_value(rng, depth + 1, bad) for _ in range(rng.randint(0, 3)))
    keys = [_text(rng) if rng.random() < 0.8 else rng.choice([1, -2.5, True, None, 10**30])
            for _ in range(rng.randint(0, 4))]  # fmt: skip
    return {k: _value(rng, depth + 1, bad) for k in keys}


def _verdict(f: Any, *args: object, **kwargs: object) -> tuple[str, str]:
    try:
        return "ok", repr(f(*args, **kwargs))
    except Exception as e:
        return type(e).__name__, str(e)


@pytest.mark.parametrize("seed", range(4))
def test_generated_values_dump_as_json_dumps_them(seed: int) -> None:
    rng = random.Random(seed)
    for case in range(150):
        obj = {"v": _value(rng, bad=0.03)} if rng.random() < 0.7 else _value(rng, bad=0.03)
        where = f"seed {seed} case {case}: {obj!r}"
        assert _verdict(cjson.dumps, obj) == _verdict(json.dumps, obj, separators=(",", ":")), where
        assert _verdict(cjson.dumps_sorted, obj) == _verdict(
            json.dumps, obj, sort_keys=True, separators=(",", ":")
        ), where


def _mangle(rng: random.Random, data: bytes) -> bytes:
    """``data`` cut, with a byte changed, inserted or doubled, or in another encoding."""
    i = rng.randrange(len(data) + 1)
    how = rng.randrange(6)
    if how == 0:
        return data[:i]
    if how == 1 and data:
        return data[: min(i, len(data) - 1)] + bytes([rng.randrange(256)]) + data[i + 1 :]
    if how == 2:
        return (
            data[:i]
            + rng.choice([b"{", b"}", b",", b'"', b"\\", b" ", b"\xff", b"\x00", b"]"])
            + data[i:]
        )
    if how == 3:
        return data + data
    if how == 4:
        return (
            data.decode("utf-8", "surrogatepass").encode(
                rng.choice(["utf-16", "utf-32-le", "latin-1"]), "surrogatepass"
            )
            if data.isascii()
            else data
        )
    return b" " * rng.randint(0, 2) + data + b"\n" * rng.randint(0, 2)


@pytest.mark.parametrize("seed", range(4))
def test_generated_payloads_load_as_json_loads_them(seed: int) -> None:
    rng = random.Random(seed)
    whole = 0
    for case in range(200):
        value = {_text(rng): _value(rng) for _ in range(rng.randint(0, 4))}
        text = json.dumps(value, ensure_ascii=rng.random() < 0.5,
                          separators=rng.choice([(",", ":"), (", ", ": ")]))  # fmt: skip
        data = text.encode("utf-8", "surrogatepass")
        if rng.random() < 0.5:
            data = _mangle(rng, data)
        else:
            whole += 1
        where = f"seed {seed} case {case}: {data!r}"
        assert _verdict(cjson.loads, data) == _verdict(json.loads, data), where
    assert whole >= 60
