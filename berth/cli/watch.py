"""Examples:

  berth watch jobs.txt                    # queue every line of jobs.txt, then each line
                                          # appended to it, once; Ctrl-C stops watching
  echo "0,/path/to/eval.py,myenv,--llm qwen2.5-3b-inst," >> jobs.txt   # queued within a second
  berth watch jobs.txt --requirements llm_config.json -t 4h   # submit options for every line
  berth watch --scan jobs.txt             # queue what is new, once, and exit (cron, scripts;
                                          # exit 5 when no daemon answers: the lines wait)
  berth watch --unique jobs.txt           # a line whose job is queued, running or done (yours,
                                          # however submitted) is not queued again
  nohup berth watch jobs.txt > watch.log 2>&1 &   # keep watching after you log out

The GPU Job Scheduler's scheduler watched its jobs.txt and queued new lines; `berth watch` does the same for
a file in either format `berth submit --file` reads (the GPU Job Scheduler's CSV, or berth's own lines).
Each line is queued exactly once, remembered by its content as the GPU Job Scheduler's hashing did: the
file may be rewritten by an editor, reordered or truncated, and the daemon or the watcher
restarted (or killed), without a line being queued twice or lost. A second line identical to
one already queued is a second job, unless --unique: then, as the GPU Job Scheduler skipped a
duplicate that had not failed, a line whose job (the same command, directory, setup and GPU
request) is pending, running or completed for you, submitted however, is not queued again;
one whose twin failed is. Only complete lines are read (ended by a newline).

A bad line (or one the daemon refuses) is reported with its line and column and left out;
fix it and it is queued as a new line. While no daemon answers, new lines wait and are queued
when one does. What was queued is kept in --state (default under ~/.local/state/berth/watch/).
"""

from __future__ import annotations

import os
import re
import sys
import time

from berth.cli import submit_file
from berth.cli.submit import check_mail
from berth.cli.submit_options import add_arguments as submit_arguments
from berth.client import Client, DaemonError
from berth.errors import EXIT_NO_DAEMON, DaemonUnreachable, UsageError
from berth.jobsfile import detect, gjs_line
from berth.jobsfile.watchstate import WatchMemory, complete_lines, default_path, keys
from berth.wire.jobspec import JobSpec
from berth.wire.protocol import ProtocolError

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("jobs_file", metavar="FILE", help="the jobs file to watch")
    p.add_argument(
        "--interval", type=float, default=1.0, help="seconds between looks at the file (1)"
    )
    p.add_argument("--scan", action="store_true", help="queue what is new once, then exit")
    p.add_argument("--state", metavar="PATH", help="where to remember what was queued")
    submit_arguments(p, command=False)  # (every line gets these, as with submit --file)


def run(args: argparse.Namespace) -> int:
    if args.wrap or args.file or args.wait or args.interactive:
        raise UsageError(
            "berth watch FILE takes the commands from FILE: no command, --wrap, --file, "
            "--wait or -i"
        )
    if getattr(args, "dry_run", False):  # (it would queue what it reads: refused, not ignored)
        raise UsageError(
            f"berth watch --dry-run: a watcher queues each line it reads; check the file with "
            f"`berth submit --file {args.jobs_file} --dry-run`"
        )
    if not args.interval > 0:
        raise UsageError(f"--interval {args.interval}: must be a positive number of seconds")
    if not os.path.isfile(args.jobs_file):
        raise UsageError(f"berth watch: {args.jobs_file!r} is not a file")
    state = WatchMemory(args.state or default_path(args.jobs_file), args.jobs_file)
    watcher = Watcher(args, state)
    try:
        while True:
            watcher.step()
            if args.scan:  # (no daemon answered: its lines wait for the next scan)
                return EXIT_NO_DAEMON if watcher.waiting else 0
            time.sleep(args.interval)
    except KeyboardInterrupt:
        sys.stderr.write("berth watch: stopped\n")
        return 0


class Watcher:
    def __init__(self, args: argparse.Namespace, state: WatchMemory) -> None:
        self.args = args
        self.state = state
        self.path = args.jobs_file
        self.seen: tuple[int, int, int] | None = None  # (inode, size, mtime) last read
        self.bad: set[str] = set()  # keys of lines reported bad (not again)
        self.waiting = False  # lines are ready but no daemon answered

    def _say(self, text: str) -> None:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()

    def _warn(self, text: str) -> None:
        sys.stderr.write(f"berth watch: {text}\n")
        sys.stderr.flush()

    def step(self) -> None:
        """Look at the file; queue its new lines if it changed (or some wait for a daemon)."""
        try:
            st = os.stat(self.path)
            sig = (st.st_ino, st.st_size, st.st_mtime_ns)
            if sig == self.seen and not self.waiting:
                return
            with open(self.path, "rb") as f:
                data = f.read()
        except OSError as e:
            if self.seen is not None:
                self._warn(f"cannot read {self.path}: {e.strerror}; still watching")
            self.seen = None
            return
        self.seen = sig
        self._queue(data)

    def _queue(self, data: bytes) -> None:
        new = [
            (key, n, text)
            for key, n, text in keys(complete_lines(data))
            if key not in self.state.queued and key not in self.bad
        ]
        specs = self._specs(new, complete_lines(data))
        while specs:
            failed = self._submit(specs)
            if failed is None:
                return
            specs = [s for s in specs if s[0] != failed]

    def _specs(
        self, new: list[tuple[str, int, str]], lines: list[tuple[int, str]]
    ) -> list[tuple[str, int, JobSpec]]:
        """Each new line as a spec (with its ``once`` key); bad ones reported and left out."""
        if not new:
            return []
        first_n, first = next((n, t) for n, t in lines if gjs_line.is_job_line(t))
        kind = detect.GJS if gjs_line.looks_like(first) else detect.BERTH  # (its 1st)
        out = []
        for key, n, text in new:
            try:
                if gjs_line.looks_like(text) != (kind == detect.GJS):
                    raise UsageError(
                        f"{self.path}:{n}:1: not in this file's format ({kind}, as its first "
                        f"job line, line {first_n}, is)"
                    )
                if kind == detect.GJS:
                    spec = submit_file.gjs_jobs(self.args, self.path, [(n, text)])[0][1]
                else:
                    spec = submit_file.berth_jobs(self.args, self.path, [(n, text)])[0][1]
            except UsageError as e:
                self._warn(f"{e}; left out (fix the line to have it queued)")
                self.bad.add(key)
                continue
            try:
                check_mail(spec)
            except UsageError as e:
                self._warn(f"{self.path}:{n}: {e}; left out")
                self.bad.add(key)
                continue
            try:
                spec = JobSpec.from_dict({**spec.to_dict(), "once": self.state.once(key)})
            except ProtocolError as e:  # (a line the daemon's rules refuse)
                self._warn(f"{self.path}:{n}: {e.message}; left out (fix the line to have it "
                           "queued)")  # fmt: skip
                self.bad.add(key)
                continue
            out.append((key, n, spec))
        return out

    def _submit(self, specs: list[tuple[str, int, JobSpec]]) -> str | None:
        """Queue the specs, all or none; the key of a line the daemon refused (reported,
        left out), or None (queued, or no daemon: they wait)."""
        try:
            with Client() as c:
                replies = c.call("submit_all", jobs=[s.to_dict() for _, _, s in specs])["replies"]
        except DaemonUnreachable as e:
            if not self.waiting:
                self._warn(f"{e}; {len(specs)} line(s) wait for it")
            self.waiting = True
            return None
        except DaemonError as e:
            m = re.match(r"job (\d+) of \d+: (.*)", str(e), re.S)
            k, why = (int(m.group(1)) - 1, m.group(2)) if m else (0, str(e))
            key, n, _ = specs[k]
            self._warn(f"{self.path}:{n}: {why}; left out (fix the line to have it queued)")
            self.bad.add(key)
            return key
        if self.waiting:
            self._warn("the daemon answers again")
        self.waiting = False
        for (key, n, _), reply in zip(specs, replies, strict=True):
            self.state.queued[key] = int(reply["job_id"])
            if reply.get("duplicate"):
                self._say(f"{self.path}:{n}: job {reply['job_id']} (queued before)")
            else:
                self._say(f"{self.path}:{n}: queued job {reply['job_id']}")
        self.state.save()
        return None
