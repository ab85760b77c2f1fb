"""The rules the workers share with the TypeScript orchestrator, read from contracts/ at the repository
root (contracts/README.md). They are part of the workflow code: its digest covers them
(contracts/identity.json), so a worker whose contracts differ is refused like one whose code differs."""

from __future__ import annotations

import functools
import json
import os
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FOLDER = os.path.join(ROOT, "contracts")


@functools.cache
def load(name: str) -> Any:
    """contracts/<name>.json, read once per process."""
    with open(os.path.join(FOLDER, f"{name}.json"), encoding="utf-8") as handle:
        return json.load(handle)
