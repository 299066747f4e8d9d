"""A claim body is checked over its own text: one decode, no encode again (issue 35.3: a
supervisor names its job in every claim it is given, the daemon reads others' bodies at each
scan; the second encode cost about what the decode did). What is accepted and
refused is unchanged."""

from __future__ import annotations

import json
import zlib

import pytest

from berth.claims import files

BODY = {"lease": "deadbeef", "gpu": "GPU-1", "pids": [12, 34], "command": "python tr\u00e4in.py"}


def test_a_body_as_written_is_read_without_encoding_it_again(monkeypatch: pytest.MonkeyPatch) -> None:
    data = files.encode_body(BODY)
    calls: list[str] = []
    real_loads = json.loads

    def loads(s: str | bytes, **kw: object) -> object:
        calls.append("loads")
        return real_loads(s)

    def dumps(*a: object, **kw: object) -> str:
        raise AssertionError("encoded again")

    monkeypatch.setattr(json, "loads", loads)
    monkeypatch.setattr(json, "dumps", dumps)
    assert files.decode_body(data) == BODY
    assert calls == ["loads"]


def test_what_is_refused_and_accepted_is_unchanged() -> None:
    data = files.encode_body(BODY)
    assert files.decode_body(data[:-9] + b"1}\n") is None  # (its checksum changed)
    scribbled = data.replace(b"deadbeef", b"deadbeee")
    assert files.decode_body(scribbled) is None  # (its text changed)
    assert files.decode_body(data[:-3]) is None  # (truncated)
    assert files.decode_body(b'{"a": 1, "crc": 5}') is None
    # Another writer's spacing, its checksum over the canonical text: still read (the
    # re-encoding check, as before).
    core = json.dumps(BODY, sort_keys=True, separators=(",", ":"))
    spaced = json.dumps({**BODY, "crc": zlib.crc32(core.encode())}, indent=1).encode()
    assert files.decode_body(spaced) == BODY
    # A second "crc" inside the text never passes as checked over its own text.
    sneaky = b'{"crc":1,"a":1'
    sneaky += b',"crc":%d}\n' % zlib.crc32(sneaky + b"}")
    assert files.decode_body(sneaky) is None
