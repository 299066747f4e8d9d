"""Every field a client sends is checked by exact type and range before anything is stored or
sent to a supervisor (a job: berth/wire/jobspec.py; other requests: berth/daemon/requests/validate.py):
a refusal is BAD_REQUEST naming the field and the value, and changes nothing; the daemon goes
on (and starts again) as before."""

from __future__ import annotations

import math

import pytest

from berth.client import DaemonError

GOOD = {"argv": ["true"], "env": {"PATH": "/usr/bin:/bin"}, "cwd": "/"}

BAD_JOBS = [
    ("after_ok", [True]),  # bool passed an int check once, and the daemon could not start again
    ("after_ok", [1.0]),
    ("after_ok", 5),
    ("gpus", True),
    ("gpus", math.nan),
    ("gpus", math.inf),
    ("gpus", -1),  # (0 is a CPU-only job: issue 34.3)
    ("gpus", 1.5),
    ("gpus", "2"),
    ("mem", -1),
    ("mem", 2**70),
    ("mem", 1.5),
    ("time_limit", math.inf),
    ("time_limit", math.nan),
    ("time_limit", -5),
    ("time_limit", 10 * 365 * 86400),
    ("priority", 2**70),
    ("priority", True),
    ("priority", 1.0),
    ("retries", -1),
    ("retries", 10**6),
    ("gpu_ids", [True]),
    ("gpu_ids", ["0"]),
    ("gpu_ids", [0, 0]),
    ("gpu_ids", []),
    ("prefer", [-1]),
    ("argv", ["a\0b"]),
    ("argv", []),
    ("argv", ["true", 5]),
    ("env", {"A": 1}),
    ("env", {"A=B": "x"}),
    ("env", {"": "x"}),
    ("env", ["A=1"]),
    ("cwd", "relative/dir"),
    ("cwd", "/tmp\0x"),
    ("stdout", "../x.out"),
    ("stdout", "/tmp/a/../../etc/x"),
    ("stderr", "logs/../../x"),
    ("stdout", ""),
    ("name", "a\0b"),
    ("hold", 1),
    ("pty", "yes"),
    ("umask", 0o1000),
    ("umask", -1),
    ("uid", 0),  # who submits is the socket's to say
    ("user", "root"),
]


def test_every_bad_job_field_is_refused_naming_it_and_nothing_is_stored(daemon):
    daemon.start()
    wrong = []
    for field, value in BAD_JOBS:
        try:
            daemon.call("submit", job={**GOOD, field: value})
            wrong.append(f"{field}={value!r}: accepted")
        except DaemonError as e:
            if e.code != "BAD_REQUEST" or field not in str(e):
                wrong.append(f"{field}={value!r}: {e.code} {e}")
    assert not wrong, "\n".join(wrong)
    assert daemon.call("queue", all=True)["jobs"] == []
    # A job with neither a command nor a shell string, or with both:
    for job in ({k: v for k, v in GOOD.items() if k != "argv"}, {**GOOD, "wrap": "true"}):
        with pytest.raises(DaemonError, match="argv"):
            daemon.call("submit", job=job)
    # The daemon starts again over what it stored (after_ok: [true] once made that fail).
    job_id = daemon.submit("true", after_ok=[])
    daemon.stop()
    daemon.start()
    assert daemon.wait_done([job_id])[job_id]["state"] == "COMPLETED"


JOB = object()  # the held job's id, in a list
BAD_REQUESTS = [
    ("cancel", {"job_ids": JOB, "signal": 99999}, "signal"),
    ("cancel", {"job_ids": JOB, "signal": 0}, "signal"),
    ("cancel", {"job_ids": JOB, "signal": -9}, "signal"),
    ("cancel", {"job_ids": JOB, "signal": 65}, "signal"),
    ("cancel", {"job_ids": JOB, "signal": True}, "signal"),
    ("cancel", {"job_ids": [True]}, "job_ids"),
    ("cancel", {"job_ids": [2**70]}, "job_ids"),
    ("cancel", {"job_ids": [0]}, "job_ids"),
    ("hold", {"job_ids": ["1"]}, "job_ids"),
    ("wait", {"job_id": 1, "timeout": math.nan}, "timeout"),
    ("wait", {"job_id": 1, "timeout": math.inf}, "timeout"),
    ("wait", {"job_id": 1, "timeout": -1}, "timeout"),
    ("show", {"job_id": 2**70}, "job_id"),
    ("show", {"job_id": True}, "job_id"),
    ("logs", {"job_id": -1}, "job_id"),
    ("queue", {"uid": -1}, "uid"),
    ("queue", {"states": [1]}, "states"),
    ("pause", {"gpus": [None]}, "gpus"),
    ("resume", {"gpus": [True]}, "gpus"),
]


def test_bad_values_in_other_requests_are_refused_and_change_nothing(daemon):
    daemon.start()
    job_id = daemon.submit(*daemon.workload("--seconds", "60"), hold=True)
    wrong = []
    for kind, fields, field in BAD_REQUESTS:
        fields = {k: ([job_id] if v is JOB else v) for k, v in fields.items()}
        try:
            daemon.call(kind, **fields)
            wrong.append(f"{kind} {fields}: accepted")
        except DaemonError as e:
            if e.code != "BAD_REQUEST" or field not in str(e):
                wrong.append(f"{kind} {fields}: {e.code} {e}")
    assert not wrong, "\n".join(wrong)
    job = daemon.job(job_id)
    assert job["state"] == "PENDING" and job["held"]


def test_the_cli_refuses_a_signal_that_does_not_exist(daemon):
    daemon.start()
    job_id = daemon.submit("true", hold=True)
    out = daemon.berth("cancel", "-s", "99999", str(job_id))
    assert out.returncode == 2 and "signal numbers go from 1 to" in out.stderr
    assert daemon.job(job_id)["state"] == "PENDING"
