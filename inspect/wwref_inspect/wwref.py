"""The wwref command line, as the task runs it: every episode action goes through `wwref` itself.

An episode is started, ended and scored by `node bin/wwref.mjs episode …`, and served to the model by
`node bin/wwref.mjs serve --episode DIR` over stdio: the rules, limits and scorer are the project's own
code, never a second implementation here. Each command prints JSON on stdout, or one line on stderr and
exit status 2 for a refusal.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from inspect_ai.util import subprocess as inspect_subprocess

#: The repository this package lives in (inspect/wwref_inspect/ → the root).
ROOT = Path(__file__).resolve().parents[2]
BIN = ROOT / "bin" / "wwref.mjs"
#: A wwref action that takes longer than this (a loaded machine creating the pinned runtime aside) is stuck.
COMMAND_SECONDS = 600


class WwrefError(RuntimeError):
    """A wwref command that refused or failed: its one-line message."""


def node() -> str:
    """The Node.js that runs wwref: WWREF_NODE, else `node` on the PATH."""
    found = os.environ.get("WWREF_NODE") or shutil.which("node")
    if not found:
        raise WwrefError("wwref needs Node.js 20+: no `node` on the PATH (or name one with WWREF_NODE)")
    return found


def server_environment() -> dict[str, str]:
    """What the served episode inherits beyond the MCP client's defaults (HOME, PATH, …): wwref's own settings."""
    return {key: value for key, value in os.environ.items() if key.startswith("WWREF_")}


def _outcome(args: list[str], returncode: int, stdout: str, stderr: str) -> Any:
    if returncode != 0:
        said = [line for line in stderr.splitlines() if line.strip()]
        raise WwrefError(f"wwref {' '.join(args[:2])} failed (exit {returncode}): {said[-1] if said else 'no message'}")
    return json.loads(stdout)


async def wwref(*args: str) -> Any:
    """Runs `wwref ARGS…` (asynchronously, beside the other samples) and returns its JSON."""
    command = [node(), str(BIN), *args]
    result = await inspect_subprocess(command, cwd=str(ROOT), timeout=COMMAND_SECONDS)
    return _outcome(list(args), result.returncode, result.stdout, result.stderr)


def wwref_now(*args: str) -> Any:
    """The same, blocking: for building the dataset before the eval starts."""
    result = subprocess.run([node(), str(BIN), *args], cwd=ROOT, capture_output=True, text=True, timeout=COMMAND_SECONDS)
    return _outcome(list(args), result.returncode, result.stdout, result.stderr)


def serve_command(episode: Path) -> tuple[str, list[str]]:
    """The command and arguments of `wwref serve --episode DIR` (stdio)."""
    return node(), [str(BIN), "serve", "--episode", str(episode)]
