"""The example agents' own environment, examples/agents/.venv (made by `npm run setup`, i.e.
scripts/setup-agents): an agent started by any other Python starts itself again there, before it
imports the MCP SDK or NumPy."""

from __future__ import annotations

import os
import sys
from pathlib import Path

VENV = Path(__file__).resolve().parent / ".venv"


def run_in_agents_env(script: str, name: str) -> None:
    """Replaces this process by `script` run by the environment's Python, unless this Python is it."""
    if Path(sys.prefix).resolve() == VENV.resolve():
        return
    python = VENV / "bin" / "python"
    if not python.exists():
        sys.exit(f"{name}: its environment {VENV} is missing: run 'npm run setup' (scripts/setup-agents)")
    os.execv(python, [str(python), str(Path(script).resolve()), *sys.argv[1:]])
