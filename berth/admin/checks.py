"""`berth admin doctor`'s checks of the host, each a list of :class:`berth.admin.verdict.Check`
lines (ok, warn or fail, with the fix): NVML and the driver, each GPU readable, MIG and
``CUDA_VISIBLE_DEVICES``, the cgroup hierarchies (what per-job cgroups and
``isolate_devices`` will do here), the admin group, the clock, the config (unknown keys; and
what its ``[inventory]`` names that this host lacks: :mod:`berth.devices.named`), the
installed unit; the places (claims dir, socket, state dir) are :mod:`berth.admin.places`.
:func:`run` runs them all; the daemon runs them at start (``daemon=True``: not those of its own
socket and lock) and logs each line. Nothing here changes the host: a probe cgroup made to
see whether a hierarchy is writable is removed at once.
"""

from __future__ import annotations

import os
import time

from berth import config
from berth.admin import install, places
from berth.admin.verdict import FAIL, OK, WARN, Check
from berth.daemon.procs import cgroup
from berth.devices import hidden_by_declared
from berth.devices.named import unmatched
from berth.errors import ConfigError, NvmlUnavailable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from berth.config import Config

OLDEST = 1_704_067_200  # 2024-01-01: a clock before this was never set


def run(
    state_dir: str, claims_dir: str | None, socket: str | None, daemon: bool = False
) -> list[Check]:
    """Every check, in the order an admin fixes things (``socket`` None: not checked). A check
    that cannot look (a directory this user may not enter) says so instead of failing."""
    cfg, out = read_config()
    out += _safe("nvml", gpus, cfg)
    out += cuda_env()
    out += _safe("cgroups", cgroups, cfg)
    out += admin_group(cfg)
    if claims_dir is not None:
        out += _safe("claims dir", places.claims_dir, claims_dir)
    answers = False
    if socket is not None:
        said = _safe("socket", places.socket_file, socket)
        answers = said[-1].level == OK
        out += said
    out += _safe("state dir", places.state_dir, state_dir, answers or daemon)
    out += _safe("clock", clock, state_dir)
    if not daemon:
        out += _safe("unit", unit)
    return out


def _safe(name: str, check: Callable[..., list[Check]], *args: Any) -> list[Check]:
    try:
        return check(*args)
    except OSError as e:
        where = f" {e.filename}" if e.filename else ""
        return [Check(name, WARN, f"cannot check{where}: {e.strerror or e}",
                      "" if os.geteuid() == 0 else "sudo berth admin doctor")]  # fmt: skip


def read_config() -> tuple[Config | None, list[Check]]:
    try:
        cfg = config.load()
    except ConfigError as e:
        return None, [Check("config", FAIL, str(e), "edit it (`berth help config` lists the keys)")]
    files = ", ".join(cfg.files) or "none (the defaults)"
    return cfg, [Check("config", OK, f"read {files}")]


def gpus(cfg: Config | None) -> list[Check]:
    """NVML and the driver; each GPU readable; MIG mode."""
    if cfg is not None and cfg.inventory.declared:
        n = cfg.inventory.declared
        said = [Check("nvml", OK, f"declared inventory: {n} logical GPU(s), NVML not used")]
        if (note := hidden_by_declared(cfg)) is not None:
            said.append(Check("inventory", WARN, note.removeprefix("note: ")))
        return said
    from berth.devices import nvml  # heavy: NVML

    try:
        driver = nvml.driver_version()
        snaps = nvml.read_all(False, telemetry=False)
    except NvmlUnavailable as e:
        return [Check("nvml", FAIL, str(e), "install or load the NVIDIA driver (nvidia-smi "
                      "should work), or declare GPUs: [inventory] gpus = N")]  # fmt: skip
    session = nvml.session()
    version = _call(session, "nvmlSystemGetNVMLVersion")
    out = [Check("nvml", OK, f"driver {driver or '?'}, NVML {version or '?'}, {len(snaps)} GPU(s)")]
    if not snaps:
        out.append(Check("gpus", WARN, "NVML sees no GPU", "nvidia-smi -L; check the driver"))
    for g in snaps:
        if not g.healthy:
            out.append(Check(f"gpu {g.index}", WARN, f"{g.uuid} cannot be read fully: "
                             f"{g.error or 'unhealthy'}",
                             "nvidia-smi -q -i " + str(g.index)))  # fmt: skip
    if cfg is not None:  # (what the config names that is not here: it changes nothing)
        out += [
            Check("inventory", FAIL, said, fix)
            for said, fix in unmatched(cfg.inventory, [(g.index, g.uuid) for g in snaps])
        ]
    readable = sum(1 for g in snaps if g.healthy)
    if snaps and readable == len(snaps):
        out.append(Check("gpus", OK, f"all {readable} readable"))
    for g in snaps:
        handle = _call(session, "nvmlDeviceGetHandleByIndex", g.index)
        mode = _call(session, "nvmlDeviceGetMigMode", handle) if handle is not None else None
        if isinstance(mode, (list, tuple)) and mode and mode[0] == 1:
            out.append(Check(f"gpu {g.index}", WARN, "MIG is enabled: berth hands out whole "
                             "GPUs, not MIG instances", f"nvidia-smi -i {g.index} -mig 0, or "
                             "[inventory] ban it"))  # fmt: skip
    return out


def _call(session: object, name: str, *args: object) -> object | None:
    fn = getattr(session, name, None)
    try:
        return fn(*args) if fn is not None else None
    except Exception:  # (NVMLError of any kind, a symbol the driver lacks: not reported)
        return None


def cuda_env() -> list[Check]:
    seen = os.environ.get("CUDA_VISIBLE_DEVICES")
    if seen is None:
        return [Check("cuda env", OK, "CUDA_VISIBLE_DEVICES not set")]
    return [Check("cuda env", WARN, f"CUDA_VISIBLE_DEVICES={seen!r} here: status and select "
                  "see only those GPUs; berth sets it for each job itself",
                  "unset it in profiles and in the unit (no Environment=CUDA_VISIBLE_DEVICES)")]  # fmt: skip


def cgroups(cfg: Config | None) -> list[Check]:
    """Which cgroup hierarchy the daemon can make a cgroup per job in (a probe made and
    removed), and what that means for ``isolate_devices``."""
    isolate = cfg.isolate_devices if cfg is not None else False
    if os.geteuid() != 0:
        return [Check("cgroups", WARN, "not root: cannot see what the system daemon may do",
                      "sudo berth admin doctor")]  # fmt: skip
    why: list[str] = []
    usable: list[str] = []
    for kind in ("v2", "freezer", "pids", "devices"):
        mine = cgroup.mine(kind)  # (where the daemon would make its cgroups of this kind)
        if mine is None:
            why.append(f"{kind}: not mounted")
            continue
        err = _probe(mine)
        if err:
            why.append(f"{kind} at {mine}: {err}")
        else:
            usable.append(kind)
    track = next((k for k in usable if k != "devices"), None)
    out = []
    if track is None:
        out.append(Check("cgroups", FAIL, "no writable cgroup hierarchy (" + "; ".join(why) +
                         "): a job's processes are tracked by process group only and can "
                         "escape their job", "mount cgroup2 read-write (systemd does), or give "
                         "the container a writable cgroup namespace"))  # fmt: skip
    else:
        more = f" ({'; '.join(why)})" if why else ""
        out.append(Check("cgroups", OK, f"a cgroup per job in {track}{more}"))
    devices = "BPF device filter" if track == "v2" else (
        "devices controller" if "devices" in usable and track else None)  # fmt: skip
    if devices:
        out.append(Check("isolate_devices", OK, f"possible here ({devices}); "
                         f"[daemon] isolate_devices = {str(isolate).lower()}"))  # fmt: skip
    else:
        level = FAIL if isolate == "required" else WARN if isolate else OK
        out.append(Check("isolate_devices", level, "cannot be enforced here (no writable "
                         "cgroup v2 nor v1 devices hierarchy)" + (
                         "; jobs will not start" if isolate == "required" else ""),
                         "" if level == OK else "a writable cgroup hierarchy, or "
                         "isolate_devices = false"))  # fmt: skip
    return out


def _probe(path: str) -> str | None:
    """None if a cgroup can be made in ``path`` (made and removed), else why not."""
    probe = os.path.join(path, f"berth-doctor-{os.getpid()}")
    try:
        os.mkdir(probe)
        os.rmdir(probe)
    except OSError as e:
        return e.strerror or str(e)
    return None


def admin_group(cfg: Config | None) -> list[Check]:
    import grp  # rare: doctor

    name = cfg.admin_group if cfg is not None else None
    if not name:
        return [Check("admin group", WARN, "none: only root may act on others' jobs and claims",
                      "[claims] admin_group = \"NAME\" (berth admin install writes one)")]  # fmt: skip
    try:
        members = grp.getgrnam(name).gr_mem
    except KeyError:
        return [Check("admin group", FAIL, f"[claims] admin_group {name!r} does not exist",
                      f"groupadd --system {name}")]  # fmt: skip
    return [Check("admin group", OK, f"{name}: {', '.join(members) or 'no members yet'}")]


def clock(state_dir: str) -> list[Check]:
    """The wall clock: set, and not behind the newest time the queue recorded."""
    now = time.time()
    if now < OLDEST:
        return [Check("clock", FAIL, f"the clock says {time.ctime(now)}", "set it (NTP)")]
    newest = _newest_record(os.path.join(state_dir, "berth.db"))
    if newest is not None and newest > now + 60:
        return [Check("clock", WARN, f"the queue recorded a time {newest - now:.0f}s ahead of "
                      "the clock: it was set back (time limits and fair share see it)",
                      "keep the clock synchronised (NTP) and let it slew")]  # fmt: skip
    return [Check("clock", OK, time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(now)))]


def _newest_record(path: str) -> float | None:
    if not os.path.isfile(path):
        return None
    import sqlite3  # heavy: doctor only

    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
        try:
            row = db.execute("SELECT MAX(MAX(submitted_at), COALESCE(MAX(ended_at), 0)) "
                             "FROM jobs").fetchone()  # fmt: skip
        finally:
            db.close()
    except sqlite3.Error:
        return None
    return None if row is None or row[0] is None else float(row[0])


def unit() -> list[Check]:
    """The installed unit, and whether every user can run the berth it starts."""
    try:
        with open(install.UNIT, encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return [Check("unit", WARN, f"{install.UNIT} is not installed",
                      "berth admin install --enable")]  # fmt: skip
    start = next((line.split("=", 1)[1].split()[0] for line in text.splitlines()
                  if line.startswith("ExecStart=")), "")  # fmt: skip
    if not start or not os.access(start, os.X_OK):
        return [Check("unit", FAIL, f"ExecStart names {start!r}, not a program",
                      "berth admin install --force")]  # fmt: skip
    closed = _closed_to_others(start)
    if closed:
        return [Check("unit", WARN, f"{start}: other users cannot run it ({closed} is "
                      "closed to them)", "install berth where everyone can run it, e.g. /opt")]  # fmt: skip
    return [Check("unit", OK, f"{install.UNIT} starts {start}" + (
        "" if install.ours(text) else " (edited since berth admin install)"))]  # fmt: skip


def _closed_to_others(path: str) -> str | None:
    """The first directory (or the file) on ``path`` that others cannot pass (run)."""
    real = os.path.realpath(path)
    parts = real.split(os.sep)
    for i in range(2, len(parts) + 1):
        here = os.sep.join(parts[:i])
        try:
            if not os.stat(here).st_mode & 0o001:
                return here
        except OSError:
            return here
    return None
