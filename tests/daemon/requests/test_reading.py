"""A request read with its user's kept environment lifted out of its frame
(berth/daemon/requests/reading.py, berth/wire/keptenv.py): whatever the frame holds, the
message is the one decoding it as it came gives (a key twice, the environment elsewhere, a
jobs file's request, another user's frame, a broken frame), and only a submit whose job's
environment is the kept one gets that very dict."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from berth.daemon.requests.reading import read
from berth.wire import keptenv, protocol
from berth.wire.protocol import ProtocolError

UID = 4242
ENV = {"PATH": "/usr/bin:/bin", "HOME": "/home/u", "LANG": "C.UTF-8", "X": 'a"b\\c{}'}


@pytest.fixture(autouse=True)
def kept() -> Iterator[dict[str, str]]:
    keptenv.forget()
    env = dict(ENV)
    keptenv.keep(UID, env)
    yield env
    keptenv.forget()


def _env_json() -> str:
    return json.dumps(ENV, separators=(",", ":"))


def _submit(job_text: str) -> bytes:
    return ('{"type":"submit","job":' + job_text + "}").encode()


def test_a_submit_with_the_kept_environment_gets_that_dict(kept: dict[str, str]) -> None:
    payload = _submit('{"argv":["true"],"env":' + _env_json() + ',"cwd":"/"}')
    msg = read(UID, payload)
    assert msg == protocol.decode(payload)
    assert msg["job"]["env"] is kept  # type: ignore[index]


@pytest.mark.parametrize(
    "payload",
    [
        # the same key twice: the last one is the job's (here a bad one, refused later)
        _submit('{"argv":["true"],"env":' + _env_json() + ',"cwd":"/","env":0}'),
        _submit('{"argv":["true"],"env":{"PATH":"/x"},"cwd":"/","env":' + _env_json() + "}"),
        # the environment where a submit has none (an unknown field: refused as it is)
        ('{"type":"submit","job":{"argv":["x"],"env":{},"cwd":"/"},"env":' + _env_json()
         + "}").encode(),
        # a jobs file's request: its jobs' and its own environment read as they came
        ('{"type":"submit_all","jobs":[{"argv":["x"],"env":' + _env_json()
         + ',"cwd":"/"}],"env":' + _env_json() + "}").encode(),
        # one variable more, or the environment inside a string
        _submit('{"argv":["true"],"env":' + _env_json()[:-1] + ',"Y":"1"},"cwd":"/"}'),
        _submit('{"argv":[' + json.dumps('"env":' + _env_json()) + '],"env":{},"cwd":"/"}'),
    ],
)  # fmt: skip
def test_any_other_frame_reads_as_it_came(payload: bytes, kept: dict[str, str]) -> None:
    msg = read(UID, payload)
    assert msg == protocol.decode(payload)
    assert keptenv.MARK not in json.dumps(msg)


def test_another_users_frame_and_a_broken_one_are_read_as_they_came() -> None:
    payload = _submit('{"argv":["true"],"env":' + _env_json() + ',"cwd":"/"}')
    other = read(UID + 1, payload)
    assert other == protocol.decode(payload) and not keptenv.checked(other["job"]["env"])  # type: ignore[index]
    broken = payload[:-1]  # (a frame cut short: its own error, not the mark's)
    with pytest.raises(ProtocolError) as got:
        read(UID, broken)
    with pytest.raises(ProtocolError) as want:
        protocol.decode(broken)
    assert got.value.code == want.value.code == protocol.BAD_FRAME


def test_a_kept_environment_is_checked_once_and_an_equal_one_sent_is_not_it() -> None:
    from berth.wire.jobspec import JobSpec

    sent = dict(ENV)  # (equal, but what a client sent: checked in full)
    assert not keptenv.checked(sent)
    sent["BAD"] = "a\0b"
    with pytest.raises(ProtocolError, match="NUL"):
        JobSpec.from_dict({"argv": ["x"], "env": sent, "cwd": "/"})


def test_a_jobs_files_request_is_decoded_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A jobs file's request of 10,000 jobs carrying the kept environment was decoded twice
    (lifted, found not a submit, then as it came): twice the CPU, and two copies of its jobs
    in memory at once (issue 35: `submit --file`'s RSS)."""
    from berth.wire import cjson

    jobs = ",".join(f'{{"argv":["true","{i}"],"cwd":"/"}}' for i in range(100))
    payload = ('{"type":"submit_all","jobs":[' + jobs + '],"env":' + _env_json() + "}").encode()
    calls: list[int] = []
    loads = cjson.loads
    monkeypatch.setattr(cjson, "loads", lambda b: calls.append(len(b)) or loads(b))
    msg = read(UID, payload)
    assert msg == json.loads(payload) and len(calls) == 1  # (was 2)
    calls.clear()
    submit = _submit('{"argv":["true"],"env":' + _env_json() + ',"cwd":"/"}')
    assert read(UID, submit)["job"]["env"] is not None and len(calls) == 1  # type: ignore[index]
