"""A job's dependency as people write it (sbatch's ``--dependency``): the one parser,
:func:`parse_dependency`, and the one formatter, :func:`format_dependency`, for the command
line, ``#SBATCH --dependency`` in a script, the job spec, the daemon's intake and the Slurm
backend (``berth update --dependency`` too).

The forms, as Slurm writes them::

    afterok:12            start after job 12 COMPLETED (a failure of 12: never)
    afterok:12:13         after 12 and 13 both COMPLETED
    afternotok:12         after 12 ended any other way (FAILED, CANCELLED, TIMEOUT...)
    afterany:12           after 12 ended, however
    after:12              once 12 has started (or ended); after:12+10: ten minutes after
    singleton             after every earlier job of yours with this job's name has ended
    afterok:12,afterany:13    all of them (',')
    afterok:12?afternotok:12  any one of them ('?'); ',' and '?' do not mix
    afterok:@             ``@``: your last submitted job (the daemon says which, not the client)
    afterok:12_3          task 3 of array 12; an array's id stands for all its tasks

Each job named is one *term* (``afterok:12:13`` is two terms, as in Slurm). Standard library,
``berth.errors`` only; no I/O.
"""

from __future__ import annotations

from berth.errors import UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

KINDS = ("after", "afterany", "afterok", "afternotok")  # each names jobs
SINGLETON = "singleton"  # names none
LAST = "@"  # the caller's last submitted job
MAX_TEXT = 4096
MAX_TERMS = 1000
MAX_MINUTES = 366 * 24 * 60
_SLURM_ONLY = ("aftercorr", "afterburstbuffer", "expand")
_FORMS = "afterok:ID[:ID...], afterany:, afternotok:, after:ID[+MIN], singleton; ID = 12, 12_3 or @"


class Term:
    """One condition: ``kind`` on one job (``job``: ``"12"``, ``"12_3"`` or ``"@"``; ``""``
    for ``singleton``); ``minutes``: only with ``after`` (``after:12+10``)."""

    __slots__ = ("job", "kind", "minutes")

    kind: str
    job: str
    minutes: int

    def __init__(self, kind: str, job: str = "", minutes: int = 0) -> None:
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "job", job)
        object.__setattr__(self, "minutes", minutes)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Term is frozen")

    def __eq__(self, other: object) -> bool:
        if type(other) is not Term:
            return NotImplemented
        return (self.kind, self.job, self.minutes) == (other.kind, other.job, other.minutes)

    def __hash__(self) -> int:
        return hash((self.kind, self.job, self.minutes))

    def __repr__(self) -> str:
        return f"Term({self.kind!r}, {self.job!r}, {self.minutes})"

    def __str__(self) -> str:
        if self.kind == SINGLETON:
            return SINGLETON
        return f"{self.kind}:{self.job}" + (f"+{self.minutes}" if self.minutes else "")


class Dependency:
    """A whole ``--dependency``: its terms, all of them needed (``any_of`` False: ``,``) or
    any one (``?``). ``str()`` is :func:`format_dependency`."""

    __slots__ = ("any_of", "terms")

    terms: tuple[Term, ...]
    any_of: bool

    def __init__(self, terms: Iterable[Term], any_of: bool = False) -> None:
        object.__setattr__(self, "terms", tuple(terms))
        object.__setattr__(self, "any_of", bool(any_of) and len(self.terms) > 1)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Dependency is frozen")

    def __eq__(self, other: object) -> bool:
        if type(other) is not Dependency:
            return NotImplemented
        return (self.terms, self.any_of) == (other.terms, other.any_of)

    def __hash__(self) -> int:
        return hash((self.terms, self.any_of))

    def __repr__(self) -> str:
        return f"Dependency({format_dependency(self)!r})"

    def __str__(self) -> str:
        return format_dependency(self)

    def jobs(self) -> list[str]:
        """The jobs named, as written (``"12"``, ``"12_3"``, ``"@"``), each once."""
        return list(dict.fromkeys(t.job for t in self.terms if t.job))

    def with_jobs(self, to: Callable[[str], str]) -> Dependency:
        """The same dependency, each job named replaced by ``to(job)`` (``@`` -> ``"41"``; a
        berth id -> a Slurm id)."""
        return Dependency(
            (Term(t.kind, to(t.job) if t.job else "", t.minutes) for t in self.terms),
            self.any_of,
        )


def parse_dependency(text: str) -> Dependency:
    """``text`` as sbatch reads ``--dependency`` (see the module). Raises UsageError naming
    the value and the forms berth takes."""
    if type(text) is not str:
        raise UsageError(f"invalid dependency {text!r}: expected text such as afterok:12")
    if len(text) > MAX_TEXT:
        raise UsageError(f"dependency of {len(text)} characters: at most {MAX_TEXT}")
    raw = text.strip()
    if not raw:
        raise UsageError(f"empty dependency: expected {_FORMS}")
    if "," in raw and "?" in raw:
        raise UsageError(
            f"invalid dependency {text!r}: ',' (all of) and '?' (any of) cannot be mixed "
            "(as in Slurm): use one of them"
        )
    any_of = "?" in raw
    terms: list[Term] = []
    for part in raw.split("?" if any_of else ","):
        terms += _item(part.strip(), text)
    if len(terms) > MAX_TERMS:
        raise UsageError(f"dependency {text[:60]!r}...: {len(terms)} jobs; at most {MAX_TERMS}")
    if len(set(terms)) != len(terms):
        terms = list(dict.fromkeys(terms))  # (afterok:12:12 is afterok:12)
    return Dependency(terms, any_of)


def _item(part: str, text: str) -> list[Term]:
    kind, colon, rest = part.partition(":")
    kind = kind.strip().lower()
    if kind == SINGLETON and not colon:
        return [Term(SINGLETON)]
    if kind in _SLURM_ONLY:
        raise UsageError(f"dependency {part!r} in {text!r}: berth does not take {kind} ({_FORMS})")
    if kind not in KINDS or not colon or not rest:
        raise UsageError(f"invalid dependency {part or text!r} in {text!r}: expected {_FORMS}")
    out = []
    for word in rest.split(":"):
        job, plus, minutes = word.strip().partition("+")
        if not _job_ref(job):
            raise UsageError(
                f"invalid job {job!r} in dependency {part!r}: a job id (12), an array's task "
                "(12_3) or @ (your last submitted job)"
            )
        mins = 0
        if plus:
            if kind != "after" or not minutes.isdigit() or not minutes.isascii():
                raise UsageError(
                    f"invalid {word!r} in dependency {part!r}: +MINUTES goes only with after "
                    "(after:12+10: ten minutes after job 12 started)"
                )
            mins = int(minutes)
            if mins > MAX_MINUTES:
                raise UsageError(f"{word!r} in dependency {part!r}: at most +{MAX_MINUTES}")
        out.append(Term(kind, job.lstrip("0") or "0" if job != LAST else LAST, mins))
    return out


def _job_ref(job: str) -> bool:
    if job == LAST:
        return True
    head, us, task = job.partition("_")
    ok = head.isascii() and head.isdigit() and len(job) <= 40 and int(head) > 0
    return ok and (not us or (task.isascii() and task.isdigit()))


def format_dependency(dep: Dependency) -> str:
    """The dependency as Slurm writes it: terms of one kind in a row share it
    (``afterok:12:13,afterany:14``), joined by ``,`` or (any of) ``?``. Reads back the same
    with :func:`parse_dependency`."""
    items: list[str] = []
    last = ""
    for t in dep.terms:
        if t.kind == SINGLETON:
            items.append(SINGLETON)
            last = ""
            continue
        word = t.job + (f"+{t.minutes}" if t.minutes else "")
        if t.kind == last:
            items[-1] += ":" + word
        else:
            items.append(f"{t.kind}:{word}")
            last = t.kind
    if dep.any_of and len(items) == 1:  # afterok:4?afterok:5, not afterok:4:5 (both)
        items = [SINGLETON if t.kind == SINGLETON else _term_text(t) for t in dep.terms]
    return ("?" if dep.any_of else ",").join(items)


def _term_text(t: Term) -> str:
    return f"{t.kind}:{t.job}" + (f"+{t.minutes}" if t.minutes else "")


def from_after_ok(ids: Iterable[int]) -> Dependency:
    """The dependency of ``after_ok: [12, 13]`` (job specs of earlier berths): ``afterok:12:13``."""
    return Dependency(Term("afterok", str(i)) for i in ids)
