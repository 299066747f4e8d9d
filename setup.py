"""The build stamp only (everything else is in pyproject.toml): a build writes into the
package which tree it was built from (``berth/_build.txt``: the commit and its date, or the
build's date), so that ``berth --version`` of a wheel names its build (berth/build_info.py)."""

from __future__ import annotations

import os
import time

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


def stamp() -> str:
    info: dict[str, object] = {"__name__": "build_info"}
    with open(os.path.join(HERE, "berth", "build_info.py"), encoding="utf-8") as f:
        exec(compile(f.read(), f.name, "exec"), info)  # (by path: the package is not built yet)
    said = info["from_git"](HERE)  # type: ignore[operator]
    return str(said) if said else "built " + time.strftime("%Y-%m-%d", time.gmtime())


class BuildWithStamp(build_py):  # type: ignore[misc]
    def run(self) -> None:
        super().run()
        if not self.dry_run:
            target = os.path.join(self.build_lib, "berth", "_build.txt")
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "w", encoding="utf-8") as f:
                f.write(stamp() + "\n")


setup(cmdclass={"build_py": BuildWithStamp})
