"""The system daemon (issue 11): three users submit to one root daemon through the real CLI;
each job runs as its submitter (uid, gid, groups, umask, home) and writes to a log the user
owns in their own directory; the clients find the daemon by themselves and say which one
answered. The daemon runs with `--system`, its socket in a sticky shared directory as
/run/berth is, and its state in a temporary directory (`--socket`, `--state-dir`).

Needs root (to create the users and run as them), as CI runs the suite.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import socket
import stat
import subprocess
import sys
from typing import Any

import pytest
from helpers import wait_until
from userkit import (
    ADMINS,
    A,
    B,
    C,
    berth_as,
    call_as,
    ensure_user,
    ensure_users,
    listen_as,
    request_as,
)

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as other users")


class System:
    """A `berth daemon --system` over the rig's fake GPUs, and how users reach it."""

    def __init__(self, rig: Any) -> None:
        ensure_users()
        self.rig = rig
        self.base = rig.sockdir
        os.chmod(self.base, 0o755)
        self.run = os.path.join(self.base, "run")
        os.mkdir(self.run)
        os.chmod(self.run, 0o1777)  # as /run/berth (the claims' directory) is
        self.sock = os.path.join(self.run, "berth.sock")
        self.state = os.path.join(self.base, "state")
        self.config = os.path.join(self.base, "config.toml")
        with open(self.config, "w") as f:
            f.write(
                f'[claims]\nadmin_group = "{ADMINS}"\n[daemon]\nsystem_socket = "{self.sock}"\n'
            )
        os.chmod(self.config, 0o644)
        self.shared = os.path.join(self.base, "shared")  # a directory everyone may write
        os.mkdir(self.shared)
        os.chmod(self.shared, 0o1777)
        rig.socket = self.sock
        rig.state_dir = self.state
        rig.env.update(BERTH_SOCKET=self.sock, BERTH_CONFIG=self.config)
        os.environ["BERTH_SOCKET"] = self.sock
        self.env = {"BERTH_CONFIG": self.config}  # users: no BERTH_SOCKET, they find it

    def start(self, *flags: str) -> None:
        self.rig.start("--system", "--socket", self.sock, "--state-dir", self.state, *flags)

    def berth(self, user: str, *args: str, umask: int = 0o022) -> subprocess.CompletedProcess[str]:
        return berth_as(user, *args, umask=umask, env=self.env)

    def submit(self, user: str, *args: str, umask: int = 0o022) -> int:
        out = self.berth(user, "submit", "--parsable", *args, umask=umask)
        assert out.returncode == 0, out.stderr
        return int(out.stdout.split()[0])

    def call(self, user: str, kind: str, /, **fields: Any) -> Any:
        """One raw request as ``user`` (``fields`` may have a ``user`` of its own): {"ok":
        reply} or {"code": ..., "message": ...}."""
        return request_as(user, self.sock, kind, **fields)


@pytest.fixture
def system(daemon: Any) -> System:
    return System(daemon)


def _uid(user: str) -> int:
    return pwd.getpwnam(user).pw_uid


def test_three_users_jobs_run_as_them_and_their_logs_are_theirs(system: System) -> None:
    system.start()
    jobs = {u: system.submit(u, "--wait", "--", "id", umask=0o077) for u in (A, B, C)}
    done = system.rig.wait_done(list(jobs.values()))
    for user, job_id in jobs.items():
        assert done[job_id]["state"] == "COMPLETED", system.rig.job(job_id)
        pw = pwd.getpwnam(user)
        path = system.rig.job(job_id)["stdout"]
        assert path == os.path.join(system.state, "logs", user, f"{job_id}.out")
        with open(path) as f:  # uid, gid and every group of the user, as `id USER` says
            assert f.read() == subprocess.run(["id", user], capture_output=True, text=True).stdout
        st = os.stat(path)
        assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (pw.pw_uid, pw.pw_gid, 0o600)
        home = os.stat(os.path.dirname(path))
        assert (home.st_uid, stat.S_IMODE(home.st_mode)) == (pw.pw_uid, 0o700)
        assert system.rig.job(job_id)["uid"] == pw.pw_uid
        for other in {A, B, C} - {user}:  # nobody else can read it
            got = call_as(other, lambda p=path: open(p).read())
            assert got.get("error") == "PermissionError", got
    with open(system.rig.job(jobs[A])["stdout"]) as f:
        assert "berth-sys-team" in f.read()  # a supplementary group reached the job
    # The umask is the submitter's: the same user with 022 gets a log others could read.
    loose = system.submit(C, "--wait", "--", "true", umask=0o022)
    system.rig.wait_done([loose])
    assert stat.S_IMODE(os.stat(system.rig.job(loose)["stdout"]).st_mode) == 0o644
    # The state is root's: users pass through it, list and read nothing of it.
    assert stat.S_IMODE(os.stat(system.state).st_mode) == 0o711
    assert stat.S_IMODE(os.stat(os.path.join(system.state, "berth.db")).st_mode) == 0o600
    assert call_as(B, lambda: os.listdir(system.state)).get("error") == "PermissionError"
    sock = os.stat(system.sock)
    assert (sock.st_uid, stat.S_IMODE(sock.st_mode)) == (0, 0o666)


def test_a_job_gets_its_users_home_and_the_umask_sent(system: System) -> None:
    system.start()
    job = {"argv": ["sh", "-c", 'echo "$HOME $USER"; umask'], "env": {"PATH": "/usr/bin:/bin"},
           "cwd": "/", "umask": 0o027}  # fmt: skip
    reply = system.call(B, "submit", job=job)
    job_id = reply["ok"]["job_id"]
    assert system.rig.wait_done([job_id])[job_id]["state"] == "COMPLETED"
    with open(system.rig.job(job_id)["stdout"]) as f:
        assert f.read() == f"{pwd.getpwnam(B).pw_dir} {B}\n0027\n"


def test_another_user_may_not_touch_a_job_but_an_admin_may(system: System) -> None:
    system.start()
    held = system.submit(A, "--hold", "-J", "mine", "--", "sleep", "600")
    term = system.submit(A, "--pty", "--", "sleep", "600")
    wait_until(lambda: system.rig.job(term)["attach"], timeout=15, message="pty job runs")
    who = f"belongs to {A}; only {A} or an admin (root, group '{ADMINS}') may"
    for args, verb in (
        (("cancel", str(held)), "cancel it"),
        (("cancel", "-s", "USR1", str(term)), "signal it"),
        (("hold", str(held)), "hold it"),
        (("release-job", str(held)), "release it"),
        (("logs", str(term)), "read its logs"),
        (("attach", str(term)), "attach to it"),
    ):
        out = system.berth(B, *args)
        assert out.returncode == 4 and f"{who} {verb}" in out.stderr, (args, out.stderr)
    paused = system.berth(B, "pause", "0")
    assert paused.returncode == 4
    assert f"may not pause GPUs: only root, group '{ADMINS}' may" in paused.stderr
    # B sees the queue (users, names), and cannot reach A's files or terminal directly.
    queue = system.berth(B, "queue")
    assert queue.returncode == 0 and f" {A} " in queue.stdout and " mine " in queue.stdout
    pty = system.rig.job(term)["attach"]
    assert pty.startswith(os.path.join(system.state, "logs", A) + "/")

    def connect() -> None:
        s = socket.socket(socket.AF_UNIX)
        s.connect(pty)

    assert call_as(B, connect).get("error") == "PermissionError"
    # A request naming another user changes nothing: such fields do not exist.
    theirs = system.call(B, "cancel", job_ids=[held], uid=_uid(A))
    assert theirs["code"] == "BAD_REQUEST", theirs
    spec = {"argv": ["true"], "env": {}, "cwd": "/", "uid": _uid(A)}
    assert system.call(B, "submit", job=spec)["code"] == "BAD_REQUEST"
    assert system.rig.job(held)["state"] == "PENDING" and system.rig.job(term)["state"] == "RUNNING"
    # An admin of the group may act on A's jobs; reading a 0600 log needs root itself.
    assert system.berth(C, "release-job", str(held)).returncode == 0
    assert system.berth(C, "cancel", str(held)).returncode == 0
    logs = system.berth(C, "logs", str(term))
    assert logs.returncode == 4 and "sudo berth logs" in logs.stderr
    assert system.rig.berth("logs", str(term)).returncode == 0  # root reads it
    s = socket.socket(socket.AF_UNIX)
    s.connect(pty)  # root reaches the terminal
    s.close()
    assert system.rig.berth("cancel", str(term)).returncode == 0
    done = system.rig.wait_done([held, term])
    assert {done[held]["state"], done[term]["state"]} == {"CANCELLED"}


def test_log_paths_with_dotdot_or_a_planted_link_are_refused(system: System) -> None:
    system.start()
    out = system.berth(A, "submit", "-o", "../x.out", "--", "true")
    assert out.returncode == 2 and "'..' component" in out.stderr
    # B controls a directory A writes logs to, and plants a link to a file of A's there.
    adir = os.path.join(system.shared, "a")
    call_as(A, lambda: os.mkdir(adir, 0o755))
    secret = os.path.join(adir, "notes")
    call_as(A, lambda: open(secret, "w").write("keep\n"))
    bdir = os.path.join(system.shared, "b")

    def plant() -> None:
        os.mkdir(bdir)
        os.chmod(bdir, 0o777)  # (not sticky: the kernel's protected_symlinks does not apply)
        os.symlink(secret, os.path.join(bdir, "a.out"))

    call_as(B, plant)
    job_id = system.submit(A, "-o", os.path.join(bdir, "a.out"), "--", "echo", "pwned")
    row = system.rig.wait_done([job_id])[job_id]
    assert row["state"] == "FAILED"
    reason = system.rig.job(job_id)["attempts"][0]["reason"]
    assert "symbolic link" in reason, reason
    with open(secret) as f:
        assert f.read() == "keep\n"


def test_private_hides_commands_and_paths_from_other_users(system: System) -> None:
    system.start("--private")
    job_id = system.submit(A, "--hold", "-J", "visible", "--", "python3", "/secret/plan.py")
    seen = json.loads(system.berth(B, "show", "--json", str(job_id)).stdout)
    assert seen["name"] == "visible" and seen["user"] == A
    assert seen["command"] == seen["cwd"] == seen["stdout"] == "(private)"
    for user in (A, C):  # the owner and an admin see everything
        full = json.loads(system.berth(user, "show", "--json", str(job_id)).stdout)
        assert full["command"] == ["python3", "/secret/plan.py"]
    listed = json.loads(system.berth(B, "queue", "--json").stdout)
    assert listed["daemon"]["private"] is True and listed["jobs"][0]["user"] == A


def test_private_hides_what_a_learned_run_time_rests_on(system: System) -> None:
    """Issue 33.1 under --private: another user sees a job's learned run time, not the script
    it rests on (part of the command); the owner sees both."""
    system.start("--private")
    script = os.path.join(system.shared, "plan.py")
    with open(script, "w") as f:
        f.write("pass\n")
    os.chmod(script, 0o644)
    done = [system.submit(A, "--", "python3", script) for _ in range(2)]
    assert {r["state"] for r in system.rig.wait_done(done).values()} == {"COMPLETED"}
    held = system.submit(A, "--hold", "--", "python3", script)

    def runtime(user: str, *how: str) -> dict[str, Any]:
        out = json.loads(system.berth(user, *how).stdout)
        row = out if "start_estimate" in out else next(r for r in out["jobs"] if r["id"] == held)
        rt: dict[str, Any] = row["start_estimate"]["runtime"]
        return rt

    for how in (("show", "--json", str(held)), ("queue", "--json")):
        seen = runtime(B, *how)
        assert seen["runs"] == 2 and "plan" not in json.dumps(seen), seen
        assert runtime(A, *how)["basis"] == "plan.py"


def test_users_find_the_system_daemon_and_are_told_which_answered(system: System) -> None:
    system.start()
    queue = system.berth(A, "queue")
    assert queue.returncode == 0, queue.stderr
    assert queue.stdout.splitlines()[0].startswith(f"system daemon on {system.sock} (pid ")
    info = json.loads(system.berth(A, "queue", "--json").stdout)["daemon"]
    assert info["system"] is True and info["socket"] == system.sock and info["user"] == "root"


def test_state_dir_entries_are_made_safely(system: System) -> None:
    system.start()
    logs = os.path.join(system.state, "logs")
    assert stat.S_IMODE(os.stat(logs).st_mode) == 0o711
    os.symlink("/etc", os.path.join(logs, B))  # not B's directory: never used as one
    out = system.berth(B, "submit", "--", "true")
    assert out.returncode != 0 and f"log directory {logs}/{B} is not a directory" in out.stderr
    assert os.listdir("/etc")  # (untouched)
    # The same user with a log file of their own is not held up by it.
    mine = os.path.join(system.shared, "b.out")
    assert system.berth(B, "submit", "-o", mine, "--", "true").returncode == 0


def test_an_impostor_socket_is_refused_by_clients_and_removed_by_the_daemon(
    system: System,
) -> None:
    squatter = listen_as(B, system.sock)  # while the daemon is down, B takes its name
    try:
        out = system.berth(A, "queue")
        assert out.returncode == 5
        assert f"should be root's (the system daemon) but {B}" in out.stderr, out.stderr
        system.start()  # the daemon removes B's socket and binds its own
        st = os.stat(system.sock)
        assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (0, 0o666)
        assert system.berth(A, "queue").returncode == 0
    finally:
        squatter.close()


SQUATTED = "berth-sys-sq"  # this test's victim only: its /tmp/berth-UID is the real /tmp's


def test_a_squatted_fallback_socket_is_skipped_for_the_system_daemon(system: System) -> None:
    """Issue 41.5: without XDG_RUNTIME_DIR (cron, su, sudo -u) a user's own socket is
    /tmp/berth-UID/daemon.sock; another user who made that path first locked the user out of
    every berth command (the impostor error), and the user cannot remove it from sticky /tmp.
    The client skips it with one warning naming it, and goes on to the system daemon."""
    victim = ensure_user(SQUATTED)
    private = f"/tmp/berth-{victim.pw_uid}"
    sock = os.path.join(private, "daemon.sock")
    shutil.rmtree(private, ignore_errors=True)
    call_as(B, lambda: os.mkdir(private, 0o755))
    squatter = listen_as(B, sock)  # B serves it: it could pose as the victim's daemon
    try:
        out = system.berth(SQUATTED, "queue")  # nothing else answers: said plainly
        assert out.returncode == 5, out.stderr
        assert f"{sock} is not yours ({private} belongs to {B}" in out.stderr, out.stderr
        assert f"Ask your admin to remove {private}" in out.stderr, out.stderr
        system.start()
        for args in (("queue",), ("submit", "--", "true")):
            out = system.berth(SQUATTED, *args)
            assert out.returncode == 0, out.stderr
            assert out.stderr.count("warning: skipping") == 1 and sock in out.stderr, out.stderr
        first = system.berth(SQUATTED, "queue").stdout.splitlines()[0]
        assert first.startswith(f"system daemon on {system.sock} (pid "), first
        squatter.close()  # a socket file nobody serves, in B's directory: skipped alike
        out = system.berth(SQUATTED, "queue")
        assert out.returncode == 0 and f"skipping {sock}: {private} belongs to {B}" in out.stderr
    finally:
        squatter.close()
        shutil.rmtree(private, ignore_errors=True)


def test_a_squatted_allocation_socket_is_skipped_for_the_next(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same inside a Slurm job: another user's ``$TMPDIR/berth-UID/slurm-JOB`` comes
    first still (for the client to skip it, saying so), then what is tried without it."""
    from berth.wire import paths

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setenv("SLURM_JOB_ID", "77")
    monkeypatch.delenv("BERTH_SOCKET", raising=False)
    alloc = paths.allocation_dir()
    assert alloc is not None
    os.makedirs(alloc)
    dead = socket.socket(socket.AF_UNIX)
    dead.bind(os.path.join(alloc, "daemon.sock"))
    dead.close()
    assert [how for _, how in paths.candidates()] == [paths.ALLOCATION]  # (root's: its own)
    os.chown(alloc, 65534, 65534)
    assert [how for _, how in paths.candidates()] == [paths.ALLOCATION, paths.PRIVATE, paths.SYSTEM]


def test_no_daemon_advice_fits_the_case(system: System) -> None:
    out = system.berth(A, "queue")
    assert out.returncode == 5
    assert "no berth daemon is running" in out.stderr and "ask your admin" in out.stderr
    dead = socket.socket(socket.AF_UNIX)
    dead.bind(system.sock)  # a socket file nobody listens on: the daemon has stopped
    dead.close()
    out = system.berth(A, "queue")
    assert out.returncode == 5
    assert "the system berth daemon does not answer" in out.stderr
    assert "ask your admin (`systemctl status berth`)" in out.stderr
    env = {**system.rig.env, "BERTH_SOCKET": ""}
    root = subprocess.run(
        [sys.executable, "-m", "berth.cli.main", "queue"], env=env, capture_output=True,
        text=True, check=False,
    )  # fmt: skip
    assert root.returncode == 5 and "systemctl start berth" in root.stderr, root.stderr


def test_only_root_starts_the_system_daemon_and_no_daemon_binds_where_others_write(
    system: System,
) -> None:
    out = system.berth(B, "daemon", "--system", "--foreground")
    assert out.returncode == 2 and "must run as root" in out.stderr
    theirs = os.path.join(system.shared, "bdir")

    def open_dir() -> None:
        os.mkdir(theirs)
        os.chmod(theirs, 0o777)

    call_as(B, open_dir)
    sock = os.path.join(theirs, "d.sock")
    out = system.rig.berth("daemon", "--foreground", "--socket", sock, "--state-dir", system.state)
    assert out.returncode != 0 and "may be changed by others" in out.stderr, out.stderr
    assert not os.path.exists(sock)
