"""The daemon's wire protocol: framing, the handshake, typed requests, enumerated error codes.

Shared by the client and the daemon, so it imports only :mod:`berth.wire.cjson` (json's C
accelerator: ``json`` itself imports ``re``, milliseconds of every CLI start).

Frame: a 4-byte big-endian length, then that many bytes of UTF-8 JSON (one object). A
connection starts with a handshake ``{"type": "hello", "version": PROTOCOL_VERSION}``; then
each request ``{"type": T, ...fields}`` gets exactly one response, ``{"ok": true, ...}`` or
``{"ok": false, "error": {"code": CODE, "message": "..."}}`` (but a ``queue`` request with
``stream``: its answer in several frames, the last ``{"ok": true, "end": true, ...}``, or an
error frame that ends it: :mod:`berth.daemon.requests.queueview`). The server checks every request
against :data:`REQUESTS` (field -> accepted types, required?) before any handler sees it;
the handlers check values strictly (a job: :mod:`berth.wire.jobspec`; the rest:
:mod:`berth.daemon.requests.validate`).
"""

from __future__ import annotations

from berth.wire import cjson

PROTOCOL_VERSION = 1
HEADER_SIZE = 4  # big-endian unsigned length (int.to_bytes: no `struct` import on the CLI path)
MAX_REQUEST = 8 * 1024 * 1024  # the daemon refuses bigger request frames
MAX_RESPONSE = 1024 * 1024 * 1024  # the client refuses bigger response frames

# Error codes (stable strings; the client maps them to berth.errors classes).
BAD_FRAME = "BAD_FRAME"  # not a JSON object / not UTF-8
FRAME_TOO_LARGE = "FRAME_TOO_LARGE"
BAD_VERSION = "BAD_VERSION"  # handshake missing or protocol version differs
UNKNOWN_REQUEST = "UNKNOWN_REQUEST"
BAD_REQUEST = "BAD_REQUEST"  # a field is missing, unknown or of the wrong type/value
NO_SUCH_JOB = "NO_SUCH_JOB"
NOT_OWNER = "NOT_OWNER"
INVALID_STATE = "INVALID_STATE"  # e.g. release_job of a job that is not held
NO_SUCH_GPU = "NO_SUCH_GPU"
INTERNAL = "INTERNAL"
TOO_MANY_CONNECTIONS = "TOO_MANY_CONNECTIONS"  # the caller's uid has too many open
TOO_MANY_REQUESTS = "TOO_MANY_REQUESTS"  # ... or too many bytes of requests in hand
ERROR_CODES = (
    BAD_FRAME,
    FRAME_TOO_LARGE,
    BAD_VERSION,
    UNKNOWN_REQUEST,
    BAD_REQUEST,
    NO_SUCH_JOB,
    NOT_OWNER,
    INVALID_STATE,
    NO_SUCH_GPU,
    INTERNAL,
    TOO_MANY_CONNECTIONS,
    TOO_MANY_REQUESTS,
)

_I = (int,)
_F = (int, float)
_S = (str,)
_B = (bool,)
_L = (list,)
_D = (dict,)
_N = (type(None),)

# request type -> {field: (accepted types, required)}
REQUESTS: dict[str, dict[str, tuple[tuple[type, ...], bool]]] = {
    "hello": {"version": (_I, True), "client": (_S, False)},
    "ping": {},
    # dry_run: every check, then what would be queued; nothing is (berth.daemon.engine.admission.dryrun)
    "submit": {"job": (_D, True), "dry_run": (_B, False)},
    "submit_all": {
        "jobs": (_L, True),
        "env": (_D, False),
        "dry_run": (_B, False),
    },  # a jobs file: all or none; env: of each job naming none
    "queue": {
        "uid": (_I + _N, False),
        "states": (_L, False),
        "all": (_B, False),
        "model": (_B, False),
        # (berth.daemon.requests.queueview) the first `limit` lines; one project's jobs; an
        # array's pending tasks as one line; the answer in frames
        "limit": (_I + _N, False),
        "project": (_S + _N, False),
        "fold": (_B, False),
        "stream": (_B, False),
    },
    # A job id: an integer, or "12_3" (task 3 of array 12: berth.daemon.engine.admission.arrays).
    "show": {"job_id": (_I + _S, True)},
    "logs": {"job_id": (_I + _S, True)},
    "attach": {"job_id": (_I + _S, True)},
    "wait": {"job_id": (_I + _S, True), "timeout": (_F + _N, False)},
    "cancel": {
        "job_ids": (_L, False),
        "signal": (_I + _N, False),
        "all_mine": (_B, False),
        "states": (_L, False),
    },
    "hold": {"job_ids": (_L, True)},
    "release_job": {"job_ids": (_L, True), "at": (_F, False)},  # (claims release GPUs)
    # `berth update` (berth.daemon.engine.admission.update): set = {gpus, time_limit, priority, name,
    # after_ok}, each checked as the job spec's field; `berth resubmit` (...engine.admission.resubmit)
    "update": {"job_id": (_I + _S, True), "set": (_D, True)},
    "resubmit": {"job_id": (_I + _S, True), "cascade": (_B, False)},
    # `berth pause` GPUs; `berth admin drain` is the CLI's other name for it: it sends a
    # ``note`` (why; even null), and names no GPU for all of them (berth.daemon.requests.admin)
    "pause": {"gpus": (_L, False), "note": (_S + _N, False)},
    "resume": {"gpus": (_L, False), "all": (_B, False)},
    "status": {},
    # `berth admin` (berth.daemon.requests.admin): limits read by anyone, set by admins
    "limits": {"user": (_S + _N, False), "set": (_D, False)},
    "projects": {},  # each project's usage, quotas, members (berth.daemon.engine.projects)
    "enforce_log": {"limit": (_I, False)},  # `berth admin log` (daemon/engine/enforcer.py)
    # admin reservations (berth.daemon.requests.reserve): read by anyone, made by admins
    "reserve": {
        "users": (_L, False),
        "groups": (_L, False),
        "projects": (_L, False),
        "gpus": (_L, False),
        "count": (_I, False),
        "start": (_F, True),
        "end": (_F, True),
        "unlimited": (_B, False),
        "note": (_S + _N, False),
    },
    "unreserve": {"id": (_I, True)},
    "reservations": {},
    "shutdown": {},
    # `berth report` (berth.daemon.engine.reports): GPU-hours over [since, until) by keys
    "report": {"since": (_F, True), "until": (_F + _N, False), "by": (_L, False)},
    # The caller's token for the web dashboard (berth.web.auth); revoke: all of theirs.
    "web_token": {"revoke": (_B, False)},
}

# A submitted job (``submit``'s ``job``, each of ``submit_all``'s ``jobs``) is a
# berth.wire.jobspec.JobSpec: its fields and their checks are there, the one validator of a
# job, run by the CLI before it sends and by the daemon on what it receives.


class ProtocolError(Exception):
    """A request the daemon refuses: ``code`` is one of :data:`ERROR_CODES`."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def encode(msg: dict[str, object]) -> bytes:
    data = cjson.dumps(msg).encode()
    return len(data).to_bytes(HEADER_SIZE, "big") + data


def frame_length(header: bytes | bytearray) -> int:
    return int.from_bytes(header[:HEADER_SIZE], "big")


def decode(payload: bytes) -> dict[str, object]:
    """The object in a frame's payload; ProtocolError(BAD_FRAME) if it is not one."""
    try:
        msg = cjson.loads(payload)
    except (UnicodeDecodeError, ValueError) as e:
        raise ProtocolError(BAD_FRAME, f"frame is not UTF-8 JSON: {e}") from None
    except RecursionError:  # ([[[[...: deeper than the parser goes)
        raise ProtocolError(BAD_FRAME, "frame holds JSON nested too deeply") from None
    if not isinstance(msg, dict):
        raise ProtocolError(BAD_FRAME, f"frame holds {type(msg).__name__}, expected an object")
    return msg


def _check_fields(
    kind: str, msg: dict[str, object], fields: dict[str, tuple[tuple[type, ...], bool]]
) -> None:
    """The fields of request ``kind`` (but its ``type``)."""
    for key, value in msg.items():
        spec = fields.get(key)
        if spec is None:
            if key == "type":
                continue
            raise ProtocolError(BAD_REQUEST, f"request {kind!r}: unknown field {key!r}")
        types = spec[0]
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            names = "/".join(t.__name__ for t in types)
            raise ProtocolError(
                BAD_REQUEST, f"request {kind!r}: field {key!r} = {value!r} must be {names}"
            )
    for key, (_, required) in fields.items():
        if required and key not in msg:
            raise ProtocolError(BAD_REQUEST, f"request {kind!r}: missing field {key!r}")


def check_request(msg: dict[str, object]) -> str:
    """Validate a request's type and fields; return its type."""
    kind = msg.get("type")
    if not isinstance(kind, str):
        raise ProtocolError(BAD_REQUEST, "request has no 'type' string")
    fields = REQUESTS.get(kind)
    if fields is None:
        raise ProtocolError(
            UNKNOWN_REQUEST,
            f"unknown request type {kind!r}; known: {', '.join(sorted(REQUESTS))}",
        )
    _check_fields(kind, msg, fields)
    return kind


def error(code: str, message: str) -> dict[str, object]:
    return {"ok": False, "error": {"code": code, "message": message}}
