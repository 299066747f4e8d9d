"""Delivery of the admin's notifications (``[[notify.webhooks]]``, ``[notify.mail]``:
:mod:`berth.config.notify`), off the daemon's loop.

The loop only appends a message to a bounded queue (:meth:`Outbox.post`: no I/O, no wait);
one worker thread drains it: a webhook is a JSON ``POST`` (``urllib.request``, the sink's
timeout), a mail goes to the configured SMTP server (``smtplib``) or, without one, to the
host's ``sendmail -i -- TO...`` (the message on its input). A delivery that fails is tried
again ``retries`` times, after ``backoff`` seconds, then twice as long each time; one that
still fails is a line of the audit log (``berth admin log``), as is every message the queue's
bound dropped (the oldest go first). A receiver that hangs holds up only later messages, never
a job: the worker has nothing the loop waits for.
"""

from __future__ import annotations

import json
import logging
import os
import smtplib
import subprocess
import threading
import time
import urllib.request
from collections import deque
from email.message import EmailMessage

from berth.daemon.engine.audit import append_log
from berth.wire.env import sendmail

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from berth.config.notify import Sink

log = logging.getLogger("berth.daemon")

BOUND = 1000  # messages waiting at most; more drop the oldest


class Outbox:
    def __init__(self, sinks: tuple[Sink, ...], audit_path: str, bound: int = BOUND) -> None:
        self.sinks = sinks
        self.audit_path = audit_path
        self.sent = 0
        self.failed = 0
        self.dropped = 0
        self._queue: deque[tuple[Sink, dict[str, Any]]] = deque()
        self._bound = bound
        self._reported = 0  # drops already written to the audit log
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def post(self, message: dict[str, Any]) -> None:
        """Queue ``message`` for every sink that wants it (the loop's side: never blocks on
        I/O). ``message`` has ``events`` (a tuple), ``user`` and ``project`` (None: about no
        one) besides what is sent."""
        events, user, project = message["events"], message.get("user"), message.get("project")
        wanted = [s for s in self.sinks if s.wants(events, user, project)]
        if not wanted:
            return
        with self._cond:
            for sink in wanted:
                if len(self._queue) >= self._bound:
                    self._queue.popleft()
                    self.dropped += 1
                self._queue.append((sink, message))
            self._cond.notify()
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="berth-notify", daemon=True)
            self._thread.start()

    def close(self, wait: float = 0.0) -> None:
        """Stop the worker (what is queued is not sent)."""
        self._stop.set()
        with self._cond:
            self._cond.notify()
        if self._thread is not None and wait:
            self._thread.join(wait)

    # -- the worker ---------------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stop.is_set():
            with self._cond:
                while not self._queue and not self._stop.is_set():
                    self._cond.wait()
                if self._stop.is_set():
                    return
                sink, message = self._queue.popleft()
                dropped = self.dropped - self._reported
                self._reported = self.dropped
            if dropped:
                self._audit({"action": "dropped", "count": dropped,
                             "reason": f"more than {self._bound} notifications waiting"})  # fmt: skip
            self._deliver(sink, message)

    def _deliver(self, sink: Sink, message: dict[str, Any]) -> None:
        delay, error = sink.backoff, ""
        for attempt in range(sink.retries + 1):
            if attempt and self._stop.wait(delay):
                return
            if attempt:
                delay *= 2
            try:
                if sink.url:
                    post_json(sink, message)
                else:
                    send_mail(sink, message)
                self.sent += 1
                return
            except Exception as e:  # (a receiver's failure is data: logged)
                error = f"{type(e).__name__}: {e}"
                log.warning("notify %s (%s): %s", sink.name, message["event"], error)
        self.failed += 1
        job = message.get("job") or {}
        self._audit({"action": "undelivered", "sink": sink.name, "event": message["event"],
                     "job": job.get("id"), "user": message.get("user"),
                     "reason": f"{error} (tried {sink.retries + 1} time(s))"})  # fmt: skip

    def _audit(self, entry: dict[str, Any]) -> None:
        append_log(self.audit_path, {"time": time.time(), **entry, "class": "notify"})


def body(message: dict[str, Any]) -> dict[str, Any]:
    """What a webhook is sent: the message without its routing fields."""
    return {k: v for k, v in message.items() if k not in ("events", "subject", "mail_text")}


def post_json(sink: Sink, message: dict[str, Any]) -> None:
    data = json.dumps(body(message)).encode()
    headers = {"Content-Type": "application/json", "User-Agent": "berth", **sink.headers}
    req = urllib.request.Request(sink.url, data=data, headers=headers, method="POST")
    with urllib.request.urlopen(req, timeout=sink.timeout) as reply:
        reply.read(65536)


def send_mail(sink: Sink, message: dict[str, Any]) -> None:
    mail = EmailMessage()
    mail["From"] = sink.mail_from
    mail["To"] = ", ".join(sink.to)
    mail["Subject"] = "".join(c if c.isprintable() else "?" for c in message["subject"])
    mail.set_content(message["mail_text"])
    if sink.smtp is not None:
        with smtplib.SMTP(sink.smtp[0], sink.smtp[1], timeout=sink.timeout) as smtp:
            smtp.send_message(mail)
        return
    exe = sendmail(os.environ.get("PATH", ""))
    if exe is None:
        raise OSError("no sendmail on this host (set [notify.mail] smtp)")
    subprocess.run([exe, "-i", "--", *sink.to], input=mail.as_bytes(), timeout=sink.timeout,
                   check=True, capture_output=True)  # fmt: skip
