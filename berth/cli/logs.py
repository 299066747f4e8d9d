"""Examples:

berth logs 12          # what job 12 wrote so far (stdout, and stderr unless it has -e)
berth logs --err 12    # its stderr, if submitted with -e
berth logs -f 12       # follow until the job ends (Ctrl-C stops following, not the job)
berth logs -n 20 12    # its last 20 lines (with -f: then follow, as tail -n 20 -f)

Only the job's owner and the admins (root, [claims] admin_group) may read a job's logs. On the
system daemon each user's logs are theirs (default /var/lib/berth/logs/USER/ID.out), created
with the umask of the shell that submitted the job.
"""

from __future__ import annotations

import json
import sys

from berth.cli.escape import shown
from berth.client import Client
from berth.errors import BerthError, Refused, UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("job_id", type=int, help="the job")
    p.add_argument("-f", "--follow", action="store_true", help="follow until the job ends")
    p.add_argument("--err", action="store_true", help="its stderr file (jobs submitted with -e)")
    p.add_argument("-n", "--lines", type=int, metavar="N", help="only the last N lines")
    p.add_argument("--json", action="store_true", help="print {path, text} as JSON")


def _exit_status(job: dict[str, object]) -> int:
    if job.get("state") == "COMPLETED":
        return 0
    code = job.get("exit_code")
    return code if isinstance(code, int) and 0 < code < 256 else 1


def wait_end(c: Client, job_id: int, as_json: bool = False) -> int:
    """Block until the job ends; its exit status."""
    c.settimeout(None)
    while True:
        reply = c.call("wait", job_id=job_id, timeout=3600.0)
        if reply["finished"]:
            break
    job = reply["job"]
    if as_json:
        sys.stdout.write(json.dumps(job) + "\n")
    else:
        sys.stderr.write(f"job {job_id} {job['state']} (exit code {job['exit_code']})\n")
    return _exit_status(job)


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
    def __init__(self, path: str, out: object, start: int = 0) -> None:
        self.path = path
        self.out = out
        self.pos = start

    def pump(self) -> None:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.pos)
                data = f.read()
        except FileNotFoundError:
            return
        if data:
            self.pos += len(data)
            buf = getattr(self.out, "buffer", None)
            if buf is not None:
                buf.write(data)
                buf.flush()


def follow(
    c: Client,
    job_id: int,
    stdout: str | None,
    stderr: str | None,
    detach_hint: bool = False,
    lines: int | None = None,
) -> int:
    """Stream the job's files until it ends; Ctrl-C stops following, not the job. ``lines``:
    begin with the last that many lines (else from the start)."""
    tails = [
        _Tail(p, o, 0 if lines is None else last_lines(p, lines))
        for p, o in ((stdout, sys.stdout), (stderr, sys.stderr))
        if p
    ]
    if len(tails) == 2 and tails[0].path == tails[1].path:
        tails.pop()
    c.settimeout(None)
    try:
        while True:
            for t in tails:
                t.pump()
            reply = c.call("wait", job_id=job_id, timeout=0.1)
            if reply["finished"]:
                for t in tails:
                    t.pump()
                return _exit_status(reply["job"])
    except KeyboardInterrupt:
        if detach_hint:
            sys.stderr.write(
                f"\ndetached; job {job_id} keeps running (`berth logs -f {job_id}` to follow, "
                f"`berth cancel {job_id}` to stop it)\n"
            )
        return 0


def run(args: argparse.Namespace) -> int:
    with Client() as c:
        job = c.call("logs", job_id=args.job_id)["job"]  # its owner's or an admin's
        path = job["stderr"] if args.err else job["stdout"]
        if args.err and job["stderr"] == job["stdout"]:
            sys.stderr.write(
                f"job {args.job_id} has one log for output and errors (submit with -e FILE to "
                "keep errors apart); showing it\n"
            )
        if args.lines is not None and args.lines < 0:
            raise UsageError(f"invalid -n/--lines {args.lines}: give 0 or more")
        if args.follow:
            out, err = (None, path) if args.err else (path, None)
            return follow(c, args.job_id, out, err, lines=args.lines)
    try:
        with open(path, "rb") as f:
            if args.lines is not None:
                f.seek(last_lines(path, args.lines))
            data = f.read()
    except FileNotFoundError:
        data = b""
        if job.get("state") == "PENDING":
            sys.stderr.write(
                f"job {args.job_id} has not started ({shown(job.get('reason') or 'pending')}); "
                f"`berth logs -f {args.job_id}` waits for it and follows\n"
            )
    except PermissionError:
        raise Refused(
            f"cannot read the log {shown(path)} of job {args.job_id}: it is "
            f"{shown(job.get('user'))}'s and "
            f"not readable by you (their umask); root can: `sudo berth logs {args.job_id}`"
        ) from None
    except OSError as e:
        raise BerthError(f"cannot read the log {shown(path)}: {e.strerror}") from None
    if args.json:
        sys.stdout.write(json.dumps({"path": path, "text": data.decode("utf-8", "replace")}))
        sys.stdout.write("\n")
    else:
        sys.stdout.buffer.write(data)
    return 0
