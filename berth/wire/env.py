"""The job's environment, as both sides see it: what ``berth submit`` captures
(``--export``), how a job's setup runs before its command (``--env-setup``, ``--conda``: the
local launcher, :mod:`berth.daemon.engine.starts`, and the Slurm batch script,
:mod:`berth.backends.sbatch`, run the same shell text), and which ``sendmail`` a job's
``PATH`` finds (``--mail-user``: the client refuses it where none exists; the daemon mails
through it).
"""

from __future__ import annotations

import os

# Kept from the submitter's environment with --export NONE.
MINIMAL_ENV = ("HOME", "USER", "LOGNAME", "PATH", "SHELL", "LANG", "TERM")

# The job runs only if the setup succeeded (its last command's status), never half set up.
SETUP_SCRIPT = (
    "{setup}\n"
    "_berth_setup=$?\n"
    'if [ "$_berth_setup" -ne 0 ]; then\n'
    "  echo \"berth: the job's environment setup failed (status $_berth_setup);"
    ' the command was not run" >&2\n'
    "  exit 127\n"
    "fi\n"
    'exec "$@"'
)
# `conda activate` needs conda's shell function, which a non-interactive bash lacks.
CONDA_HOOK = (
    'eval "$(conda shell.bash hook)" 2>/dev/null || . "$(conda info --base)/etc/profile.d/conda.sh"'
)
CONDA_SETUP = CONDA_HOOK + '\nconda activate "$BERTH_CONDA_ENV" || exit 127'

SENDMAIL_DIRS = ("/usr/sbin", "/usr/lib")


def export_env(mode: str, environ: dict[str, str]) -> dict[str, str]:
    """``--export ALL|NONE|VAR,VAR``: the environment captured at submit (client side)."""
    if mode.upper() == "ALL":
        return dict(environ)
    keep = set(MINIMAL_ENV)
    if mode.upper() != "NONE":
        keep |= {v.strip() for v in mode.split(",") if v.strip()}
    return {k: v for k, v in environ.items() if k in keep}


def sendmail(path: str) -> str | None:
    """The ``sendmail`` a job with this ``PATH`` would use (then /usr/sbin, /usr/lib)."""
    for d in [*path.split(os.pathsep), *SENDMAIL_DIRS]:
        exe = os.path.join(d or ".", "sendmail")
        if os.path.isfile(exe) and os.access(exe, os.X_OK):
            return exe
    return None
