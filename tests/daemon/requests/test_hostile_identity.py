"""Local users against the system daemon's idea of who they are and what is theirs (issue 20:
identity and claims). A pid is never an identity (invariant 7): who calls is the socket's
uid at connect time, group membership comes from the user database, and a process is
signalled only when it is proven to be the job's.

The tests that force a pid to be reused (``/proc/sys/kernel/ns_last_pid``) live in this one
module, which pytest runs serially. Needs root (to create the users and run as them), as CI
runs the suite.
"""

from __future__ import annotations

import grp
import os
import pwd
import signal
from typing import Any

import pytest
from helpers import wait_until
from pidreuse import alive, end, gone, process_at
from test_system_mode import System
from userkit import ADMINS, A, B, call_as, ensure_users

from berth.claims import files
from berth.claims.ledger import Ledger

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as other users")


@pytest.fixture
def system(daemon: Any) -> System:
    """The system daemon, its claims in a directory every user reaches (as /run/berth)."""
    ensure_users()
    system = System(daemon)
    daemon.env["BERTH_CLAIMS_DIR"] = system.run
    with open(system.config) as f:
        text = f.read()
    with open(system.config, "w") as f:
        f.write(text.replace("[claims]\n", f'[claims]\ndir = "{system.run}"\n'))
    return system


# A job of mallory's (B): it tries to write through the claim descriptor it inherited, then
# locks its claim file from a child that hands the lock on to a grandchild and exits, so
# that /proc/locks names a dead pid. It prints what the write did, the dead pid, the
# grandchild's and its supervisor's, then sleeps.
MALLORYS_JOB = """
import errno, fcntl, os, time
fd, path = next(
    (int(n), os.readlink(f"/proc/self/fd/{n}")) for n in os.listdir("/proc/self/fd")
    if os.path.basename(os.readlink(f"/proc/self/fd/{n}") if os.path.exists(f"/proc/self/fd/{n}") else "").startswith("c.")
)
try:
    os.pwrite(fd, b"x" * 65536, 0)
    wrote = "wrote"
except OSError as e:
    wrote = errno.errorcode[e.errno]
r, w = os.pipe()
child = os.fork()
if child == 0:
    os.close(r)
    lock = os.open(path, os.O_RDONLY)
    fcntl.flock(lock, fcntl.LOCK_SH)
    grandchild = os.fork()
    if grandchild == 0:
        os.close(w)
        os.setsid()
        time.sleep(600)
        os._exit(0)
    os.write(w, str(grandchild).encode())
    os._exit(0)
os.close(w)
grandchild = int(os.read(r, 64))
os.waitpid(child, 0)
print(wrote, child, grandchild, os.getppid(), flush=True)
time.sleep(600)
"""


def _mallorys_job(system: System) -> tuple[int, list[str]]:
    """Submit MALLORYS_JOB as B on one GPU; (job id, the words it printed)."""
    job = system.submit(B, "-g", "1", "--", "/usr/bin/python3", "-c", MALLORYS_JOB)

    def said() -> list[str] | None:
        path = system.rig.job(job)["stdout"]
        try:
            with open(path) as f:
                words = f.read().split()
        except OSError:
            return None
        return words if len(words) == 4 else None

    return job, wait_until(said, timeout=20, message="mallory's job to set up")



def _forked_as(user: str, groups: list[int], fn: Any) -> Any:
    """``fn()`` in a child root forks that keeps ``groups`` as its supplementary groups
    and then becomes ``user``: its /proc status shows groups the user database does not give
    the user."""
    import json

    import berth.client  # noqa: F401  (imported before the switch: see userkit)

    pw = pwd.getpwnam(user)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        try:
            os.close(r)
            os.setgroups(groups)
            os.setgid(pw.pw_gid)
            os.setuid(pw.pw_uid)
            out = fn()
        except BaseException as e:
            out = {"error": f"{type(e).__name__}: {e}"}
        os.write(w, json.dumps(out).encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        data = f.read()
    os.waitpid(pid, 0)
    return json.loads(data)


def test_groups_a_process_carries_do_not_make_its_user_an_admin(system: System) -> None:
    """B is not in the admin group. A process of B's whose supplementary groups include it
    (root kept them across setuid, or B's membership was revoked since login) is B, no more:
    before issue 20 the daemon read them from /proc/PID/status and let it pause GPUs."""
    system.start()
    admin_gid = grp.getgrnam(ADMINS).gr_gid
    assert B not in grp.getgrnam(ADMINS).gr_mem
    sock = system.sock

    def pause() -> Any:
        from berth.client import Client, DaemonError

        try:
            with Client(sock) as c:
                return {"ok": c.call("pause", gpus=["0"])}
        except DaemonError as e:
            return {"code": e.code, "message": str(e)}

    got = _forked_as(B, [admin_gid], pause)
    assert got.get("code") == "NOT_OWNER" and "may not pause GPUs" in got["message"], got


def test_a_job_cannot_write_its_claim_file(system: System) -> None:
    """The claim file is root's, written before the job starts; the job holds it through a
    read-only descriptor (before issue 20 a read-write one: it could rewrite what the claim
    says, or fill /run/berth's tmpfs)."""
    system.start()
    job, (wrote, *_) = _mallorys_job(system)
    try:
        assert wrote == "EBADF"
        (c,) = Ledger(system.run).scan().claims
        assert (c.uid, c.corrupt, c.label) == (0, False, f"berth job {job} (python3)")
        assert os.stat(c.path).st_size < 4096
    finally:
        system.rig.call("cancel", job_ids=[job])
        system.rig.wait_done([job])


def test_the_daemon_does_not_kill_whoever_got_a_pid_proc_locks_names(system: System) -> None:
    """Mallory's job makes /proc/locks name a pid that dies; the number comes round to A's
    process; mallory kills her job's supervisor. The daemon ends what the job left (before
    issue 20: every pid /proc/locks named on its claim files, A's process with them)."""
    system.start()
    job, (_, dead, grandchild, supervisor) = _mallorys_job(system)
    victim = process_at(int(dead), A)
    try:
        (c,) = Ledger(system.run).scan().claims
        assert victim in files.lock_owners(os.stat(c.path))
        assert call_as(B, lambda: os.kill(int(supervisor), signal.SIGKILL)) is None
        assert system.rig.wait_done([job])[job]["state"] == "LOST"
        wait_until(lambda: gone(int(grandchild)), timeout=10, message="her grandchild ends")
        assert alive(victim), "the daemon killed A's process: its pid was in /proc/locks"
        assert Ledger(system.run).scan().claims == []
    finally:
        end(victim)
        if not gone(int(grandchild)):
            os.kill(int(grandchild), signal.SIGKILL)


def _sit_on(path: str, user: str) -> int:
    """A process of ``user`` holding a shared lock on ``path``; its pid, once it holds it."""
    import fcntl

    pw = pwd.getpwnam(user)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        try:
            os.setgroups([])
            os.setgid(pw.pw_gid)
            os.setuid(pw.pw_uid)
            fd = os.open(path, os.O_RDONLY)
            fcntl.flock(fd, fcntl.LOCK_SH)
            os.write(w, b"x")
            signal.pause()
        finally:
            os._exit(0)
    os.close(w)
    assert os.read(r, 1) == b"x"
    os.close(r)
    return pid


def test_a_lock_on_a_jobs_claim_file_does_not_keep_its_gpu_claimed(system: System) -> None:
    """B sits on a shared lock of A's job's claim file; once the job ends the GPU is free
    (before issue 20 it stayed "claimed by root" as long as B liked)."""
    system.start()
    job = system.submit(A, "-g", "1", "--", "sleep", "600")
    wait_until(lambda: Ledger(system.run).scan().claims, timeout=15, message="A's job runs")
    (c,) = Ledger(system.run).scan().claims
    sitter = _sit_on(c.path, B)
    try:
        system.rig.call("cancel", job_ids=[job])
        assert system.rig.wait_done([job])[job]["state"] == "CANCELLED"
        wait_until(
            lambda: Ledger(system.run).scan().claims == [],
            timeout=5,
            message="the ended job's claim to go",
        )
    finally:
        end(sitter)


def test_release_of_a_queue_jobs_gpu_cancels_the_job_and_spares_the_daemon(
    system: System,
) -> None:
    """`berth release` of a GPU a queue job holds asks the daemon to cancel the job (before
    issue 20 it sent SIGTERM to every pid /proc/locks named: the daemon, which took the
    claim's lock, stopped)."""
    system.start()
    job = system.submit(A, "-g", "1", "--", "sleep", "600")
    wait_until(lambda: Ledger(system.run).scan().claims, timeout=15, message="A's job runs")
    (c,) = Ledger(system.run).scan().claims
    out = system.rig.berth("release", str(c.index), "--yes", "--grace", "5")
    assert out.returncode == 0, out.stderr
    assert system.rig.wait_done([job])[job]["state"] == "CANCELLED"
    assert system.rig.proc.poll() is None, "berth release stopped the daemon"
    assert f"job {job} of {A} (the queue)" in out.stdout
    assert Ledger(system.run).scan().claims == []


def test_a_claim_outside_the_queue_counts_against_its_users_gpu_limit(daemon: Any) -> None:
    """A user's `berth run` (a claim without the daemon) counts with their jobs against
    their max_gpus: before issue 20 their job took a second GPU beside it."""
    from berth.api.lease import build_request, claim

    daemon.start()
    daemon.call("limits", set={"max_gpus": 1})
    held, _ = claim(build_request(1, only="0"), timeout=0)  # root's `berth run`
    try:
        job = daemon.submit(*daemon.workload("--seconds", "0.1"), gpus=1)
        wait_until(
            lambda: "holds 1 of 1 GPUs" in (daemon.job(job).get("reason") or ""),
            timeout=10,
            message="the job to wait for its user's limit",
        )
    finally:
        held.release()
    assert daemon.wait_done([job])[job]["state"] == "COMPLETED"  # ...until the claim ends


def test_a_claim_outside_the_queue_is_charged_to_its_user() -> None:
    """What a claim outside the queue used goes to its user's fair-share usage while it
    lives and once it is gone, counted from when the daemon first saw it; each GPU it holds
    a share of counts whole (issue 41.3), found by the UUID of the claim file's name."""
    from berth.core.fairshare import INF
    from berth.daemon.engine.claimers import Claimers

    class Seen:
        def __init__(self, lease: str, share: float, uuid: str) -> None:
            self.lease, self.share, self.user, self.uid = lease, share, "alice", 1000
            if lease == "job":  # (the daemon's own job's claim: a file of the daemon's user)
                self.uid = os.geteuid()
            self.uuid = uuid

    claimers = Claimers()
    two = [Seen("a1", 1.0, "GPU-a"), Seen("a1", 0.01, "GPU-b"), Seen("job", 1.0, "GPU-c")]
    index = {"GPU-a": 0, "GPU-b": 1, "GPU-c": 2}
    assert claimers.seen(two, {"job"}, now=100.0, index=index) == []  # type: ignore[arg-type]
    assert claimers.held() == {"alice": {0, 1}}
    assert claimers.usage(now=110.0, half_life=INF) == {"alice": 20.0}
    assert claimers.seen([], {"job"}, now=120.0) == [("alice", 2.0, 100.0)]
    assert claimers.held() == {}
