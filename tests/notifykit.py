"""Local receivers for the notification tests (issue 36.3): :class:`Receiver`, an HTTP server
(``http.server``) that records the JSON posted to it, may fail the first N posts (500) and may
hang (until released); :class:`SmtpSink`, a tiny SMTP server on asyncio (Python 3.12 removed
``smtpd``) that records each mail's envelope and text. Both listen on 127.0.0.1, a free port,
in a thread of their own; use them as context managers."""

from __future__ import annotations

import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Receiver:
    def __init__(self, fail_first: int = 0, hang: bool = False) -> None:
        self.posts: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.tries = 0  # posts received, failed ones included
        self.fail_first = fail_first
        self.released = threading.Event()
        if not hang:
            self.released.set()
        me = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                data = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                me.tries += 1
                if not me.released.wait(60):
                    return
                if me.tries <= me.fail_first:
                    self.send_response(500)
                    self.end_headers()
                    return
                me.posts.append(json.loads(data))
                me.headers.append(dict(self.headers.items()))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook/secret-token"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def events(self) -> list[str]:
        return [p["event"] for p in self.posts]

    def __enter__(self) -> Receiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.released.set()
        self.server.shutdown()
        self.server.server_close()


class SmtpSink:
    """Records ``{"from", "to": [...], "data"}`` per mail."""

    def __init__(self) -> None:
        self.mails: list[dict[str, Any]] = []
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(
            asyncio.start_server(self._session, "127.0.0.1", 0)
        )
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()
        server.close()

    async def _session(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        def say(line: str) -> None:
            writer.write(line.encode() + b"\r\n")

        say("220 sink ESMTP")
        mail: dict[str, Any] = {"to": []}
        while line := (await reader.readline()).decode().rstrip("\r\n"):
            verb = line[:4].upper()
            if verb in ("EHLO", "HELO"):
                say("250 sink")
            elif verb == "MAIL":
                mail = {"from": line.split(":", 1)[1].strip(" <>"), "to": []}
                say("250 ok")
            elif verb == "RCPT":
                mail["to"].append(line.split(":", 1)[1].strip(" <>"))
                say("250 ok")
            elif verb == "DATA":
                say("354 go on")
                await writer.drain()
                lines = []
                while (got := await reader.readline()) not in (b".\r\n", b""):
                    lines.append(got.decode())
                mail["data"] = "".join(lines)
                self.mails.append(mail)
                say("250 queued")
            elif verb == "QUIT":
                say("221 bye")
                await writer.drain()
                break
            else:
                say("250 ok")  # (RSET, NOOP)
            await writer.drain()
        writer.close()

    def __enter__(self) -> SmtpSink:
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
