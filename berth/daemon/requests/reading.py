"""A request's frame read into its message (:func:`read`): decoded as it came, except that a
submit carrying its user's kept environment (:mod:`berth.wire.keptenv`) is decoded without
it, and its job given that environment, the very dict the daemon keeps (issue 35: the spec
read once; the environment, most of a CLI submit's bytes, is not decoded, compared, checked
or measured again).

The frame is read as it would have been: the kept environment's bytes stand for an equal
dict, and the mark that replaced them is taken for it only where the decoded request has it
as its job's ``env`` (the one a JSON object with a key twice keeps, its last); anywhere else,
or in a request that is not a ``submit``, the frame is decoded again as it came (its errors
are its own); a frame without ``"type":"submit"`` (a jobs file's request) is decoded once.
"""

from __future__ import annotations

from berth.wire import keptenv, protocol

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def read(uid: int, payload: bytes) -> dict[str, Any]:
    """The request in ``payload``, sent by ``uid`` (as the socket vouches);
    ProtocolError(BAD_FRAME) if it is not one (:func:`berth.wire.protocol.decode`)."""
    msg = _lifted(uid, payload)
    return msg if msg is not None else protocol.decode(payload)


def _lifted(uid: int, payload: bytes) -> dict[str, Any] | None:
    """A submit read with the kept environment lifted out; None: read it as it came. (A
    frame that cannot be a submit, a jobs file's request of 10,000 jobs, is not decoded
    twice; one decoded for nothing is let go before it is decoded again.)"""
    lifted = keptenv.lift(uid, payload)
    if lifted is None or b'"type":"submit"' not in lifted[0]:  # (as the client writes it)
        return None
    short, env = lifted
    try:
        msg = protocol.decode(short)
    except protocol.ProtocolError:
        return None
    job = msg.get("job")
    if msg.get("type") == "submit" and type(job) is dict and job.get("env") == keptenv.MARK:
        job["env"] = env
        return msg
    return None
