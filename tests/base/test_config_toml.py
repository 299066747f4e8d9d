"""berth.config.toml reads the plain TOML of a config file exactly as tomllib does, and
declines (None) whatever else, so that tomllib reads it (and names what is wrong)."""

from __future__ import annotations

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
