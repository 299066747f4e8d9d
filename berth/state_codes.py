"""Slurm's two-letter code of each job state (the ST column), by the state's name: the one
table. A leaf that imports nothing: the core's ``State`` (``berth.core.states``) is made to
match it, and the daemon's rows and every backend's screens read it without importing the
core (which the CLI's start-up must not load)."""

from __future__ import annotations

CODES: dict[str, str] = {
    "PENDING": "PD",
    "RUNNING": "R",
    "COMPLETING": "CG",
    "COMPLETED": "CD",
    "FAILED": "F",
    "CANCELLED": "CA",
    "TIMEOUT": "TO",
    "PREEMPTED": "PR",
    "LOST": "LO",
}
