"""berth.config.toml reads the plain TOML of a config file exactly as tomllib does, and
declines (None) whatever else, so that tomllib reads it (and names what is wrong)."""

from __future__ import annotations

import random
import sys

import pytest

from berth.config import toml as config_toml

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

PLAIN = [
    "",
    "\n\n",
    "# only a comment\n",
    '[inventory]\ngpus = 8\nmemory = "80G"\n',
    "[daemon]\npoll_interval = 0.5  # seconds\nkill_after = '2s'\n\n[limits]\nmax_jobs = 200000\n",
    '  [ queue ]  \n  backend = "slurm"\nflag = true\nother = false\nx = -3\ny = +1.5e3\nz = 0\n',
    "[a]\ns = \"with # inside\"  # and a comment\nt = 'it'\n",
    "[a]\nkey-name_2 = 1\n[b]\nkey-name_2 = 2\n",
    '[a]\ntab = "a\tb"\n',
    "top = 1\n[a]\nb = 2",
    "[a]\nx = -0\ny = 1E5\nz = 2.5e-3\nw = \"\"\nv = 'back\\slash'\n[b] # c\n",
]
OTHER = [
    '[a]\ns = "esc\\"ape"\n',  # an escape
    "[a]\nx = [1, 2]\n",  # an array
    "[a]\nx = 1\nx = 2\n",  # a key twice: malformed
    "[a]\n[a]\n",  # a table twice: malformed
    "[a.b]\nx = 1\n",  # a dotted table
    "[a]\nb.c = 1\n",  # a dotted key
    "[a]\nx = 1_000\n",
    "[a]\nx = 0x10\n",
    "[a]\nx = 01\n",  # malformed
    "[a]\nx = 1.\n",  # malformed
    "[a]\nd = 1979-05-27\n",
    "[a]\nx = \n",  # malformed
    "[a]\nx = 1\r\n",
    "[a]\nx = inf\n",
    '[a]\n"quoted" = 1\n',
    "[a]\nx = { y = 1 }\n",
    "[a]\nx = 'unterminated\n",
    '[a]\nx = """multi"""\n',
    "[a]x = 1\n",
    "[]\n",
    "[a]\nx = 1 2\n",
    "[a]\nx = .5\n",
    '[a]\nx = "a" "b"\n',
    "[[a]]\n",
    "[a]\nx = 1 # \x01\n",
]


@pytest.mark.parametrize("text", PLAIN)
def test_plain_toml_is_read_as_tomllib_reads_it(text: str) -> None:
    got = config_toml.loads(text)
    assert got == tomllib.loads(text)
    assert [type(v) for t in got.values() if isinstance(t, dict) for v in t.values()] == [
        type(v) for t in tomllib.loads(text).values() if isinstance(t, dict) for v in t.values()
    ]


@pytest.mark.parametrize("text", OTHER)
def test_anything_else_is_left_to_tomllib(text: str) -> None:
    assert config_toml.loads(text) is None


# Generated documents (issue 38, step 6): lines of the plain kind mixed with what only tomllib
# reads or what is malformed, at fixed seeds. Whatever the reader answers is tomllib's answer,
# to the type (repr: 1, 1.0 and True; -0.0 and 0.0); what tomllib refuses it declines.
_KEYS = ["a", "b", "key-name_2", "A1", "0", "gpus", "x"]  # bare keys...
_ODD_KEYS = ["a.b", '"q"', "", "é", "k y"]  # ...and what only tomllib reads, or nobody
_WORDS = ["true", "false", "0", "-0", "+1", "42", "1.5", "-2.5e-3", "1E5", "1e+05", "-0.0", "0.0"]
_ODD_WORDS = ["True", "007", "1_000", "0x10", "1.", ".5", "inf", "nan", "1979-05-27", "1 2",
              "[1, 2]", "{ y = 1 }", "yes", "", "01.5", "1e", "+", "-0e0"]  # fmt: skip
_INSIDE = ["plain", "with # hash", "tab\there", "é ✓", "", " ", "it", "say 'hi'"]
_ODD_INSIDE = ["it's", 'say "hi"', "back\\slash", "\\n", "\x01"]


def _pick(rng: random.Random, plain: float, usual: list[str], odd: list[str]) -> str:
    return rng.choice(usual if rng.random() < plain else odd)


def _toml_value(rng: random.Random, plain: float) -> str:
    kind = rng.randrange(4)
    if kind == 0:
        return '"' + _pick(rng, plain, _INSIDE, _ODD_INSIDE) + '"'
    if kind == 1:
        return "'" + _pick(rng, plain, _INSIDE, _ODD_INSIDE) + "'"
    if kind == 2:
        return _pick(rng, plain, _WORDS, _ODD_WORDS)
    return str(rng.choice([rng.randint(-(10**6), 10**6), rng.uniform(-1e3, 1e3), 10**20]))


def _toml_line(rng: random.Random, sections: list[str], plain: float) -> str:
    def pad() -> str:
        return rng.choice(["", "", " ", "  ", "\t"])

    comment = rng.choice(["", "", "", " # note", "#c", " # é", " # \x01"])
    kind = rng.randrange(10)
    if kind == 0:
        return ""
    if kind == 1:
        return pad() + "# " + rng.choice(_INSIDE)
    if kind == 2:
        name = rng.choice(sections) if rng.random() < plain else rng.choice(["a.b", "", "[x]"])
        close = "]" if rng.random() < plain else ""
        return f"{pad()}[{pad()}{name}{pad()}{close}{pad()}{comment}"
    eq = "=" if rng.random() < plain else ":"
    key = _pick(rng, plain, _KEYS, _ODD_KEYS)
    return f"{pad()}{key}{pad()}{eq}{pad()}{_toml_value(rng, plain)}{pad()}{comment}"


def _toml_outcome(text: str) -> tuple[str, str]:
    try:
        return "ok", repr(tomllib.loads(text))
    except tomllib.TOMLDecodeError:
        return "refused", ""


@pytest.mark.parametrize("seed", range(4))
def test_generated_documents_are_read_as_tomllib_reads_them_or_left_to_it(seed: int) -> None:
    rng = random.Random(seed)
    answered = 0
    for case in range(250):
        plain = rng.choice([0.8, 0.95, 1.0])
        sections = rng.sample(["inventory", "daemon", "limits", "queue", "s-1", "a", "x"], 3)
        lines = [_toml_line(rng, sections, plain) for _ in range(rng.randint(0, 8))]
        text = ("\r\n" if rng.random() < 0.05 else "\n").join(lines) + rng.choice(["", "\n"])
        where = f"seed {seed} case {case}: {text!r}"
        mine = config_toml.loads(text)
        if mine is None:
            continue
        answered += 1
        assert ("ok", repr(mine)) == _toml_outcome(text), where
    assert answered >= 60  # (it answers enough of them for the comparison to mean something)
