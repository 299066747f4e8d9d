"""A job's size in bytes, and the bounds on it (issue 41.4): what a job costs the daemon's
store and memory is its spec as the wire and the store carry it (argv, environment, setup,
every field: :meth:`~berth.wire.jobspec.JobSpec.to_dict` as JSON), so that is what is counted.

- One job: at most ``[limits] max_job_bytes`` (default 256 KiB, at most the protocol's
  request frame, 8 MiB), checked by the client before it sends (a clear error, nothing sent)
  and by the daemon at submit, ``submit_all``, ``update`` and ``resubmit``. An array's tasks
  (a sweep's each with its own command) count one task's command each.
- One user: the bytes their unfinished jobs keep in the store, at most ``[limits]
  max_user_bytes`` (default 256 MiB), checked by the daemon (it alone knows the total). An
  array's shared spec is stored, and counted, once, plus :data:`TASK_BYTES` a task.

The JSON is ASCII (as the store writes it), so its length is its size in bytes.
"""

from __future__ import annotations

from berth.units import format_size
from berth.wire import cjson, keptenv
from berth.wire.protocol import BAD_REQUEST, ProtocolError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from berth.wire.jobspec import JobSpec

TASK_BYTES = 256  # what the store keeps of each array task beside the shared spec (about)


def job_bytes(spec: JobSpec) -> int:
    """One job's size: its spec as JSON; a sweep's task with its own command only."""
    d = spec.to_dict()
    argvs = d.pop("array_argvs", None)
    if argvs:
        d["argv"] = max(argvs, key=lambda a: sum(len(w) for w in a))
    return len(cjson.dumps(d))


def stored_bytes(spec: JobSpec, tasks: int) -> int:
    """What ``spec`` (of ``tasks`` tasks: an array's; 1) keeps in the store: its spec once
    (a sweep's commands all), and :data:`TASK_BYTES` for each task of an array."""
    return sizes(spec, tasks)[1]


def sizes(spec: JobSpec, tasks: int) -> tuple[int, int]:
    """(:func:`job_bytes`, :func:`stored_bytes`) of ``spec``, from one encoding of it where
    they are the same (the daemon's intake: the spec is read once); an environment the daemon
    keeps (:mod:`berth.wire.keptenv`) is counted from its JSON made once, not encoded again."""
    env = keptenv.json_length(spec.env)
    d = spec.to_dict(env=env is None)
    argvs = d.get("array_argvs")
    if env is None:
        whole = len(cjson.dumps(d))
    else:  # (its place in the object: '"env":' and its JSON, a comma; cwd is always there)
        whole = len(cjson.dumps(d)) + len('"env":,') + env
    extra = TASK_BYTES * tasks if spec.array is not None else 0
    if not argvs:
        return whole, whole + extra
    return job_bytes(spec), whole + extra


def env_bytes(spec: JobSpec) -> int:
    """Bytes of the job's environment (``NAME=value`` each) and setup text (``[limits]
    max_env_size``, a part of the job's bytes with a bound of its own)."""
    size = len(spec.env_setup.encode(errors="surrogatepass")) if spec.env_setup else 0
    env = spec.env
    kept = keptenv.size_of(env)  # (a kept environment: measured once)
    if kept is not None:
        return size + kept
    names, values = "".join(env), "".join(env.values())
    if names.isascii() and values.isascii():  # (its length is its size: no copy made)
        return size + len(names) + len(values) + 2 * len(env)
    for k, v in env.items():
        size += len(k.encode(errors="surrogatepass")) + len(v.encode(errors="surrogatepass")) + 2
    return size


def check_job_bytes(size: int, most: int) -> None:
    """Refuse a job of ``size`` bytes past ``most`` (``[limits] max_job_bytes``)."""
    if size > most:
        raise ProtocolError(
            BAD_REQUEST,
            f"the job is {format_size(size)} (its command, environment, setup and options), "
            f"more than one job may be ({format_size(most)}, [limits] max_job_bytes); nothing "
            "was queued: put long arguments in a file the command reads, or export less "
            "(--export NAMES)",
        )
