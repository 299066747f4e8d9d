"""What `berth watch` has queued of a jobs file, remembered by content (as the GPU Job Scheduler's hashing
did), so that a line is queued exactly once whatever becomes of the file or the processes.

A job line's identity is its text without its comment and outer blanks (a hash of it) and
its occurrence among identical lines (``#1``, ``#2``: appending a line identical to one already
there queues it again, as a second job; rewriting the file with the same lines, reordering
them or truncating it queues nothing). Only complete lines count (ended by a newline): a line
being appended is read once it is whole.

The state (``key#n`` -> job id) is a small JSON file, written atomically after each batch; the
same key also goes to the daemon with the job (``once``), so a watcher killed between the
daemon's answer and its own write finds, when started again, that the daemon has the job
already and is told its id instead of queueing it twice.
"""

from __future__ import annotations

import hashlib
import json
import os

from berth.errors import UsageError
from berth.jobsfile import gjs_line


def default_path(jobs_file: str) -> str:
    """``$XDG_STATE_HOME/berth/watch/<hash of the file's absolute path>.json``."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state"
    )
    digest = hashlib.sha256(os.path.abspath(jobs_file).encode()).hexdigest()[:16]
    return os.path.join(base, "berth", "watch", f"{digest}.json")


def complete_lines(data: bytes) -> list[tuple[int, str]]:
    """(number, text) of the lines ended by a newline (a line being written is not read)."""
    text = data[: data.rfind(b"\n") + 1].decode("utf-8", errors="replace")
    return list(enumerate(text.splitlines(), 1))


def keys(lines: list[tuple[int, str]]) -> list[tuple[str, int, str]]:
    """(key, line number, text) of each job line: ``sha#occurrence``."""
    seen: dict[str, int] = {}
    out = []
    for n, text in lines:
        if not gjs_line.is_job_line(text):
            continue
        body = gjs_line.strip_comment(text).strip()
        digest = hashlib.sha256(body.encode()).hexdigest()[:32]
        seen[digest] = seen.get(digest, 0) + 1
        out.append((f"{digest}#{seen[digest]}", n, text))
    return out


class WatchMemory:
    """What `berth watch` has queued of one jobs file (``key#n`` -> job id), kept in its JSON
    file (the core's job states are :class:`berth.core.states.State`)."""

    def __init__(self, path: str, jobs_file: str) -> None:
        self.path = path
        self.jobs_file = os.path.abspath(jobs_file)
        self.queued: dict[str, int] = {}  # key -> job id
        try:
            with open(path, encoding="utf-8") as f:
                raw = json.load(f)
            if isinstance(raw, dict) and isinstance(raw.get("queued"), dict):
                self.queued = {str(k): int(v) for k, v in raw["queued"].items()}
        except FileNotFoundError:
            pass
        except (OSError, ValueError, TypeError) as e:
            raise UsageError(
                f"cannot read the watch state {path!r} ({e}): move it aside to start over "
                "(the daemon still knows which lines it has: nothing is queued twice)"
            ) from None

    def once(self, key: str) -> str:
        """The key the daemon keeps with the job (the file and the line's identity)."""
        return hashlib.sha256(f"{self.jobs_file}\0{key}".encode()).hexdigest()[:40]

    def save(self) -> None:
        os.makedirs(os.path.dirname(self.path) or ".", mode=0o700, exist_ok=True)
        tmp = f"{self.path}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump({"file": self.jobs_file, "queued": self.queued}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
