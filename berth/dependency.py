"""A job's dependency (sbatch's ``--dependency``): the one class of a term,
:class:`Dependency`, the one parser, :func:`parse_dependency`, and the one formatter,
:func:`format_dependency`, for the command line, ``#SBATCH --dependency`` in a script, the job
spec, the daemon's intake, the scheduling core's resolved terms (``Job.dependencies``, checked
by :mod:`berth.core.deps`), the store's text of them and the Slurm backend (``berth update
--dependency`` too). A leaf, under both the core and ``wire/`` (each may import only leaves).

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

Each job named is one *term* (``afterok:12:13`` is two terms, as in Slurm): a
:class:`Dependency`; the whole of what was written, its terms and how they join, a
:class:`Written`. Standard library, ``berth.errors`` only; no I/O.
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


class Dependency:
    """One term of a dependency, on one job: ``kind`` (``after``, ``afterok``, ``afternotok``,
    ``afterany``, ``singleton``) of ``job``, as written (``"12"``, ``"12_3"``, ``"@"``) or
    resolved by the daemon (a job's id: ``job_id``); ``""`` for ``singleton``. ``minutes``:
    only with ``after`` (``after:12+10``). ``array``: the array whose task ``job`` is, when
    the dependency named the whole array (its tasks count as one term, all needed, also under
    ``Job.dependency_any``). Frozen; ``str()`` is its text, as stored: ``afterok:12``,
    ``after:12+10``, ``afterok:13/12`` (task 13 of array 12), ``singleton``.

    The written form, the daemon's resolved terms (``Job.dependencies``) and the store's text
    are this one class; a bad kind, job or minutes is a UsageError naming them."""

    __slots__ = ("array", "job", "job_id", "kind", "minutes")

    kind: str
    job: str
    minutes: int
    array: int
    job_id: int  # ``job`` as an id (0: singleton, ``@``, ``12_3`` before they are resolved)

    def __init__(self, kind: str, job: str | int = "", minutes: int = 0, array: int = 0) -> None:
        if kind not in (*KINDS, SINGLETON):
            raise UsageError(
                f"unknown dependency type {kind!r}: use one of {', '.join((*KINDS, SINGLETON))}"
            )
        text = str(job) if job != 0 else ""
        if (kind == SINGLETON) != (text == "") or text.startswith("-"):
            raise UsageError(f"invalid dependency {kind}:{job}: a job id >= 1 "
                             "(none for singleton)")  # fmt: skip
        if (minutes and kind != "after") or minutes < 0:
            raise UsageError(f"invalid dependency {kind}:{job}+{minutes}: "
                             "minutes go with after only")  # fmt: skip
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "job", text)
        object.__setattr__(self, "minutes", minutes)
        object.__setattr__(self, "array", array)
        object.__setattr__(self, "job_id", int(text) if text.isascii() and text.isdigit() else 0)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Dependency is frozen")

    def __reduce__(self) -> tuple[type[Dependency], tuple[str, str, int, int]]:
        return (Dependency, self._key())  # (copy, deepcopy, pickle: the simulator copies jobs)

    def _key(self) -> tuple[str, str, int, int]:
        return (self.kind, self.job, self.minutes, self.array)

    def __eq__(self, other: object) -> bool:
        if type(other) is not Dependency:
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"Dependency({str(self)!r})"

    def __str__(self) -> str:
        if self.kind == SINGLETON:
            return SINGLETON
        return _term_text(self) + (f"/{self.array}" if self.array else "")

    @property
    def group(self) -> tuple[str, int, int]:
        """What makes one alternative of an any-of dependency: a job, or a whole array."""
        return (self.kind, self.array or self.job_id, self.minutes)

    @classmethod
    def parse_list(cls, text: str) -> tuple[Dependency, ...]:
        """The stored text of terms (``"afterok:1:2,afterany:3"``, ``"after:4+10"``,
        ``"afterok:13/12"``, ``"singleton"``; ``;`` of earlier berths as ``,``): the terms,
        read by :func:`parse_dependency` (``stored``)."""
        return parse_dependency(text, stored=True).terms


class Written:
    """A whole ``--dependency`` as written: its terms, all of them needed (``any_of`` False:
    ``,``) or any one (``?``). ``str()`` is :func:`format_dependency`."""

    __slots__ = ("any_of", "terms")

    terms: tuple[Dependency, ...]
    any_of: bool

    def __init__(self, terms: Iterable[Dependency], any_of: bool = False) -> None:
        object.__setattr__(self, "terms", tuple(terms))
        object.__setattr__(self, "any_of", bool(any_of) and len(self.terms) > 1)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Written is frozen")

    def __reduce__(self) -> tuple[type[Written], tuple[tuple[Dependency, ...], bool]]:
        return (Written, (self.terms, self.any_of))

    def __eq__(self, other: object) -> bool:
        if type(other) is not Written:
            return NotImplemented
        return (self.terms, self.any_of) == (other.terms, other.any_of)

    def __hash__(self) -> int:
        return hash((self.terms, self.any_of))

    def __repr__(self) -> str:
        return f"Written({format_dependency(self)!r})"

    def __str__(self) -> str:
        return format_dependency(self)

    def jobs(self) -> list[str]:
        """The jobs named, as written (``"12"``, ``"12_3"``, ``"@"``), each once."""
        return list(dict.fromkeys(t.job for t in self.terms if t.job))

    def with_jobs(self, to: Callable[[str], str]) -> Written:
        """The same dependency, each job named replaced by ``to(job)`` (``@`` -> ``"41"``; a
        berth id -> a Slurm id)."""
        return Written(
            (Dependency(t.kind, to(t.job) if t.job else "", t.minutes) for t in self.terms),
            self.any_of,
        )


def parse_dependency(text: str, stored: bool = False) -> Written:
    """``text`` as sbatch reads ``--dependency`` (see the module). Raises UsageError naming
    the value and the forms berth takes. ``stored``: the store's text of resolved terms
    instead (:meth:`Dependency.parse_list`): ids only, ``/ARRAY`` after a task's id, ``;`` as
    ``,``, each term kept as it is."""
    if stored:
        return Written(_stored(text))
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
    terms: list[Dependency] = []
    for part in raw.split("?" if any_of else ","):
        terms += _item(part.strip(), text)
    if len(terms) > MAX_TERMS:
        raise UsageError(f"dependency {text[:60]!r}...: {len(terms)} jobs; at most {MAX_TERMS}")
    if len(set(terms)) != len(terms):
        terms = list(dict.fromkeys(terms))  # (afterok:12:12 is afterok:12)
    return Written(terms, any_of)


def _stored(text: str) -> list[Dependency]:
    out: list[Dependency] = []
    for part in text.replace(";", ",").split(","):
        part = part.strip()
        if not part:
            continue
        kind, _, ids = part.partition(":")
        kind = kind.strip().lower()
        if kind == SINGLETON and not ids:
            out.append(Dependency(SINGLETON))
            continue
        if not ids:
            raise UsageError(f"invalid dependency {part!r}: expected e.g. afterok:12[:13]")
        for raw in ids.split(":"):
            job, _, array = raw.partition("/")
            job, _, minutes = job.partition("+")
            try:
                numbers = int(job), int(minutes or 0), int(array or 0)
            except ValueError:
                raise UsageError(
                    f"invalid job id {raw!r} in dependency {part!r}: expected an integer"
                ) from None
            out.append(Dependency(kind, *numbers))
    return out


def _item(part: str, text: str) -> list[Dependency]:
    kind, colon, rest = part.partition(":")
    kind = kind.strip().lower()
    if kind == SINGLETON and not colon:
        return [Dependency(SINGLETON)]
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
        out.append(Dependency(kind, job.lstrip("0") or "0" if job != LAST else LAST, mins))
    return out


def _job_ref(job: str) -> bool:
    if job == LAST:
        return True
    head, us, task = job.partition("_")
    ok = head.isascii() and head.isdigit() and len(job) <= 40 and int(head) > 0
    return ok and (not us or (task.isascii() and task.isdigit()))


def format_dependency(dep: Written) -> str:
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


def _term_text(t: Dependency) -> str:
    return f"{t.kind}:{t.job}" + (f"+{t.minutes}" if t.minutes else "")


def from_after_ok(ids: Iterable[int]) -> Written:
    """The dependency of ``after_ok: [12, 13]`` (job specs of earlier berths): ``afterok:12:13``."""
    return Written(Dependency("afterok", str(i)) for i in ids)
