"""The config's notifications (issue 36.3): ``[[notify.webhooks]]`` (one table each) and
``[notify.mail]``, written by the admin (docs/admin.md "Reports and notifications")::

    [[notify.webhooks]]
    url = "https://hooks.slack.com/services/T0/B0/XXXX"
    events = ["job_fail", "job_timeout", "gpu_lost", "disk_full"]   # default: all
    users = ["alice"]            # only these users' jobs and reservations (default: everyone)
    projects = ["vision"]        # only these projects' jobs (default: every job)
    headers = { Authorization = "Bearer s3cret" }
    timeout = "10s"              # one attempt's (default 10s)
    retries = 3                  # attempts after the first (default 3) ...
    backoff = "2s"               # ... the first after 2s, then 4s, 8s (doubling)

    [notify.mail]
    to = ["gpu-admins@lab.example"]
    events = ["job_fail", "gpu_lost", "disk_full"]
    smtp = "localhost:25"        # default: the host's sendmail

Only the daemon sends them, and only to what this file names: no field of a job (its name,
user, command) becomes a URL, a header or a recipient. A table's keys are checked like every
other key: an unknown key, a wrong type or a bad value is refused naming the file, the key and
the value.
"""

from __future__ import annotations

from berth.errors import ConfigError
from berth.units import parse_duration

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# job_end: every end; job_fail: FAILED or LOST; job_timeout: TIMEOUT (one end is one message,
# sent where any of its events is asked for)
EVENTS = ("job_begin", "job_end", "job_fail", "job_timeout", "job_requeue",
          "reservation_start", "reservation_end", "gpu_lost", "disk_full")  # fmt: skip
HOOK_KEYS = ("url", "events", "users", "projects", "headers", "timeout", "retries", "backoff")
MAIL_KEYS = ("to", "events", "users", "projects", "from", "smtp", "timeout", "retries",
             "backoff")  # fmt: skip
EXAMPLE = """
    [[notify.webhooks]]           # one table per receiver (docs/admin.md "Notifications")
    url = "https://hooks.slack.com/services/T0/B0/XXXX"
    events = ["job_fail", "job_timeout", "gpu_lost", "disk_full"]  # default: all
    users = ["alice"]             # only their jobs and reservations (default: everyone)
    projects = ["vision"]         # only these projects' jobs
    headers = { Authorization = "Bearer s3cret" }
    timeout = "10s"               # one attempt's; retries = 3, backoff = "2s" (doubling)

    [notify.mail]                 # mail to the admins (a job's --mail-user mails its owner)
    to = ["gpu-admins@lab.example"]
    events = ["job_fail", "gpu_lost", "disk_full"]
    smtp = "localhost:25"         # default: the host's sendmail
"""


class Sink:
    """One receiver as the admin configured it: a webhook (``url``) or the mail (``to``)."""

    __slots__ = ("backoff", "events", "headers", "mail_from", "projects", "retries", "smtp",
                 "timeout", "to", "url", "users")  # fmt: skip

    def __init__(self) -> None:
        self.url = ""
        self.to: tuple[str, ...] = ()
        self.mail_from = ""
        self.smtp: tuple[str, int] | None = None  # (host, port); None: sendmail
        self.events: frozenset[str] = frozenset(EVENTS)
        self.users: frozenset[str] = frozenset()  # empty: everyone
        self.projects: frozenset[str] = frozenset()
        self.headers: dict[str, str] = {}
        self.timeout = 10.0
        self.retries = 3
        self.backoff = 2.0

    @property
    def name(self) -> str:
        """What the audit log calls it (a URL without its path, which may hold a secret)."""
        if self.url:
            scheme, _, rest = self.url.partition("://")
            return f"{scheme}://{rest.split('/', 1)[0]}/..."
        return "mail to " + ",".join(self.to)

    def wants(self, events: tuple[str, ...], user: str | None, project: str | None) -> bool:
        """Whether this receiver is sent a message of these events about ``user``'s job (or
        reservation) of ``project``: an event it asks for, and the user and the project in
        its filters (a GPU or the disk, about no one, passes the filters)."""
        if not self.events.intersection(events):
            return False
        if self.users and user is not None and user not in self.users:
            return False
        return not (self.projects and user is not None and project not in self.projects)


class Notify:
    """``[notify]``: the webhooks and the mail (None: no mail to admins)."""

    __slots__ = ("mail", "webhooks")

    def __init__(self) -> None:
        self.webhooks: tuple[Sink, ...] = ()
        self.mail: Sink | None = None

    def sinks(self) -> tuple[Sink, ...]:
        return (*self.webhooks, *((self.mail,) if self.mail is not None else ()))


def read(path: str, raw: Any) -> Notify:
    """The ``[notify]`` section of one config file, checked."""
    out = Notify()
    if type(raw) is not dict:
        raise ConfigError(f"config file {path!r}: [notify] must be a section")
    for key in raw:
        if key not in ("webhooks", "mail"):
            raise ConfigError(
                f"config file {path!r}: unknown key {key!r} in [notify]; known: "
                "[[notify.webhooks]] tables, [notify.mail]"
            )
    hooks = raw.get("webhooks", [])
    if type(hooks) is not list:
        raise ConfigError(
            f"config file {path!r}: notify.webhooks must be [[notify.webhooks]] tables"
        )
    out.webhooks = tuple(_sink(path, f"[[notify.webhooks]] #{i + 1}", t, HOOK_KEYS)
                         for i, t in enumerate(hooks))  # fmt: skip
    if "mail" in raw:
        out.mail = _sink(path, "[notify.mail]", raw["mail"], MAIL_KEYS)
    return out


def _sink(path: str, table_name: str, table: Any, known: tuple[str, ...]) -> Sink:
    where = f"config file {path!r}: {table_name}"
    if type(table) is not dict:
        raise ConfigError(f"{where} must be a table ({', '.join(known)})")
    for key in table:
        if key not in known:
            raise ConfigError(f"{where}: unknown key {key!r}; known: {', '.join(known)}")
    out = Sink()
    if "url" in known:
        out.url = _url(where, table.get("url"))
        out.headers = _headers(where, table.get("headers", {}))
    else:
        out.to = tuple(_address(where, "to", a) for a in _names(where, "to", table))
        if not out.to:
            raise ConfigError(f"{where} to = [] must name at least one address")
        sender = table.get("from", "berth")
        out.mail_from = _address(where, "from", sender)
        if "smtp" in table:
            out.smtp = _hostport(where, table["smtp"])
    events = _names(where, "events", table) if "events" in table else list(EVENTS)
    for e in events:
        if e not in EVENTS:
            raise ConfigError(f"{where} events has {e!r}; known: {', '.join(EVENTS)}")
    out.events = frozenset(events)
    out.users = frozenset(_names(where, "users", table))
    out.projects = frozenset(_names(where, "projects", table))
    out.timeout = _seconds(where, "timeout", table.get("timeout", 10.0), 0.1, 300.0)
    out.backoff = _seconds(where, "backoff", table.get("backoff", 2.0), 0.0, 3600.0)
    retries = table.get("retries", 3)
    if type(retries) is not int or not 0 <= retries <= 20:
        raise ConfigError(f"{where} retries = {retries!r} must be an integer from 0 to 20")
    out.retries = retries
    return out


def _url(where: str, url: Any) -> str:
    if type(url) is not str or not url.startswith(("http://", "https://")):
        raise ConfigError(f"{where} url = {url!r} must be an http:// or https:// URL")
    host = url.split("://", 1)[1].split("/", 1)[0]
    if not host or any(c.isspace() or ord(c) < 32 for c in url):
        raise ConfigError(f"{where} url = {url!r} must name a host and hold no spaces")
    return url


def _headers(where: str, headers: Any) -> dict[str, str]:
    if type(headers) is not dict:
        raise ConfigError(f"{where} headers = {headers!r} must be a table of names and values")
    for name, value in headers.items():
        ok_name = name and all(c.isalnum() or c in "-_" for c in name)
        if not ok_name or type(value) is not str or any(c in value for c in "\r\n\0"):
            raise ConfigError(
                f"{where} headers: {name!r} = {value!r} must be a header name (letters, "
                "digits, '-') and a one-line string"
            )
    return dict(headers)


def _address(where: str, key: str, addr: Any) -> str:
    if (type(addr) is not str or not addr or addr.startswith("-")
            or any(c.isspace() or c in "<>,;\"'()\\" for c in addr)):  # fmt: skip
        raise ConfigError(f"{where} {key}: {addr!r} must be one mail address (user@host)")
    return addr


def _hostport(where: str, value: Any) -> tuple[str, int]:
    host, _, port = value.rpartition(":") if type(value) is str else ("", "", "")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"{where} smtp = {value!r} must be HOST:PORT (localhost:25)")
    return host, int(port)


def _seconds(where: str, key: str, value: Any, lo: float, hi: float) -> float:
    try:
        seconds = parse_duration(value, what=f"{where} {key}")
    except ValueError as e:
        raise ConfigError(str(e)) from None
    if not lo <= seconds <= hi:
        raise ConfigError(f"{where} {key} = {value!r} must be from {lo:g}s to {hi:g}s")
    return seconds


def _names(where: str, key: str, table: dict[str, Any]) -> list[str]:
    value = table.get(key, [])
    if type(value) is not list or not all(type(v) is str and v for v in value):
        raise ConfigError(f"{where} {key} = {value!r} must be a list of names")
    return list(value)
