"""The job's GPU ids in its command: ``--inject-arg --cuda`` (the GPU Job Scheduler rewrote ``--cuda``) and
the ``{gpus}`` / ``{cuda}`` placeholders. Pure; :mod:`berth.daemon.engine.starts` applies it when
the attempt's GPUs are known.

Two ways to number the same GPUs, and the job chooses:

- ``job`` (``--inject-arg --cuda``, the default): as the job sees them. berth sets
  ``CUDA_VISIBLE_DEVICES`` to the job's GPUs, so inside the job they are ``0..n-1``: a
  script that does ``torch.device(f"cuda:{args.cuda}")`` gets its own GPU.
- ``machine`` (``--inject-arg --cuda=machine``): the machine's NVML indices (what
  ``berth status`` and ``$BERTH_GPUS`` show), as the GPU Job Scheduler passed them: for a script that sets
  ``CUDA_VISIBLE_DEVICES`` from ``--cuda`` itself (with ``CUDA_DEVICE_ORDER=PCI_BUS_ID``,
  which berth sets, the numbers mean the same GPUs).

The flag's value is replaced where the command already has it (``--cuda 3`` or
``--cuda=3``, every occurrence) and appended (``--cuda 0,1``) where it has not. Placeholders
are replaced in every word of the command (or in the ``--wrap`` string): ``{gpus}`` by the
machine's indices, ``{cuda}`` by the job's own (``0,1``). A word is never split or re-parsed.
"""

from __future__ import annotations

FORMS = ("job", "machine")
PLACEHOLDERS = ("{gpus}", "{cuda}")


def parse(text: str) -> tuple[str, str]:
    """``--cuda`` -> (``--cuda``, ``job``); ``--cuda=machine`` -> (``--cuda``, ``machine``).
    Raises ValueError with what to write."""
    flag, eq, form = text.partition("=")
    form = form if eq else "job"
    if (
        not flag.startswith("-") or flag in ("-", "--") or any(c.isspace() for c in flag)
        or "\0" in flag or len(flag) > 128
    ):  # fmt: skip
        raise ValueError(
            f"--inject-arg {text!r}: name an option of your command, e.g. --inject-arg --cuda "
            "(ids as the job sees them) or --inject-arg --cuda=machine (the machine's)"
        )
    if form not in FORMS:
        raise ValueError(
            f"--inject-arg {text!r}: after '=' say whose GPU numbers: job (0..n-1, as the job "
            "sees them) or machine (as berth status shows them)"
        )
    return flag, form


def ids(gpus: list[int], form: str) -> str:
    """The ids of GPUs ``gpus`` (machine indices, in the job's CUDA order) in ``form``."""
    return ",".join(str(i) for i in (range(len(gpus)) if form == "job" else gpus))


def rewrite(argv: list[str], flag: str, value: str) -> list[str]:
    """``argv`` with ``flag``'s value set to ``value`` (replaced, or appended)."""
    out = list(argv)
    found = False
    i = 1  # (argv[0] is the program)
    while i < len(out):
        word = out[i]
        if word == flag and i + 1 < len(out):
            out[i + 1] = value
            found = True
            i += 2
            continue
        if word == flag:  # the last word, without a value
            out.append(value)
            found = True
            break
        if word.startswith(flag + "="):
            out[i] = f"{flag}={value}"
            found = True
        i += 1
    if not found:
        out += [flag, value]
    return out


def fill(text: str, gpus: list[int]) -> str:
    """``text`` with ``{gpus}`` (machine indices) and ``{cuda}`` (the job's own) replaced."""
    if "{" not in text:
        return text
    return text.replace("{gpus}", ids(gpus, "machine")).replace("{cuda}", ids(gpus, "job"))
