"""A request's frame read into its message (:func:`read`): decoded as it came, except that a
submit carrying its user's kept environment (:mod:`berth.wire.keptenv`) is decoded without
it, and its job given that environment, the very dict the daemon keeps (issue 35: the spec
read once; the environment, most of a CLI submit's bytes, is not decoded, compared, checked
or measured again).

The frame is read as it would have been: the kept environment's bytes stand for an equal
dict, and the mark that replaced them is taken for it only where the decoded request has it
as its job's ``env`` (the one a JSON object with a key twice keeps, its last); anywhere else,
or in a request that is not a ``submit``, the frame is decoded again as it came (its errors
are its own).
"""

from __future__ import annotations

from berth.wire import keptenv, protocol

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def read(uid: int, payload: bytes) -> dict[str, Any]:
    """The request in ``payload``, sent by ``uid`` (as the socket vouches);
    ProtocolError(BAD_FRAME) if it is not one (:func:`berth.wire.protocol.decode`)."""
    lifted = keptenv.lift(uid, payload)
    if lifted is not None:
        short, env = lifted
        try:
            msg = protocol.decode(short)
        except protocol.ProtocolError:
            msg = {}
        job = msg.get("job")
        if msg.get("type") == "submit" and type(job) is dict and job.get("env") == keptenv.MARK:
            job["env"] = env
            return msg
    return protocol.decode(payload)
