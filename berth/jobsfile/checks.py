"""What would only fail once the job runs (as exit 127, hours later), checked at submit: the
conda environment, the script, the program. Client side, with the submitter's environment
(the one the job will get).

A conda environment is looked for where conda keeps them (``$CONDA_ENVS_PATH``, ``<base>/envs``,
``~/.conda/envs``; the base found from ``$CONDA_EXE``, ``$CONDA_PREFIX`` or ``conda`` on
``PATH``), without running conda; only when that finds nothing is ``conda env list --json``
asked (it knows ``envs_dirs`` from ``.condarc``).
"""

from __future__ import annotations

import os

from berth.errors import UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping


def _which(name: str, path: str) -> str | None:
    for d in path.split(os.pathsep):
        candidate = os.path.join(d or ".", name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def _bases(env: Mapping[str, str]) -> list[str]:
    """conda's base directories this environment points at."""
    out: list[str] = []
    exe = env.get("CONDA_EXE") or _which("conda", env.get("PATH") or os.defpath)
    if exe:
        out.append(os.path.dirname(os.path.dirname(os.path.realpath(exe))))
        out.append(os.path.dirname(os.path.dirname(exe)))  # (condabin/conda, a link)
    prefix = env.get("CONDA_PREFIX")
    if prefix:
        head, sep, _ = prefix.rpartition(os.sep + "envs" + os.sep)
        out.append(head if sep else prefix)
    for key in ("MAMBA_ROOT_PREFIX", "CONDA_ROOT"):
        if env.get(key):
            out.append(env[key])
    return list(dict.fromkeys(out))


def conda_dir(name: str, env: Mapping[str, str]) -> str | None:
    """The directory of conda environment ``name`` (a name or a path), or None."""
    if os.sep in name:
        return name if os.path.isdir(name) else None
    bases = _bases(env)
    if name == "base":
        return bases[0] if bases else None
    dirs = [d for key in ("CONDA_ENVS_PATH", "CONDA_ENVS_DIRS") for d in
            (env.get(key) or "").split(os.pathsep) if d]  # fmt: skip
    dirs += [os.path.join(b, "envs") for b in bases]
    home = env.get("HOME") or os.path.expanduser("~")
    dirs.append(os.path.join(home, ".conda", "envs"))
    for d in dirs:
        candidate = os.path.join(d, name)
        if os.path.isdir(candidate):
            return candidate
    return None


def _conda_list(env: Mapping[str, str]) -> list[str] | None:
    """The environments ``conda env list --json`` names, or None if conda cannot say."""
    import json  # rare: conda asked
    import subprocess  # heavy (~3 ms); rare: conda asked

    exe = env.get("CONDA_EXE") or _which("conda", env.get("PATH") or os.defpath)
    if not exe:
        return None
    try:
        done = subprocess.run(
            [exe, "env", "list", "--json"], env=dict(env), capture_output=True, timeout=30,
            check=False,
        )  # fmt: skip
        envs = json.loads(done.stdout).get("envs")
    except (OSError, ValueError, AttributeError, subprocess.TimeoutExpired):
        return None
    return [str(e) for e in envs] if isinstance(envs, list) else None


def check_conda(name: str, env: Mapping[str, str], what: str = "--conda") -> str | None:
    """Raise UsageError if conda environment ``name`` does not exist for this user; its
    directory if known."""
    found = conda_dir(name, env)
    if found is not None:
        return found
    listed = _conda_list(env)
    if listed is not None:
        for path in listed:
            if os.path.basename(path) == name or path == name:
                return path
        names = ", ".join(sorted(os.path.basename(p) or p for p in listed)) or "none"
        raise UsageError(
            f"{what} {name!r}: no such conda environment (conda env list: {names}); create "
            f"it (conda create -n {name}) or name one that exists"
        )
    if not _bases(env):
        raise UsageError(
            f"{what} {name!r}: conda is not found in this shell (no conda on PATH, "
            "$CONDA_EXE unset): activate conda first, or leave the environment out"
        )
    raise UsageError(
        f"{what} {name!r}: no such conda environment under "
        f"{', '.join(os.path.join(b, 'envs') for b in _bases(env))}; create it "
        f"(conda create -n {name}) or name one that exists"
    )


def find_program(
    name: str, env: Mapping[str, str], cwd: str, conda: str | None = None
) -> str | None:
    """Where exec would find ``name`` for the job (in its conda environment first), or None."""
    if os.sep in name:
        path = os.path.join(cwd, name)
        return path if os.path.isfile(path) and os.access(path, os.X_OK) else None
    search = env.get("PATH") or os.defpath
    if conda:
        search = os.path.join(conda, "bin") + os.pathsep + search
    found = _which(name, search)
    return None if found is None else found


def check_program(
    name: str, env: Mapping[str, str], cwd: str, where: str, conda: str | None = None
) -> None:
    if find_program(name, env, cwd, conda) is not None:
        return
    if os.sep in name:
        path = os.path.join(cwd, name)
        why = "is not executable" if os.path.isfile(path) else "does not exist"
        raise UsageError(f"{where}: program {name!r} {why}")
    inside = f" nor in the conda environment {os.path.basename(conda)}" if conda else ""
    raise UsageError(
        f"{where}: no program {name!r} on PATH{inside}: the job would fail with exit code 127"
    )


def check_script(path: str, cwd: str, where: str) -> None:
    full = os.path.join(cwd, path)
    if not os.path.isfile(full):
        why = "is a directory" if os.path.isdir(full) else "does not exist"
        raise UsageError(f"{where}: script {path!r} {why}")
