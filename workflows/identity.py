"""The part of a process's runtime identity that needs none of the libraries the families compute with:
interpreter, string hashing, bit-deciding package versions and the workflow code it loaded. The Dask bridge, which
computes nothing, reports only this; workers report it inside their full hello (workflows/records.py)."""
from __future__ import annotations

import functools
import os
import platform
import sys
from importlib import metadata as importlib_metadata
from typing import Any

from workflows.hashing import digest

WORKFLOWS = os.path.dirname(os.path.abspath(__file__))
REQUIREMENTS = os.path.join(WORKFLOWS, "requirements.txt")


def bit_deciding_packages() -> list[str]:
    """The packages marked "decides bits" in workflows/requirements.txt, in file order."""
    with open(REQUIREMENTS, encoding="utf-8") as pins:
        return [line.split("==")[0].strip().lower() for line in pins if "==" in line and "# decides bits" in line]


@functools.cache
def loaded_versions() -> dict[str, str]:
    """The versions of the bit-deciding packages this process image imported: read once, so a fork
    reports its template's (the code it runs), even if the installation changed since."""
    return {name: importlib_metadata.version(name) for name in bit_deciding_packages()}


@functools.cache
def code_sha256() -> str:
    """digest of {path relative to the repository: sha256} over workflows/**/*.py, as the orchestrator
    computes it (pipelines/execution/identity.ts): the code this process image loaded."""
    root = os.path.dirname(WORKFLOWS)
    files = {}
    for folder, subfolders, names in os.walk(WORKFLOWS):
        subfolders[:] = [d for d in subfolders if d != "__pycache__"]
        for name in names:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                with open(path, "rb") as handle:
                    files[os.path.relpath(path, root).replace(os.sep, "/")] = digest(handle.read())
    return digest(files)


def interpreter() -> dict[str, Any]:
    """Python version, string hashing (``hash_randomization`` is False when the process started with
    PYTHONHASHSEED=0, so sets of strings iterate in one order in every process of the same CPython),
    versions, code digest."""
    return {"python": platform.python_version(), "hash_randomization": bool(sys.flags.hash_randomization),
            "versions": loaded_versions(), "code_sha256": code_sha256()}
