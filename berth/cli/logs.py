"""Examples:

berth logs 12          # what job 12 wrote so far (stdout, and stderr unless it has -e)
berth logs --err 12    # its stderr, if submitted with -e
berth logs -f 12       # follow until the job ends (Ctrl-C stops following, not the job)
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse

    from berth.client import Client

HELP = "print a job's output (its log; --err: its -e file); -f follows it"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("job_id", type=int, help="the job")
    p.add_argument("-f", "--follow", action="store_true", help="follow until the job ends")
    p.add_argument("--err", action="store_true", help="its stderr file (jobs submitted with -e)")
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
        import json

        sys.stdout.write(json.dumps(job) + "\n")
    else:
        sys.stderr.write(f"job {job_id} {job['state']} (exit code {job['exit_code']})\n")
    return _exit_status(job)


class _Tail:
    def __init__(self, path: str, out: object) -> None:
        self.path = path
        self.out = out
        self.pos = 0

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
    c: Client, job_id: int, stdout: str | None, stderr: str | None, detach_hint: bool = False
) -> int:
    """Stream the job's files until it ends; Ctrl-C stops following, not the job."""
    tails = [_Tail(p, o) for p, o in ((stdout, sys.stdout), (stderr, sys.stderr)) if p]
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
    from berth.client import Client

    with Client() as c:
        job = c.call("show", job_id=args.job_id)["job"]
        path = job["stderr"] if args.err else job["stdout"]
        if args.err and job["stderr"] == job["stdout"]:
            sys.stderr.write(
                f"job {args.job_id} has one log for output and errors (submit with -e FILE to "
                "keep errors apart); showing it\n"
            )
        if args.follow:
            return follow(c, args.job_id, None if args.err else path, path if args.err else None)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        data = b""
        if job.get("state") == "PENDING":
            sys.stderr.write(
                f"job {args.job_id} has not started ({job.get('reason') or 'pending'}); "
                f"`berth logs -f {args.job_id}` waits for it and follows\n"
            )
    except OSError as e:
        from berth.errors import BerthError

        raise BerthError(f"cannot read the log {path}: {e.strerror}") from None
    if args.json:
        import json

        sys.stdout.write(json.dumps({"path": path, "text": data.decode("utf-8", "replace")}))
        sys.stdout.write("\n")
    else:
        sys.stdout.buffer.write(data)
    return 0
