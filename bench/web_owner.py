"""What finding the owner of a new dashboard connection costs (berth/web/peers.py), per
connection, on this host: the kernel's sock_diag look-up by the four-tuple (what the server
uses) against reading /proc/net/tcp (its fallback), whose cost grows with every TCP socket of
the host. From the repository root:

    .venv/bin/python bench/web_owner.py
"""

from __future__ import annotations

import json
import socket
import time

from berth.web import peers


def main() -> None:
    sockets = sum(sum(1 for _ in open(t)) - 1 for t in ("/proc/net/tcp", "/proc/net/tcp6"))
    diag = peers.Diag()
    with socket.create_server(("127.0.0.1", 0)) as srv:
        client = socket.create_connection(srv.getsockname())
        conn, _ = srv.accept()
        out: dict[str, object] = {"tcp_sockets_on_host": sockets}
        for name, n, ask in (
            ("sock_diag", 2000, lambda: peers.owner(conn, diag)),
            ("proc_net_tcp", 100, lambda: peers.owner(conn)),
        ):
            ask()
            t = time.perf_counter()
            for _ in range(n):
                who = ask()
            out[name] = {"owner": who, "us_per_connection": round((time.perf_counter() - t) / n * 1e6, 1)}
        conn.close()
        client.close()
    diag.close()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
