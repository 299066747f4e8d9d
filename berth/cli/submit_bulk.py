"""Sending a jobs file's checked jobs to the daemon: any number of them, in bounded memory.

Every line is checked before anything is sent (:mod:`berth.cli.submit_file`); each checked job
goes, encoded, one a line, into a temporary file (a :class:`Spool`), so the client holds one
request's jobs at a time, not the file's. The environment most jobs share (the one captured at
submit) is written once, not per job: ``submit_all``'s ``env`` is the environment of every job
of the request that names none (a job whose environment differs carries its own). The jobs go
in requests of at most :data:`MAX_JOBS` jobs (the daemon's bound) and :data:`MAX_BYTES` bytes
(under its frame limit), each queued all or none and durable before its answer; with more than
one request a progress line on stderr says how far it got.
"""

from __future__ import annotations

import json
import sys
import tempfile
from array import array

from berth.client import DaemonError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any

MAX_JOBS = 10_000  # jobs of one `submit_all` (berth.daemon.engine.admission.admit.MAX_BATCH)
MAX_BYTES = 6 * 1024 * 1024  # of one request's jobs: well under the 8 MiB request frame


class Spool:
    """Checked jobs, one JSON object a line in a temporary file, and each one's line number."""

    def __init__(self) -> None:
        self.file = tempfile.TemporaryFile()
        self.lines = array("q")  # job k's line of the jobs file
        self.env: dict[str, str] | None = None  # what most jobs share: sent once a request

    def __len__(self) -> int:
        return len(self.lines)

    def add(self, n: int, job: dict[str, Any]) -> None:
        env = job.setdefault("env", {})  # explicit: a job without one must not take `env`
        if self.env is None:
            self.env = env
        if env is self.env or env == self.env:
            del job["env"]
        self.file.write(json.dumps(job, separators=(",", ":")).encode() + b"\n")
        self.lines.append(n)

    def requests(self) -> Iterator[tuple[int, list[Any]]]:
        """(place of its first job, jobs) of each request, in the file's order."""
        self.file.seek(0)
        batch: list[Any] = []
        size = start = 0
        for k, raw in enumerate(self.file):
            if batch and (len(batch) >= MAX_JOBS or size + len(raw) > MAX_BYTES):
                yield start, batch
                batch, size, start = [], 0, k
            batch.append(json.loads(raw))
            size += len(raw)
        if batch:
            yield start, batch

    def close(self) -> None:
        self.file.close()


def send(c: Any, spool: Spool, failed: Any, dry: bool = False) -> Iterator[dict[str, Any]]:
    """Every job's reply, request by request. ``failed(start, error)`` makes the exception to
    raise when the request whose first job is ``start`` is refused. ``dry``: a dry run's
    (each request's ids are counted from the daemon's next one)."""
    total = len(spool)
    shared: dict[str, Any] = {"env": spool.env} if spool.env else {}
    if dry:
        shared["dry_run"] = True
    for start, batch in spool.requests():
        try:
            replies: list[Any] = c.call("submit_all", jobs=batch, **shared)["replies"]
        except DaemonError as e:
            raise failed(start, e) from None
        yield from replies
        if len(batch) != total:
            done = start + len(batch)
            sys.stderr.write(f"berth: {done} of {total} jobs {'checked' if dry else 'queued'}\n")
            sys.stderr.flush()
