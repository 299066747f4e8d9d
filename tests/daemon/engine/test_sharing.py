"""Queued jobs and everybody else: daemonless claims (`berth run`, `acquire()`) and GPU
processes outside berth are respected; a claim released elsewhere dispatches at once."""

from __future__ import annotations

import os
import time

import records
from helpers import wait_until

from berth.claims.ledger import Ledger
from berth.daemon.supervisor.runfile import read_run_file


def test_a_daemonless_claim_keeps_queued_jobs_off_and_its_release_dispatches_at_once(daemon):
    daemon.start("--poll-interval", "600")  # only the claim watcher can wake it
    uuid = daemon.fake.uuids[0]
    lease = Ledger(daemon.fake.claims_dir).try_claim([uuid], label="someone's berth run")
    assert lease is not None
    job_id = daemon.submit(*daemon.workload("--seconds", "0.05", "--record", daemon.record),
                           gpu_ids=[0])  # fmt: skip
    others = [daemon.submit(*daemon.workload("--seconds", "0.05")) for _ in range(3)]
    daemon.wait_done(others)
    job = daemon.job(job_id)
    assert job["state"] == "PENDING" and job["reason"].startswith("Resources")
    released = time.time()
    lease.release()
    row = daemon.wait_done([job_id])[job_id]
    assert row["state"] == "COMPLETED"
    start = next(e for e in records.read(daemon.record) if e["event"] == "start")
    assert start["time"] - released < 2.0  # the watcher, not a 600 s poll, woke it


def test_queued_jobs_claim_their_gpus_so_daemonless_users_see_them(daemon):
    daemon.start()
    job_id = daemon.submit(*daemon.workload("--seconds", "60"), gpu_ids=[2])
    wait_until(lambda: daemon.job(job_id)["state"] == "RUNNING", message="running")
    ledger = Ledger(daemon.fake.claims_dir)
    held = ledger.scan().held()
    assert held[daemon.fake.uuids[2]].share == 1.0
    assert ledger.try_claim([daemon.fake.uuids[2]]) is None  # berth run cannot take it
    daemon.call("cancel", job_ids=[job_id])
    daemon.wait_done([job_id])
    wait_until(lambda: daemon.fake.uuids[2] not in ledger.scan().held(), message="released")


def test_claims_survive_a_daemon_crash_with_their_jobs(daemon):
    daemon.start()
    job_id = daemon.submit(*daemon.workload("--seconds", "60"), gpu_ids=[1])
    path = os.path.join(daemon.state_dir, "run", f"{job_id}.1")
    wait_until(lambda: "job" in read_run_file(path), message="the job started")
    daemon.kill9()
    ledger = Ledger(daemon.fake.claims_dir)
    assert ledger.try_claim([daemon.fake.uuids[1]]) is None  # still held by the job
    daemon.start()
    assert daemon.job(job_id)["state"] == "RUNNING"


def test_outside_processes_are_seen_through_nvml(daemon):
    daemon.fake.setup(n=2, memory="80G")
    daemon.fake.spawn_workload(visible="1", mem="10G")  # not berth's
    daemon.start("--poll-interval", "0.2", gpus=None)
    work = daemon.workload("--seconds", "0.1", "--record", daemon.record)
    ids = [daemon.submit(*work) for _ in range(3)]
    daemon.wait_done(ids)
    used = {g for _, _, gpus, _ in records.intervals(daemon.record) for g in gpus}
    assert used == {daemon.fake.uuids[0]}
