"""Serve berth's commands to a coding agent as Model Context Protocol tools, over stdio.

Register it with the agent as a local (stdio) server whose command is ``berth mcp``; for
example, in Claude Code: ``claude mcp add berth -- berth mcp``. The tools (status, select,
submit with a dry run, queue, show, logs, cancel, wait, why a job is pending and when it
starts) run the berth commands as you: the agent can do what you can, nothing more.

Needs the optional MCP SDK: ``pip install 'gpu-berth[mcp]'``.
"""

from __future__ import annotations

import importlib.util

from berth.errors import UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse


def add_arguments(p: argparse.ArgumentParser) -> None:
    del p  # (no options: the agent starts it, and talks on stdin/stdout)


def run(args: argparse.Namespace) -> int:
    if importlib.util.find_spec("mcp") is None:
        raise UsageError(
            "berth mcp needs the MCP SDK, which is not installed: "
            "pip install 'gpu-berth[mcp]' (or: pip install 'mcp>=2,<3')"
        )
    from berth.mcpserver import serve  # heavy (the MCP SDK, pydantic): only here

    serve()
    return 0
