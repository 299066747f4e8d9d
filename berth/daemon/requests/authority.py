"""Who is calling, and what they may do (invariant 5).

The caller is a :class:`Peer`: uid and gid from the socket (SO_PEERCRED at connect time,
read by :mod:`berth.daemon.requests.server`), never from the message; whether that uid is an
admin comes from the user database (:func:`is_admin`), never from the calling process (its
/proc status shows whatever groups it was started with, and its pid may be another's by the
time anybody reads it: invariant 7). The rules:

- everyone sees the queue (users, job names, states, GPUs);
- a job's owner or an admin may act on it: cancel, signal, hold, release, attach, read its
  logs; with ``--private`` (``[daemon] private``), only they see its command, directory and
  log paths;
- an admin (root, or a member of ``[claims] admin_group``) or the daemon's own user may pause
  and resume GPUs and stop the daemon; on the system daemon (run by root) that is the admins.

Every refusal says who may (:func:`owned`, :func:`admins_only`).
"""

from __future__ import annotations

import os
import pwd

from berth.claims.procs import user_name
from berth.wire import protocol
from berth.wire.protocol import ProtocolError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from berth.core.job import Job
    from berth.daemon.options import Options


class Peer:
    """The caller: ``uid``/``gid``/``pid`` from SO_PEERCRED (the pid for logs only: never
    an identity); ``admin``: :func:`is_admin` of the uid; ``rules``: the daemon's settings
    the checks below read (``private``, who the admins are; None: not private, root)."""

    __slots__ = ("admin", "gid", "pid", "rules", "uid", "user")

    def __init__(
        self, pid: int, uid: int, gid: int, admin: bool, rules: Options | None = None
    ) -> None:
        self.pid = pid
        self.uid = uid
        self.gid = gid
        self.admin = admin
        self.user = user_name(uid)
        self.rules = rules


def is_admin(uid: int, admin_gid: int | None) -> bool:
    """Is user ``uid`` an admin: root, or a member of group ``admin_gid`` as the user database
    says (its primary group, or listed in /etc/group: ``os.getgrouplist``)."""
    if uid == 0:
        return True
    if admin_gid is None:
        return False
    try:
        pw = pwd.getpwuid(uid)
    except KeyError:
        return False
    return admin_gid == pw.pw_gid or admin_gid in os.getgrouplist(pw.pw_name, pw.pw_gid)


def admins(peer: Peer) -> str:
    """Who the admins are, for messages: ``root`` or ``root, group 'gpuadmin'``."""
    return peer.rules.admins() if peer.rules is not None else "root"


def may_see(peer: Peer, job: Job) -> bool:
    """May ``peer`` see the job's command, directory and log paths?"""
    private = peer.rules is not None and peer.rules.private
    return not private or peer.admin or peer.uid == job.uid


def owned(job: Job, peer: Peer, verb: str) -> Job:
    """``job`` if ``peer`` may ``verb`` it (its owner or an admin); else NOT_OWNER saying
    who may: "job 12 belongs to alice; only alice or an admin (root) may cancel it"."""
    if job.uid != peer.uid and not peer.admin:
        raise ProtocolError(
            protocol.NOT_OWNER,
            f"job {job.id} belongs to {job.user}; only {job.user} or an admin "
            f"({admins(peer)}) may {verb}",
        )
    return job


def admins_only(peer: Peer, what: str) -> None:
    """Refuse ``what`` unless ``peer`` is an admin or the daemon's own user."""
    me = os.geteuid()
    if peer.admin or peer.uid == me:
        return
    who = (
        admins(peer)
        if me == 0
        else f"{user_name(me)} (whose daemon this is) or an admin ({admins(peer)})"
    )
    raise ProtocolError(protocol.NOT_OWNER, f"{peer.user} may not {what}: only {who} may")
