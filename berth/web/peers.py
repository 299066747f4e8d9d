"""Who opened a connection to the dashboard, known before a byte of it is read, as the kernel
vouches for it (never as the peer says): the key its unread connections are counted under
(:mod:`berth.web.caps`), so that one user's flood of new connections cannot starve another's.

- a TCP peer on this host (the loopback, ``127.0.0.0/8``, ``::1``, ``::ffff:127.x``, or any
  address of the host's own) is a socket of this host: the kernel's table of TCP sockets
  (``sock_diag``; ``/proc/net/tcp``, ``tcp6`` for a loopback peer where netlink cannot be
  used) gives the uid that made it.
  The connection is found by its exact four-tuple, seen from both ends: our end's row must be
  the very socket we accepted (its inode is our descriptor's), and the peer's row (the same
  tuple reversed) must be a live socket (inode not 0: not one already closed). While we hold
  our end no other connection can have that tuple, so the uid is the one of the process that
  made the peer's socket. Key ``uid N``.
- a Unix socket peer: ``SO_PEERCRED``'s uid (taken at connect). Key ``uid N``.
- a remote peer (no socket of this host has its end): its address (everyone behind it
  shares). Key ``address A``.
- a loopback peer not found (it closed already, or the table cannot be read): ``unknown``
  (one bucket for all such).

What a user cannot do with it: make berth count their connections as another user's. The uid
of a socket is its creator's, fixed when it was made (``sk_uid``, the creating process's
fsuid); a user can hand their socket to nobody else's creation, and a four-tuple names one
connection. Only a socket another user (or root) made and gave away carries that user's uid:
their doing, counted against them. A peer in another network namespace cannot reach our
loopback; reaching us through an address, it is counted by that address.
"""

from __future__ import annotations

import os
import socket
import struct
import sys

UNKNOWN = "unknown"
_TABLES: dict[int, str] = {socket.AF_INET: "/proc/net/tcp", socket.AF_INET6: "/proc/net/tcp6"}
_UID = 7  # columns of a row: sl local rem st queues tr retrnsmt uid timeout inode
_INODE = 9
# sock_diag (netlink): one exact look-up of a TCP socket by its four-tuple, answered by the
# kernel from its hash table (reading /proc/net/tcp costs a line per socket of the host)
_NETLINK_SOCK_DIAG = 4
_SOCK_DIAG_BY_FAMILY = 20
_NLMSG_ERROR = 2
_REQUEST = struct.Struct("=IHHII BBBBI HH16s16sI II")  # nlmsghdr + inet_diag_req_v2
_ANSWER = struct.Struct("=IHHII BBBB HH16s16sI II IIIII")  # nlmsghdr + inet_diag_msg


class Diag:
    """The kernel's answer to "whose is this TCP socket": a netlink socket kept open, or
    None where there is none (then /proc/net/tcp is read)."""

    def __init__(self) -> None:
        self.sock: socket.socket | None
        try:
            self.sock = socket.socket(
                socket.AF_NETLINK, socket.SOCK_RAW | socket.SOCK_CLOEXEC, _NETLINK_SOCK_DIAG
            )
            self.sock.settimeout(1.0)
        except OSError:
            self.sock = None
        self.seq = 0

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def lookup(
        self, family: int, src: tuple[str, int], dst: tuple[str, int]
    ) -> tuple[int, int] | None:
        """(uid, inode) of the TCP socket of this host whose local end is ``src`` and whose
        peer is ``dst``; None if there is none. OSError if the kernel cannot be asked."""
        assert self.sock is not None
        self.seq += 1
        req = _REQUEST.pack(
            _REQUEST.size, _SOCK_DIAG_BY_FAMILY, 1, self.seq, 0,  # NLM_F_REQUEST
            family, socket.IPPROTO_TCP, 0, 0, 0xFFFFFFFF,  # every state
            socket.htons(src[1]), socket.htons(dst[1]),
            socket.inet_pton(family, src[0]).ljust(16, b"\0"),
            socket.inet_pton(family, dst[0]).ljust(16, b"\0"),
            0, 0xFFFFFFFF, 0xFFFFFFFF,  # any interface, no cookie
        )  # fmt: skip
        self.sock.send(req)
        while True:
            data = self.sock.recv(8192)
            if len(data) < 16:
                raise OSError("a short answer from sock_diag")
            kind, seq = struct.unpack_from("=HHI", data, 4)[0], struct.unpack_from("=I", data, 8)[0]
            if seq != self.seq:
                continue  # (an answer to an earlier question that timed out)
            if kind == _NLMSG_ERROR:
                return None  # (ENOENT: no such socket)
            if kind != _SOCK_DIAG_BY_FAMILY or len(data) < _ANSWER.size:
                raise OSError(f"an unexpected answer from sock_diag (type {kind})")
            fields = _ANSWER.unpack_from(data)
            return fields[-2], fields[-1]  # idiag_uid, idiag_inode


def _hex(family: int, host: str, port: int) -> str:
    """``host:port`` as the kernel's table writes it (each 32-bit word in host order)."""
    raw = socket.inet_pton(family, host)
    order = "<" if sys.byteorder == "little" else ">"
    words = struct.unpack(f"{order}{len(raw) // 4}I", raw)
    return "".join(f"{w:08X}" for w in words) + f":{port:04X}"


def _loopback(host: str) -> bool:
    host = host.lower()
    if host.startswith("::ffff:"):  # (an IPv4 peer of an IPv6 socket)
        host = host[7:]
    return host.startswith("127.") or host == "::1"


def _rows(path: str, wanted: set[str]) -> dict[str, tuple[int, int]]:
    """``local rem`` -> (uid, inode), for the rows of the table at ``path`` whose local
    address is one of ``wanted``."""
    out: dict[str, tuple[int, int]] = {}
    with open(path, "rb") as f:
        next(f, None)  # (the header)
        for line in f:
            fields = line.split()
            if len(fields) <= _INODE or fields[1].decode() not in wanted:
                continue
            out[f"{fields[1].decode()} {fields[2].decode()}"] = (
                int(fields[_UID]), int(fields[_INODE]),
            )  # fmt: skip
    return out


def owner(sock: socket.socket, diag: Diag | None = None) -> str:
    """The key the connection ``sock`` (an accepted one) counts under: ``uid N``,
    ``address A`` or :data:`UNKNOWN` (see the module). ``diag``: ask the kernel through it
    (else, or where it cannot answer, /proc/net/tcp is read)."""
    family = sock.family
    if family == socket.AF_UNIX:
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        return f"uid {struct.unpack('3i', creds)[1]}"
    try:
        peer = sock.getpeername()
        mine = sock.getsockname()
        inode = os.fstat(sock.fileno()).st_ino
    except OSError:
        return UNKNOWN
    local = _loopback(peer[0])
    remote = f"address {peer[0]}"
    if not local and (diag is None or diag.sock is None):
        return remote  # (a peer elsewhere, or this host's own address: not told apart)
    peer_end, my_end = (peer[0], peer[1]), (mine[0], mine[1])
    if family == socket.AF_INET6 and peer[0].lower().startswith("::ffff:"):
        family = socket.AF_INET  # (an IPv4 peer of a dual-stack socket: the IPv4 tables)
        peer_end, my_end = (peer[0][7:], peer[1]), (mine[0].lower().removeprefix("::ffff:"), mine[1])
    try:
        if diag is not None and diag.sock is not None:
            us, them = diag.lookup(family, my_end, peer_end), diag.lookup(family, peer_end, my_end)
        else:
            us, them = _from_table(family, my_end, peer_end)
    except (OSError, ValueError):
        return UNKNOWN if local else remote
    if us is None or us[1] != inode or them is None or them[1] == 0:
        # (not our very connection, or its peer's socket is gone, or is not on this host)
        return UNKNOWN if local else remote
    return f"uid {them[0]}"


def _from_table(
    family: int, mine: tuple[str, int], peer: tuple[str, int]
) -> tuple[tuple[int, int] | None, tuple[int, int] | None]:
    """(uid, inode) of our end and of the peer's, from /proc/net/tcp{,6}."""
    ours, theirs = _hex(family, *mine), _hex(family, *peer)
    rows = _rows(_TABLES[family], {ours, theirs})
    return rows.get(f"{ours} {theirs}"), rows.get(f"{theirs} {ours}")
