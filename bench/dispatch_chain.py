"""Where the dispatch gap goes: one job's end -> the next job's start on the freed GPU, step
by step, in a copy of a tree with trace points added (the product code carries none):

    .venv/bin/python bench/dispatch_chain.py [--rev HEAD] [--rounds 2] [--jobs 80] [--gpus 8]
        [--seconds 0.1] [--sync full,normal]

``--rev`` is exported (``git archive``: commit what you measure) into a temporary directory,
and trace points are inserted there by text (each anchor must be found, or the bench stops:
update the anchors when the code moves). ``jobs`` x ``sleep SECONDS`` 1-GPU jobs on ``gpus``
logical GPUs, all submitted at once: job ``a + gpus`` is the one that takes job ``a``'s GPU.
Each trace point appends ``name job CLOCK_MONOTONIC`` to one file (a few microseconds each).
The steps, p50 / p90 in ms:

- ``exit->done_sent``: the supervisor sees its job's exit (pidfd), reaps, records, is about
  to say ``done`` (each stamp is taken just before the message it names is sent);
- ``done_sent->daemon_read``: the daemon's loop reads it;
- ``daemon_read->pass``: the scheduling pass it kicks begins;
- ``pass->sent_run``: the pass decides, claims, writes ahead (the commit leaves for the
  committer thread), hands the next attempt to a supervisor;
- ``sent_run->sup_recv``, ``sup_recv->sup_ready``: that supervisor wakes, prepares (log files,
  the command's lookup, claims);
- ``sup_ready->gate``: it waits at its start gate until the committer has made the start durable;
- and, per commit, ``flush->c_begin`` (the committer thread wakes) and ``c_begin->c_commit``
  (the transaction and its fsync).

From e08c66c on, the committer itself opens the gates before the log's sync (``--sync early``
below became what berth does): ``--sync normal`` and ``early`` patch the committer of earlier
revisions only (``--rev 9a92838``). ``--sync normal`` runs the committer with ``PRAGMA synchronous=NORMAL`` (no fsync per commit:
durable against a crash of the daemon, not of the machine): an experiment that shows what the
fsync costs the chain, never a setting berth has. ``--sync early``: the committer opens the
start gates once the COMMIT is written to the write-ahead log (NORMAL), then forces the log to
disk (``fdatasync``) before the loop hears of it: the fsync off the chain, everything the
loop does after a commit still after it (see RESULTS.md for what it would trade). ``--seconds
0`` runs ``true`` (the throughput bench's job); each row also gives the jobs/s of its run.
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

TRACE = """
import os as _tos, time as _ttime
def _tr(name, job):
    _fd = _tos.open(_tos.environ["BENCH_TRACE"], _tos.O_WRONLY | _tos.O_APPEND | _tos.O_CREAT, 0o666)
    _tos.write(_fd, f"{name} {job} {_ttime.monotonic():.6f}\\n".encode())
    _tos.close(_fd)
"""

# (file, [(anchor, replacement)]): the trace points.
POINTS: list[tuple[str, list[tuple[str, str]]]] = [
    ("berth/daemon/supervisor/attempt.py", [
        ("            if any(fd == pidfd for fd, _ in events):\n                break",
         "            if any(fd == pidfd for fd, _ in events):\n                _tr('s_exit', self.job)\n                break"),
        ("            if not self._through_gate():  # all is ready",
         "            _tr('s_ready', self.job)\n            if not self._through_gate():  # all is ready"),
        ("            return os.posix_spawn(\n                exe,",
         "            _tr('s_gate', self.job)\n            return os.posix_spawn(\n                exe,"),
    ]),
    ("berth/daemon/supervisor/serve.py", [
        ("        attempt.chan.sendmsg([done(msg, line)], [], socket.MSG_NOSIGNAL)",
         "        _tr('s_done', attempt.job)\n        attempt.chan.sendmsg([done(msg, line)], [], socket.MSG_NOSIGNAL)"),
        ("        chan = _one_attempt(msg, fds, chan, r, me)",
         "        _tr('s_recv', msg.get('job'))\n        chan = _one_attempt(msg, fds, chan, r, me)"),
    ]),
    ("berth/daemon/procs/pool.py", [
        ("            self.on_done(job, attempt, result)",
         "            _tr('d_done', job)\n            self.on_done(job, attempt, result)"),
        ("                socket.send_fds(slot.chan, [data], fds)",
         "                _tr('d_sent', msg['job'])\n                socket.send_fds(slot.chan, [data], fds)"),
    ]),
    ("berth/daemon/engine/engine.py", [
        ("    def schedule_pass(self) -> None:\n",
         "    def schedule_pass(self) -> None:\n        _tr('d_pass', 0)\n"),
    ]),
    ("berth/daemon/store/writer.py", [
        ("            batch, done, gates = item\n",
         "            batch, done, gates = item\n            _tr('c_begin', len(gates))\n"),
        ("                self.commits += 1\n",
         "                self.commits += 1\n                _tr('c_commit', len(gates))\n"),
        ("                self._sync()\n",  # (from e08c66c: the log's sync after the gates)
         "                self._sync()\n                _tr('c_synced', len(gates))\n"),
        # (from cf09596: the committer's batch in a method of its own, one level less deep)
        ("        batch, done, gates = item\n",
         "        batch, done, gates = item\n        _tr('c_begin', len(gates))\n"),
        ("            self.commits += 1\n",
         "            self.commits += 1\n            _tr('c_commit', len(gates))\n"),
        ("            self._sync()\n",
         "            self._sync()\n            _tr('c_synced', len(gates))\n"),
    ]),
    ("berth/daemon/store/journal.py", [
        ("        self._in_flight = True\n",
         "        self._in_flight = True\n        _tr('d_flush', len(gates))\n"),
    ]),
]  # fmt: skip

OPTIONAL = {  # (absent before e08c66c; the committer's anchors before / after cf09596)
    "                self._sync()\n", "            batch, done, gates = item\n",
    "                self.commits += 1\n", "        batch, done, gates = item\n",
    "            self.commits += 1\n", "            self._sync()\n",
}

SYNC = (
    'self.db.execute("PRAGMA synchronous=FULL")',
    'self.db.execute("PRAGMA synchronous=NORMAL")',
)
# --sync early: the gates open once the COMMIT is in the write-ahead log (written, in the
# system's cache: a crash of the daemon cannot lose it), and the log is forced to disk right
# after, before the loop hears of the commit (so everything else waits for the disk as now).
EARLY = [
    SYNC,
    (
        "        self.loop = loop\n",
        "        self.loop = loop\n        self._wal_path, self._wal = path + '-wal', -1\n",
    ),
    (
        "                if gates:\n                    gate.open_all(list(gates))",
        "                if gates:\n                    gate.open_all(list(gates))\n"
        "                if self._wal < 0:\n"
        "                    self._wal = _tos.open(self._wal_path, _tos.O_RDONLY | _tos.O_CLOEXEC)\n"
        "                _tos.fdatasync(self._wal)\n"
        "                _tr('c_synced', len(gates))",
    ),
]

CHILD = r"""
import json, os, sys
tree, bench, jobs, gpus, seconds = sys.argv[1:6]
sys.path[:0] = [bench, tree]
import daemon_bench as db
db.ROOT = tree
import time
d = db.Daemon(gpus=int(gpus))
argv = ["true"] if float(seconds) == 0 else ["sleep", seconds]
try:
    t = time.perf_counter()
    ids = d.submit_many([d.job(argv, gpus=1) for _ in range(int(jobs))])
    d.wait_idle(ids[-1])
    print(round(int(jobs) / (time.perf_counter() - t), 1))
finally:
    d.stop()
"""


def export(rev: str, into: str, sync: str) -> str:
    archive = subprocess.run(
        ["git", "-C", ROOT, "archive", rev, "berth"], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", into], input=archive, check=True)
    for rel, pairs in POINTS:
        path = os.path.join(into, rel)
        with open(path) as f:
            text = f.read()
        head = text.index("\n\n", text.index("from __future__"))
        text = text[:head] + "\n" + TRACE + text[head:]
        if rel.endswith("writer.py") and sync == "normal":
            pairs = [*pairs, SYNC]
        if rel.endswith("writer.py") and sync == "early":
            pairs = [*pairs, *EARLY]
        for anchor, new in pairs:
            if anchor not in text and anchor in OPTIONAL:
                continue
            if anchor not in text:
                raise SystemExit(
                    f"{rel}: anchor not found (update bench/dispatch_chain.py): {anchor!r}"
                )
            text = text.replace(anchor, new, 1)
        with open(path, "w") as f:
            f.write(text)
    return into


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p))]


def steps(trace: str, jobs: int, gpus: int) -> dict[str, Any]:
    ev: dict[int, dict[str, float]] = {}
    passes: list[float] = []
    commits: dict[str, list[float]] = {"d_flush": [], "c_begin": [], "c_commit": [], "c_synced": []}
    with open(trace) as f:
        for line in f:
            name, job, t = line.split()
            if name == "d_pass":
                passes.append(float(t))
            elif name in commits:
                commits[name].append(float(t))
            else:
                ev.setdefault(int(job), {}).setdefault(name, float(t))
    chains: dict[str, list[float]] = {}
    for a in range(1, jobs - gpus + 1):
        x, y = ev.get(a, {}), ev.get(a + gpus, {})
        if (
            not {"s_exit", "s_done", "d_done"} <= x.keys()
            or not {"d_sent", "s_recv", "s_ready", "s_gate"} <= y.keys()
        ):
            continue
        i = bisect.bisect_left(passes, x["d_done"])
        if i == len(passes):
            continue
        pts = [
            ("exit", x["s_exit"]), ("done_sent", x["s_done"]), ("daemon_read", x["d_done"]),
            ("pass", passes[i]), ("sent_run", y["d_sent"]), ("sup_recv", y["s_recv"]),
            ("sup_ready", y["s_ready"]), ("gate", y["s_gate"]),
        ]  # fmt: skip
        for (n0, t0), (n1, t1) in itertools.pairwise(pts):
            chains.setdefault(f"{n0}->{n1}", []).append((t1 - t0) * 1000)
        chains.setdefault("exit->gate", []).append((y["s_gate"] - x["s_exit"]) * 1000)
    fl, bg, cm = commits["d_flush"], commits["c_begin"], commits["c_commit"]
    chains["flush->c_begin"] = [(b - a) * 1000 for a, b in zip(fl, bg, strict=False)]
    chains["c_begin->c_commit"] = [(c - b) * 1000 for b, c in zip(bg, cm, strict=False)]
    sy = commits["c_synced"]  # (--sync early: the log forced to disk after the gates)
    chains["c_commit->c_synced"] = [(y - c) * 1000 for c, y in zip(cm, sy, strict=False)]
    out: dict[str, Any] = {
        k: [round(statistics.median(v), 2), round(pct(v, 0.9), 2)] for k, v in chains.items() if v
    }
    out["pairs"] = len(chains.get("exit->gate", []))
    out["commits"] = len(cm)
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rev", default="HEAD")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--jobs", type=int, default=80)
    p.add_argument("--gpus", type=int, default=8)
    p.add_argument("--seconds", default="0.1")
    p.add_argument("--sync", default="full", help="full, normal, early, or several: full,early")
    a = p.parse_args()
    syncs = a.sync.split(",")
    with tempfile.TemporaryDirectory(prefix="chain-") as tmp:
        trees = {s: export(a.rev, tempfile.mkdtemp(dir=tmp), s) for s in syncs}
        for r in range(a.rounds):
            for s in syncs if r % 2 == 0 else syncs[::-1]:
                trace = os.path.join(tmp, f"trace-{r}-{s}.txt")
                env = {**os.environ, "PYTHONPATH": trees[s], "BENCH_TRACE": trace}
                before = os.getloadavg()[0]
                out = subprocess.run(
                    [sys.executable, "-c", CHILD, trees[s], os.path.join(ROOT, "bench"),
                     str(a.jobs), str(a.gpus), a.seconds],
                    env=env, check=True, cwd=trees[s], capture_output=True, text=True,
                )  # fmt: skip
                row = {"round": r + 1, "rev": a.rev, "sync": s, "loadavg": round(before, 2),
                       "jobs_per_second": float(out.stdout.split()[-1])}  # fmt: skip
                print(json.dumps({**row, **steps(trace, a.jobs, a.gpus)}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
