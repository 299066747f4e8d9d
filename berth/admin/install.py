"""What `berth admin install` writes, and how it knows a file it wrote from one an admin changed.

Three files: the systemd unit (``files/berth.service``, its ``ExecStart`` naming the berth that
runs the install), the tmpfiles rule (``files/berth-tmpfiles.conf``) and the config
(``/etc/berth/config.toml``: the GPUs found, the admin group). Each starts with a stamp line,
``# written by berth admin install; sha256 of what follows: HEX``: a file whose rest still
has that hash is berth's to replace or remove; any other existing file is the admin's, and
is replaced or removed only with ``--force``. Paths are under a root (``/``, or ``--root DIR``
for review); nothing here runs a command.
"""

from __future__ import annotations

import hashlib
import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

FILES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "files")
UNIT = "/etc/systemd/system/berth.service"
TMPFILES = "/etc/tmpfiles.d/berth.conf"
CONFIG = "/etc/berth/config.toml"
WANTS = "/etc/systemd/system/multi-user.target.wants/berth.service"  # (what enable links)
STAMP = "# written by berth admin install; sha256 of what follows: "
PLACEHOLDER = "@BERTH@"

WHY = (
    "KillMode=process: stopping, restarting or upgrading the daemon stops the daemon only; "
    "running jobs stay under their supervisors and the next daemon adopts them (the default, "
    "control-group, would kill every job).",
    "Delegate=yes: the daemon makes a cgroup per job below the service's own; delegated, "
    "systemd leaves them alone (docs/admin.md, 'Jobs and cgroups').",
    "No RuntimeDirectory=: /run/berth (the claims, the socket) must outlive the daemon; the "
    "tmpfiles rule makes it at boot, root's, mode 1777.",
)


def source(name: str) -> str:
    """A file shipped in the package (``berth.service``, ``berth-tmpfiles.conf``)."""
    with open(os.path.join(FILES, name), encoding="utf-8") as f:
        return f.read()


def unit_text(berth: str) -> str:
    """The unit, its ExecStart naming ``berth`` (a path, or ``python -m berth``)."""
    return source("berth.service").replace(PLACEHOLDER, berth)


def config_text(gpus: Sequence[tuple[int, str, str]], declared: int | None, group: str) -> str:
    """The system config: the GPUs found ((index, name, uuid): comments, NVML finds them at
    every start), or ``declared`` logical GPUs where no driver answered, and the admin group."""
    lines = ["# berth's system config (`berth help config` lists every key).", ""]
    if gpus:
        lines.append("# GPUs NVML found at install (the daemon reads them again at each start):")
        lines += [f"#   {i}: {name} {uuid}" for i, name, uuid in gpus]
        lines += ['# [inventory] ban = ["GPU-..."]   # keep berth off some of them', ""]
    elif declared is not None:
        lines += ["# No NVIDIA driver answered at install: GPUs declared (berth help config).",
                  "[inventory]", f"gpus = {declared}", ""]  # fmt: skip
    else:
        lines += ["# No NVIDIA driver answered at install, and no --gpus N was given: berth",
                  "# sees no GPU until the driver answers (or: [inventory] gpus = N).", ""]  # fmt: skip
    lines += ["[claims]", "# Its members may act on every job and claim (root always may).",
              f"admin_group = {_toml_string(group)}", ""]  # fmt: skip
    return "\n".join(lines)


def _toml_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def stamped(text: str) -> str:
    """``text`` with the stamp line that marks it as berth's."""
    return f"{STAMP}{_digest(text)}\n{text}"


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def ours(text: str) -> bool:
    """Whether a file's text is as berth admin install wrote it (its stamp still matches)."""
    head, _, rest = text.partition("\n")
    return head.startswith(STAMP) and head[len(STAMP) :] == _digest(rest)


def under(root: str, path: str) -> str:
    """``path`` (absolute) under ``root``."""
    return os.path.join(root, path.lstrip("/")) if root != "/" else path


def plan(berth: str, config: str) -> list[tuple[str, str, int]]:
    """(absolute path, text as written, mode) of each file to install."""
    return [
        (UNIT, stamped(unit_text(berth)), 0o644),
        (TMPFILES, stamped(source("berth-tmpfiles.conf")), 0o644),
        (CONFIG, stamped(config), 0o644),
    ]


def status(path: str, text: str) -> str:
    """What installing ``text`` at ``path`` (already under its root) would be: "new",
    "same", "update" (berth's own earlier file) or "changed" (not berth's, or edited since)."""
    try:
        with open(path, encoding="utf-8") as f:
            now = f.read()
    except FileNotFoundError:
        return "new"
    except (OSError, UnicodeDecodeError):
        return "changed"
    if now == text:
        return "same"
    return "update" if ours(now) else "changed"


def write(path: str, text: str, mode: int) -> None:
    """Write ``text`` at ``path`` whole (a temporary file renamed over it), ``mode``, its
    directories made (0755)."""
    os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
    tmp = f"{path}.berth-new"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, mode)
    try:
        os.fchmod(fd, mode)
        os.write(fd, text.encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def contrib(berth: str = "/usr/local/bin/berth") -> dict[str, str]:
    """contrib/systemd's copies (file name -> text), generated from the package's sources."""
    head = "# Generated from berth/admin/files/ (`berth admin install` writes it for you).\n"
    return {
        "berth.service": head + unit_text(berth),
        "berth-tmpfiles.conf": head + source("berth-tmpfiles.conf"),
    }
