"""berth's pure scheduling core: job model, state transitions, policies. No I/O, no clock.

Everything here is a function of its arguments; time is always passed in as ``now`` (seconds,
any epoch: the daemon uses ``time.time()``, the simulator its virtual clock). The daemon
(berth.daemon) and the simulator (berth.sim) call the very same functions.

Stable API (import from ``berth.core``)::

    # states (berth.core.states)
    State            PENDING RUNNING COMPLETING COMPLETED FAILED CANCELLED TIMEOUT PREEMPTED LOST
                     .code -> "PD" "R" "CG" "CD" "F" "CA" "TO" "PR" "LO"; State.parse("PD")
    Reason           Resources Priority Dependency DependencyNeverSatisfied Held GpuPaused
                     GpuUnhealthy BeginTime BadConstraints JobArrayTaskLimit UserGpuLimit
                     ProjectGpuLimit Reservation None
    ACTIVE, FINISHED, OUTCOMES   groupings (PREEMPTED is an attempt outcome: the job requeues)

    # the job model (berth.core.job); to_dict()/from_dict() are JSON-ready for the store
    Request(gpus=1 | 0.5, mem=bytes|None, gpu_ids=(0, 2)|None, prefer=(1,), name="A100"|None,
            each=1.0 | 0.1)   # each: the share of each of several GPUs (gpus=2, each=0.1)
    Job(id, submit_time, request, name, user, uid, gid, tenant, project, priority, time_limit,
        dependencies=Dependency.parse_list("afterok:3:4"), retries, retry_delay, requeue,
        held, extra={...daemon's own: argv, cwd, env, log paths...})
        .state .attempts[-1] (.gpus .share .mem .start .end .outcome .exit_code) .history
        .queue_time .not_before .deadline()

    # the one function that changes state (berth.core.transition); mutates and returns job
    transition(job, State.RUNNING, now=t, gpus=(0,), share=1.0, mem=None)   # from a Start
    transition(job, State.COMPLETING, now=t, reason="cancel requested")   # signal sent
    transition(job, State.COMPLETED | FAILED | TIMEOUT | CANCELLED | LOST, now=t, exit_code=rc)
    transition(job, State.PREEMPTED, now=t)   # requeue: job.state becomes PENDING again
    hold(job, now=t), release(job, now=t)      # the held flag (recorded in history)
    IllegalTransition (a UsageError) for every move the model forbids.

    # inventory (berth.core.inventory)
    Gpu(index, uuid, name, memory_total, healthy, node="")   from a GpuSnapshot
    Usage(share, mem, busy, label)   per GPU: claims NOT held by the daemon's jobs + processes
                                     outside berth (busy=True: no whole-GPU job goes there)
    Node(name, cpu, ram); uniform(gpus, memory, nodes=N) for simulated inventories

    # the policy (berth.core.policy; the pass in steps: berth.core.schedpass)
    schedule(Inputs(pending, running, inventory, others, paused, now, policy="guarded",
                    placement="packer", done={job_id: State}, usage=..., fair=..., limits=...,
                    reservations=[Window(id, gpus, start, end, users, projects)])) -> Decisions
    Decisions.starts [Start(job_id, gpus, share, mem, node)]   -> transition(..., RUNNING)
             .cancels [Cancel(job_id, reason)]                   afterok on a failed job
             .pending {job_id: Pending(job_id, reason, detail)}  every pending job not started
             .expected {job_id: time}   predicted start of the blocked head job
             .wakeup   earliest time a pass may decide something new by itself (timer); the
                       next time limit of a running job is one
    POLICIES = fifo, fifo-backfill, priority, sjf, fairshare, balanced, guarded (DEFAULT_POLICY)
    PLACEMENTS = first-fit, best-fit, packer (DEFAULT_PLACEMENT)
    check_policy(name, placement) raises UsageError for unknown names.

How the daemon uses it: on every event (submit, exit, cancel, claim change, NVML poll, timer),
call ``schedule(Inputs(...))``; for each Start take the claim and spawn, then
``transition(job, RUNNING, gpus=..., share=..., mem=...)``; for each Cancel
``transition(job, CANCELLED, reason=...)``; show ``pending[id]`` in ``berth queue``; arm a
timer at ``wakeup``. Time limits are not the core's to enforce: a job's supervisor ends its
attempt at its limit (``daemon/supervisor/attempt.py``; the daemon's overdue watch,
``daemon/procs/overdue.py``, one whose supervisor does not), and the simulator runs a job at
most its limit.
"""

from __future__ import annotations

from berth.core.decisions import Cancel, Decisions, Pending, Start
from berth.core.inventory import GIB, Gpu, Node, Usage, uniform
from berth.core.job import Attempt, Event, Job
from berth.core.placement import PLACEMENTS, Profile
from berth.core.policy import (
    DEFAULT_PLACEMENT,
    DEFAULT_POLICY,
    POLICIES,
    Inputs,
    check_policy,
    order_key,
    schedule,
)
from berth.core.request import Request
from berth.core.reservations import Window
from berth.core.states import ACTIVE, CODES, FINISHED, OUTCOMES, Reason, State
from berth.core.transition import IllegalTransition, hold, release, transition
from berth.dependency import Dependency

__all__ = [
    "ACTIVE",
    "CODES",
    "DEFAULT_PLACEMENT",
    "DEFAULT_POLICY",
    "FINISHED",
    "GIB",
    "OUTCOMES",
    "PLACEMENTS",
    "POLICIES",
    "Attempt",
    "Cancel",
    "Decisions",
    "Dependency",
    "Event",
    "Gpu",
    "IllegalTransition",
    "Inputs",
    "Job",
    "Node",
    "Pending",
    "Profile",
    "Reason",
    "Request",
    "Start",
    "State",
    "Usage",
    "Window",
    "check_policy",
    "hold",
    "order_key",
    "release",
    "schedule",
    "transition",
    "uniform",
]
