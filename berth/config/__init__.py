"""berth's configuration: one TOML file, and four environment variables.

Where the file is read from (the first that applies):

1. ``$BERTH_CONFIG`` if set: that file only (an empty value reads no file at all);
2. otherwise ``/etc/berth/config.toml`` (the admin's), then ``~/.config/berth/config.toml``
   (``$XDG_CONFIG_HOME`` honoured); keys in the user's file override the admin's, per section.

Environment variables (they override the file):

- ``BERTH_CONFIG``: the config file to read
- ``BERTH_CLAIMS_DIR``: the claim ledger directory shared by all users of the host
- ``BERTH_STATE_DIR``: the daemon's state directory (database, job logs)
- ``BERTH_SOCKET``: the daemon's UNIX socket
- ``BERTH_PTS_DIR``: where the daemon finds users' terminals (default /dev/pts)
"""

# Each key is declared once, as a Key (berth.config.key) on its class (Inventory: inventory.py,
# Config: sections.py, Enforce: enforce.py): its [section], name, TOML types, default, check and
# line in `berth help config`'s example. Here: the files, and load()/get() of them.

from __future__ import annotations

import os

from berth.config import inventory as config_inventory
from berth.config import notify as config_notify
from berth.config import projects as config_projects
from berth.config.enforce import Enforce
from berth.config.inventory import Inventory
from berth.config.key import At, Key, example, keys_of
from berth.config.sections import DEFAULT_MAX_JOBS, INF, MAX_REQUEST_SIZE, Config
from berth.errors import ConfigError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

SYSTEM_CONFIG = "/etc/berth/config.toml"
ENV_CONFIG = "BERTH_CONFIG"
ENV_CLAIMS_DIR = "BERTH_CLAIMS_DIR"
ENV_STATE_DIR = "BERTH_STATE_DIR"
ENV_SOCKET = "BERTH_SOCKET"

_TYPE_NAMES = {int: "an integer", float: "a number", str: "a string", list: "a list", bool: "true or false"}  # fmt: skip
__all__ = ["DEFAULT_MAX_JOBS", "INF", "MAX_REQUEST_SIZE", "Config", "Inventory", "config_files", "get", "load", "reset"]  # fmt: skip


KEYS: list[Key[Any]] = [*keys_of(Inventory), *keys_of(Config), *keys_of(Enforce)]
SECTIONS: dict[str, dict[str, Key[Any]]] = {}
for _key in KEYS:
    SECTIONS.setdefault(_key.section, {})[_key.name] = _key
__doc__ = f"{__doc__}\n{example(SECTIONS, config_projects.EXAMPLE + config_notify.EXAMPLE)}"


def config_files() -> list[str]:
    """The files that :func:`load` reads, in order (existing or not)."""
    explicit = os.environ.get(ENV_CONFIG)
    if explicit is not None:
        return [explicit] if explicit else []
    xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return [SYSTEM_CONFIG, os.path.join(xdg, "berth", "config.toml")]


def _read_toml(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        if os.environ.get(ENV_CONFIG) == path:
            raise ConfigError(
                f"config file {path!r} (from ${ENV_CONFIG}) does not exist: "
                f"create it or unset {ENV_CONFIG}"
            ) from None
        return {}
    except OSError as e:
        raise ConfigError(f"cannot read config file {path!r}: {e.strerror}") from None
    from berth.config import toml as config_toml  # rare: a config file exists

    return config_toml.parse(path, data)


def _check(path: str, raw: dict[str, Any]) -> None:
    """Every section and key known, every value of a type its key takes."""
    for section, values in raw.items():
        if section == "projects":  # (its own tables: berth.config.projects)
            config_projects.read(path, values)
            continue
        if section == "notify":  # (its own tables: berth.config.notify)
            config_notify.read(path, values)
            continue
        keys = SECTIONS.get(section)
        if not isinstance(values, dict):  # (a key before any [section])
            owners = [f"[{s}]" for s, ks in SECTIONS.items() if section in ks]
            raise ConfigError(
                f"config file {path!r}: {section} = {_toml(values)} is outside any section: "
                + (f"put it under {' or '.join(owners)}" if owners else
                   f"no section has a key {section!r} (`berth help config` lists them)")
            )  # fmt: skip
        if keys is None:
            known = ", ".join(f"[{s}]" for s in [*SECTIONS, "projects", "notify"])
            raise ConfigError(
                f"config file {path!r}: unknown section [{section}]; known sections: {known}"
            )
        for name, value in values.items():
            key = keys.get(name)
            if key is None:
                raise ConfigError(
                    f"config file {path!r}: unknown key {name!r} in [{section}]; "
                    f"known: {', '.join(keys)}"
                )
            types = key.types
            if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
                want = " or ".join(_TYPE_NAMES[t] for t in types)
                raise ConfigError(
                    f"config file {path!r}: [{section}] {name} = {_toml(value)} must be {want}"
                )


def _toml(value: Any) -> str:
    """A value as the file wrote it: ``true``, not Python's ``True``."""
    return ("true" if value else "false") if isinstance(value, bool) else repr(value)


def load() -> Config:
    """Read the config file(s) and the BERTH_* environment. Raises ConfigError on bad input."""
    cfg = Config()
    merged: dict[tuple[str, str], tuple[str, Any]] = {}  # (section, key) -> (file, value)
    read: list[str] = []
    for path in config_files():
        raw = _read_toml(path)
        if not raw and not os.path.exists(path):
            continue
        _check(path, raw)
        read.append(path)
        for section, values in raw.items():
            if section == "projects":  # (a later file's table replaces an earlier one's)
                cfg.projects.update(config_projects.read(path, values))
                continue
            if section == "notify":  # (a later file's [notify] replaces an earlier one's)
                cfg.notify = config_notify.read(path, values)
                continue
            merged.update({(section, k): (path, v) for k, v in values.items()})
    cfg.files = tuple(read)
    for key in sorted(KEYS, key=lambda k: k.late):  # (a late key's check reads the others)
        if (item := merged.get((key.section, key.name))) is not None:
            path, value = item
            if key.convert is not None:
                value = key.convert(value, At(path, key.section, key.name), cfg)
            held = {"inventory": cfg.inventory, "enforce": cfg.enforce}.get(key.section, cfg)
            setattr(held, key.attr, value)
    given = {name: path for (section, name), (path, _) in merged.items() if section == "inventory"}
    config_inventory.check(cfg.inventory, given)
    env = os.environ
    cfg.claims_dir = env.get(ENV_CLAIMS_DIR) or cfg.claims_dir
    cfg.state_dir = env.get(ENV_STATE_DIR) or cfg.state_dir
    cfg.socket = env.get(ENV_SOCKET) or cfg.socket
    return cfg


_cached: Config | None = None


def get() -> Config:
    """The configuration of this process, loaded once."""
    global _cached
    if _cached is None:
        _cached = load()
    return _cached


def reset() -> None:
    """Forget the cached configuration (tests change BERTH_* variables)."""
    global _cached
    _cached = None
