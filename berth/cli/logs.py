"""Examples:

berth logs 12          # what job 12 wrote so far (stdout, and stderr unless it has -e)
berth logs --err 12    # its stderr, if submitted with -e
berth logs -f 12       # follow until the job ends (Ctrl-C stops following, not the job)
berth logs -n 20 12    # its last 20 lines (with -f: then follow, as tail -n 20 -f)
berth logs 12_3        # task 3 of array 12

The same on the local queue and on Slurm (--backend slurm: the paths Slurm or berth's record of
the job give); -f exits as `berth wait` does once the job has ended. -f follows the log by its
name, as `tail -F`: one not there yet (nor its directory) is waited for, one truncated is read
again from its start, one replaced (rotated) to its end and then the new one.

Only the job's owner and the admins (root, [claims] admin_group) may read a job's logs. On the
system daemon each user's logs are theirs (default /var/lib/berth/logs/USER/ID.out), created
with the umask of the shell that submitted the job.
"""

from __future__ import annotations

import os
import sys

from berth.backends.base import exit_status
from berth.cli.backend_choice import of
from berth.cli.escape import shown
from berth.cli.job_ids import job_id
from berth.errors import BerthError, Refused, UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import BinaryIO

    from berth.backends.base import Backend, JobInfo


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("job_id", type=job_id, help="the job (12), or an array's task (12_3)")
    p.add_argument("-f", "--follow", action="store_true", help="follow until the job ends")
    p.add_argument("--err", action="store_true", help="its stderr file (jobs submitted with -e)")
    p.add_argument("-n", "--lines", type=int, metavar="N", help="only the last N lines")
    p.add_argument("--json", action="store_true", help="print {path, text} as JSON")


def wait_end(backend: Backend, job_id: str, as_json: bool = False) -> int:
    """Block until the job (all of an array) ends; its exit status (`berth wait`'s rule)."""
    info = backend.wait(job_id, float("inf"))
    if as_json:
        import json  # rare: --json

        sys.stdout.write(json.dumps(info.to_dict() if info else None) + "\n")
    elif info is not None:
        sys.stderr.write(f"job {job_id} {info.state} (exit code {info.exit_code})\n")
    return exit_status(info)


def last_lines(path: str, n: int) -> int:
    """The offset where the last ``n`` lines of the file begin (0 if it has fewer), read
    backwards in blocks: a long log is not read whole."""
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        return 0
    with f:
        end = f.seek(0, 2)
        pos, seen = end, 0
        if end and (f.seek(end - 1), f.read(1))[1] == b"\n":
            seen = -1  # the final newline ends the last line, it does not start one
        while pos > 0:
            step = min(65536, pos)
            pos -= step
            f.seek(pos)
            block = f.read(step)
            count = block.count(b"\n")
            if seen + count >= n:
                for _ in range(n - seen):
                    step = block.rindex(b"\n", 0, step)
                return pos + step + 1
            seen += count
        return 0


class _Tail:
    """One log followed by its name, as ``tail -F`` does: kept open between reads; one
    truncated (shorter than what was read) is read again from its start, and one replaced by
    a new file (rotated) is read to its end, then the new one from its start."""

    def __init__(self, path: str, out: object, start: int = 0) -> None:
        self.path = path
        self.out = out
        self.pos = start
        self.seen = start > 0  # (a byte of the log read, or some skipped by -n)
        self.f: BinaryIO | None = None

    def pump(self) -> None:
        while True:
            if self.f is None:
                try:
                    self.f = open(self.path, "rb")
                except FileNotFoundError:
                    return
            st = os.fstat(self.f.fileno())
            if st.st_size < self.pos:
                self.pos = 0  # truncated: what it holds now is all new
            self.f.seek(self.pos)
            self._show(self.f.read())
            try:
                now = os.stat(self.path)
            except FileNotFoundError:
                return  # (renamed away, no new one yet: the old is still read)
            if (now.st_dev, now.st_ino) == (st.st_dev, st.st_ino):
                return
            self.close()  # rotated: the old one read to its end, now the new one
            self.pos = 0

    def _show(self, data: bytes) -> None:
        if data:
            self.pos += len(data)
            self.seen = True
            buf = getattr(self.out, "buffer", None)
            if buf is not None:
                buf.write(data)
                buf.flush()

    def close(self) -> None:
        if self.f is not None:
            self.f.close()
            self.f = None


def follow(
    backend: Backend,
    job_id: str,
    stdout: str | None,
    stderr: str | None,
    detach_hint: bool = False,
    lines: int | None = None,
) -> int:
    """Stream the job's files until it ends; Ctrl-C stops following, not the job. ``lines``:
    begin with the last that many lines (else from the start). A write to a log is read at
    once, and the job's end seen the moment the backend says (:mod:`berth.cli.logs_follow`)."""
    from berth.cli.logs_follow import Wakes  # heavy (ctypes, threading): -f only

    tails = [
        _Tail(p, o, 0 if lines is None else last_lines(p, lines))
        for p, o in ((stdout, sys.stdout), (stderr, sys.stderr))
        if p
    ]
    if len(tails) == 2 and tails[0].path == tails[1].path:
        tails.pop()
    wakes = Wakes(backend, job_id, [t.path for t in tails])
    try:
        while not wakes.ended:
            for t in tails:
                t.pump()
            wakes.wait()
        for t in tails:
            t.pump()
        info = wakes.info()
        if info is not None and not any(t.seen for t in tails):
            _ended_silent(job_id, info)
        return exit_status(info)
    except KeyboardInterrupt:
        if detach_hint:
            sys.stderr.write(
                f"\ndetached; job {job_id} keeps running (`berth logs -f {job_id}` to follow, "
                f"`berth cancel {job_id}` to stop it)\n"
            )
        return 0
    finally:
        wakes.close()
        for t in tails:
            t.close()


def run(args: argparse.Namespace) -> int:
    if args.lines is not None and args.lines < 0:
        raise UsageError(f"invalid -n/--lines {args.lines}: give 0 or more")
    backend = of(args)
    out, err = backend.logs(args.job_id)  # its owner's or an admin's
    path = err if args.err else out
    if args.err and err == out:
        sys.stderr.write(
            f"job {args.job_id} has one log for output and errors (submit with -e FILE to "
            "keep errors apart); showing it\n"
        )
    if args.follow:
        out_path, err_path = (None, path) if args.err else (path, None)
        return follow(backend, args.job_id, out_path, err_path, lines=args.lines)
    try:
        with open(path, "rb") as f:
            if args.lines is not None:
                f.seek(last_lines(path, args.lines))
            data = f.read()
    except FileNotFoundError:
        data = b""
        _nothing_yet(backend, args.job_id, path)
    except PermissionError:
        raise Refused(
            f"cannot read the log {shown(path)} of job {args.job_id}: it is its owner's and not "
            f"readable by you (their umask); root can: `sudo berth logs {args.job_id}`"
        ) from None
    except OSError as e:
        raise BerthError(f"cannot read the log {shown(path)}: {e.strerror}") from None
    if args.json:
        import json  # rare: --json

        sys.stdout.write(json.dumps({"path": path, "text": data.decode("utf-8", "replace")}))
        sys.stdout.write("\n")
    else:
        sys.stdout.buffer.write(data)
    return 0


def _ended_silent(job: str, info: JobInfo) -> None:
    """`logs -f` of a job that ended without a byte of output: say so, and how it ended."""
    code = f", exit code {info.exit_code}" if info.exit_code is not None else ""
    sys.stderr.write(f"job {job} ended {info.state}{code} without output; `berth show {job}` "
                     "says how it ended\n")  # fmt: skip


def _nothing_yet(backend: Backend, job: str, path: str) -> None:
    """Why a job's log is not there: it has not started, it ended without ever running (its
    state says how: cancelled while pending, its setup or command failed at once), or it has
    written nothing yet."""
    info = backend.status([job]).get(job)
    if info is not None and info.state == "PENDING":
        why = f"has not started ({shown(info.reason or 'pending')})"
    elif info is not None and info.finished:
        code = f", exit code {info.exit_code}" if info.exit_code is not None else ""
        sys.stderr.write(
            f"job {job} ended {info.state}{code} and wrote no output: there is no log "
            f"({shown(path)}); `berth show {job}` says how it ended\n"
        )
        return
    else:
        why = f"has written nothing yet ({shown(path)})"
    sys.stderr.write(f"job {job} {why}; `berth logs -f {job}` waits for it and follows\n")
