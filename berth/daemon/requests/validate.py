"""Strict checks of the values of every request but ``submit``, before the daemon acts on them.

A submitted job is checked by :meth:`berth.wire.jobspec.JobSpec.from_dict`, the one validator
of a job (the CLI runs the same checks before it sends). Here: job ids, signal numbers,
timeouts, uids, GPU names. :mod:`berth.wire.protocol` checks only that a request's fields
exist and have a JSON type; here every value is checked by *exact* type (``True`` is not a job
id), element by element, and by range (:mod:`berth.wire.checks`: a signal the kernel knows, a
finite timeout, strings without NUL). A refusal is a ``BAD_REQUEST`` naming the field and the
value, and changes nothing.
"""

from __future__ import annotations

import signal as _signal

from berth.units import MAX_GPU_INDEX
from berth.wire.checks import MAX_ID, bad, int_list, integer, is_int, number, text

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

MAX_UID = 2**32 - 2  # (uid_t; -1 is "none")
MAX_TIMEOUT = 7 * 86400.0  # of a `wait` request
SIGNAL_MAX = int(getattr(_signal, "SIGRTMAX", 64))


# -- requests other than submit ---------------------------------------------------------------


def job_id(v: Any, field: str = "job_id") -> int:
    return integer(field, v, 1, MAX_ID)


def job_ids(v: Any) -> list[int]:
    return int_list("job_ids", [] if v is None else v, 1, MAX_ID, empty=True)


def signal_number(v: Any) -> int | None:
    """A signal to send to a job: 1..SIGRTMAX (0 would only probe; larger ones do not exist)."""
    if v is None:
        return None
    if not is_int(v) or not 1 <= v <= SIGNAL_MAX:
        raise bad("signal", v, f"must be a signal number from 1 to {SIGNAL_MAX} (or a name)")
    return int(v)


def timeout(v: Any) -> float | None:
    return None if v is None else number("timeout", v, 0, MAX_TIMEOUT, low_open=False)


def unix_time(field: str, v: Any) -> float | None:
    """A moment (Unix time), e.g. `release-job --at`'s; None stays None."""
    return None if v is None else number(field, v, 0, 1e11)


def uid(v: Any) -> int | None:
    return None if v is None else integer("uid", v, 0, MAX_UID)


def strings(field: str, v: Any) -> list[str]:
    if v is None:
        return []
    if type(v) is not list:
        raise bad(field, v, "must be a list of strings")
    return [text(f"{field}[{i}]", s, limit=256) for i, s in enumerate(v)]


def gpu_names(field: str, v: Any) -> list[str]:
    """GPUs named by index (int or text) or UUID (`pause`, `resume`)."""
    if v is None:
        return []
    if type(v) is not list:
        raise bad(field, v, "must be a list of GPU indices or UUIDs")
    out = []
    for g in v:
        if is_int(g) and 0 <= g <= MAX_GPU_INDEX:
            out.append(str(g))
        elif type(g) is str:
            out.append(text(field, g, limit=256))
        else:
            raise bad(field, g, "must be a GPU index or UUID")
    return out
